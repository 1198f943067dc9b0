"""The torch engine's decoding loop (`inference.decoding.decode`) computes what `generate()` computes: the same
sequences (token for token, same padding and length) and the same scores (transformers' ``sequences_scores`` with
beams; greedy, the sum of the processed log-probabilities `inference.translate` reports), on random tiny models of
every architecture option, with padded batches whose sentences finish at different steps, for every decoding
option the commands expose; what it cannot do goes to `generate()` by one rule (`unsupported`)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from conftest import random_batch, tiny_model

from vanilla_transformer.inference.decoding import (
    DECODER_ENV,
    chosen_decoder,
    decode,
    resolved_generation_config,
    unsupported,
)
from vanilla_transformer.inference.translate import _sequence_scores

# the decoding options every random model is decoded with (beam options are dropped for greedy by the caller, as
# inference.translate does)
OPTIONS: list[dict[str, Any]] = [
    dict(num_beams=1, max_new_tokens=24),
    dict(num_beams=4, max_new_tokens=24),
    dict(num_beams=4, num_return_sequences=3, max_new_tokens=16, length_penalty=0.6),
    dict(num_beams=3, num_return_sequences=3, max_new_tokens=12, early_stopping=False, length_penalty=2.0),
    dict(num_beams=5, max_new_tokens=12, early_stopping="never", length_penalty=-0.5),
    dict(num_beams=2, max_new_tokens=10, early_stopping="never", length_penalty=1.0, min_new_tokens=6),
    dict(num_beams=1, max_new_tokens=9, min_new_tokens=4),
    dict(num_beams=3, max_new_tokens=7, forced_bos_token_id=5, forced_eos_token_id=3),
    dict(num_beams=1, max_new_tokens=7, forced_bos_token_id=6, forced_eos_token_id=3),
    dict(num_beams=4, max_new_tokens=9, suppress_tokens=[4, 7, 9], length_penalty=0.0),
]


def random_model(seed: int):
    """A tiny encoder-decoder with architecture options drawn by `seed` and an output bias towards </s>, so that
    the sentences of a batch finish at different steps."""
    rng = random.Random(seed)
    shared = rng.random() < 0.6
    overrides = dict(
        normalize_before=rng.random() < 0.5,
        position_encoding=rng.choice(["sinusoidal", "learned", "rope", "none"]),
        sinusoidal_layout=rng.choice(["interleaved", "concatenated", "tensor2tensor"]),
        position_offset=rng.choice([0, 0, 2]),
        tie_word_embeddings=rng.random() < 0.5,
        share_encoder_decoder_embeddings=shared,
        layernorm_embedding=rng.random() < 0.3,
        scale_embedding=rng.random() < 0.7,
        output_bias=rng.random() < 0.8,
        decoder_layers=rng.choice([1, 2, 3]),
    )
    if not shared:
        overrides["decoder_vocab_size"] = rng.choice([61, 97, 131])
    model = tiny_model(seed=seed, attn=rng.choice(["sdpa", "sdpa", "eager"]), **overrides)
    model.generation_config.suppress_tokens = [0, 2]
    ids, mask = random_batch(model.config.vocab_size, batch=5, length=11, seed=seed)
    eos = model.config.eos_token_id
    # raise </s> until greedy decoding of the batch ends at three different steps or more
    for _ in range(20):
        finished = first_eos(generated(model, ids, mask, dict(num_beams=1, max_new_tokens=24))[0], eos)
        if len(finished) > 2:
            break
        with torch.no_grad():
            if model.final_logits_bias is not None:
                model.final_logits_bias[eos] += 0.5
            else:
                model.lm_head.weight[eos] *= 1.2
    return model


def first_eos(sequences: torch.Tensor, eos: int) -> set[int]:
    """The steps at which the rows of `sequences` first produce </s>."""
    return {int((row == eos).nonzero()[0]) for row in sequences if (row == eos).any()}


def generated(model, ids, mask, options: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        output = model.generate(
            input_ids=ids, attention_mask=mask, return_dict_in_generate=True, output_scores=True, **options
        )
    return output.sequences, torch.tensor(_sequence_scores(model, output))


def beam_only(options: dict[str, Any]) -> dict[str, Any]:
    if options.get("num_beams", 1) == 1:
        return {k: v for k, v in options.items() if k not in ("length_penalty", "early_stopping")}
    return options


@pytest.mark.parametrize("seed", range(24))
def test_the_loop_equals_generate_on_random_models(seed):
    model = random_model(seed)
    ids, mask = random_batch(model.config.vocab_size, batch=5, length=11, seed=seed)
    eos = model.config.eos_token_id
    lengths = set()
    for options in OPTIONS:
        options = beam_only(options)
        assert unsupported(model, options) is None
        expected, expected_scores = generated(model, ids, mask, options)
        output = decode(model, ids, mask, **options)
        assert torch.equal(output.sequences, expected), (options, output.sequences, expected)
        torch.testing.assert_close(output.sequences_scores, expected_scores, rtol=0, atol=1e-4)
        lengths |= first_eos(expected, eos)
    # the sentences of the batch finished at different steps
    assert len(lengths) > 2


def unending_batch() -> tuple[Any, torch.Tensor, torch.Tensor]:
    """The first random model and batch (by seed) whose greedy outputs finish at three different steps or more
    and hold a sentence that runs to 30 new tokens."""
    for seed in range(3, 40):
        model = random_model(seed)
        ids, mask = random_batch(model.config.vocab_size, batch=6, length=9, seed=seed)
        expected, _ = generated(model, ids, mask, dict(num_beams=1, max_new_tokens=30))
        eos = model.config.eos_token_id
        if len(first_eos(expected, eos)) >= 3 and any(not (row[1:] == eos).any() for row in expected):
            return model, ids, mask
    raise AssertionError("no random model of seeds 3-39 leaves a sentence unfinished")


def test_sentences_that_run_to_the_limit_leave_the_others_finished():
    """A batch in which some sentences never end and the others end at different steps: the finished ones leave
    the batch, and the result is generate()'s."""
    model, ids, mask = unending_batch()
    all_options: list[dict[str, Any]] = [
        dict(num_beams=1, max_new_tokens=30),
        dict(num_beams=3, max_new_tokens=30),
    ]
    for options in all_options:
        expected, scores = generated(model, ids, mask, options)
        output = decode(model, ids, mask, **options)
        assert torch.equal(output.sequences, expected)
        torch.testing.assert_close(output.sequences_scores, scores, rtol=0, atol=1e-4)


def test_a_shortlist_of_the_whole_vocabulary_changes_nothing_and_a_smaller_one_is_a_restricted_softmax():
    model = random_model(5)
    ids, mask = random_batch(model.config.vocab_size, batch=3, length=8, seed=2)
    vocabulary_size = model.config.decoder_vocab_size
    all_options: list[dict[str, Any]] = [
        dict(num_beams=1, max_new_tokens=12),
        dict(num_beams=4, max_new_tokens=12),
    ]
    for options in all_options:
        full = decode(model, ids, mask, **options)
        everything = decode(model, ids, mask, vocabulary=torch.arange(vocabulary_size), **options)
        assert torch.equal(full.sequences, everything.sequences)
        torch.testing.assert_close(full.sequences_scores, everything.sequences_scores)
    shortlist = torch.tensor([4, 8, 15, 16, 23, 42])
    output = decode(model, ids, mask, vocabulary=shortlist, num_beams=1, max_new_tokens=6)
    eos = model.config.eos_token_id
    allowed = set(shortlist.tolist()) | {eos, model.config.decoder_start_token_id, model.config.pad_token_id}
    assert set(output.sequences.unique().tolist()) <= allowed
    # the greedy score is the log-probability under the softmax over the shortlist (and </s>)
    columns = torch.tensor(sorted(set(shortlist.tolist()) | {eos}))
    with torch.no_grad():
        sequences = output.sequences
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=sequences[:, :-1]).logits
    log_probs = logits[:, :, columns].log_softmax(-1)
    targets = torch.searchsorted(columns, sequences[:, 1:].clamp(min=columns[0]))
    token_scores = log_probs.gather(-1, targets[:, :, None]).squeeze(-1)
    finished_before = (sequences[:, 1:] == eos).long().cumsum(1) - (sequences[:, 1:] == eos).long()
    expected = token_scores.masked_fill(finished_before > 0, 0.0).sum(1)
    torch.testing.assert_close(output.sequences_scores, expected, rtol=0, atol=1e-4)


def test_the_resolved_generation_config_is_generates():
    model = random_model(0)
    config = resolved_generation_config(model, dict(num_beams=2, max_new_tokens=5, min_new_tokens=2))
    assert (config.num_beams, config.max_length, config.min_length) == (2, 6, 3)
    assert config.length_penalty == model.generation_config.length_penalty


def test_what_the_loop_cannot_do_goes_to_generate():
    model = random_model(0)
    assert unsupported(model, {}) is None
    reasons = {
        "sampling": dict(do_sample=True),
        "repetition_penalty": dict(repetition_penalty=1.2),
        "no_repeat_ngram_size": dict(no_repeat_ngram_size=3),
        "custom_generate": dict(custom_generate=lambda **_: None),
        "bad_words_ids": dict(bad_words_ids=[[5, 6]]),
    }
    for reason, options in reasons.items():
        assert reason in str(unsupported(model, options))
    assert unsupported(model, dict(bad_words_ids=[[5], [6]])) is None
    model.train()
    assert "training" in str(unsupported(model, {}))
    with pytest.raises(ValueError, match="use model.generate"):
        decode(model, torch.tensor([[5, 3]]))


def test_single_token_bad_words_equal_generate():
    model = random_model(7)
    ids, mask = random_batch(model.config.vocab_size, batch=3, length=7, seed=4)
    all_options: list[dict[str, Any]] = [
        dict(num_beams=1, max_new_tokens=10),
        dict(num_beams=3, max_new_tokens=10),
    ]
    for options in all_options:
        options["bad_words_ids"] = [[5], [11], [3]]
        expected, scores = generated(model, ids, mask, options)
        output = decode(model, ids, mask, **options)
        assert torch.equal(output.sequences, expected)
        torch.testing.assert_close(output.sequences_scores, scores, rtol=0, atol=1e-4)


def test_the_decoder_choice(monkeypatch):
    monkeypatch.delenv(DECODER_ENV, raising=False)
    assert chosen_decoder() == "loop" and chosen_decoder("generate") == "generate"
    monkeypatch.setenv(DECODER_ENV, "generate")
    assert chosen_decoder() == "generate" and chosen_decoder("loop") == "loop"
    monkeypatch.setenv(DECODER_ENV, "fast")
    with pytest.raises(ValueError, match="VANILLA_TRANSFORMER_DECODER='fast' is invalid"):
        chosen_decoder()
