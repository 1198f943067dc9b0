"""Parity against an implementation nobody here wrote: transformers' BertForMaskedLM and
BertForSequenceClassification with the same weights (converted by convert/bert.py)."""

from __future__ import annotations

import importlib.util
import json
from typing import TypeVar

import pytest
import torch
from conftest import perturb_biases_and_norms
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    pipeline,
)

from vanilla_transformer.convert.bert import convert_bert, convert_bert_checkpoint
from vanilla_transformer.modeling import (
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, 61)]  # ids = index


def bert_values(
    width: int, layers: int, heads: int, ffn_dim: int, activation: str, types: int, positions: int, **options
) -> dict:
    """BertConfig values: the sizes, the activation, the token-type and position table sizes, then `options`,
    further BertConfig fields."""
    values = dict(
        hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=ffn_dim
    )
    return {
        **values,
        "hidden_act": activation,
        "type_vocab_size": types,
        "max_position_embeddings": positions,
        **options,
    }


# width, layers, heads, feed-forward width, activation, token types, positions, options
BERT_CONFIGS = [
    bert_values(32, 2, 4, 48, "gelu", 2, 40),
    bert_values(24, 3, 2, 40, "gelu_new", 3, 16, layer_norm_eps=1e-5),
    bert_values(16, 1, 4, 24, "relu", 1, 24, tie_word_embeddings=False),
]


def bert_config(index: int, **overrides) -> BertConfig:
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **{**BERT_CONFIGS[index], **overrides},
    )
    config._attn_implementation = "sdpa"
    return config


M = TypeVar("M", bound=torch.nn.Module)


def perturbed(bert: M, seed: int) -> M:
    """`bert` in eval mode with random biases and LayerNorm parameters (fresh ones are zeros and ones), so that
    parity covers every parameter."""
    torch.manual_seed(seed)
    perturb_biases_and_norms(bert)
    return bert.eval()


def make_bert(index: int, head: type[M] = BertForMaskedLM, **overrides) -> M:
    torch.manual_seed(200 + index)
    return perturbed(head(bert_config(index, **overrides)), seed=300 + index)


def padded_batch(config: BertConfig, seed: int):
    """Right-padded (ids, mask, token types, MLM labels): a full row, a shorter one, one with a single token."""
    g = torch.Generator().manual_seed(seed)
    length = min(11, config.max_position_embeddings)
    ids = torch.randint(5, config.vocab_size, (3, length), generator=g)
    ids[:, 0] = 2  # [CLS]
    mask = torch.ones_like(ids)
    mask[1, length - 4 :] = 0
    mask[2, 1:] = 0
    ids[mask == 0] = 0
    token_types = torch.randint(0, config.type_vocab_size, ids.shape, generator=g) * mask
    labels = torch.where(torch.rand(ids.shape, generator=g) < 0.4, ids, -100).masked_fill(mask == 0, -100)
    labels[0, 1] = ids[0, 1]  # at least one scored position
    return ids, mask, token_types, labels


@pytest.mark.parametrize("index", range(len(BERT_CONFIGS)))
def test_masked_lm_logits_and_loss_match_bert(index):
    bert = make_bert(index)
    ours = convert_bert(bert)
    assert type(ours) is VanillaEncoderOnlyForMaskedLM
    assert ours.config.tie_word_embeddings == bert.config.tie_word_embeddings
    ids, mask, token_types, labels = padded_batch(bert.config, seed=index)
    real = mask.bool()
    for attn in ("sdpa", "eager"):
        bert.set_attn_implementation(attn)
        ours.set_attn_implementation(attn)
        with torch.no_grad():
            for types in (token_types, None):  # BERT's default is type 0 everywhere
                expected = bert(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
                got = ours(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels)
                torch.testing.assert_close(got.logits[real], expected.logits[real], atol=1e-4, rtol=1e-4)
                torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)
            # BERT's positions at padding are 0..L-1 too: with them every position matches
            positions = torch.arange(ids.shape[1])[None]
            expected = bert(input_ids=ids, attention_mask=mask, token_type_ids=token_types).logits
            got = ours(
                input_ids=ids, attention_mask=mask, token_type_ids=token_types, position_ids=positions
            ).logits
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "index, problem_type, num_labels, in_config",
    [
        (0, "single_label_classification", 3, False),
        (1, "multi_label_classification", 3, False),
        (2, "regression", 1, False),
        (0, "regression", 3, True),
    ],
)
def test_sequence_classification_matches_bert(index, problem_type, num_labels, in_config):
    """Logits and loss for each problem type, inferred from the labels as BERT does or set in the config."""
    bert = make_bert(
        index,
        BertForSequenceClassification,
        num_labels=num_labels,
        classifier_dropout=0.2,
        problem_type=problem_type if in_config else None,
    )
    ours = convert_bert(bert)
    assert type(ours) is VanillaEncoderOnlyForSequenceClassification
    ids, mask, token_types, _ = padded_batch(bert.config, seed=10 + index)
    g = torch.Generator().manual_seed(index)
    labels = {
        "single_label_classification": torch.tensor([0, 2, 1]),
        "multi_label_classification": torch.randint(0, 2, (3, num_labels), generator=g).float(),
        "regression": torch.randn(3, num_labels, generator=g).squeeze(-1),
    }[problem_type]
    with torch.no_grad():
        expected = bert(input_ids=ids, attention_mask=mask, token_type_ids=token_types, labels=labels)
        got = ours(input_ids=ids, attention_mask=mask, token_type_ids=token_types, labels=labels)
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)
    assert bert.config.problem_type == problem_type  # the case is the one intended


def convert(*argv) -> int:
    """`vanilla-transformer convert --from bert ARGV` in this process; its exit status."""
    return importlib.import_module("vanilla_transformer.commands.convert").main(
        ["--from", "bert", *map(str, argv)]
    )


def bert_tokenizer() -> BertTokenizer:
    return BertTokenizer(vocab={token: i for i, token in enumerate(VOCAB)})


def test_converted_folders_load_with_auto_classes_and_fill_mask(tmp_path):
    """A saved BertForMaskedLM folder with its tokenizer -> converted folder (tokenizer copied) -> the
    AutoModelForMaskedLM of this package gives BERT's logits, and the fill-mask pipeline BERT's predictions; a saved
    BertForSequenceClassification folder keeps its labels."""
    bert = make_bert(0)
    bert.save_pretrained(tmp_path / "bert")
    bert_tokenizer().save_pretrained(tmp_path / "bert")
    assert convert(tmp_path / "bert", tmp_path / "ours") == 0
    ours = AutoModelForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "ours")
    assert type(ours) is VanillaEncoderOnlyForMaskedLM and tokenizer.mask_token == "[MASK]"
    batch = tokenizer(["w5 w9 [MASK] w17", "w33 [MASK]"], ["w7 w8", "w40"], padding=True, return_tensors="pt")
    with torch.no_grad():
        real = batch["attention_mask"].bool()
        torch.testing.assert_close(
            ours(**batch).logits[real], bert(**batch).logits[real], atol=1e-4, rtol=1e-4
        )
    text = "w5 w9 [MASK] w17"
    got, expected = (
        pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=3)(text) for model in (ours, bert)
    )
    assert [row["sequence"] for row in got] == [row["sequence"] for row in expected]
    assert [row["score"] for row in got] == pytest.approx([row["score"] for row in expected], abs=1e-6)

    classifier = make_bert(
        1,
        BertForSequenceClassification,
        num_labels=2,
        id2label={0: "neg", 1: "pos"},
        label2id={"neg": 0, "pos": 1},
    )
    classifier.save_pretrained(tmp_path / "bert-cls")
    convert_bert_checkpoint(tmp_path / "bert-cls", tmp_path / "ours-cls")
    ours_cls = AutoModelForSequenceClassification.from_pretrained(tmp_path / "ours-cls").eval()
    assert type(ours_cls) is VanillaEncoderOnlyForSequenceClassification
    assert ours_cls.config.id2label == {0: "neg", 1: "pos"}
    ids, mask, token_types, _ = padded_batch(classifier.config, seed=5)
    with torch.no_grad():
        torch.testing.assert_close(
            ours_cls(input_ids=ids, attention_mask=mask, token_type_ids=token_types).logits,
            classifier(input_ids=ids, attention_mask=mask, token_type_ids=token_types).logits,
            atol=1e-4,
            rtol=1e-4,
        )


def test_pretraining_checkpoint_converts_to_masked_lm(tmp_path):
    """BertForPreTraining (the original BERT checkpoints' head) converts through its masked-LM head; the
    next-sentence head is dropped."""
    pretraining = make_bert(2, BertForPreTraining)
    pretraining.save_pretrained(tmp_path / "bert")
    ours = convert_bert(tmp_path / "bert")
    ids, mask, token_types, _ = padded_batch(pretraining.config, seed=7)
    with torch.no_grad():
        expected = pretraining(
            input_ids=ids, attention_mask=mask, token_type_ids=token_types
        ).prediction_logits
        got = ours(input_ids=ids, attention_mask=mask, token_type_ids=token_types).logits
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()], atol=1e-4, rtol=1e-4)


def test_conversion_refuses_what_it_cannot_map(tmp_path):
    with pytest.raises(ValueError, match="BertForMaskedLM or BertForSequenceClassification"):
        # a BERT class without a head, on purpose: the check names the ones it converts
        convert_bert(BertModel(bert_config(0)))  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="is_decoder"):
        convert_bert(BertForMaskedLM(bert_config(0, is_decoder=True)))
    BertModel(bert_config(0)).save_pretrained(tmp_path / "base")
    with pytest.raises(ValueError, match="architectures"):
        convert_bert(tmp_path / "base")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"model_type": "marian"}))
    with pytest.raises(ValueError, match="not a BERT model"):
        convert_bert(tmp_path / "other")


def test_convert_script_reports_bad_folder(tmp_path, capsys):
    assert convert(tmp_path, tmp_path / "out") == 2
    assert "config.json" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
