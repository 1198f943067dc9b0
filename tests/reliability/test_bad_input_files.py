"""Damaged files of a model folder and wrong command-line numbers, through the commands as a user runs them:
one line that names the file (and the tensor) and the problem, exit 2, never a traceback."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest
import torch
from conftest import tiny_model
from helpers.shared import run_main
from safetensors.torch import load_file, save_file

from vanilla_transformer.training.checkpoint import write_manifest


def one_line_error(code: int | str | None, err: str, *named: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for name in named:
        assert name in err, err


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_translate_ct2_with_a_truncated_model_bin(export, tmp_path, monkeypatch, capsys):
    from vanilla_transformer.export.ct2 import export_ct2

    folder = export_ct2(str(export), tmp_path / "ct2")
    truncate(folder / "model.bin")
    capsys.readouterr()  # the export's own output
    code, _, err = run_main(monkeypatch, capsys, "--engine", "ct2", "--model", str(folder), stdin="w5 w9\n")
    one_line_error(code, err, str(folder / "model.bin"), "invalid payload size")


def test_translate_with_a_truncated_tokenizer_json(export, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "model"
    shutil.copytree(export, folder)
    truncate(folder / "tokenizer.json")
    code, _, err = run_main(monkeypatch, capsys, "--model", str(folder), "--device", "cpu", stdin="w5 w9\n")
    one_line_error(code, err, str(folder / "tokenizer.json"), "not valid JSON")


def test_translate_with_a_tensor_of_the_wrong_shape(export, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "model"
    shutil.copytree(export, folder)
    weights = load_file(folder / "model.safetensors")
    name = next(k for k in weights if k.endswith("fc1.weight"))
    weights[name] = torch.zeros(3, 3)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    code, _, err = run_main(monkeypatch, capsys, "--model", str(folder), "--device", "cpu", stdin="w5 w9\n")
    one_line_error(code, err, str(folder / "model.safetensors"), name, "(3, 3)")


def average(capsys, *argv) -> tuple[int | str | None, str]:
    capsys.readouterr()
    try:
        code = importlib.import_module("vanilla_transformer.commands.average").main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


def test_average_of_a_folder_without_checkpoints(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, err = average(capsys, "--checkpoints", tmp_path / "empty", "--output", tmp_path / "avg")
    one_line_error(code, err, str(tmp_path / "empty"), "config.json")
    assert not (tmp_path / "avg").exists()


@pytest.mark.parametrize("num", [0, -2])
def test_average_num_below_one(num, tmp_path, capsys):
    folder = tmp_path / "run" / "checkpoints" / "checkpoint-1"
    tiny_model().save_pretrained(folder)
    write_manifest(folder)
    code, err = average(capsys, "--run", tmp_path / "run", "--num", num, "--output", tmp_path / "avg")
    assert code == 2 and f"--num {num} is invalid" in err and ">= 1" in err, err
    assert not (tmp_path / "avg").exists()
