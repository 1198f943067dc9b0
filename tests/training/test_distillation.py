"""Sequence-level distillation (`train --distill_from`): a tiny teacher run, then a student run on the teacher's
translations of the training sources; validation and test keep their references; a resumed run reuses the
teacher's translations; the options that cannot apply are refused by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import small_run

from vanilla_transformer.corpus import SOURCE, TARGET
from vanilla_transformer.inference import load_model_and_tokenizer
from vanilla_transformer.inference.corpus_translation import read_output
from vanilla_transformer.inference.translate import translate
from vanilla_transformer.training import train
from vanilla_transformer.training.distillation import distill_training_split
from vanilla_transformer.training.options import check_options


@pytest.fixture(scope="module")
def teacher(tmp_path_factory, tokenizer_dir) -> Path:
    """A tiny model folder exported by a short run (a teacher whose translations differ from the references),
    with outputs capped at 24 tokens: a model this young rarely ends a sentence, and short outputs keep the tests
    fast."""
    from transformers import GenerationConfig

    out = tmp_path_factory.mktemp("teacher")
    train(small_run(out, tokenizer=tokenizer_dir, max_steps=30, export=True, test_beams=1))
    config = GenerationConfig.from_pretrained(out)
    config.max_new_tokens = 24
    config.save_pretrained(out)
    return out


def distilled_splits(cfg, folder: Path):
    from accelerate import PartialState

    splits, _ = cfg.load_splits()
    return splits, distill_training_split(cfg, splits, folder, PartialState(cpu=True))


def test_training_targets_are_the_teachers_greedy_translations(teacher, tokenizer_dir, tmp_path):
    cfg = small_run(tmp_path / "student", tokenizer=tokenizer_dir, distill_from=str(teacher), distill_beams=1)
    splits, (distilled, note) = distilled_splits(cfg, tmp_path / "distill")
    model, tokenizer = load_model_and_tokenizer(str(teacher))
    sources = list(splits["train"][SOURCE])
    expected = translate(model, tokenizer, sources, num_beams=1)
    records = read_output(next((tmp_path / "distill").glob("teacher-*.jsonl")))
    assert [r["source"] for r in records] == sources
    assert list(distilled["train"][SOURCE]) == sources
    # a source over the teacher's length limit keeps its reference; every other target is the teacher's
    for record, target, translation, reference in zip(
        records, distilled["train"][TARGET], expected, splits["train"][TARGET]
    ):
        assert target == (translation if record["error"] is None else reference)
    assert sum(r["error"] is None for r in records) > len(records) // 2
    assert list(distilled["train"][TARGET]) != list(splits["train"][TARGET])
    for name in ("validation", "test"):
        assert distilled[name][:] == splits[name][:]
    assert note.startswith(
        f"Distilled: the training targets are the translations of the teacher {teacher.name}"
    )


def test_a_second_run_reuses_the_teachers_translations(teacher, tokenizer_dir, tmp_path, monkeypatch):
    from vanilla_transformer.inference import corpus_translation

    cfg = small_run(tmp_path / "student", tokenizer=tokenizer_dir, distill_from=str(teacher), distill_beams=1)
    _, (first, _) = distilled_splits(cfg, tmp_path / "distill")

    def no_translation(*args, **kwargs):
        raise AssertionError("the teacher translated again")

    monkeypatch.setattr(corpus_translation, "run_shard", no_translation)
    _, (second, _) = distilled_splits(cfg, tmp_path / "distill")
    assert second["train"][:] == first["train"][:]
    # another teacher decoding is another translation, not the saved one
    with pytest.raises(AssertionError, match="translated again"):
        distilled_splits(
            small_run(tmp_path / "beam", distill_from=str(teacher), distill_beams=2), tmp_path / "distill"
        )


def test_student_run_trains_exports_and_names_its_teacher(teacher, tokenizer_dir, tmp_path):
    out = tmp_path / "student"
    events: list[tuple[str, dict]] = []
    result = train(
        small_run(
            out, tokenizer=tokenizer_dir, distill_from=str(teacher), distill_beams=1, max_steps=3, export=True
        ),
        lambda name, info: events.append((name, info)),
    )
    assert result.step == 3 and (out / "model.safetensors").is_file()
    # the teacher's progress: its start (the whole training split, none done before), then every sentence
    start = next(info for name, info in events if name == "distill_start")
    assert start["num_sentences"] == result.split_sizes["train"] and start["done"] == 0
    assert sum(info["n"] for name, info in events if name == "distill_progress") == start["num_sentences"]
    assert list((out / "checkpoints" / "distill").glob("teacher-*.jsonl"))
    card = (out / "README.md").read_text(encoding="utf-8")
    assert (
        f"training targets translated by the teacher `{teacher.name}` (sequence-level distillation)" in card
    )
    assert f"Distilled: the training targets are the translations of the teacher {teacher.name}" in card


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"distill_beams": 2},
            "--distill_beams: options of --distill_from's teacher; pass --distill_from too",
        ),
        ({"distill_engine": "ct2"}, "--distill_engine: options of --distill_from's teacher"),
        ({"distill_from": "no/such/folder"}, "--distill_from 'no/such/folder' is not a folder"),
        ({"distill_from": ".", "objective": "causal_lm"}, "--objective causal_lm does not translate"),
        ({"distill_from": ".", "mix_data": "general.tsv"}, "--mix_data mixes references in"),
    ],
)
def test_distillation_options_that_cannot_apply_are_refused(tmp_path, options, message):
    with pytest.raises(ValueError, match="Invalid training options: .*" + re.escape(message)):
        check_options(small_run(tmp_path / "run", max_steps=1, **options))
