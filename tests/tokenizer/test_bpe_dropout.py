"""BPE-dropout (``--bpe_dropout``): `tokenizer.BPEDropout` against the tokenizer's own segmentation (p = 0), against
characters (p = 1) and against the paper's segmentation probabilities worked out by hand for a toy merge table;
then training: a fresh, seeded segmentation of the training pairs every epoch, deterministic validation, batches cut
by each epoch's lengths, exact resume across epochs, and the refused option values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import small_run
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus
from vanilla_transformer.tokenizer import BYTE_TOKENS, EOS_ID, SPECIAL_TOKENS, BPEDropout
from vanilla_transformer.training import train
from vanilla_transformer.training.options import RESUME_KEYS, check_options

# byte fallback (an emoji and a letter the 300 verses lack), a special token written as text, an empty text
ODD_TEXTS = ["Zürich 😀 ok", "a </s> b", "", "  spaced   out  "]


@pytest.fixture(scope="module")
def tok(tokenizer_dir) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=300)
    return list(ds["source"]) + list(ds["target"]) + ODD_TEXTS


@pytest.fixture(scope="module")
def segmenter(tok, texts) -> BPEDropout:
    return BPEDropout(tok, texts)


def rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(list(key))


def test_without_dropout_the_segmentation_is_the_tokenizers_own(tok, texts, segmenter):
    assert segmenter.segment(0.0, rng(0)) == tok(texts)["input_ids"]


def test_no_texts_and_tokenizers_that_are_not_bpe():
    vocab = {"<unk>": 0, "a": 1}
    word_level = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    )
    with pytest.raises(ValueError, match="BPE-dropout needs a BPE tokenizer.*WordLevel model"):
        BPEDropout(word_level, ["a"])
    bpe = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE(vocab, [], unk_token="<unk>")))
    assert BPEDropout(bpe, []).segment(0.5, rng(0)) == []
    assert BPEDropout(bpe, ["aa", "a"]).segment(0.5, rng(0)) == [[1, 1], [1]]  # no merges at all


def test_full_dropout_leaves_every_word_in_characters_or_bytes(tok, texts, segmenter):
    deterministic = tok(texts)["input_ids"]
    for ids, reference in zip(segmenter.segment(1.0, rng(0)), deterministic):
        assert all(
            len(t) == 1 or t in BYTE_TOKENS or t in SPECIAL_TOKENS for t in tok.convert_ids_to_tokens(ids)
        )
        assert tok.decode(ids) == tok.decode(reference)


def test_dropout_segmentations_differ_use_the_vocabulary_and_decode_to_the_same_text(tok, texts, segmenter):
    deterministic = tok(texts)["input_ids"]
    first, second = segmenter.segment(0.1, rng(1, 0)), segmenter.segment(0.1, rng(1, 1))
    assert first == segmenter.segment(0.1, rng(1, 0))  # the generator alone decides
    assert first != second and first != deterministic and second != deterministic
    changed = sum(a != b for a, b in zip(first, deterministic))
    assert changed > len(texts) // 4  # most 30-word verses lose a merge somewhere
    for ids, reference in zip(first, deterministic):
        assert all(0 <= i < len(tok) for i in ids) and ids[-1] == EOS_ID
        assert len(ids) >= len(reference)  # dropping merges never joins pieces
        assert tok.decode(ids) == tok.decode(reference)


def test_extra_tokens_grow_with_the_dropout_probability(tok, texts, segmenter):
    base = sum(map(len, tok(texts)["input_ids"]))
    extra = [
        sum(map(len, segmenter.segment(p, rng(7, i)))) / base - 1 for i, p in enumerate((0.05, 0.1, 0.2, 0.4))
    ]
    # about 20k tokens per draw: a fraction varies by about 0.005 between draws, the gaps are 0.06 and more
    assert all(b - a > 0.03 for a, b in zip(extra, extra[1:])), extra
    assert 0.02 < extra[1] < 0.5, extra


def test_segmentation_probabilities_are_the_papers_algorithm():
    """Vocabulary a, b, c, ab, abc; merges (a b) then (ab c). Algorithm 1 on "abc": the only applicable merge
    (a b) is dropped with probability p, which ends the word as a|b|c; else (ab c) is dropped with probability p:
    ab|c; else abc. So P(a|b|c) = p, P(ab|c) = (1 - p) p, P(abc) = (1 - p)^2."""
    vocab = {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3, "c": 4, "ab": 5, "abc": 6}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b"), ("ab", "c")], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    toy = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>")
    n, p = 4000, 0.3
    words = BPEDropout(toy, ["abc abc"] * (n // 2)).segment(p, rng(3))
    counts = {}
    for text in words:
        for word in _words(toy, text):
            counts[word] = counts.get(word, 0) + 1
    expected = {("a", "b", "c"): p, ("ab", "c"): (1 - p) * p, ("abc",): (1 - p) ** 2}
    assert set(counts) == set(expected)
    for word, probability in expected.items():  # 5 standard errors (n = 4000: below 0.04)
        assert abs(counts[word] / n - probability) < 5 * math.sqrt(probability * (1 - probability) / n), (
            counts
        )


def _words(toy: PreTrainedTokenizerFast, ids: list[int]) -> list[tuple[str, ...]]:
    """Split a segmentation of "abc abc" back into its two words (each ends with c)."""
    words, current = [], []
    for token in toy.convert_ids_to_tokens(ids):
        current.append(token)
        if token.endswith("c"):
            words.append(tuple(current))
            current = []
    return words


def test_the_sampler_cuts_each_epoch_by_its_own_lengths_and_refuses_lengths_that_break_the_budget():
    from vanilla_transformer.training.batching import BatchStream, TokenBudgetBatchSampler

    fixed = [10] * 8
    longer = {0: fixed, 1: [20] * 8}  # epoch 1: every example twice as long, half as many per batch
    sampler = TokenBudgetBatchSampler(
        fixed, fixed, 40, seed=1, epoch_lengths=lambda e: (longer[e], longer[e])
    )
    assert [len(b) for b in sampler.batches(0)] == [4, 4] and [len(b) for b in sampler.batches(1)] == [2] * 4
    taken = BatchStream(sampler).take(4)
    assert [epoch for epoch, _ in taken] == [0, 0, 1, 1] and [len(b) for _, b in taken] == [4, 4, 2, 2]
    broken = TokenBudgetBatchSampler(fixed, fixed, 40, epoch_lengths=lambda e: ([50] * 8, fixed))
    with pytest.raises(ValueError, match="longer than max_tokens=40"):
        broken.batches(0)


# ---- training --------------------------------------------------------------------------------------------------
def trainer_data(tmp_path, name: str, tokenizer_dir: str, **options):
    from vanilla_transformer.training.loop import Trainer

    return Trainer(
        small_run(
            tmp_path / name, tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"), max_steps=1, **options
        )
    ).data


def test_each_epoch_trains_on_its_own_seeded_segmentation_and_validation_stays_deterministic(
    tok, tokenizer_dir, tmp_path
):
    plain = trainer_data(tmp_path, "plain", tokenizer_dir)
    dropout = trainer_data(tmp_path, "dropout", tokenizer_dir, bpe_dropout=0.1)
    again = trainer_data(tmp_path, "again", tokenizer_dir, bpe_dropout=0.1)
    sources, targets = plain.train_examples(0)
    assert plain.train_examples(3) == (sources, targets)  # no dropout: the same ids every epoch ...
    train_sources, train_targets = (
        tok(list(plain.splits["train"][side]))["input_ids"] for side in ("source", "target")
    )
    kept = [
        i for i, (s, t) in enumerate(zip(train_sources, train_targets)) if len(s) <= 256 and len(t) <= 256
    ]
    # ... and the tokenizer's
    assert (sources, targets) == ([train_sources[i] for i in kept], [train_targets[i] for i in kept])
    epochs = [dropout.train_examples(e) for e in range(3)]
    for e, (src, tgt) in enumerate(epochs):
        assert src != sources and tgt != targets  # both sides re-segmented
        assert [tok.decode(x) for x in src] == [tok.decode(x) for x in sources]
        assert [tok.decode(x) for x in tgt] == [tok.decode(x) for x in targets]
        assert epochs[e] not in epochs[:e]  # a fresh segmentation every epoch
        assert again.train_examples(e) == epochs[e]  # a pure function of --seed and the epoch
        # the batches of an epoch are cut by that epoch's lengths, within the token budget
        lengths = [max(len(s), len(t)) for s, t in zip(src, tgt)]
        batches = dropout.sampler.batches(e)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        assert all(len(b) * max(lengths[i] for i in b) <= 512 for b in batches)
        assert batches != plain.sampler.batches(e)
    # validation is never re-segmented
    assert (dropout.valid_src, dropout.valid_tgt) == (plain.valid_src, plain.valid_tgt)
    assert dropout.tokenizer.backend_tokenizer.model.dropout is None


def test_resume_with_bpe_dropout_continues_exactly_across_epochs(tokenizer_dir, tmp_path):
    # 34 training pairs: about 4 updates an epoch, so the resumed updates 4..10 start two new epochs
    common = dict(
        tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"), max_lines=60, max_steps=10, bpe_dropout=0.1
    )
    full = train(small_run(tmp_path / "full", **common))
    train(small_run(tmp_path / "cut", **{**common, "max_steps": 3}))
    resumed = train(small_run(tmp_path / "cut", **common, resume=True))
    assert [h["step"] for h in resumed.history] == list(range(4, 11))
    assert resumed.history[0]["epoch"] == 0 and resumed.history[-1]["epoch"] == 2
    for a, b in zip(full.history[3:], resumed.history):
        assert (a["loss"], a["ntokens"], a["epoch"]) == (b["loss"], b["ntokens"], b["epoch"]), (a, b)
    # every update trained on its epoch's segmentation: the target tokens of its batch, epoch by epoch
    data = trainer_data(tmp_path, "data", tokenizer_dir, max_lines=60, bpe_dropout=0.1)
    expected = [
        sum(len(data.train_examples(e)[1][i]) for i in batch)
        for e in range(3)
        for batch in data.sampler.batches(e)
    ]
    assert [h["ntokens"] for h in full.history] == expected[:10]
    plain = train(small_run(tmp_path / "plain", **{**common, "bpe_dropout": 0.0}))
    assert [h["ntokens"] for h in plain.history] != [h["ntokens"] for h in full.history]


def test_a_side_longer_than_the_length_limit_keeps_its_deterministic_ids(tokenizer_dir, tmp_path):
    plain = trainer_data(tmp_path, "plain", tokenizer_dir, max_length=48)
    dropout = trainer_data(tmp_path, "dropout", tokenizer_dir, max_length=48, bpe_dropout=0.3)
    sources, targets = plain.train_examples(0)
    for epoch in range(2):
        src, tgt = dropout.train_examples(epoch)
        sides = [*src, *tgt]
        assert max(map(len, sides)) <= 48
        kept = sum(a == b for a, b in zip(sides, [*sources, *targets]))
        assert 0 < kept < len(sides)  # some sides would have been too long, not all


@pytest.mark.parametrize("objective", ["causal_lm", "masked_lm", "span_corruption"])
def test_bpe_dropout_is_refused_for_the_other_objectives(objective, tmp_path):
    with pytest.raises(
        ValueError, match=f"--bpe_dropout re-segments translation pairs; --objective {objective}"
    ):
        check_options(small_run(tmp_path, objective=objective, bpe_dropout=0.1, max_steps=1))
    check_options(small_run(tmp_path, objective=objective, bpe_dropout=0.0, max_steps=1))


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, math.nan])
def test_bad_bpe_dropout_is_refused(value, tmp_path):
    with pytest.raises(ValueError, match=r"--bpe_dropout must be in \[0, 1\), got"):
        check_options(small_run(tmp_path, bpe_dropout=value, max_steps=1))


def test_bpe_dropout_is_fixed_for_a_resumed_run():
    assert "bpe_dropout" in RESUME_KEYS  # the refusal itself: tests/training/test_training_resume.py
