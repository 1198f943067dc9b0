"""The one rule for output folders (export.folders), through the commands as a user runs them: a writer (export
--engine ct2/onnx, average, convert) writes only to a new or empty folder or over a complete earlier output of its
own kind (its manifest lists every file there), never over the input folder or a folder containing it; a refusal
is one line, exit 2, names the files in the way, and leaves every byte in place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import tiny_model
from helpers.shared import run_in_process as run

from vanilla_transformer.export.folders import MANIFEST
from vanilla_transformer.training.checkpoint import write_manifest


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def assert_refused(code: int | str | None, err: str, *named: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for name in named:
        assert name in err, err


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """A user's folder that happens to hold a model.bin next to files of their own."""
    folder = tmp_path / "mine"
    (folder / "notes").mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"\x00\x01 someone else's weights")
    (folder / "notes" / "thesis.txt").write_text("three years of work", encoding="utf-8")
    return folder


def test_ct2_export_over_a_user_folder_with_a_model_bin_is_refused(export, user_folder, capsys):
    before = snapshot(user_folder)
    code, err = run("export", capsys, "--engine", "ct2", export, user_folder)
    assert_refused(code, err, "model.bin", "notes/thesis.txt", "not part of an earlier CTranslate2 export")
    assert snapshot(user_folder) == before


@pytest.mark.parametrize("engine", ["onnx", "ct2"])
def test_export_into_the_model_folder_or_one_containing_it_is_refused(export, engine, tmp_path, capsys):
    model = tmp_path / "run" / "model"
    shutil.copytree(export, model)
    before = snapshot(tmp_path / "run")
    code, err = run("export", capsys, "--engine", engine, model, model)
    assert_refused(code, err, "is the input folder")
    code, err = run("export", capsys, "--engine", engine, model, tmp_path / "run")
    assert_refused(code, err, "contains the input folder")
    assert snapshot(tmp_path / "run") == before


def test_ct2_re_export_over_a_complete_earlier_export_works(export, tmp_path, capsys):
    out = tmp_path / "ct2"
    assert run("export", capsys, "--engine", "ct2", export, out)[0] == 0
    first = snapshot(out)
    assert json.loads(first[MANIFEST])["kind"] == "CTranslate2 export" and "model.bin" in first
    code, err = run("export", capsys, "--engine", "ct2", export, out, "--quantization", "int8")
    assert code == 0, err
    assert set(snapshot(out)) == set(first) and snapshot(out)["model.bin"] != first["model.bin"]
    (out / "mine.txt").write_text("added by the user", encoding="utf-8")  # no longer only the export's files
    code, err = run("export", capsys, "--engine", "ct2", export, out)
    assert_refused(code, err, "mine.txt")
    assert (out / "mine.txt").read_text(encoding="utf-8") == "added by the user"


def test_onnx_re_export_over_a_complete_earlier_export_works_and_other_kinds_are_refused(
    export, tmp_path, capsys
):
    from vanilla_transformer.export.folders import write_output_manifest
    from vanilla_transformer.export.onnx import OUTPUT_KIND

    # an earlier ONNX export as its manifest records it (written by hand: the exporter takes ~30 s a run): a graph
    # this export rewrites, and one it no longer writes
    out = tmp_path / "onnx"
    (out / "onnx").mkdir(parents=True)
    (out / "onnx" / "encoder_model.onnx").write_bytes(b"an earlier graph")
    (out / "onnx" / "stale_model.onnx").write_bytes(b"a graph this export no longer writes")
    write_output_manifest(out, OUTPUT_KIND)
    code, err = run("export", capsys, "--engine", "onnx", export, out)
    assert code == 0, err
    files = snapshot(out)
    assert files["onnx/encoder_model.onnx"] != b"an earlier graph" and "onnx/stale_model.onnx" not in files
    manifest = json.loads(files[MANIFEST])
    assert manifest["kind"] == OUTPUT_KIND and set(manifest["files"]) == set(files) - {MANIFEST}
    # an ONNX export is not a CTranslate2 one
    code, err = run("export", capsys, "--engine", "ct2", export, out)
    assert_refused(code, err, "holds an earlier ONNX export; only an earlier CTranslate2 export")
    assert snapshot(out) == files


@pytest.fixture
def checkpoints(tmp_path) -> Path:
    """RUN/checkpoints with two complete checkpoints of a tiny model."""
    root = tmp_path / "run" / "checkpoints"
    for step in (1, 2):
        folder = root / f"checkpoint-{step}"
        tiny_model(seed=step).save_pretrained(folder)
        write_manifest(folder)
    return root


def test_average_output_rule(checkpoints, user_folder, tmp_path, capsys):
    run_dir = checkpoints.parent
    before = snapshot(user_folder)
    code, err = run("average", capsys, "--run", run_dir, "--num", 2, "--output", user_folder)
    assert_refused(code, err, "model.bin", "not part of an earlier averaged model")
    assert snapshot(user_folder) == before
    code, err = run("average", capsys, "--run", run_dir, "--num", 2, "--output", run_dir)
    assert_refused(code, err, "contains the input folder")
    out = tmp_path / "avg"
    for _ in range(2):  # the second run replaces the first one's complete output
        code, err = run("average", capsys, "--run", run_dir, "--num", 2, "--output", out)
        assert code == 0, err
    assert json.loads((out / MANIFEST).read_text(encoding="utf-8"))["kind"] == "averaged model"


def test_convert_output_rule(user_folder, tmp_path, capsys):
    from transformers import GPT2Config, GPT2LMHeadModel

    source = tmp_path / "gpt2"
    GPT2LMHeadModel(
        GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=32)
    ).save_pretrained(source)
    before = snapshot(user_folder), snapshot(source)
    code, err = run("convert", capsys, "--from", "gpt2", source, user_folder)
    assert_refused(code, err, "model.bin", "notes/thesis.txt")
    code, err = run("convert", capsys, "--from", "gpt2", source, source)
    assert_refused(code, err, "is the input folder")
    assert (snapshot(user_folder), snapshot(source)) == before
