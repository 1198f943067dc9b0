"""Forced decoding (`inference.forced_decoding`): a translation that generate() produced scores what generate() gave
it, token by token and as beam search ranks it, in PyTorch, CTranslate2 and ONNX Runtime."""

from __future__ import annotations

import pytest
import torch
from conftest import export_scoring_model

from vanilla_transformer.inference.forced_decoding import score_ids, score_pairs

EOS = 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The tiny exported model of `export_scoring_model`: most hypotheses finish, and generate() decodes from the
    distribution forced decoding scores with."""
    return export_scoring_model(tmp_path_factory.mktemp("scored"), EOS)


@pytest.fixture(scope="module")
def loaded(folder):
    from vanilla_transformer.inference.engines import load_engine

    return load_engine("torch", folder, dtype="float32")


@pytest.fixture(scope="module")
def sources(loaded):
    _, tokenizer = loaded
    texts = ["起初神创造天地。", "地是空虚混沌", "神说：要有光，就有了光。", "神看光是好的"]
    return [list(ids) for ids in tokenizer(texts)["input_ids"]]


def _padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(row) for row in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row)
        mask[index, : len(row)] = 1
    return ids, mask


def _generated(sequences: torch.Tensor) -> list[list[int]]:
    """generate()'s rows without the decoder start token, up to and including </s> (or all, unfinished)."""
    rows = []
    for row in sequences[:, 1:].tolist():
        rows.append(row[: row.index(EOS) + 1] if EOS in row else row)
    return rows


def test_greedy_tokens_score_the_log_probs_generate_gave_them(loaded, sources):
    model, _ = loaded
    input_ids, mask = _padded(sources)
    out = model.generate(
        input_ids=input_ids,
        attention_mask=mask,
        num_beams=1,
        output_scores=True,
        return_dict_in_generate=True,
    )
    transition = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    targets = _generated(out.sequences)
    scores = score_ids(model, sources, targets, batch_size=3)
    finished = 0
    for row, (target, scored) in enumerate(zip(targets, scores)):
        expected = transition[row, : len(target)].tolist()
        assert scored.token_ids[: len(target)] == target
        assert scored.token_log_probs[: len(target)] == pytest.approx(expected, abs=1e-4)
        finished += target[-1] == EOS
    assert finished >= 2


def test_beam_search_scores_equal_sequences_scores(loaded, sources):
    model, _ = loaded
    input_ids, mask = _padded(sources)
    out = model.generate(
        input_ids=input_ids,
        attention_mask=mask,
        num_beams=4,
        num_return_sequences=4,
        length_penalty=0.6,
        output_scores=True,
        return_dict_in_generate=True,
    )
    targets = _generated(out.sequences)
    repeated = [source for source in sources for _ in range(4)]
    scores = score_ids(model, repeated, targets)
    checked = 0
    for target, scored, expected in zip(targets, scores, out.sequences_scores.tolist()):
        if target[-1] == EOS:
            assert scored.score(0.6) == pytest.approx(expected, abs=1e-4)
            checked += 1
    assert checked >= 8
    # n-best order: generate() ranks by the same score
    for begin in range(0, len(targets), 4):
        ranked = [scores[k].score(0.6) for k in range(begin, begin + 4) if targets[k][-1] == EOS]
        assert ranked == sorted(ranked, reverse=True)


# ONNX Runtime's scoring is checked beside its other graph tests (tests/export/test_export_onnx.py), whose
# exports it reuses
@pytest.mark.parametrize("engine", ["ct2"])
def test_exported_engines_score_as_pytorch(folder, loaded, sources, engine, tmp_path):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export import exporter
    from vanilla_transformer.inference.engines import load_engine

    model, tokenizer = loaded
    exported = exporter(engine)(folder, tmp_path / engine, tokenizer=tokenizer)
    engine_model, _ = load_engine(engine, exported)
    texts = ["起初神创造天地。", "地是空虚混沌", "", "神看光是好的"]
    targets = ["In the beginning", "the earth was", "", "God saw light"]
    expected = score_pairs(model, tokenizer, texts, targets, batch_size=2)
    scored = score_pairs(engine_model, tokenizer, texts, targets, batch_size=3)
    for mine, theirs in zip(scored, expected):
        assert mine.token_ids == theirs.token_ids
        assert mine.token_log_probs == pytest.approx(theirs.token_log_probs, abs=1e-3)


def test_text_pairs_are_tokenized_as_labels_with_their_eos(loaded):
    model, tokenizer = loaded
    [scored] = score_pairs(model, tokenizer, ["起初神创造天地。"], ["In the beginning"])
    assert scored.token_ids == tokenizer(text_target="In the beginning")["input_ids"]
    assert scored.token_ids[-1] == EOS
    assert scored.log_prob == pytest.approx(sum(scored.token_log_probs))
    assert scored.log_prob < 0


def test_bad_pairs_are_refused(loaded, sources):
    model, tokenizer = loaded
    with pytest.raises(ValueError, match="one target per source"):
        score_pairs(model, tokenizer, ["a", "b"], ["c"])
    with pytest.raises(ValueError, match="decoder's 24 positions"):
        score_ids(model, sources[:1], [[5] * 30])
    with pytest.raises(ValueError, match="batch_size"):
        score_ids(model, sources[:1], [[5]], batch_size=0)
