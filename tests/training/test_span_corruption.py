"""T5 span corruption: the noise mask against the counts of T5's formula and its target statistics (noise density
0.15, mean span length 3 within 10 % over 10,000 texts), the random segmentation's uniformity, the corrupted
inputs and targets (sentinels in order, the original recovered from both), seeded batches, and the tokenizer's
denoising tokens (fixed ids, old layout unchanged without them, a saved folder that transformers loads and masks
with)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
import torch

from vanilla_transformer.modeling import IGNORE_INDEX
from vanilla_transformer.tokenizer.bpe import (
    BYTE_TOKENS,
    DENOISING_TOKENS,
    MASK_TOKEN,
    SENTINEL_TOKENS,
    SPECIAL_TOKENS,
    sentinel_token_ids,
    train_bpe_tokenizer,
)
from vanilla_transformer.training.batching import (
    _random_segmentation,
    batch_generator,
    collate_span_corruption,
    random_spans_noise_mask,
    span_corruption,
)

SENTINELS = list(range(1000, 1100))  # ids outside the token range of the texts below
EOS = 3


def spans_of(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of every run of True."""
    runs, start = [], None
    for i, noise in enumerate(list(mask) + [False]):
        if noise and start is None:
            start = i
        elif not noise and start is not None:
            runs.append((start, i))
            start = None
    return runs


def t5_counts(length: int) -> tuple[int, int]:
    """Noise tokens and noise spans of T5's random_spans_noise_mask, written out from its definition."""
    n = max(length, 2)
    noise = min(max(int(np.round(n * 0.15)), 1), n - 1)
    return noise, max(int(np.round(noise / 3.0)), 1)


def reconstruct(inputs: list[int], targets: list[int]) -> list[int]:
    """The text (with </s>) from corrupted inputs and targets: each sentinel of the inputs replaced by the tokens
    that follow the same sentinel in the targets."""
    spans, current = {}, None
    for token in targets[:-1]:
        if token in SENTINELS:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    return [t for token in inputs for t in (spans[token] if token in SENTINELS else [token])]


def test_noise_mask_has_t5_counts_and_the_target_density_and_span_length_over_10000_texts():
    rng = batch_generator(0)
    lengths = rng.integers(1, 200, size=10_000)
    noise_total = spans_total = 0
    for length in lengths.tolist():
        mask = random_spans_noise_mask(length, rng)
        runs = spans_of(mask)
        assert mask.shape == (length,) and mask.dtype == bool
        if length >= 2:
            assert (int(mask.sum()), len(runs)) == t5_counts(length), length
            assert not mask[0] and mask[-1]  # starts with kept tokens, ends with noise (no random roll)
        else:
            assert not mask.any()  # one token: T5 pads the length to 2 and cuts the mask back
        noise_total += int(mask.sum())
        spans_total += len(runs)
    density, mean_span = noise_total / lengths.sum(), noise_total / spans_total
    assert abs(density - 0.15) < 0.015 and abs(mean_span - 3.0) < 0.3, (density, mean_span)


def test_random_segmentation_is_uniform_over_compositions():
    # 6 items in 3 non-empty ordered segments: C(5, 2) = 10 compositions, each with probability 1/10
    rng = batch_generator(1)
    counts = Counter(tuple(_random_segmentation(6, 3, rng).tolist()) for _ in range(20_000))
    compositions = {c for c in itertools.product(range(1, 5), repeat=3) if sum(c) == 6}
    assert set(counts) == compositions and len(compositions) == 10
    assert all(abs(n / 20_000 - 0.1) < 0.01 for n in counts.values()), counts


def test_inputs_and_targets_have_sentinels_in_order_and_give_back_the_text():
    rng = batch_generator(2)
    for _ in range(500):
        text = rng.integers(4, 900, size=int(rng.integers(1, 120))).tolist()
        mask = random_spans_noise_mask(len(text), rng)
        inputs, targets = span_corruption(text, mask, SENTINELS, EOS)
        in_sentinels = [t for t in inputs if t in SENTINELS]
        assert in_sentinels == SENTINELS[: len(spans_of(mask))]  # one per span, <extra_id_0> first
        assert [t for t in targets if t in SENTINELS] == in_sentinels
        assert inputs[-1] == EOS and targets[-1] == EOS
        assert [t for t in targets if t not in SENTINELS][:-1] == [t for t, m in zip(text, mask) if m]
        assert reconstruct(inputs, targets) == text + [EOS]
        assert len(inputs) <= len(text) + 1  # never longer than the text: the token budget of the text holds


def test_too_many_spans_for_the_sentinels_is_a_clear_error():
    mask = np.array([False, True] * 5)
    with pytest.raises(ValueError, match="more noise spans than the 3 sentinels.*--max_length"):
        span_corruption(list(range(10)), mask, [100, 101, 102], EOS)


def test_span_corruption_batch_is_a_seq2seq_batch_seeded_by_its_key():
    texts = [list(range(10, 10 + n)) + [EOS] for n in (40, 7, 1, 23)]
    batch = collate_span_corruption(texts, SENTINELS, batch_generator(5, 7, 0), eos_token_id=EOS)
    again = collate_span_corruption(texts, SENTINELS, batch_generator(5, 7, 0), eos_token_id=EOS)
    other = collate_span_corruption(texts, SENTINELS, batch_generator(5, 8, 0), eos_token_id=EOS)
    assert all(torch.equal(batch[k], again[k]) for k in batch)
    assert not torch.equal(batch["input_ids"], other["input_ids"])
    for row, text in enumerate(texts):
        n_in, n_tgt = (
            int(batch["attention_mask"][row].sum()),
            int((batch["labels"][row] != IGNORE_INDEX).sum()),
        )
        inputs, targets = batch["input_ids"][row, :n_in].tolist(), batch["labels"][row, :n_tgt].tolist()
        assert reconstruct(inputs, targets) == text  # </s> of the text is kept, never noise
        assert (batch["input_ids"][row, n_in:] == 0).all() and (
            batch["labels"][row, n_tgt:] == IGNORE_INDEX
        ).all()
    assert int(batch["ntokens"]) == int((batch["labels"] != IGNORE_INDEX).sum())
    assert batch["labels"][2].tolist()[:1] == [EOS]  # a one-token text has no noise: the target is only </s>


# ---- the tokenizer's denoising tokens ----------------------------------------------------------------------
TEXTS = ["In the beginning God created the heavens and the earth.", "起初，神创造天地。", "And God said"] * 20


def test_denoising_tokens_have_fixed_ids_and_the_default_layout_is_unchanged():
    plain = train_bpe_tokenizer(TEXTS, vocab_size=500)
    denoising = train_bpe_tokenizer(TEXTS, vocab_size=600, denoising_tokens=True)
    fixed = len(SPECIAL_TOKENS) + len(BYTE_TOKENS)
    vocab = denoising.get_vocab()
    assert [vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3] and vocab[BYTE_TOKENS[0]] == 4
    assert [vocab[t] for t in DENOISING_TOKENS] == list(range(fixed, fixed + 101))
    assert vocab[MASK_TOKEN] == 260 and vocab["<extra_id_0>"] == 261 and vocab["<extra_id_99>"] == 360
    # learned pieces
    assert min(i for t, i in vocab.items() if t not in DENOISING_TOKENS and i >= fixed) == 361
    assert sentinel_token_ids(denoising) == list(range(261, 361)) and denoising.mask_token_id == 260
    # without them: no mask token, no sentinels, the learned pieces right after the byte tokens
    assert plain.mask_token is None and not set(DENOISING_TOKENS) & set(plain.get_vocab())
    assert min(i for i in plain.get_vocab().values() if i >= fixed) == fixed
    with pytest.raises(ValueError, match="no T5 sentinel tokens.*denoising_tokens=True"):
        sentinel_token_ids(plain)
    byte_level = train_bpe_tokenizer(TEXTS, vocab_size=700, kind="byte", denoising_tokens=True)
    assert sentinel_token_ids(byte_level) == list(range(5, 105)) and byte_level.mask_token_id == 4
    with pytest.raises(ValueError, match="the 105 special tokens"):
        train_bpe_tokenizer(TEXTS, vocab_size=300, denoising_tokens=True)


def test_denoising_tokenizer_saves_loads_and_masks_with_transformers(tmp_path):
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling

    train_bpe_tokenizer(TEXTS, vocab_size=600, denoising_tokens=True).save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.mask_token == MASK_TOKEN and sentinel_token_ids(loaded) == list(range(261, 361))
    ids = loaded("God <mask> the <extra_id_0>").input_ids
    # written special tokens are recognised, as in T5/BERT
    assert 260 in ids and 261 in ids and ids[-1] == EOS
    assert "<extra_id_0>" not in loaded.decode(ids, skip_special_tokens=True)
    special = set(loaded.all_special_ids)
    assert {0, 1, 2, 3, 260, *range(261, 361)} <= special
    collator = DataCollatorForLanguageModeling(loaded, mlm_probability=0.5, seed=0)
    batch = collator([loaded(t).input_ids for t in TEXTS[:6]])
    chosen = batch["labels"] != IGNORE_INDEX
    assert chosen.any() and not torch.isin(batch["labels"][chosen], torch.tensor(sorted(special))).any()
    assert (batch["input_ids"] == 260).any()
    assert len(SENTINEL_TOKENS) == 100
