"""LoRA adapters (`training.lora`): few trainable parameters, and the merged model computes what the adapted one
does."""

from __future__ import annotations

import pytest
import torch
from conftest import random_batch, tiny_model

from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

pytest.importorskip("peft")


@pytest.mark.parametrize("ffn", [False, True])
def test_merged_model_computes_what_the_adapted_model_computes(ffn):
    from vanilla_transformer.training.lora import add_lora, has_lora, merged

    model = tiny_model(seed=1).eval()
    keys = set(model.state_dict())
    src, mask = random_batch(model.config.vocab_size, 3, 7, seed=2)
    tgt, _ = random_batch(model.config.vocab_size, 3, 5, seed=3)
    with torch.no_grad():
        base = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    trainable, total = add_lora(model, rank=2, ffn=ffn)
    assert trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert 0 < trainable < 0.1 * total
    names = {
        name.split(".lora_")[0].split(".")[-1] for name, p in model.named_parameters() if p.requires_grad
    }
    assert names == {"q_proj", "k_proj", "v_proj", "out_proj", *(("fc1", "fc2") if ffn else ())}
    # trained adapters (B starts at zero: the adapted model computes the base model's logits)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
        adapted = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    out = merged(model)
    assert has_lora(model) and not has_lora(out)
    assert type(out) is VanillaTransformerForConditionalGeneration and set(out.state_dict()) == keys
    with torch.no_grad():
        logits = out(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert not torch.allclose(adapted, base, atol=1e-3)
    torch.testing.assert_close(logits, adapted, rtol=1e-5, atol=1e-5)


def test_a_rank_above_the_layer_widths_is_refused_before_any_adapter(export):
    """d_model 32, feed-forward widths 48 and 40: a rank above the narrowest adapted width is one line from the
    option check (`train --lora` exits 2 before anything is read or written) and from `add_lora` itself, with no
    adapter allocated."""
    from vanilla_transformer.training.cli import parse_dataclass
    from vanilla_transformer.training.lora import add_lora, has_lora, rank_problem
    from vanilla_transformer.training.options import TrainConfig, check_options

    config = tiny_model().config
    assert rank_problem(config, 32) is None and rank_problem(config, 32, ffn=True) is None
    assert "(d_model=32)" in str(rank_problem(config, 33))
    assert "(d_model=32)" in str(rank_problem(config, 41, ffn=True))
    narrow = tiny_model(encoder_ffn_dim=16).config
    assert rank_problem(narrow, 20) is None and "(encoder_ffn_dim=16)" in str(
        rank_problem(narrow, 20, ffn=True)
    )
    cfg = parse_dataclass(
        TrainConfig,
        ["--init_from", str(export), "--lora", str(2**20), "--max_steps", "1", "--output_dir", "x"],
    )
    with pytest.raises(
        ValueError, match=rf"--lora {2**20} is above the width of the layers it adapts \(d_model="
    ):
        check_options(cfg)
    model = tiny_model()
    with pytest.raises(ValueError, match="--lora 1000 is above the width"):
        add_lora(model, rank=1000)
    assert not has_lora(model)
