"""Which precision a training run picks: the command line, then accelerate's configuration, then a short timing on
the machine (or VANILLA_TRANSFORMER_CPU_BF16, which forces the CPU's answer). The timing is replaced
(`inference.precision`'s `cpu_bf16_flags` and `training_speeds`, tests/helpers/precision.py), so that every branch
runs on any machine; bf16 autocast training itself goes to a fresh
process, because accelerate's state is one object per process (see test_training_numerics.py). bf16 loading and
decoding are in test_precision.py."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, small_run, small_run_options
from helpers.precision import CPU_KINDS, FASTER, SLOWER, simulate

import vanilla_transformer.inference.precision as precision
from vanilla_transformer.inference.precision import BF16_MIN_SPEEDUP, CPU_BF16_ENV, Speeds
from vanilla_transformer.training import TrainConfig
from vanilla_transformer.training.hardware import PRECISION_ENV, choose_mixed_precision

CPU = torch.device("cpu")


# ---- the training run's choice --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "env", "flags", "speeds", "expected", "source"),
    [
        (None, None, ["avx512_bf16"], FASTER, "bf16", "automatic"),
        (None, None, ["amx_bf16", "avx512_bf16"], SLOWER, "no", "automatic"),
        (None, None, [], None, "no", "automatic"),  # no bf16 feature: no timing at all
        ("no", None, ["amx_bf16"], FASTER, "no", "command line"),
        ("bf16", None, [], None, "bf16", "command line"),
        (None, "no", ["amx_bf16"], FASTER, "no", "accelerate"),
        (None, "bf16", ["avx512_bf16"], SLOWER, "bf16", "accelerate"),
        ("no", "bf16", ["avx512_bf16"], FASTER, "no", "command line"),
    ],
    ids=[
        "faster-bf16",
        "slower-fp32",
        "no-flag-fp32",
        "flag-no-wins",
        "flag-bf16-wins",
        "accelerate-no-wins",
        "accelerate-bf16-wins",
        "flag-beats-accelerate",
    ],
)
def test_choice_order_command_line_then_accelerate_then_measured(
    monkeypatch, flag, env, flags, speeds, expected, source
):
    called = simulate(monkeypatch, flags, speeds)
    if env is None:
        monkeypatch.delenv(PRECISION_ENV, raising=False)
    else:
        monkeypatch.setenv(PRECISION_ENV, env)
    choice = choose_mixed_precision(TrainConfig(mixed_precision=flag, max_steps=1), CPU)
    assert (choice.mixed_precision, choice.source) == (expected, source)
    measured = source == "automatic" and bool(flags)
    assert called == (["training_speeds"] if measured else [])
    if measured:  # the reason says what was measured and the rule
        assert (
            f"{speeds.bf16_speedup:.2f}x as fast as fp32" in choice.reason
            and str(BF16_MIN_SPEEDUP) in choice.reason
        )
        assert ", ".join(flags) in choice.reason
    if source == "automatic" and not flags:
        assert "neither AMX-BF16 nor AVX512-BF16" in choice.reason


@pytest.mark.parametrize(("cpu", "forced", "expected"), [("no-bf16", "1", "bf16"), ("amx", "0", "no")])
def test_the_bf16_switch_forces_the_cpus_answer_without_timing(monkeypatch, cpu, forced, expected):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    called = simulate(monkeypatch, *CPU_KINDS[cpu])
    monkeypatch.setenv(CPU_BF16_ENV, forced)
    choice = choose_mixed_precision(TrainConfig(max_steps=1), CPU)
    assert (choice.mixed_precision, choice.source) == (expected, "automatic")
    assert choice.reason == f"{CPU_BF16_ENV}={forced}" and called == []


def test_the_speedup_threshold_is_inclusive(monkeypatch):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    cfg = TrainConfig(max_steps=1)
    simulate(monkeypatch, ["avx512_bf16"], Speeds(BF16_MIN_SPEEDUP, 1.0))
    assert choose_mixed_precision(cfg, CPU).mixed_precision == "bf16"
    simulate(monkeypatch, ["avx512_bf16"], Speeds(BF16_MIN_SPEEDUP * 0.99, 1.0))
    assert choose_mixed_precision(cfg, CPU).mixed_precision == "no"


def test_a_resumed_run_keeps_the_precision_it_started_with(monkeypatch):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    simulate(monkeypatch, ["avx512_bf16"], None)  # no new timing
    saved = {"mixed_precision": "bf16", "source": "automatic", "reason": "bf16 ran 3.00x as fast"}
    choice = choose_mixed_precision(TrainConfig(max_steps=1), CPU, saved)
    assert (choice.mixed_precision, choice.source) == ("bf16", "automatic")
    assert "kept from the run's start: bf16 ran 3.00x as fast" in choice.reason
    monkeypatch.setenv(PRECISION_ENV, "no")  # an explicit setting still wins on resume
    assert choose_mixed_precision(TrainConfig(max_steps=1), CPU, saved).mixed_precision == "no"


@pytest.mark.parametrize(("bf16", "expected"), [(True, "bf16"), (False, "fp16")])
def test_cuda_uses_bf16_where_supported_else_fp16(monkeypatch, bf16, expected):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    simulate(monkeypatch, [], None)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Simulated GPU")
    choice = choose_mixed_precision(TrainConfig(max_steps=1), torch.device("cuda", 0))
    assert choice.mixed_precision == expected and "Simulated GPU" in choice.reason


def test_the_training_probe_times_both_precisions_on_the_model_sizes():
    speeds = precision.training_speeds(64, 128, 97, tokens=64)
    assert 0 < speeds.fp32_seconds < 10 and 0 < speeds.bf16_seconds < 10
    assert math.isfinite(speeds.bf16_speedup)


def test_an_automatic_fp32_choice_is_saved_in_the_recipe(tokenizer_dir, tmp_path, monkeypatch):
    """In this process (fp32 needs no fresh accelerate state): the simulated timing says bf16 is slower."""
    from vanilla_transformer.training import Trainer

    monkeypatch.delenv(PRECISION_ENV, raising=False)
    simulate(monkeypatch, ["avx512_bf16"], SLOWER)
    trainer = Trainer(small_run(tmp_path / "run", tokenizer=tokenizer_dir, max_steps=1))
    assert trainer.accelerator.mixed_precision == "no"
    recipe = json.loads((tmp_path / "run" / "checkpoints" / "recipe.json").read_text())
    assert recipe["precision"]["mixed_precision"] == "no" and recipe["precision"]["source"] == "automatic"
    assert "0.80x as fast as fp32" in recipe["precision"]["reason"]


# a run whose timing is simulated (bf16 4x as fast) and whose Linear layers report the dtype they compute in
DRIVER = """
import json, sys
import torch
import vanilla_transformer.inference.precision as precision
from vanilla_transformer.training import Trainer, TrainConfig
from vanilla_transformer.training.cli import parse_dataclass

precision.cpu_bf16_flags = lambda: ["avx512_bf16"]
precision.training_speeds = lambda *a, **k: precision.Speeds(1.0, 0.25)
trainer = Trainer(parse_dataclass(TrainConfig, sys.argv[1:]))
dtypes = set()
for module in trainer.unwrapped.modules():
    if isinstance(module, torch.nn.Linear):
        module.register_forward_hook(lambda m, a, out: dtypes.add(str(out.dtype)) if m.training else None)
messages = []
trainer.emit = lambda name, info: messages.append(info.get("message")) if name == "info" else None
result = trainer.run()
print(json.dumps({"linear_outputs": sorted(dtypes), "precision": result.precision,
                  "losses": [log["loss"] for log in result.history]}))
"""


def test_automatic_bf16_trains_under_autocast_and_says_so(tokenizer_dir, tmp_path):
    out = tmp_path / "run"
    options = small_run_options(
        tokenizer=tokenizer_dir,
        max_steps=2,
        output_dir=str(out),
        export=True,
        length_penalty=1.0,
        test_beams=1,
    )
    # the simulated CPU decides, whatever the outer environment forces
    env = {k: v for k, v in os.environ.items() if k not in (PRECISION_ENV, CPU_BF16_ENV)}
    env.update(
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    args = [
        f"--{k}={'none' if v is None else str(v).lower() if isinstance(v, bool) else v}"
        for k, v in options.items()
    ]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=240, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["linear_outputs"] == ["torch.bfloat16"]
    assert report["precision"]["mixed_precision"] == "bf16" and report["precision"]["source"] == "automatic"
    assert all(math.isfinite(loss) for loss in report["losses"])
    recipe = json.loads((out / "checkpoints" / "recipe.json").read_text())
    assert recipe["precision"] == report["precision"]
    assert "4.00x as fast as fp32" in recipe["precision"]["reason"]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "with bf16 mixed precision (chosen automatically: CPU with avx512_bf16: bf16 ran" in card


# ---- inference in bf16 ------------------------------------------------------------------------------------------
