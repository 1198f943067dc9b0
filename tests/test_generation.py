"""generate(): sampling, logits processors, streaming, default generation config, and bad generation input."""

from __future__ import annotations

import pytest
import torch
from conftest import random_batch, tiny_model
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedTokenizerFast, TextStreamer


def word_tokenizer(vocab_size: int = 97) -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    vocab.update({f"w{i}": i for i in range(4, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")


@pytest.fixture(scope="module")
def setup():
    model = tiny_model(seed=40)
    src, mask = random_batch(97, 2, 8, seed=41)
    return model, src, mask


def gen(model, src, mask, **kwargs):
    kwargs.setdefault("num_beams", 1)
    kwargs.setdefault("do_sample", False)
    kwargs.setdefault("max_new_tokens", 8)
    return model.generate(input_ids=src, attention_mask=mask, **kwargs)


def test_default_generation_config_follows_the_paper(setup):
    model, _, _ = setup
    g = model.generation_config
    assert (g.num_beams, g.length_penalty, g.decoder_start_token_id) == (4, 0.6, 2)
    assert g.max_new_tokens and set(g.suppress_tokens) == {0, 2}


def test_default_generate_never_emits_pad_or_bos(setup):
    model, src, mask = setup
    with torch.no_grad():  # make pad and bos the most likely tokens: they must still never appear
        model.final_logits_bias[[0, 2]] += 100.0
    try:
        out = model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6)
    finally:
        with torch.no_grad():
            model.final_logits_bias[[0, 2]] -= 100.0
    assert out[:, 0].eq(2).all()  # starts with decoder_start
    generated = out[:, 1:]
    for row in generated:
        eos = (row == 3).nonzero()
        body = row[: eos[0, 0]] if len(eos) else row
        assert not body.eq(0).any() and not body.eq(2).any()


def test_sampling_is_seeded_and_top_k_one_is_greedy(setup):
    model, src, mask = setup
    greedy = gen(model, src, mask)
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
    with torch.no_grad():
        model.final_logits_bias[3] += 50.0  # make </s> overwhelmingly likely
    try:
        assert gen(model, src, mask, max_new_tokens=6)[:, 1].eq(3).all()
        out = gen(model, src, mask, max_new_tokens=6, min_new_tokens=4)
        assert not out[:, 1:5].eq(3).any()
    finally:
        with torch.no_grad():
            model.final_logits_bias[3] -= 50.0
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
    out = model.generate(input_ids=src, attention_mask=mask, num_beams=4, num_return_sequences=3,
                         max_new_tokens=6, output_scores=True, return_dict_in_generate=True)
    assert out.sequences.shape[0] == 6
    scores = out.sequences_scores.view(2, 3)
    assert (scores[:, :-1] >= scores[:, 1:]).all()


def test_text_streamer_prints_the_translation(setup, capsys):
    model, src, mask = setup
    tokenizer = word_tokenizer()
    streamer = TextStreamer(tokenizer, skip_special_tokens=True)
    out = model.generate(input_ids=src[:1], attention_mask=mask[:1], num_beams=1, do_sample=False,
                         max_new_tokens=5, streamer=streamer)
    printed = capsys.readouterr().out.strip()
    assert printed == tokenizer.decode(out[0], skip_special_tokens=True).strip()
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
