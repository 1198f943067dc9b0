"""The decoder-only causal LM: cache equivalence (dynamic and static caches against full recomputation), causality,
positions from the mask, the shifted and answer-only loss against explicit formulas, the config, and remote code in
a fresh process where the project cannot be imported."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import ROOT, perturb_bias_and_layer_norms, tiny_family_config
from helpers.shared import run_python
from torch.nn import functional as F
from transformers import AutoModel, AutoModelForCausalLM, DynamicCache, StaticCache

from vanilla_transformer.modeling import (
    IGNORE_INDEX,
    VanillaDecoderOnlyConfig,
    VanillaDecoderOnlyForCausalLM,
    VanillaDecoderOnlyModel,
    answer_only_example,
)

VOCAB = 61


def tiny_decoder(seed: int = 0, attn: str = "sdpa", **overrides) -> VanillaDecoderOnlyForCausalLM:
    config = tiny_family_config(
        VanillaDecoderOnlyConfig, "decoder", 40, attn, **{"vocab_size": VOCAB, **overrides}
    )
    torch.manual_seed(seed)
    model = VanillaDecoderOnlyForCausalLM(config).eval()
    perturb_bias_and_layer_norms(model, logits_bias_std=0.5)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") and "layer_norm" not in name:
                parameter.normal_(0.0, 0.1)
    return model


def left_padded(seed: int, batch: int = 3, length: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask): row i has i * 2 left-padding positions (pad id 0), every row at least one token."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, VOCAB, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    for row in range(batch):
        mask[row, : min(2 * row, length - 1)] = 0
    return ids.masked_fill(mask == 0, 0), mask


def incremental_logits(model, ids, mask, cache) -> torch.Tensor:
    """Prefill the first 3 tokens, then one token per call through `cache`; returns (B, T, V)."""
    steps = []
    with torch.no_grad():
        for start, stop in [(0, 3)] + [(t, t + 1) for t in range(3, ids.shape[1])]:
            out = model(
                input_ids=ids[:, start:stop], attention_mask=mask[:, :stop], cache=cache, use_cache=True
            )
            cache = out.past_key_values if hasattr(out, "past_key_values") else out.cache
            steps.append(out.logits)
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned", "rope"])
@pytest.mark.parametrize("normalize_before", [False, True])
def test_incremental_decoding_equals_full_recomputation(position_encoding, normalize_before):
    model = tiny_decoder(position_encoding=position_encoding, normalize_before=normalize_before)
    ids, mask = left_padded(seed=1)
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
    real = mask.bool()
    dynamic = incremental_logits(model, ids, mask, DynamicCache(config=model.config))
    torch.testing.assert_close(dynamic[real], expected[real], atol=1e-5, rtol=1e-5)
    static = incremental_logits(model, ids, mask, StaticCache(config=model.config, max_cache_len=12))
    torch.testing.assert_close(static[real], expected[real], atol=1e-5, rtol=1e-5)
    # a cache created by the model
    no_mask = incremental_logits(model, ids[:1], torch.ones_like(ids[:1]), None)
    torch.testing.assert_close(no_mask, expected[:1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_beams=1), dict(num_beams=3, length_penalty=0.6), dict(num_beams=3, num_return_sequences=2)],
)
def test_generate_same_with_dynamic_static_and_no_cache(kwargs):
    model = tiny_decoder(seed=4)
    ids, mask = left_padded(seed=5)
    common = dict(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=10, **kwargs)
    with torch.no_grad():
        dynamic = model.generate(**common)
        assert torch.equal(model.generate(**common, use_cache=False), dynamic)
        assert torch.equal(model.generate(**common, cache_implementation="static"), dynamic)
    assert dynamic.shape[1] == ids.shape[1] + 10 and torch.equal(dynamic[:: dynamic.shape[0] // 3, :8], ids)


def test_greedy_generate_equals_a_no_cache_argmax_loop():
    model = tiny_decoder(seed=6)
    ids, mask = left_padded(seed=7)
    tokens, token_mask = ids, mask
    with torch.no_grad():
        for _ in range(6):
            logits = model(input_ids=tokens, attention_mask=token_mask, use_cache=False).logits[:, -1]
            logits[:, model.generation_config.suppress_tokens] = float("-inf")
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
            token_mask = torch.cat([token_mask, torch.ones_like(token_mask[:, :1])], dim=1)
        generated = model.generate(
            input_ids=ids, attention_mask=mask, do_sample=False, num_beams=1, max_new_tokens=6
        )
    eos = model.config.eos_token_id
    assert eos not in tokens[:, 8:]  # no row finished early, so no padding after an eos to mirror
    assert torch.equal(generated, tokens)


def test_sampling_is_seeded_and_obeys_top_k():
    model = tiny_decoder(seed=8)
    ids, mask = left_padded(seed=9)
    common = dict(input_ids=ids, attention_mask=mask, do_sample=True, top_k=1, max_new_tokens=5)
    with torch.no_grad():
        torch.manual_seed(0)
        first = model.generate(**{**common, "top_k": 0, "temperature": 1.5})
        torch.manual_seed(0)
        assert torch.equal(model.generate(**{**common, "top_k": 0, "temperature": 1.5}), first)
        greedy = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=5)
        assert torch.equal(model.generate(**common), greedy)  # top_k=1 sampling is greedy


def test_left_padding_does_not_change_the_real_positions():
    """Positions are counted over real tokens: a left-padded row computes what it computes alone."""
    model = tiny_decoder(seed=10, position_encoding="learned")
    ids, mask = left_padded(seed=11)
    with torch.no_grad():
        batch = model(input_ids=ids, attention_mask=mask).logits
        for row in range(ids.shape[0]):
            alone = model(input_ids=ids[row : row + 1, mask[row].bool()]).logits[0]
            torch.testing.assert_close(batch[row, mask[row].bool()], alone, atol=1e-5, rtol=1e-5)
        explicit = (mask.cumsum(-1) - 1).clamp(min=0)
        torch.testing.assert_close(
            model(input_ids=ids, attention_mask=mask, position_ids=explicit).logits, batch
        )
        shifted = model(input_ids=ids, attention_mask=mask, position_ids=explicit + 1).logits
    assert not torch.allclose(shifted[mask.bool()], batch[mask.bool()], atol=1e-3)  # the ids are read


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned", "rope"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_output_at_t_does_not_depend_on_later_inputs(position_encoding, attn):
    model = tiny_decoder(seed=12, attn=attn, position_encoding=position_encoding, normalize_before=True)
    g = torch.Generator().manual_seed(13)
    embeds = torch.randn(2, 9, 32, generator=g, requires_grad=True)
    logits = model(inputs_embeds=embeds, use_cache=False).logits  # (B, T, V)
    for t in (0, 4, 8):
        (grad,) = torch.autograd.grad(logits[:, t].sum(), embeds, retain_graph=True)
        assert torch.count_nonzero(grad[:, t + 1 :]) == 0, t
        assert torch.count_nonzero(grad[:, : t + 1]) > 0, t
    ids = torch.randint(4, VOCAB, (2, 9), generator=g)
    changed = ids.clone()
    changed[:, 5:] = torch.randint(4, VOCAB, (2, 4), generator=g)
    with torch.no_grad():
        before, after = model(input_ids=ids).logits, model(input_ids=changed).logits
    torch.testing.assert_close(after[:, :5], before[:, :5], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(after[:, 5:], before[:, 5:], atol=1e-3)


def explicit_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over scored positions of -log softmax(logits[b, t])[labels[b, t + 1]]."""
    total, count = logits.new_zeros(()), 0
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1] - 1):
            if labels[b, t + 1] != IGNORE_INDEX:
                total = total - F.log_softmax(logits[b, t].double(), dim=-1)[labels[b, t + 1]]
                count += 1
    return total / count


def sft_batch() -> tuple[dict[str, torch.Tensor], list[int]]:
    """Two answer-only examples, right-padded (pad 0, labels IGNORE_INDEX); and their prompt lengths."""
    examples = [
        answer_only_example([2, 11, 12, 13, 14], [21, 22, 3]),
        answer_only_example([2, 15], [23, 24, 25, 3]),
    ]
    length = max(len(e["input_ids"]) for e in examples)
    batch = {
        key: torch.tensor([e[key] + [fill] * (length - len(e[key])) for e in examples])
        for key, fill in (("input_ids", 0), ("attention_mask", 0), ("labels", IGNORE_INDEX))
    }
    return batch, [5, 2]


def test_answer_only_example():
    example = answer_only_example([2, 7, 8], [9, 3])
    assert example == {
        "input_ids": [2, 7, 8, 9, 3],
        "attention_mask": [1] * 5,
        "labels": [-100, -100, -100, 9, 3],
    }
    with pytest.raises(ValueError, match="non-empty prompt and answer"):
        answer_only_example([2], [])


def test_answer_only_loss_ignores_the_prompt():
    model = tiny_decoder(seed=14)
    batch, prompt_lengths = sft_batch()
    out = model(**batch)
    torch.testing.assert_close(
        out.loss.double(), explicit_loss(out.logits, batch["labels"]), atol=1e-6, rtol=1e-6
    )
    # the loss has no gradient through the predictions of prompt tokens (nor after the answer)
    logits = out.logits
    (grad,) = torch.autograd.grad(out.loss, logits)
    for row, prompt in enumerate(prompt_lengths):
        scored = batch["attention_mask"][row].sum() - 1  # predictions at prompt - 1 .. last - 1 are scored
        assert torch.count_nonzero(grad[row, : prompt - 1]) == 0
        assert torch.count_nonzero(grad[row, scored:]) == 0
        assert bool((grad[row, prompt - 1 : scored].abs().sum(-1) > 0).all())
    # in parameter space: the summed answer-only loss is the summed full-sequence loss minus its prompt-only part,
    # whose (non-zero) gradient the answer-only loss therefore does not contain
    full = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, IGNORE_INDEX)
    prompt_only = full.masked_fill(batch["labels"] != IGNORE_INDEX, IGNORE_INDEX)
    grads = {}
    for name, labels in (("answer", batch["labels"]), ("full", full), ("prompt", prompt_only)):
        model.zero_grad()
        # the sum over scored tokens
        model(**{**batch, "labels": labels}, num_items_in_batch=1).loss.backward()
        grads[name] = [p.grad.clone() for p in model.parameters()]
    assert sum(g.abs().sum() for g in grads["prompt"]) > 0
    for answer, full_grad, prompt in zip(grads["answer"], grads["full"], grads["prompt"]):
        torch.testing.assert_close(answer, full_grad - prompt, atol=1e-5, rtol=1e-4)


def test_loss_is_summed_over_num_items_in_batch():
    """Trainer's accumulation: the losses of two batches, each divided by the count of both, add up to the loss of
    the concatenated batch (a causal LM's count is of labels after the first position)."""
    model = tiny_decoder(seed=15)
    batch, _ = sft_batch()
    assert model.loss_type == "ForCausalLM" and model.accepts_loss_kwargs  # Trainer counts labels[..., 1:]
    total = (batch["labels"][:, 1:] != IGNORE_INDEX).sum()
    with torch.no_grad():
        whole = model(**batch).loss
        parts = sum(
            model(**{k: v[i : i + 1] for k, v in batch.items()}, num_items_in_batch=total).loss
            for i in (0, 1)
        )
    torch.testing.assert_close(parts, whole, atol=1e-6, rtol=1e-6)


def test_output_bias_and_tying_are_config_choices():
    tied = tiny_decoder(seed=16)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight and tied.final_logits_bias is None
    assert "final_logits_bias" not in tied.state_dict()
    untied = tiny_decoder(seed=16, tie_word_embeddings=False, output_bias=True)
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight
    ids = torch.randint(4, VOCAB, (1, 5))
    with torch.no_grad():
        before = untied(input_ids=ids).logits
        untied.final_logits_bias[7] += 2.0
        after = untied(input_ids=ids).logits
    torch.testing.assert_close(after[..., 7] - before[..., 7], torch.full_like(before[..., 7], 2.0))


def test_config_checks_and_aliases():
    config = VanillaDecoderOnlyConfig()
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id) == (0, 2, 3)
    assert (config.normalize_before, config.position_encoding, config.activation_function) == (
        False,
        "sinusoidal",
        "relu",
    )
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (6, 8, 512)
    assert not config.is_encoder_decoder
    with pytest.raises(ValueError, match="did you mean 'decoder_layers'"):
        VanillaDecoderOnlyConfig(encoder_layers=2)
    with pytest.raises(ValueError, match="d_model=30 is not divisible.*eos_token_id=99 is outside"):
        VanillaDecoderOnlyConfig(vocab_size=50, d_model=30, eos_token_id=99)


def test_bad_inputs_say_what_to_do():
    model = tiny_decoder()
    ids = torch.randint(4, VOCAB, (2, 5))
    with pytest.raises(ValueError, match="same shape as input_ids"):
        model(input_ids=ids, labels=ids[:, :4])
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model(input_ids=ids, attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(input_ids=torch.randint(4, VOCAB, (1, 41)))
    with pytest.raises(ValueError, match="cache must be a transformers Cache"):
        model(input_ids=ids, cache=((torch.zeros(1),),))
    with pytest.raises(ValueError, match="position_ids"):
        model(input_ids=ids, position_ids=torch.arange(4)[None])


def test_outputs_hidden_states_and_attentions():
    model = tiny_decoder()
    ids, mask = left_padded(seed=17)
    out = model.model(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    assert len(out.hidden_states) == model.config.decoder_layers + 1 and len(out.attentions) == 2
    weights = out.attentions[0]  # (B, H, T, K)
    assert weights.shape == (3, 4, 8, 8)
    assert torch.count_nonzero(torch.triu(weights[0], diagonal=1)) == 0  # causal
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 8))


def test_remote_code_in_a_fresh_process(tmp_path):
    """Every save writes the code; a process that cannot import the project loads the folder with AutoModel and
    AutoModelForCausalLM and generates the original model's tokens, with dynamic and static caches."""
    model = tiny_decoder(seed=18)
    model.save_pretrained(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_vanilla_decoder_only.VanillaDecoderOnlyConfig",
        "AutoModel": "modeling_vanilla_decoder_only.VanillaDecoderOnlyModel",
        "AutoModelForCausalLM": "modeling_vanilla_decoder_only.VanillaDecoderOnlyForCausalLM",
    }
    assert "custom_pipelines" not in config
    for name in (
        "modeling_vanilla_decoder_only.py",
        "configuration_vanilla_decoder_only.py",
        "modeling_vanilla_transformer.py",
    ):
        assert (tmp_path / "model" / name).read_bytes() == (ROOT / "modeling" / name).read_bytes(), name
    assert type(AutoModelForCausalLM.from_pretrained(tmp_path / "model")) is VanillaDecoderOnlyForCausalLM
    assert type(AutoModel.from_pretrained(tmp_path / "model")) is VanillaDecoderOnlyModel
    ids, mask = left_padded(seed=19)
    with torch.no_grad():
        expected = {
            "greedy": model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6).tolist(),
            "beam": model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=6, num_beams=3
            ).tolist(),
        }
    out = run_python(
        f"""
        import json, torch
        from transformers import AutoModel, AutoModelForCausalLM
        folder = {str(tmp_path / "model")!r}
        model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        assert type(AutoModel.from_pretrained(folder, trust_remote_code=True)).__name__ == "VanillaDecoderOnlyModel"
        ids, mask = torch.tensor({ids.tolist()}), torch.tensor({mask.tolist()})
        with torch.no_grad():
            greedy = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6)
            static = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, cache_implementation="static")
            assert torch.equal(greedy, static)
            beam = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, num_beams=3)
        model.save_pretrained({str(tmp_path / "again")!r})
        print(json.dumps({{"greedy": greedy.tolist(), "beam": beam.tolist()}}))
        """,
        cwd=tmp_path,
    )
    assert json.loads(out.strip().splitlines()[-1]) == expected
    again = json.loads((tmp_path / "again" / "config.json").read_text())
    assert again["auto_map"] == config["auto_map"]
    assert (tmp_path / "again" / "modeling_vanilla_decoder_only.py").is_file()
