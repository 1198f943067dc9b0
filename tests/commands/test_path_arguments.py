"""Path arguments of every command (`commands.arguments.path_argument`, and the options dataclasses' ``path`` fields
through `training.cli.OptionParser`), both checked by `paths.path_problem`: a symbolic-link loop, a
device (/dev/zero, /dev/urandom), a FIFO where a folder is expected, a file where a folder is expected or a folder where a file is, is refused
as it is parsed: exit 2, one ``error:`` line naming the argument and the path, nothing read or written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.shared import run_in_process as run

from vanilla_transformer.paths import PATH_KINDS, path_problem


def assert_refused(code: int | str | None, err: str, argument: str, path: Path | str, problem: str) -> None:
    """Exit 2 and argparse's usage with one error line that names `argument`, `path` and `problem`."""
    assert code == 2, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert f"argument {argument}: {path} {problem}" in errors[0], err


@pytest.fixture
def places(tmp_path) -> dict[str, Path]:
    """A link loop, a FIFO, a file, a folder and a path under the file, in `tmp_path`."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file.txt").write_text("a\tb\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    return {
        "loop": tmp_path / "loop",
        "fifo": tmp_path / "fifo",
        "file": tmp_path / "file.txt",
        "folder": tmp_path / "folder",
        "under_file": tmp_path / "file.txt" / "out",
    }


def test_path_problem_of_each_kind(places):
    for kind in PATH_KINDS:
        assert "symbolic-link loop" in str(path_problem(places["loop"], kind))
        assert "is under a file" in str(path_problem(places["under_file"], kind))
        assert path_problem(places["loop"].parent / "missing", kind) is None
    for kind in ("file", "file or folder", "folder"):
        assert "is a character device" in str(path_problem("/dev/zero", kind))
    # a file to read may be a pipe (process substitution), a folder may not
    assert (
        path_problem(places["fifo"], "file") is None
        and path_problem(places["fifo"], "file or folder") is None
    )
    assert "is a FIFO (named pipe)" in str(path_problem(places["fifo"], "folder"))
    # writing to /dev/null or a pipe is fine
    assert path_problem("/dev/null", "output file") is None
    assert path_problem(places["fifo"], "output file") is None
    assert "is a FIFO" in str(path_problem(places["fifo"], "output folder"))
    assert (
        path_problem(places["folder"], "file") == f"{places['folder']} is a folder, not a file: pass a file"
    )
    assert (
        path_problem(places["file"], "output folder")
        == f"{places['file']} is a file, not a folder: pass a folder"
    )
    assert path_problem(places["file"], "file or folder") is None
    assert path_problem(places["folder"], "file or folder") is None


def test_train_refuses_endless_and_looping_paths(places, tmp_path, capsys):
    """`train --data /dev/zero` used to read forever; each refusal is at parse time, before the run folder."""
    out = tmp_path / "run"
    code, err = run("train", capsys, "--data", "/dev/zero", "--output_dir", out, "--max_steps", 1)
    assert_refused(code, err, "--data", "/dev/zero", "is a character device")
    code, err = run("train", capsys, "--data", "/dev/urandom", "--output_dir", out, "--max_steps", 1)
    assert_refused(code, err, "--data", "/dev/urandom", "is a character device")
    code, err = run("train", capsys, "--output_dir", places["under_file"], "--max_steps", 1)
    assert_refused(code, err, "--output_dir", places["under_file"], "is under a file, not a folder")
    code, err = run("train", capsys, "--init_from", places["file"], "--output_dir", out, "--max_steps", 1)
    assert_refused(code, err, "--init_from", places["file"], "is a file, not a folder")
    code, err = run("train", capsys, "--config", "/dev/urandom", "--output_dir", out)
    assert code == 2 and "--config /dev/urandom is a character device" in err, err
    assert not out.exists()


def test_convert_refuses_link_loops_as_source_and_output(places, tmp_path, capsys):
    code, err = run("convert", capsys, "--from", "joeynmt", places["loop"], tmp_path / "out")
    assert_refused(code, err, "src_dir", places["loop"], "is a symbolic-link loop")
    code, err = run("convert", capsys, "--from", "marian", places["folder"], places["loop"])
    assert_refused(code, err, "out_dir", places["loop"], "is a symbolic-link loop")
    code, err = run("convert", capsys, "--from", "marian", "/dev/zero", tmp_path / "out")
    assert_refused(code, err, "src_dir", "/dev/zero", "is a character device")
    assert not (tmp_path / "out").exists()


def test_other_commands_refuse_devices_fifos_and_the_wrong_kind(places, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(
        "translate_corpus", capsys, "--model", out, "--input", "/dev/zero", "--output", out / "o.jsonl"
    )
    assert_refused(code, err, "--input", "/dev/zero", "is a character device")
    code, err = run("export", capsys, places["fifo"], out)
    assert_refused(code, err, "model", places["fifo"], "is a FIFO")
    code, err = run("export", capsys, places["file"], out)
    assert_refused(code, err, "model", places["file"], "is a file, not a folder")
    code, err = run("train_tokenizer", capsys, places["folder"], "--output", out)
    assert_refused(code, err, "files", places["folder"], "is a folder, not a file")
    code, err = run("evaluate", capsys, "--model", places["loop"])
    assert_refused(code, err, "--model", places["loop"], "is a symbolic-link loop")
    code, err = run("evaluate", capsys, "--model", places["folder"], "--data", "/dev/urandom")
    assert_refused(code, err, "--data", "/dev/urandom", "is a character device")
    code, err = run("average", capsys, "--checkpoints", places["folder"], "--output", places["file"])
    assert_refused(code, err, "--output", places["file"], "is a file, not a folder")
    assert not out.exists()
