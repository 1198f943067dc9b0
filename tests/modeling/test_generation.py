"""generate(): sampling, logits processors, streaming, default generation config, and bad generation input."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from conftest import random_batch, tiny_model
from helpers.shared import word_tokenizer
from transformers import LogitsProcessor, LogitsProcessorList, TextStreamer

from vanilla_transformer.modeling import DEFAULT_LENGTH_PENALTY


@pytest.fixture(scope="module")
def setup():
    model = tiny_model(seed=40)
    src, mask = random_batch(97, 2, 8, seed=41)
    return model, src, mask


@contextmanager
def raised_logits(model, tokens: list[int], amount: float) -> Iterator[None]:
    """Add `amount` to the output bias of `tokens` inside the block; restore the exact values after it."""
    saved = model.final_logits_bias.detach().clone()
    with torch.no_grad():
        model.final_logits_bias[tokens] += amount
    try:
        yield
    finally:
        with torch.no_grad():
            model.final_logits_bias.copy_(saved)


def gen(model, src, mask, **kwargs):
    kwargs.setdefault("num_beams", 1)
    kwargs.setdefault("do_sample", False)
    kwargs.setdefault("max_new_tokens", 8)
    return model.generate(input_ids=src, attention_mask=mask, **kwargs)


def test_default_generation_config_follows_the_paper(setup):
    """The paper's beam 4, with the project's one default length penalty."""
    model, _, _ = setup
    g = model.generation_config
    assert (g.num_beams, g.length_penalty, g.decoder_start_token_id) == (4, DEFAULT_LENGTH_PENALTY, 2)
    assert g.max_new_tokens and set(g.suppress_tokens) == {0, 2}


def test_default_generate_never_emits_pad_or_bos(setup):
    model, src, mask = setup
    # pad and bos the most likely tokens: they must still never appear
    with raised_logits(model, [0, 2], 100.0):
        out = model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6)
    assert out[:, 0].eq(2).all()  # starts with decoder_start
    generated = out[:, 1:]
    for row in generated:
        eos = (row == 3).nonzero()
        body = row[: eos[0, 0]] if len(eos) else row
        assert not body.eq(0).any() and not body.eq(2).any()


def test_sampling_is_seeded_and_top_k_one_is_greedy(setup):
    model, src, mask = setup
    greedy = gen(model, src, mask)
    with torch.random.fork_rng():  # the global generator is left as it was
        torch.manual_seed(0)
        assert torch.equal(gen(model, src, mask, do_sample=True, top_k=1), greedy)
        torch.manual_seed(1)
        a = gen(model, src, mask, do_sample=True, temperature=1.5, top_p=0.9)
        torch.manual_seed(1)
        b = gen(model, src, mask, do_sample=True, temperature=1.5, top_p=0.9)
        assert torch.equal(a, b)
        samples = set()
        for seed in range(6):
            torch.manual_seed(seed)
            samples.add(tuple(gen(model, src, mask, do_sample=True, temperature=5.0)[0].tolist()))
    assert len(samples) > 1


# A hand-made next-token distribution: five likely tokens, the remaining 0.04 spread evenly over the other 92.
# With an all-zero output projection the logits are the output bias at every step, whatever the source.
HEAD = {10: 0.40, 11: 0.25, 12: 0.15, 13: 0.10, 14: 0.06}
SUPPRESSED = {0, 2}  # <pad> and <s>, suppressed by the default generation config


@pytest.fixture(scope="module")
def fixed_distribution():
    model = tiny_model(seed=42, tie_word_embeddings=False)
    probs = torch.full((97,), 0.04 / (97 - len(HEAD)), dtype=torch.float64)
    for token, p in HEAD.items():
        probs[token] = p
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.final_logits_bias.copy_(probs.log().float())
    src, mask = random_batch(97, 1, 5, seed=43)
    return model, src, mask


# Expected kept sets, worked out by hand on HEAD. top_p keeps the smallest set of most likely tokens whose
# probability reaches top_p (the two suppressed tokens carry under 0.001 and move no cut-off):
# 0.30 -> {10} (0.40); 0.60 -> {10, 11} (0.65); 0.75 -> {10, 11, 12} (0.80); 1.0 keeps every token.
# top_k=2 then top_p=0.95 renormalises over {10, 11} (0.62, 0.38): both stay.
ALL_TOKENS = set(range(97)) - SUPPRESSED
SCORED = dict(output_scores=True, return_dict_in_generate=True)  # generate() returns the scores of every step


@pytest.mark.parametrize(
    "kwargs, kept",
    [
        (dict(top_k=1), {10}),
        (dict(top_k=3), {10, 11, 12}),
        (dict(top_k=4), {10, 11, 12, 13}),
        (dict(top_p=0.3), {10}),
        (dict(top_p=0.6), {10, 11}),
        (dict(top_p=0.75), {10, 11, 12}),
        (dict(top_k=2, top_p=0.95), {10, 11}),
        (dict(top_k=0, top_p=1.0), ALL_TOKENS),  # 0 and 1.0 disable the filters
    ],
)
def test_top_k_and_top_p_keep_exactly_the_right_tokens(fixed_distribution, kwargs, kept):
    """The scores generate() samples from are finite exactly on the tokens the filters keep, every sample is
    one of them, and samples follow the renormalised distribution (within 5 standard deviations)."""
    model, src, mask = fixed_distribution
    n = 2000
    with torch.random.fork_rng():
        torch.manual_seed(0)
        one_step = dict(do_sample=True, num_beams=1, max_new_tokens=1, num_return_sequences=n)
        out = model.generate(input_ids=src, attention_mask=mask, **one_step, **SCORED, **kwargs)
    (scores,) = out.scores  # (n, V): one step
    assert {int(t) for t in torch.isfinite(scores[0]).nonzero()} == kept
    assert torch.equal(torch.isfinite(scores), torch.isfinite(scores[:1]).expand_as(scores))
    sampled = out.sequences[:, 1]
    assert set(sampled.tolist()) <= kept
    if len(kept) <= len(HEAD):
        total = sum(HEAD[t] for t in kept)
        for token in kept:
            p = HEAD[token] / total
            frequency = (sampled == token).float().mean().item()
            assert abs(frequency - p) <= 5 * (p * (1 - p) / n) ** 0.5, (token, frequency, p)


def test_logits_processors(setup):
    model, src, mask = setup
    greedy = gen(model, src, mask, max_new_tokens=6)
    banned = int(greedy[0, 1])
    out = gen(model, src, mask, max_new_tokens=6, bad_words_ids=[[banned]])
    assert not out.eq(banned).any()
    out = gen(model, src, mask, max_new_tokens=6, suppress_tokens=[banned])
    assert not out.eq(banned).any()
    out = gen(model, src, mask, max_new_tokens=10, no_repeat_ngram_size=1)
    for row in out[:, 1:]:
        real = [t for t in row.tolist() if t not in (0, 3)]
        assert len(real) == len(set(real))
    with raised_logits(model, [3], 50.0):  # </s> overwhelmingly likely
        assert gen(model, src, mask, max_new_tokens=6)[:, 1].eq(3).all()
        out = gen(model, src, mask, max_new_tokens=6, min_new_tokens=4)
        assert not out[:, 1:5].eq(3).any()
    penalised = gen(model, src, mask, max_new_tokens=10, repetition_penalty=5.0)
    assert not torch.equal(penalised, gen(model, src, mask, max_new_tokens=10))

    class Force(LogitsProcessor):
        def __call__(self, input_ids, scores):
            forced = torch.full_like(scores, -1e9)
            forced[:, 42] = 0
            return forced

    out = gen(model, src, mask, max_new_tokens=4, logits_processor=LogitsProcessorList([Force()]))
    assert out[:, 1:].eq(42).all()


def test_beam_search_returns_ranked_sequences(setup):
    model, src, mask = setup
    out = model.generate(
        input_ids=src,
        attention_mask=mask,
        num_beams=4,
        num_return_sequences=3,
        max_new_tokens=6,
        **SCORED,
    )
    assert out.sequences.shape[0] == 6
    scores = out.sequences_scores.view(2, 3)
    assert (scores[:, :-1] >= scores[:, 1:]).all()


def test_text_streamer_prints_the_translation(setup, capsys):
    model, src, mask = setup
    tokenizer = word_tokenizer()
    streamer = TextStreamer(tokenizer, skip_special_tokens=True)
    out = model.generate(
        input_ids=src[:1],
        attention_mask=mask[:1],
        num_beams=1,
        do_sample=False,
        max_new_tokens=5,
        streamer=streamer,
    )
    printed = capsys.readouterr().out.strip()
    assert printed == tokenizer.batch_decode(out, skip_special_tokens=True)[0].strip()
    assert printed


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_beams=2, num_return_sequences=3), "num_return_sequences"),
        (dict(do_sample=True, top_p=1.5), "top_p"),
        (dict(do_sample=True, temperature=0.0), "temperature"),
        (dict(do_sample=True, temperature=-1.0), "temperature"),
        (dict(do_sample=True, top_k=-2), "top_k"),
    ],
)
def test_conflicting_generation_arguments_raise(setup, kwargs, match):
    model, src, mask = setup
    with pytest.raises(ValueError, match=match):
        model.generate(input_ids=src, attention_mask=mask, max_new_tokens=3, **kwargs)


def test_threads_generating_with_one_model_get_their_own_translations(setup):
    """A server generates with one model from several threads at once: each call's outputs equal the same call
    made alone, though the calls' sources have different lengths and their per-call memos (the checked source
    mask, the cross-attention mask) are replaced by the other threads between every step."""
    import sys
    import threading

    model = setup[0].eval()
    batches = [random_batch(97, size, length, seed=50 + length) for size, length in ((2, 5), (3, 17), (1, 9))]
    alone = [gen(model, src, mask, num_beams=beams) for (src, mask), beams in zip(batches, (1, 3, 2))]
    wrong, interval = [], sys.getswitchinterval()

    def work(index: int) -> None:
        (src, mask), beams = batches[index], (1, 3, 2)[index]
        for _ in range(15):
            try:
                out = gen(model, src, mask, num_beams=beams)
            except RuntimeError as error:  # a mask of another call's shape
                wrong.append((index, str(error)))
                continue
            if not torch.equal(out, alone[index]):
                wrong.append((index, out.tolist()))

    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(batches))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not wrong, wrong[:3]


def test_the_mask_memo_never_pairs_one_mask_with_another_calls_value():
    """The memo's lookup cannot be split by another thread's store: a store made in the middle of a lookup (here
    from inside the key comparison, where a thread switch could land) does not change what the lookup returns."""
    from vanilla_transformer.modeling.checks_vanilla_transformer import MaskMemo

    memo = MaskMemo()
    mine, other = torch.ones(2, 5, dtype=torch.long), torch.ones(3, 17, dtype=torch.long)

    class SwitchingKey(tuple):
        def __eq__(self, key):  # another thread stores its own mask and value mid-lookup
            memo.put(other, ("other",), "other value")
            return tuple.__eq__(self, key)

        __hash__ = tuple.__hash__

    memo.put(mine, SwitchingKey(("mine",)), "my value")
    assert memo.get(mine, ("mine",)) == (True, "my value")
    assert memo.get(other, ("other",)) == (True, "other value")
    assert memo.get(mine, ("mine",)) == (False, None)
