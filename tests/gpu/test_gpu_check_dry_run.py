"""The GPU check itself, on the CPU: its dry run end to end through the command (the ``gpu`` tests' bodies run on
the CPU with tiny sizes, both measuring parts run, the JSON and the Markdown have every part), a part refused when
its budget cannot hold it, and the bf16 peak table."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from studies import gpu
from studies.gpu import Budget, Part, Settings, measure_training, peak_bf16_flops
from vanilla_transformer.benchmarks.contenders import build_contenders

PARTS = ["tests", "training", "generation"]


def gpu_test_names() -> set[str]:
    """The test functions of the gpu-marked modules of this folder."""
    names = set()
    for path in Path(__file__).parent.glob("test_gpu_*.py"):
        if path.name != Path(__file__).name:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names |= {
                n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
            }
    return names


def test_dry_run_runs_every_part_on_the_cpu(tmp_path):
    out = tmp_path / "check"
    command = [sys.executable, "-m", "studies.gpu", "--device", "cpu", "--dry_run"]
    done = subprocess.run(
        [*command, "--output_dir", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ),
        cwd=gpu.ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    assert [p["name"] for p in report["parts"]] == PARTS
    assert {p["name"]: p["status"] for p in report["parts"]} == dict.fromkeys(PARTS, "ran"), report["parts"]
    assert report["device"]["type"] == "cpu" and report["device"]["bf16_peak_tflops"] == "unknown"
    tests, training, generation = (p["results"] for p in report["parts"])
    # every gpu test ran its body on the CPU and passed
    assert tests["failed"] == tests["skipped"] == 0 and tests["passed"] == len(tests["tests"])
    ran = {t["name"].split("::")[-1].split("[")[0] for t in tests["tests"]}
    assert ran == gpu_test_names()
    assert set(training["contenders"]) == {"marian", "ours"}
    for row in training["contenders"].values():
        assert row["target_tokens_per_s"] > 0 and row["peak_memory_mib"] > 0 and row["mfu"] == "unknown"
    dry = Settings.dry_run()
    expected = [f"{'greedy' if b == 1 else f'beam {b}'} b{n}" for b in dry.beams for n in dry.gen_batches]
    assert [w["workload"] for w in generation["workloads"]] == expected
    assert all(w["same_tokens_fp32"] for w in generation["workloads"])
    markdown = (out / "gpu_check.md").read_text(encoding="utf-8")
    for name in PARTS:
        assert f"| {name} | ran |" in markdown
    assert f"Tests: {tests['passed']} passed, 0 failed, 0 skipped" in markdown
    assert "| ours |" in markdown and "| greedy b1 |" in markdown
    assert "passed" in (out / "gpu_tests.log").read_text(encoding="utf-8")  # pytest's own output, kept


def test_a_budget_too_small_refuses_every_part_and_says_why(tmp_path, capsys):
    out = tmp_path / "check"
    argv = ["--device", "cpu", "--dry_run", "--budget_s", "1", "--output_dir", str(out)]
    assert gpu.main(argv) == 0
    report = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    assert [(p["name"], p["status"]) for p in report["parts"]] == [(name, "skipped") for name in PARTS]
    assert all("left in its budget" in p["reason"] for p in report["parts"]), report["parts"]
    assert "| training | skipped |" in capsys.readouterr().out


def test_a_measured_first_step_that_does_not_fit_stops_the_part():
    """The training part times each contender's first step and refuses the rounds when they cannot fit."""
    budget = Budget(1e-6, clock=lambda: 0.0)  # a clock that never moves: 1 microsecond left throughout
    part = Part("training")
    measure_training(
        build_contenders("tiny", with_ct2=False, with_bf16=False),
        Settings.dry_run(),
        torch.device("cpu"),
        budget,
        part,
    )
    assert part.status == "skipped" and part.reason.startswith("first steps took"), part
    assert part.results == {}


@pytest.mark.parametrize(
    "name, tflops",
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA L40S", None),
        ("Tesla T4", None),
    ],
)
def test_bf16_peak_by_device_name(name, tflops):
    peak = peak_bf16_flops(name)
    assert (peak / 1e12 if peak else None) == tflops
