"""The vocabulary shortlist: IBM Model 1 candidates from a corpus, its file, a batch's vocabulary, decoding over it
(PyTorch through `shortlisted`, CTranslate2 through the exported vocabulary map) and the command that builds it."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

import pytest
import torch
from conftest import export_tiny_model, random_batch, tiny_model
from transformers import LogitsProcessor, LogitsProcessorList

from vanilla_transformer.inference import load_model_and_tokenizer
from vanilla_transformer.inference.shortlist import (
    SHORTLIST_FILE,
    VMAP_FILE,
    Shortlist,
    build_shortlist,
    load_shortlist,
    shortlisted,
    vmap_lines,
)
from vanilla_transformer.inference.translate import translate_hypotheses

# a word-for-word corpus: source 10 + k translates to target 20 + k, target 5 is in every sentence
LEXICON = {10: 20, 11: 21, 12: 22, 13: 23, 14: 24}


def lexicon_pairs() -> list[tuple[list[int], list[int]]]:
    sentences = [[10, 11], [11, 12, 13], [10, 14], [12, 14], [13, 10, 11], [14, 12]]
    return [(s, [5, *(LEXICON[i] for i in s)]) for s in sentences] * 3


def test_candidates_are_the_translations_and_always_holds_frequent_and_special_tokens():
    shortlist = build_shortlist(lexicon_pairs(), 30, 40, top_k=1, frequent=1, always=[0, 1, 2, 3])
    for source, target in LEXICON.items():
        assert shortlist.candidates(source) == [target]
    assert shortlist.candidates(15) == []  # never seen
    assert shortlist.always.tolist() == [0, 1, 2, 3, 5]  # the specials and the most frequent target
    wider = build_shortlist(lexicon_pairs(), 30, 40, top_k=3, frequent=0)
    assert wider.candidates(10)[0] == 20 and len(wider.candidates(10)) <= 3
    assert set(wider.candidates(10)) <= {5, 20, 21, 23, 24}  # only targets that co-occur with 10


def test_batch_vocabulary_is_the_sorted_union_without_padding():
    shortlist = build_shortlist(lexicon_pairs(), 30, 40, top_k=1, frequent=1, always=[0, 3])
    ids = torch.tensor([[10, 12, 0], [14, 0, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert shortlist.for_batch(ids, mask).tolist() == [0, 3, 5, 20, 22, 24]
    # without a mask, padding (id 0, no candidates) adds nothing here
    assert shortlist.for_batch(ids).tolist() == [0, 3, 5, 20, 22, 24]
    with pytest.raises(ValueError, match="another model"):
        shortlist.for_batch(torch.tensor([[31]]))


def test_file_round_trip_and_bad_file(tmp_path):
    shortlist = build_shortlist(lexicon_pairs(), 30, 40, top_k=2, frequent=2, always=[0])
    shortlist.save(tmp_path)
    again = load_shortlist(tmp_path)
    for name in ("offsets", "targets", "always"):
        assert torch.equal(getattr(again, name), getattr(shortlist, name))
    assert (again.source_vocab_size, again.target_vocab_size) == (30, 40)
    assert again.settings == {"top_k": 2, "frequent": 2, "iterations": 5, "pairs": 18}
    (tmp_path / SHORTLIST_FILE).write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match="vanilla-transformer shortlist"):
        load_shortlist(tmp_path)
    with pytest.raises(ValueError, match="has no shortlist.safetensors"):
        load_shortlist(tmp_path / "missing")


def everything(model) -> Shortlist:
    """A shortlist whose vocabulary is every target id of ``model``."""
    size = model.config.decoder_vocab_size
    return Shortlist(
        offsets=torch.zeros(model.config.vocab_size + 1, dtype=torch.long),
        targets=torch.zeros(0, dtype=torch.long),
        always=torch.arange(size),
        source_vocab_size=model.config.vocab_size,
        target_vocab_size=size,
        settings={},
    )


@pytest.mark.parametrize(
    "options",
    [
        dict(num_beams=1),
        dict(num_beams=3, num_return_sequences=2, length_penalty=0.7),
        dict(num_beams=2, min_new_tokens=3),
    ],
)
def test_a_shortlist_of_every_token_decodes_exactly_as_without(options, loaded):
    model, tokenizer = loaded
    lines = ["起初神创造天地。", "", "地是空虚混沌", "神说：要有光，就有了光。"]
    plain = translate_hypotheses(model, tokenizer, lines, 2, token_scores=True, **options)
    restricted = translate_hypotheses(
        model, tokenizer, lines, 2, token_scores=True, shortlist=everything(model), **options
    )
    assert restricted == plain


class OnlyVocabulary(LogitsProcessor):
    """Every token outside ``vocabulary`` masked: greedy decoding over the vocabulary, as an independent
    reference."""

    def __init__(self, vocabulary: torch.Tensor):
        self.vocabulary = vocabulary

    def __call__(self, input_ids, scores):
        masked = torch.full_like(scores, torch.finfo(scores.dtype).min)
        masked[:, self.vocabulary] = scores[:, self.vocabulary]
        return masked


def test_greedy_over_a_partial_shortlist_is_the_argmax_over_it_and_leaves_the_model_alone():
    model = tiny_model(vocab_size=60)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    src, mask = random_batch(60, 4, 7, seed=3)
    vocabulary = torch.tensor(sorted({0, 1, 2, 3} | set(range(4, 60, 4))))
    options = dict(num_beams=1, max_new_tokens=8, suppress_tokens=None)
    view: Any = shortlisted(model, vocabulary)
    assert view.lm_head.weight.shape == (len(vocabulary), model.config.d_model)
    output = vocabulary[view.generate(input_ids=src, attention_mask=mask, **options)]
    reference = model.generate(
        input_ids=src,
        attention_mask=mask,
        logits_processor=LogitsProcessorList([OnlyVocabulary(vocabulary)]),
        **options,
    )
    assert torch.equal(output, reference)
    assert set(output[:, 1:].unique().tolist()) <= set(vocabulary.tolist())
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())
    decoder: Any = model.get_decoder()
    assert model.lm_head.weight.shape[0] == 60 and decoder.embed_tokens.weight.shape[0] == 60
    with pytest.raises(ValueError, match="not in the shortlist's vocabulary"):
        shortlisted(model, torch.arange(4, 60))  # no decoder start, pad or eos


def test_shortlist_refuses_a_glossary_and_another_model(loaded):
    from vanilla_transformer.inference.glossary import Glossary

    model, tokenizer = loaded
    with pytest.raises(ValueError, match="--glossary"):
        translate_hypotheses(
            model,
            tokenizer,
            ["神"],
            shortlist=everything(model),
            glossary=Glossary.from_pairs([("神", "God")]),
        )
    other = build_shortlist(lexicon_pairs(), 30, 40)
    with pytest.raises(ValueError, match="built for vocabularies of 30 source and 40 target"):
        translate_hypotheses(model, tokenizer, ["神"], shortlist=other)


def run_command(module, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = module.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def folder_with_shortlist(tmp_path_factory):
    """A tiny exported model with a shortlist built by the command from a 40-pair TSV corpus."""
    from vanilla_transformer.commands import shortlist as command

    root = tmp_path_factory.mktemp("shortlisted")
    folder = export_tiny_model(root / "model")
    import lzma

    from conftest import ROOT

    with lzma.open(ROOT / "data" / "bible.zh-en.tsv.xz", "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(40), f)]
    corpus = root / "corpus.zh-en.tsv"
    corpus.write_text("".join(lines), encoding="utf-8")
    code, out, err = run_command(
        command,
        [
            "--model",
            str(folder),
            "--data",
            str(corpus),
            "--valid_size",
            "5",
            "--test_size",
            "5",
            "--top_k",
            "20",
        ],
    )
    assert code == 0, err
    assert "shortlist of 30 training pairs" in out
    return folder, corpus


def test_command_saves_a_shortlist_for_the_model(folder_with_shortlist):
    folder_with_shortlist, _ = folder_with_shortlist
    model, tokenizer = load_model_and_tokenizer(str(folder_with_shortlist))
    shortlist = load_shortlist(folder_with_shortlist)
    shortlist.check_model(model.config)
    assert shortlist.settings["pairs"] == 30 and shortlist.settings["top_k"] == 20
    special = [tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id]
    assert all(token in shortlist.always.tolist() for token in special)
    god = tokenizer("神", add_special_tokens=False).input_ids
    assert any(shortlist.candidates(i) for i in god)


def test_command_refuses_a_folder_that_is_not_local(tmp_path):
    from vanilla_transformer.commands import shortlist as command

    code, _, err = run_command(command, ["--model", str(tmp_path / "nowhere"), "--data", "x.tsv"])
    assert code == 2 and "is not a local folder" in err


def test_translate_command_with_shortlist(folder_with_shortlist, monkeypatch, capsys):
    from vanilla_transformer.commands import translate as command

    folder_with_shortlist, _ = folder_with_shortlist
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("起初神创造天地。\n\n神说\n".encode())))
    assert command.main(["--model", str(folder_with_shortlist), "--shortlist", "--num_beams", "2"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[1] == ""


def test_ct2_export_writes_the_vocabulary_map_and_decodes_with_it(folder_with_shortlist, tmp_path):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export.ct2 import export_ct2, vocabulary
    from vanilla_transformer.inference.engines import load_engine

    folder_with_shortlist, _ = folder_with_shortlist
    out = export_ct2(folder_with_shortlist, tmp_path / "ct2")
    shortlist = load_shortlist(out)  # the export carries the shortlist too
    _, tokenizer = load_model_and_tokenizer(str(folder_with_shortlist))
    size = len(tokenizer)
    written = (out / VMAP_FILE).read_text(encoding="utf-8").splitlines()
    assert written == vmap_lines(
        shortlist, vocabulary(tokenizer, size), vocabulary(tokenizer, size, "target")
    )
    # the first line: an empty source n-gram and the always-candidates
    assert written[0].startswith("\t") and {"<pad>", "</s>"} <= set(written[0].split())
    model, tokenizer = load_engine("ct2", out)
    lines = ["起初神创造天地。", "神说：要有光，就有了光。"]
    with_map = translate_hypotheses(model, tokenizer, lines, num_beams=2, shortlist=shortlist)
    assert [len(hyps) for hyps in with_map] == [1, 1]
    from vanilla_transformer.inference.engine_ct2 import CT2Translator

    assert CT2Translator(out).vmap_problem() is None  # <pad> <unk> <s> </s> are ids 0-3, always candidates
    # a suppressed id whose lower ids are not all always-candidates is refused (CTranslate2 would map it to the
    # position it had in its first batch)
    high = max(set(range(size)) - set(shortlist.always.tolist()))
    config = json.loads((out / "generation_config.json").read_text())
    (out / "generation_config.json").write_text(json.dumps({**config, "suppress_tokens": [0, 2, high]}))
    refused, _ = load_engine("ct2", out)
    with pytest.raises(
        ValueError, match=rf"\[{high}\] are not; translate it with --engine torch --shortlist"
    ):
        translate_hypotheses(refused, tokenizer, lines, num_beams=2, shortlist=shortlist)
    # CTranslate2 ran with use_vmap=True: a folder without the map refuses it
    (out / VMAP_FILE).unlink()
    with pytest.raises(ValueError, match="no vocabulary map"):
        translate_hypotheses(model, tokenizer, lines, num_beams=2, shortlist=shortlist)


def test_evaluate_command_with_shortlist(folder_with_shortlist, capsys):
    from vanilla_transformer.commands import evaluate as command

    folder, corpus = folder_with_shortlist
    split = ["--data", str(corpus), "--valid_size", "5", "--test_size", "5", "--num_beams", "1"]
    assert command.main(["--model", str(folder), *split, "--shortlist"]) == 0
    assert "(5 sentences, beam 1, length penalty 1.0, shortlist)" in capsys.readouterr().out


def test_ct2_vocabulary_map_of_every_token_decodes_as_without(tmp_path):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.inference.engines import load_engine

    folder = export_tiny_model(tmp_path / "model")
    model, _ = load_model_and_tokenizer(str(folder))
    everything(model).save(folder)
    model, tokenizer = load_engine("ct2", export_ct2(folder, tmp_path / "ct2"))
    lines = ["起初神创造天地。", "地是空虚混沌", "神说：要有光，就有了光。"]
    plain = translate_hypotheses(model, tokenizer, lines, num_beams=3)
    assert (
        translate_hypotheses(model, tokenizer, lines, num_beams=3, shortlist=load_shortlist(folder)) == plain
    )


def test_onnx_engine_refuses_a_shortlist(loaded):
    from vanilla_transformer.inference.engines import EngineModel

    model, tokenizer = loaded

    class Stand:
        config, generation_config = model.config, model.generation_config

    with pytest.raises(ValueError, match="--engine onnx computes the whole output layer"):
        translate_hypotheses(EngineModel(Stand(), "onnx"), tokenizer, ["神"], shortlist=everything(model))
