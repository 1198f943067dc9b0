"""Every subcommand of `vanilla-transformer` speaks one command-line style (transformers' underscores), answers
--help, rejects an unknown flag with exit status 2, and a run's saved configuration reruns it (`--config`)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import re
import subprocess
import sys
import typing

import pytest

from vanilla_transformer.cli import COMMANDS, main
from vanilla_transformer.commands.bench import KINDS
from vanilla_transformer.training import TrainConfig, train
from vanilla_transformer.training.cli import parse_dataclass

MODULES = sorted(
    {module for module, _ in COMMANDS.values() if module != "bench"} | {m for m, _ in KINDS.values()}
)
# arguments a command requires (values are never used: parsing stops at the unknown flag)
REQUIRED = {
    "average": ["--output", "x"],
    "train_tokenizer": ["--output", "x"],
    "demo": ["--model", "m"],
    "serve": ["--model", "m"],
    "convert": ["--from", "marian", "src", "out"],
    "export": ["--engine", "ct2", "model", "out"],
    "evaluate": ["--model", "m"],
    "shortlist": ["--model", "m"],
    "score": ["--model", "m"],
    "plot_attention": ["--model", "m", "--text", "t"],
    "push": ["--model", "m", "--repo_id", "r"],
    "translate": ["--model", "m"],
    "translate_corpus": ["--model", "m", "--input", "i", "--output", "o"],
}


def load_script(name: str):
    return importlib.import_module(f"vanilla_transformer.commands.{name}")


def run_main(module, argv: list[str]) -> tuple[int | str | None, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.raises(SystemExit) as exit_info,
    ):
        module.main(argv)
    return exit_info.value.code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", MODULES)
def test_every_command_has_help_in_one_style_and_rejects_unknown_flags(name):
    module = load_script(name)
    code, help_text, _ = run_main(module, ["--help"])
    assert code == 0 and "usage:" in help_text
    options = re.findall(r"(?<![\w-])--[A-Za-z0-9_-]+", help_text)
    assert options and not [o for o in options if "-" in o[2:]], f"{name}: hyphenated options {options}"
    code, _, err = run_main(module, [*REQUIRED.get(name, []), "--no_such_flag_here"])
    assert code == 2 and "unrecognized arguments: --no_such_flag_here" in err


def test_train_help_is_grouped_and_bools_take_values():
    module = load_script("train")
    _, help_text, _ = run_main(module, ["--help"])
    titles = re.findall(r"(?m)^(\S[^:\n]*):$", help_text)
    assert titles[:4] == ["options", "data options", "split options", "training data options"], titles
    assert "--config FILE" in help_text
    assert "--no_export" in help_text and "--no-export" not in help_text
    assert parse_dataclass(TrainConfig, ["--export", "false"]).export is False
    assert parse_dataclass(TrainConfig, ["--no_export"]).export is False
    assert parse_dataclass(TrainConfig, ["--resume"]).resume is True
    assert parse_dataclass(TrainConfig, ["--has_header", "true"]).has_header is True
    assert parse_dataclass(TrainConfig, []).has_header is None
    pre_ln = parse_dataclass(
        TrainConfig, ["--normalize_before", "--encoder_layers", "4", "--decoder_layers", "2"]
    )
    assert (pre_ln.normalize_before, pre_ln.encoder_layers, pre_ln.decoder_layers) == (True, 4, 2)


def test_none_unsets_every_optional_option():
    cfg = parse_dataclass(
        TrainConfig,
        ["--max_minutes", "none", "--mixed_precision", "none", "--has_header", "none", "--max_steps", "3"],
    )
    assert (cfg.max_minutes, cfg.mixed_precision, cfg.has_header, cfg.max_steps) == (None, None, None, 3)
    assert parse_dataclass(TrainConfig, ["--mixed_precision", "bf16"]).mixed_precision == "bf16"


def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "run.yaml"
    bad.write_text("vocab_sise: 8000\n", encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        parse_dataclass(TrainConfig, ["--config", str(bad)])
    assert (
        exit_info.value.code == 2
        and "unknown option(s): 'vocab_sise' (did you mean 'vocab_size'?)" in err.getvalue()
    )
    with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
        parse_dataclass(TrainConfig, ["--config", str(tmp_path / "missing.yaml")])


def test_config_file_values_and_flags_that_override_them(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("preset: tiny\nmax_steps: 7\nlabel_smoothing: 0.2\nexport: false\n", encoding="utf-8")
    cfg = parse_dataclass(TrainConfig, ["--config", str(config), "--max_steps", "9"])
    assert (cfg.preset, cfg.max_steps, cfg.label_smoothing, cfg.export) == ("tiny", 9, 0.2, False)


def test_a_saved_run_configuration_reruns_the_run(tmp_path, tokenizer_dir):
    from conftest import small_run_options

    options = small_run_options(output_dir=str(tmp_path / "first"), max_steps=100, tokenizer=tokenizer_dir)
    argv = [f"--{k}={v}" for k, v in options.items() if v is not None]
    first = train(parse_dataclass(TrainConfig, argv))
    saved = tmp_path / "first" / "checkpoints" / "train_config.json"
    assert json.loads(saved.read_text(encoding="utf-8"))["max_steps"] == 100
    again = train(
        parse_dataclass(TrainConfig, ["--config", str(saved), "--output_dir", str(tmp_path / "again")])
    )
    assert len(first.history) == 100
    assert [h["loss"] for h in again.history] == [h["loss"] for h in first.history]


def test_an_unknown_flag_is_refused_with_the_nearest_option(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_dataclass(TrainConfig, ["--vocab_sise", "8000"])
    error_lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit_info.value.code == 2 and len(error_lines) == 1
    assert "unrecognized arguments: --vocab_sise 8000 (did you mean --vocab_size?)" in error_lines[0]


def test_a_value_out_of_range_is_refused_as_it_is_parsed_and_in_python(capsys):
    """--grad_accum 0 stops the command before anything runs, naming the option and its range; a range that only a
    model configuration checked (--init_std) is refused with the other options."""
    from vanilla_transformer.training.options import check_options

    with pytest.raises(SystemExit) as exit_info:
        parse_dataclass(TrainConfig, ["--grad_accum", "0"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "argument --grad_accum: expected an integer >= 1, got '0'" in err
    with pytest.raises(ValueError, match="--init_std must be a number > 0, got -0.5"):
        check_options(TrainConfig(init_std=-0.5, max_steps=1))


def _out_of_range(metadata, kind) -> tuple:
    """(a value just outside the declared range, the bound itself, whether the bound is allowed)."""
    step = 1 if kind is int else 0.5
    if "ge" in metadata:
        return metadata["ge"] - step, metadata["ge"], True
    if "gt" in metadata:
        return metadata["gt"] - step, metadata["gt"], False
    return metadata["le"] + step, metadata["le"], True


RANGED = [
    (f.name, typing.get_type_hints(TrainConfig)[f.name])
    for f in dataclasses.fields(TrainConfig)
    if {"ge", "gt", "le", "lt"} & set(f.metadata)
]


@pytest.mark.parametrize("name, hint", RANGED, ids=[name for name, _ in RANGED])
def test_every_declared_range_is_checked_for_flags_config_files_and_python(tmp_path, capsys, name, hint):
    """A field's range (its metadata) refuses a value outside it as a flag, in a config file and in Python
    (check_options), naming the option; the bound itself parses as it should."""
    from vanilla_transformer.training.options import check_options

    kind = next(t for t in (int, float) if t in (hint, *typing.get_args(hint)))
    metadata = next(f.metadata for f in dataclasses.fields(TrainConfig) if f.name == name)
    bad, bound, bound_allowed = _out_of_range(metadata, kind)
    with pytest.raises(ValueError, match=f"--{name} must be "):
        check_options(TrainConfig(**{"max_steps": 1, name: bad}))
    with pytest.raises(SystemExit):
        parse_dataclass(TrainConfig, [f"--{name}", str(bad)])
    assert f"argument --{name}: expected " in capsys.readouterr().err
    config = tmp_path / "run.yaml"
    config.write_text(f"{name}: {bad}\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        parse_dataclass(TrainConfig, ["--config", str(config)])
    assert f"{name}: expected " in capsys.readouterr().err
    if bound_allowed:
        assert getattr(parse_dataclass(TrainConfig, [f"--{name}", str(bound)]), name) == bound
    else:
        with pytest.raises(SystemExit):
            parse_dataclass(TrainConfig, [f"--{name}", str(bound)])


def test_report_to_names_accelerate_trackers(monkeypatch):
    from vanilla_transformer.training.options import check_options, report_to_trackers

    assert report_to_trackers("none") == [] and report_to_trackers("tensorboard, tensorboard") == [
        "tensorboard"
    ]
    with pytest.raises(ValueError, match=r"unknown tracker\(s\) \['tensorbord'\]"):
        check_options(TrainConfig(report_to="tensorbord"))
    monkeypatch.setattr("accelerate.tracking.get_available_trackers", lambda: [])
    with pytest.raises(
        ValueError, match="wandb is not installed here; pip install wandb, or pass --report_to none"
    ):
        check_options(TrainConfig(report_to="wandb"))
    assert report_to_trackers("all") == []


def test_the_command_lists_its_subcommands_and_refuses_an_unknown_one(capsys):
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in COMMANDS), listing
    assert main(["trian"]) == 2 and "did you mean 'train'" in capsys.readouterr().err
    assert main([]) == 2 and "usage:" in capsys.readouterr().err
    assert main(["bench", "--help"]) == 0
    kinds = capsys.readouterr().out
    assert all(f"  {kind} " in kinds for kind in KINDS), kinds
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("vanilla-transformer ")


def test_python_dash_m_runs_the_command(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "convert", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "usage: vanilla-transformer convert" in done.stdout


@pytest.mark.parametrize(
    "line, field, value",
    [
        ("max_steps: 7", "max_steps", 7),  # int (optional)
        ("max_tokens: null", "max_tokens", None),  # optional: null is none
        ("label_smoothing: 0.2", "label_smoothing", 0.2),  # float
        ("weight_decay: 1", "weight_decay", 1.0),  # an integer is a valid float
        ("export: no", "export", False),  # bool (YAML)
        ("cpu: 'true'", "cpu", True),  # bool written as the flag's text
        ("export_at_minutes: [25, 60]", "export_at_minutes", "25,60"),  # list
        ("export_at_minutes: '25,60'", "export_at_minutes", "25,60"),  # or the flag's text
        ("sample_sentences: [a b, c]", "sample_sentences", "a b|c"),  # list of a '|'-separated option
        ("preset: tiny", "preset", "tiny"),  # choice
    ],
)
def test_config_file_values_parse_like_their_flags(tmp_path, line, field, value):
    config = tmp_path / "run.yaml"
    config.write_text(line + "\n", encoding="utf-8")
    assert getattr(parse_dataclass(TrainConfig, ["--config", str(config)]), field) == value


@pytest.mark.parametrize(
    "line, expected",
    [
        ("max_steps: -3", "max_steps: expected an integer >= 1 or none, got -3"),
        ("max_steps: 2.5", "max_steps: expected an integer >= 1 or none, got 2.5"),
        ("grad_accum: null", "grad_accum: expected an integer >= 1, got null"),
        ("label_smoothing: high", "label_smoothing: expected a number in [0, 1), got 'high'"),
        ("export: maybe", "export: expected true or false, got 'maybe'"),
        ("export_at_minutes: {25: 60}", "export_at_minutes: expected a list (or a ','-separated string)"),
        ("max_minutes: [25, 60]", "max_minutes: expected a number >= 0 or none, got [25, 60]"),
        ("preset: huge", "preset: expected one of tiny, small, student, base, big, got 'huge'"),
        ("source_lang: no", "source_lang: expected a string or none, got False"),
    ],
)
def test_a_bad_config_value_names_the_option_the_file_and_what_it_takes(tmp_path, line, expected):
    config = tmp_path / "run.yaml"
    config.write_text(line + "\n", encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        parse_dataclass(TrainConfig, ["--config", str(config)])
    error_lines = [line for line in err.getvalue().splitlines() if "error:" in line]
    assert exit_info.value.code == 2 and len(error_lines) == 1
    assert f"--config {str(config)!r}: {expected}" in error_lines[0]


def test_train_with_a_config_file_refuses_what_its_flags_refuse(tmp_path):
    """Through the command: a YAML list of export minutes is taken, a negative --max_steps is refused at once
    (from the file and from the command line) instead of a run of 0 updates."""
    config = tmp_path / "run.yaml"
    config.write_text("export_at_minutes: [25, 60]\nmax_steps: -3\n", encoding="utf-8")
    output = tmp_path / "run"
    command = [sys.executable, "-m", "vanilla_transformer", "train", "--output_dir", str(output)]
    done = subprocess.run([*command, "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--config {str(config)!r}: max_steps: expected an integer >= 1 or none, got -3" in done.stderr
    done = subprocess.run([*command, "--max_steps", "-3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "argument --max_steps: expected an integer >= 1 or none" in done.stderr
    assert not output.exists()
    config.write_text("export_at_minutes: [25, 60]\nmax_steps: 3\n", encoding="utf-8")
    assert parse_dataclass(TrainConfig, ["--config", str(config)]).export_at_minutes == "25,60"
