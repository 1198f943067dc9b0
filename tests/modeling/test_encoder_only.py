"""The encoder-only family: its config, bidirectional attention with padding, the masked-LM and classification
heads and their losses, masking by transformers' DataCollatorForLanguageModeling, every option being real, and
save/load (locally and as remote code in a process that cannot import the project)."""

from __future__ import annotations

import json
from typing import TypeVar

import pytest
import torch
from conftest import ROOT, random_batch, tiny_family_config
from helpers.shared import run_python, word_tokenizer
from torch.nn import functional as F
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

from vanilla_transformer.modeling import (
    VanillaEncoderOnlyConfig,
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
    VanillaEncoderOnlyModel,
)
from vanilla_transformer.modeling.configuration_vanilla_encoder_only import BERT

VOCAB = 61
AUTO_MAP = {
    "AutoConfig": "configuration_vanilla_encoder_only.VanillaEncoderOnlyConfig",
    "AutoModel": "modeling_vanilla_encoder_only.VanillaEncoderOnlyModel",
    "AutoModelForMaskedLM": "modeling_vanilla_encoder_only.VanillaEncoderOnlyForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_vanilla_encoder_only.VanillaEncoderOnlyForSequenceClassification",
}


def tiny_config(**overrides) -> VanillaEncoderOnlyConfig:
    return tiny_family_config(VanillaEncoderOnlyConfig, "encoder", 32, **{"vocab_size": VOCAB, **overrides})


M = TypeVar("M", bound=torch.nn.Module)


def perturb(model: M) -> M:
    """Random biases and LayerNorm parameters (fresh ones are zeros and ones), so that every parameter matters."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                parameter.normal_(1.0 if "norm" in name and name.endswith("weight") else 0.0, 0.1)
    return model


def tiny(model_class: type[M] = VanillaEncoderOnlyForMaskedLM, /, seed: int = 0, **overrides) -> M:
    torch.manual_seed(seed)
    return perturb(model_class(tiny_config(**overrides))).eval()


def logits(model, ids, mask=None, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, **kwargs).logits


# ---- config -----------------------------------------------------------------------------------------------------


def test_config_reports_every_bad_value_and_misspelled_fields():
    with pytest.raises(ValueError) as error:
        VanillaEncoderOnlyConfig(
            type_vocab_size=-1,
            classifier_pooling="max",
            classifier_dropout=1.5,
            # a string where a bool belongs, on purpose: the check names it
            embedding_layer_norm="yes",  # pyright: ignore[reportArgumentType]
        )
    message = str(error.value)
    for fragment in (
        "type_vocab_size must be an integer >= 0 (0: no token types), got -1",
        "classifier_pooling must be one of ('first', 'mean'), got 'max'",
        "classifier_dropout must be a probability in [0, 1), got 1.5",
        "embedding_layer_norm must be true or false, got 'yes'",
    ):
        assert fragment in message
    with pytest.raises(ValueError, match="not divisible by encoder_attention_heads=5"):
        VanillaEncoderOnlyConfig(d_model=32, encoder_attention_heads=5)
    with pytest.raises(ValueError, match=r"pad_token_id=70 is outside the vocabulary \[0, 61\)"):
        VanillaEncoderOnlyConfig(vocab_size=61, pad_token_id=70)
    with pytest.raises(ValueError, match="problem_type must be None .* got 'ordinal'"):
        VanillaEncoderOnlyConfig(problem_type="ordinal")
    with pytest.raises(ValueError, match="did you mean 'type_vocab_size'"):
        VanillaEncoderOnlyConfig(type_vocab_sise=2)
    config = VanillaEncoderOnlyConfig(
        **BERT, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=80, num_labels=5
    )
    assert (
        config.d_model,
        config.encoder_layers,
        config.encoder_attention_heads,
        config.encoder_ffn_dim,
    ) == (64, 3, 4, 80)
    assert config.num_labels == 5 and not config.is_encoder_decoder


# ---- the encoder ------------------------------------------------------------------------------------------------


def test_attention_is_bidirectional_and_padding_is_invisible():
    """Every position sees later tokens; a sequence padded on the right or on the left (positions count real
    tokens) gives its unpadded states at the real positions, whatever the padding ids are."""
    model = tiny(VanillaEncoderOnlyModel, type_vocab_size=2, embedding_layer_norm=True)
    ids = torch.tensor([[5, 9, 17, 33, 40]])
    changed_last = ids.clone()
    changed_last[0, -1] = 41
    with torch.no_grad():
        alone = model(input_ids=ids).last_hidden_state
        assert not torch.allclose(model(input_ids=changed_last).last_hidden_state[0, 0], alone[0, 0])
        padding = torch.tensor([[7, 8, 9]])  # arbitrary ids: masked, they must not matter
        for padded, mask in (
            (torch.cat((ids, padding), 1), torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])),  # right
            (torch.cat((padding, ids), 1), torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])),  # left
        ):
            got = model(input_ids=padded, attention_mask=mask).last_hidden_state[mask.bool()]
            torch.testing.assert_close(got, alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "field, value",
    [
        ("activation_function", "gelu"),
        ("normalize_before", True),
        ("position_encoding", "learned"),
        ("position_encoding", "rope"),
        ("scale_embedding", False),
        ("type_vocab_size", 2),
        ("embedding_layer_norm", True),
        ("mlm_head_transform", True),
        ("output_bias", False),
        ("layer_norm_eps", 1e-1),
        ("sinusoidal_layout", "concatenated"),
    ],
)
def test_every_option_changes_the_masked_lm(field, value):
    """The same weights (where both models have them) give other logits with the option changed."""
    ids, mask = random_batch(VOCAB, 2, 6, seed=1)
    base = tiny(seed=2)
    variant = VanillaEncoderOnlyForMaskedLM(tiny_config(**{field: value})).eval()
    perturb(variant)
    variant.load_state_dict(base.state_dict(), strict=False)
    assert not torch.allclose(logits(base, ids, mask), logits(variant, ids, mask))


def test_initialisation_dropout_and_length_follow_the_config():
    """init_std / linear_init_std (None: d_model ** -0.5 and Xavier-uniform), a zero pad row; each dropout acts in
    training only; max_position_embeddings bounds the input length."""
    torch.manual_seed(13)
    default = VanillaEncoderOnlyForMaskedLM(tiny_config(d_model=64, encoder_ffn_dim=256))
    bert_like = VanillaEncoderOnlyForMaskedLM(tiny_config(d_model=64, init_std=0.3, linear_init_std=0.02))
    fc1 = default.get_parameter("model.layers.0.ffn.fc1.weight")
    assert fc1.std().item() == pytest.approx((2 / (64 + 256)) ** 0.5, rel=0.1)  # Xavier-uniform
    assert bert_like.get_parameter("model.layers.0.ffn.fc1.weight").std().item() == pytest.approx(
        0.02, rel=0.1
    )
    embeddings = default.get_input_embeddings().get_parameter("weight")
    assert embeddings[1:].std().item() == pytest.approx(64**-0.5, rel=0.1)
    assert bert_like.get_input_embeddings().get_parameter("weight")[1:].std().item() == pytest.approx(
        0.3, rel=0.1
    )
    assert not embeddings[0].any()  # pad_token_id 0
    ids, mask = random_batch(VOCAB, 2, 6, seed=14)
    reference = tiny(seed=15)
    for field in ("dropout", "attention_dropout", "activation_dropout"):
        model = tiny(seed=15, **{field: 0.3})
        torch.testing.assert_close(logits(model, ids, mask), logits(reference, ids, mask))
        model.train()
        assert not torch.allclose(logits(model, ids, mask), logits(reference, ids, mask)), field
    with pytest.raises(ValueError, match="at most max_position_embeddings=32"):
        reference(input_ids=torch.randint(4, VOCAB, (1, 33)))


def test_token_types_select_their_embedding():
    model = tiny(type_vocab_size=3)
    ids, mask = random_batch(VOCAB, 2, 6, seed=3)
    zeros = torch.zeros_like(ids)
    torch.testing.assert_close(logits(model, ids, mask), logits(model, ids, mask, token_type_ids=zeros))
    assert not torch.allclose(logits(model, ids, mask), logits(model, ids, mask, token_type_ids=zeros + 2))
    with pytest.raises(
        ValueError, match="token_type_ids contains 3, but type_vocab_size=3; token types are 0..2"
    ):
        model(input_ids=ids, token_type_ids=zeros + 3)
    with pytest.raises(
        ValueError, match=r"token_type_ids must be an integer tensor of the input ids' shape \(2, 6\)"
    ):
        model(input_ids=ids, token_type_ids=zeros[:, :3])
    # no token types: a tokenizer's all-zero token_type_ids (one segment) are accepted, other types are not
    plain = tiny()
    torch.testing.assert_close(logits(plain, ids, mask), logits(plain, ids, mask, token_type_ids=zeros))
    with pytest.raises(
        ValueError, match="token_type_ids contains 1, but type_vocab_size=0; this model has no token"
    ):
        plain(input_ids=ids, token_type_ids=zeros + 1)
    with pytest.raises(ValueError, match=r"position_ids contains 32, outside \[0, 32\)"):
        plain(input_ids=ids, position_ids=torch.arange(6)[None] + 27)


def test_eager_equals_sdpa_and_attentions_are_returned():
    model = tiny(**BERT)
    ids, mask = random_batch(VOCAB, 3, 7, seed=4)
    sdpa = logits(model, ids, mask)
    model.set_attn_implementation("eager")
    torch.testing.assert_close(logits(model, ids, mask), sdpa, atol=1e-5, rtol=1e-5)
    model.set_attn_implementation("sdpa")
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 4, 7, 7)
    assert len(out.hidden_states) == 3 and out.hidden_states[0].shape == (3, 7, 32)
    padded_keys = (mask == 0)[:, None, None, :].expand_as(out.attentions[0])
    assert padded_keys.any() and out.attentions[0][padded_keys].abs().max() == 0  # no weight on padding


# ---- masked-LM head ---------------------------------------------------------------------------------------------


def test_masked_lm_loss_is_summed_over_scored_positions_and_divided_by_num_items():
    """Unscored (-100) positions do not count; the default is the mean over scored positions; with Trainer's
    num_items_in_batch, two half batches give the loss and the gradient of the whole batch."""
    model = tiny(**BERT)
    ids, mask = random_batch(VOCAB, 4, 8, seed=5)
    g = torch.Generator().manual_seed(6)
    labels = torch.where((torch.rand(ids.shape, generator=g) < 0.3) & (mask == 1), ids, -100)
    labels[:, 0] = ids[:, 0]
    scored = labels != -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    expected = F.cross_entropy(out.logits[scored], labels[scored])
    torch.testing.assert_close(out.loss, expected)
    out.loss.backward()
    whole = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    total = scored.sum()
    for half in (slice(0, 2), slice(2, 4)):
        part = model(
            input_ids=ids[half], attention_mask=mask[half], labels=labels[half], num_items_in_batch=total
        )
        part.loss.backward()
    for accumulated, reference in zip((p.grad for p in model.parameters()), whole):
        torch.testing.assert_close(accumulated, reference, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="labels have shape"):
        model(input_ids=ids, labels=labels[:, :3])


def test_data_collator_for_language_modeling_batches_train_the_model():
    """transformers' collator masks with the tokenizer's mask token, whatever its id (the model reads no mask id):
    15 % of the real tokens are scored, the rest -100; the batch runs forward and backward."""
    tokenizer = word_tokenizer(VOCAB)
    tokenizer.add_special_tokens({"mask_token": "<mask>"})  # a new id at the end of the vocabulary
    model = tiny(**BERT, vocab_size=len(tokenizer))
    texts = [" ".join(f"w{4 + (7 * i + j) % 50}" for j in range(12 + i % 5)) for i in range(64)]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=7)
    batch = collator([tokenizer(text, return_token_type_ids=False) for text in texts])
    scored = batch["labels"] != -100
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert 0.10 < scored.sum() / batch["attention_mask"].sum() < 0.20
    assert (batch["input_ids"][scored] == tokenizer.mask_token_id).float().mean() > 0.6  # 80 % become <mask>
    assert (batch["input_ids"][~scored] != tokenizer.mask_token_id).all()
    out = model(**batch)
    out.loss.backward()
    assert torch.isfinite(out.loss) and model.lm_head.weight.grad.abs().sum() > 0


def test_tied_output_projection_and_resize():
    """Tied: one matrix for input embedding and output projection, saved once; resizing the vocabulary keeps
    the logits of the old tokens (the output bias grows with zeros)."""
    model = tiny(**BERT)
    assert model.lm_head.weight is model.get_input_embeddings().weight
    assert tiny(tie_word_embeddings=False).lm_head.weight is not tiny().get_input_embeddings().weight
    ids, mask = random_batch(VOCAB, 2, 6, seed=8)
    before = logits(model, ids, mask)
    model.resize_token_embeddings(VOCAB + 5)
    assert model.config.vocab_size == VOCAB + 5 and model.lm_head.bias.shape == (VOCAB + 5,)
    assert model.lm_head.weight is model.get_input_embeddings().weight
    torch.testing.assert_close(logits(model, ids, mask)[..., :VOCAB], before)


# ---- classification head ----------------------------------------------------------------------------------------


def test_classification_pooling_and_losses():
    """ "first" reads the first token's state, "mean" the mean over real tokens (padding changes nothing); the
    losses are BERT's for each problem type; classifier dropout acts in training only."""
    ids = torch.tensor([[5, 9, 17, 33]])
    padded, mask = torch.tensor([[5, 9, 17, 33, 0, 0]]), torch.tensor([[1, 1, 1, 1, 0, 0]])
    first = tiny(VanillaEncoderOnlyForSequenceClassification, seed=9, num_labels=3)
    mean = tiny(VanillaEncoderOnlyForSequenceClassification, seed=9, num_labels=3, classifier_pooling="mean")
    with torch.no_grad():
        states = first.model(input_ids=ids).last_hidden_state  # the same encoder weights in both models
        for model, pooled in ((first, states[:, 0]), (mean, states.mean(1))):
            expected = model.classifier(torch.tanh(model.pooler.dense(pooled)))
            torch.testing.assert_close(logits(model, ids), expected)
            torch.testing.assert_close(logits(model, padded, mask), expected, atol=1e-5, rtol=1e-5)

    ids, mask = random_batch(VOCAB, 3, 6, seed=10)
    out = first(input_ids=ids, attention_mask=mask, labels=torch.tensor([2, 0, 1]))
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, torch.tensor([2, 0, 1])))
    multi = torch.tensor([[1.0, 0, 1], [0, 0, 0], [1, 1, 1]])
    out = first(input_ids=ids, attention_mask=mask, labels=multi)
    torch.testing.assert_close(out.loss, F.binary_cross_entropy_with_logits(out.logits, multi))
    regression = tiny(VanillaEncoderOnlyForSequenceClassification, num_labels=1)
    out = regression(input_ids=ids, attention_mask=mask, labels=torch.tensor([0.5, -1.0, 2.0]))
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits[:, 0], torch.tensor([0.5, -1.0, 2.0])))
    # Trainer averages accumulation
    assert not VanillaEncoderOnlyForSequenceClassification.accepts_loss_kwargs

    dropped = tiny(VanillaEncoderOnlyForSequenceClassification, seed=9, num_labels=3, classifier_dropout=0.5)
    torch.testing.assert_close(logits(dropped, ids, mask), logits(first, ids, mask))
    dropped.train()
    assert not torch.allclose(logits(dropped, ids, mask), logits(first, ids, mask))


def test_every_parameter_gets_a_gradient():
    ids, mask = random_batch(VOCAB, 2, 6, seed=11)
    for model_class, labels in (
        (VanillaEncoderOnlyForMaskedLM, ids.masked_fill(mask == 0, -100)),
        (VanillaEncoderOnlyForSequenceClassification, torch.tensor([0, 1])),
    ):
        model = tiny(model_class, **BERT)
        model.train()
        model(input_ids=ids, attention_mask=mask, token_type_ids=mask, labels=labels).loss.backward()
        missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]
        assert not missing, missing


# ---- save and load ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tie", [True, False])
def test_save_load_round_trip_writes_the_family_auto_map(tmp_path, tie):
    model = tiny(**{**BERT, "tie_word_embeddings": tie})
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"] == AUTO_MAP and "custom_pipelines" not in config
    assert config["model_type"] == "vanilla_encoder_only"
    for name in (
        "modeling_vanilla_encoder_only.py",
        "configuration_vanilla_encoder_only.py",
        "modeling_vanilla_transformer.py",
    ):
        assert (tmp_path / name).read_bytes() == (ROOT / "modeling" / name).read_bytes()
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is VanillaEncoderOnlyForMaskedLM
    assert (loaded.lm_head.weight is loaded.get_input_embeddings().weight) == tie
    ids, mask = random_batch(VOCAB, 2, 6, seed=12)
    torch.testing.assert_close(
        logits(loaded, ids, mask, token_type_ids=mask),
        logits(model, ids, mask, token_type_ids=mask),
        atol=0,
        rtol=0,
    )


def test_fresh_process_loads_remote_code_and_fills_masks(tmp_path):
    """Folders saved with plain save_pretrained load in a process that cannot import the project: the masked-LM
    model (logits equal; transformers' fill-mask pipeline predicts our arg-max), the base model and the
    classifier; a save from the remote-code model writes the same auto_map again."""
    tokenizer = word_tokenizer(VOCAB)
    tokenizer.add_special_tokens({"mask_token": "<mask>"})
    mlm = tiny(**BERT, vocab_size=len(tokenizer))
    classifier = tiny(
        VanillaEncoderOnlyForSequenceClassification, **BERT, vocab_size=len(tokenizer), num_labels=3
    )
    mlm.save_pretrained(tmp_path / "mlm")
    tokenizer.save_pretrained(tmp_path / "mlm")
    classifier.save_pretrained(tmp_path / "cls")
    text = "w5 w9 <mask> w17"
    batch = tokenizer([text, "w7 w8"], padding=True, return_tensors="pt", return_token_type_ids=False)
    expected = {
        "mlm": logits(mlm, batch["input_ids"], batch["attention_mask"]).tolist(),
        "cls": logits(classifier, batch["input_ids"], batch["attention_mask"]).tolist(),
        "fill": tokenizer.convert_ids_to_tokens(int(logits(mlm, batch["input_ids"][:1])[0, 2].argmax())),
    }
    out = run_python(
        f"""
        import json, torch
        from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, pipeline
        mlm_folder, cls_folder = {str(tmp_path / "mlm")!r}, {str(tmp_path / "cls")!r}
        mlm = AutoModelForMaskedLM.from_pretrained(mlm_folder, trust_remote_code=True).eval()
        assert type(mlm).__module__.startswith("transformers_modules"), type(mlm).__module__
        base = AutoModel.from_pretrained(mlm_folder, trust_remote_code=True)
        assert type(base).__name__ == "VanillaEncoderOnlyModel", type(base)
        classifier = AutoModelForSequenceClassification.from_pretrained(cls_folder, trust_remote_code=True).eval()
        mlm.save_pretrained({str(tmp_path / "again")!r})
        ids, mask = torch.tensor({batch["input_ids"].tolist()}), torch.tensor({batch["attention_mask"].tolist()})
        fill = pipeline("fill-mask", model=mlm_folder, trust_remote_code=True, top_k=1)({text!r})
        with torch.no_grad():
            print(json.dumps({{
                "mlm": mlm(input_ids=ids, attention_mask=mask).logits.tolist(),
                "cls": classifier(input_ids=ids, attention_mask=mask).logits.tolist(),
                "fill": fill[0]["token_str"],
            }}))
        """,
        cwd=tmp_path,
    )
    got = json.loads(out.strip().splitlines()[-1])
    assert got["fill"] == expected["fill"]
    for name in ("mlm", "cls"):
        torch.testing.assert_close(
            torch.tensor(got[name]), torch.tensor(expected[name]), atol=1e-5, rtol=1e-5
        )
    assert json.loads((tmp_path / "again" / "config.json").read_text())["auto_map"] == AUTO_MAP
