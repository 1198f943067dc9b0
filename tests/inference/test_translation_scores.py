"""Scores of translations (`inference.translate.translate_hypotheses` with token scores): every hypothesis carries
the score decoding ranked it by and its output's tokens with their forced-decoding log-probabilities, and the two
agree (beam search: score = log_prob / length ** length_penalty; greedy: score = log_prob), in PyTorch and
CTranslate2 (ONNX Runtime beside its other graph tests, tests/export/test_export_onnx.py); n-best lists are sorted
and as long as asked."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MAX_POSITIONS, export_scoring_model

from vanilla_transformer.inference import translate_nbest
from vanilla_transformer.inference.forced_decoding import score_ids
from vanilla_transformer.inference.translate import translate_hypotheses, translation_record

EOS = 3
TEXTS = ["起初神创造天地。", "", "地是空虚混沌", "神说：要有光，就有了光。", "神看光是好的"]
BEAMS: dict[str, Any] = dict(num_beams=4, num_return_sequences=3, length_penalty=0.6)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return export_scoring_model(tmp_path_factory.mktemp("scored"), EOS)


@pytest.fixture(scope="module")
def loaded(folder):
    from vanilla_transformer.inference.engines import load_engine

    return load_engine("torch", folder, dtype="float32")


def _checked_nbest(nbest, texts, count: int, length_penalty: float, tolerance: float) -> None:
    """Each non-empty text has `count` hypotheses sorted by score, each score equal to its forced-decoding score
    normalised with `length_penalty`; an empty text has empty hypotheses without scores."""
    assert len(nbest) == len(texts)
    for text, hypotheses in zip(texts, nbest):
        assert len(hypotheses) == count
        if not text.strip():
            assert all(h.text == "" and h.score is None and h.tokens is None for h in hypotheses)
            continue
        scores = [h.score for h in hypotheses]
        assert scores == sorted(scores, reverse=True)
        for hypothesis in hypotheses:
            assert hypothesis.tokens is not None and hypothesis.score is not None
            assert hypothesis.score == pytest.approx(hypothesis.tokens.score(length_penalty), abs=tolerance)


def test_beam_hypotheses_are_sorted_and_score_as_forced_decoding_scores_their_output(loaded):
    model, tokenizer = loaded
    nbest = translate_hypotheses(model, tokenizer, TEXTS, batch_size=2, token_scores=True, **BEAMS)
    _checked_nbest(nbest, TEXTS, 3, 0.6, 1e-4)
    # the same hypotheses as the text output, and the tokens are the output's
    assert [[h.text for h in hyps] for hyps in nbest] == translate_nbest(
        model, tokenizer, TEXTS, batch_size=2, **BEAMS
    )
    for hypotheses in nbest:
        for hypothesis in hypotheses:
            if hypothesis.tokens is not None:
                decoded = tokenizer.decode(hypothesis.tokens.token_ids, skip_special_tokens=True)
                assert " ".join(decoded.split()) == hypothesis.text


def test_greedy_scores_are_the_log_prob_also_of_an_output_cut_at_the_length_limit(loaded):
    """Greedy: score = log_prob; an output that reached max_new_tokens without </s> is scored as it is (no </s>
    appended), so its score still equals its tokens' sum."""
    model, tokenizer = loaded
    nbest = translate_hypotheses(model, tokenizer, TEXTS, batch_size=2, token_scores=True, num_beams=1)
    _checked_nbest(nbest, TEXTS, 1, 0.0, 1e-4)
    ends = [hyps[0].tokens.token_ids[-1] for hyps in nbest if hyps[0].tokens is not None]
    cut = [
        hyps[0].tokens for hyps in nbest if hyps[0].tokens is not None and hyps[0].tokens.token_ids[-1] != EOS
    ]
    assert EOS in ends and cut
    assert all(len(tokens.token_ids) == model.generation_config.max_new_tokens for tokens in cut)


def test_translation_records_hold_the_best_hypothesis_and_the_nbest(loaded):
    model, tokenizer = loaded
    nbest = translate_hypotheses(model, tokenizer, TEXTS[:2], token_scores=True, **BEAMS)
    record = translation_record(nbest[0], tokenizer)
    best = nbest[0][0]
    assert best.tokens is not None and best.score is not None
    assert record["translation"] == best.text and record["score"] == pytest.approx(best.score, abs=1e-6)
    assert record["log_prob"] == pytest.approx(best.tokens.log_prob, abs=1e-6)
    assert record["tokens"] == tokenizer.convert_ids_to_tokens(best.tokens.token_ids)
    assert record["length"] == len(record["token_log_probs"]) == len(best.tokens.token_ids)
    assert [r["translation"] for r in record["nbest"]] == [h.text for h in nbest[0]]
    assert {k: v for k, v in record["nbest"][0].items()} == {k: v for k, v in record.items() if k != "nbest"}
    empty = translation_record(nbest[1], tokenizer)
    assert empty["translation"] == "" and empty["score"] is None and empty["tokens"] == []
    assert "nbest" not in translation_record(nbest[0][:1], tokenizer)


@pytest.fixture(scope="module")
def ct2(folder, loaded, tmp_path_factory):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export import exporter
    from vanilla_transformer.inference.engines import load_engine

    _, tokenizer = loaded
    return load_engine("ct2", exporter("ct2")(folder, tmp_path_factory.mktemp("ct2"), tokenizer=tokenizer))


@pytest.mark.parametrize("options", [BEAMS, dict(num_beams=1)], ids=["beams", "greedy"])
def test_ct2_hypotheses_score_as_pytorch(loaded, ct2, options: dict[str, Any]):
    model, tokenizer = loaded
    engine_model, engine_tokenizer = ct2
    expected = translate_hypotheses(model, tokenizer, TEXTS, batch_size=2, token_scores=True, **options)
    nbest = translate_hypotheses(
        engine_model, engine_tokenizer, TEXTS, batch_size=3, token_scores=True, **options
    )
    penalty = options.get("length_penalty", 0.0)
    _checked_nbest(nbest, TEXTS, options.get("num_return_sequences", 1), penalty, 1e-3)
    for hypotheses, theirs in zip(nbest, expected):
        for mine, their in zip(hypotheses, theirs):
            assert mine.text == their.text
            if mine.tokens is not None and their.tokens is not None:
                assert mine.tokens.token_ids == their.tokens.token_ids
                assert mine.tokens.token_log_probs == pytest.approx(their.tokens.token_log_probs, abs=1e-3)


def test_ct2_scores_an_output_as_long_as_the_decoder_positions(loaded, ct2):
    """A hypothesis cut at the decoder's last position without </s>: CTranslate2's score_batch would read one
    position more (for the </s> it appends); its last token is scored from the logits after the others."""
    model, tokenizer = loaded
    engine_model, _ = ct2
    sources = [tokenizer(text)["input_ids"] for text in ("起初神创造天地。", "地是空虚混沌", "神")]
    targets = [list(range(10, 10 + MAX_POSITIONS)), [7], [15, 16, EOS]]
    expected = score_ids(model, sources, targets, append_eos=False)
    scored = score_ids(engine_model, sources, targets, append_eos=False)
    for mine, theirs in zip(scored, expected):
        assert mine.token_ids == theirs.token_ids
        assert mine.token_log_probs == pytest.approx(theirs.token_log_probs, abs=1e-3)
