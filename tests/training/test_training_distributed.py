"""Data parallelism: the training function under `accelerate launch --multi_gpu --num_processes 2` on CPU
(torchrun + gloo; without --multi_gpu accelerate starts a single process on a machine with no GPU) makes
the same updates as one process accumulating 2 batches per update, because every update sums the loss over
the same global batches and divides by their total target-token count (dropout off so that the two runs
draw no random numbers; tolerance: float32 summation order of the gradient all-reduce).

Adam's update changes only through its eps when every gradient is scaled by the same factor, so equal weights are
a weak check of the gradient scale (such as the world-size factor that undoes DDP's averaging); Adam's moment
estimates, the gradients' running mean and mean square, scale with the gradients: they must match too."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import SMALL_RUN_LINES, small_run, small_run_options
from helpers.shared import accelerate_cpu_launcher
from safetensors.torch import load_file

from vanilla_transformer.training import train

ROOT = Path(__file__).resolve().parents[2]
STEPS = 3


def adam_moments(path: Path) -> dict[tuple[int, str], torch.Tensor]:
    """Adam's ``exp_avg`` and ``exp_avg_sq`` of every parameter in a checkpoint's optimizer state."""
    state = torch.load(path, weights_only=True)["state"]
    return {
        (index, name): value
        for index, moments in state.items()
        for name, value in moments.items()
        if name in ("exp_avg", "exp_avg_sq")
    }


def launch_two_processes(options: dict, out: Path, timeout: float = 280) -> subprocess.CompletedProcess:
    """`vanilla-transformer train` with ``options`` as flags under ``accelerate launch --multi_gpu --num_processes 2`` on
    the CPU (one thread each, no export), writing to ``out``; asserts that it succeeded. A launch still running
    after ``timeout`` seconds fails the test with every process's Python stack (faulthandler, on SIGABRT)."""
    # the boolean options and --num_threads are spelled out below
    args = [f"--{k}={v}" for k, v in options.items() if k not in ("report_to", "export", "num_threads")]
    cmd = [
        *accelerate_cpu_launcher(2),
        "-m",
        "vanilla_transformer",
        "train",
        *args,
        "--report_to=none",
        "--no_export",
        "--grad_accum=1",
        "--num_threads=1",
        f"--output_dir={out}",
    ]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONFAULTHANDLER": "1",
    }
    launch = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        stdout, stderr = launch.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # torchrun starts each worker in a session of its own: signal the launcher's children and the launcher
        listed = Path(f"/proc/{launch.pid}/task/{launch.pid}/children")
        pids = [*map(int, listed.read_text().split() if listed.exists() else []), launch.pid]

        def send(sig: int) -> None:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

        send(signal.SIGABRT)  # faulthandler prints each process's Python stack
        try:
            stdout, stderr = launch.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
            stdout, stderr = launch.communicate()
        stacks = [
            line for line in stderr.splitlines() if line.lstrip().startswith(("File ", "Thread ", "Current "))
        ]
        pytest.fail(f"the launch did not end in {timeout} s:\n{stdout[-3000:]}\n" + "\n".join(stacks[-200:]))
    proc = subprocess.CompletedProcess(cmd, launch.returncode, stdout, stderr)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 process(es)" in proc.stdout, proc.stdout  # really distributed (torchrun + gloo)
    return proc


def test_two_processes_equal_one_process_with_gradient_accumulation(tokenizer_dir, tmp_path):
    pytest.importorskip("accelerate")
    run = dict(
        tokenizer=tokenizer_dir, max_steps=STEPS, dropout=0.0, cooldown=0.5, cache_dir=str(tmp_path / "cache")
    )
    single = train(small_run(tmp_path / "single", grad_accum=2, **run))

    own_cache = {**run, "cache_dir": str(tmp_path / "ddp-cache")}  # nothing tokenised by the one-process run
    proc = launch_two_processes(small_run_options(**own_cache), tmp_path / "ddp")
    assert f"Stopped after {STEPS} updates" in proc.stdout

    ckpt = f"checkpoint-{STEPS}"
    a = load_file(tmp_path / "single" / "checkpoints" / ckpt / "model.safetensors")
    b = load_file(tmp_path / "ddp" / "checkpoints" / ckpt / "model.safetensors")
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5, msg=key)
    adam_a, adam_b = (
        adam_moments(tmp_path / run / "checkpoints" / ckpt / "optimizer.bin") for run in ("single", "ddp")
    )
    assert set(adam_a) == set(adam_b) and len(adam_a) == 2 * len(list(single.model.parameters()))
    for key in adam_a:
        torch.testing.assert_close(adam_b[key], adam_a[key], rtol=1e-4, atol=1e-9, msg=str(key))
    assert (tmp_path / "ddp" / "checkpoints" / ckpt / "random_states_1.pkl").exists()
    assert single.history[-1]["ntokens"] > 0

    # each process tokenised one half of the training split and nothing tokenised it whole (the manifests of the
    # two-process run's own tokenisation cache say who tokenised what: the halves, and the validation split)
    train_size = single.split_sizes["train"]
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "ddp-cache").glob("tokenized-*.json")]
    assert manifests and all(m["rows"] < train_size for m in manifests), manifests
    halves = sorted((m["process"], m["rows"]) for m in manifests if m["rows"] > train_size // 3)
    assert [p for p, _ in halves] == [0, 1], manifests
    assert sum(rows for _, rows in halves) == train_size
    assert abs(halves[0][1] - halves[1][1]) <= 1


def test_two_streaming_processes_each_read_and_tokenise_half_of_the_split(tokenizer_dir, tmp_path):
    """With --streaming each process streams its own half of the training split (`training.streaming`): the
    checkpoint keeps both positions, each process read and tokenised its half (counted by its stream: the
    default pool of 4,096 pairs holds a whole half of this slice, so the first batch reads it all) and none the
    whole split, and the run resumes."""
    pytest.importorskip("accelerate")
    options = small_run_options(tokenizer=tokenizer_dir, max_steps=STEPS, streaming=True, dropout=0.0)
    proc = launch_two_processes({**options, "cache_dir": str(tmp_path / "cache")}, tmp_path / "ddp")
    assert f"Stopped after {STEPS} updates" in proc.stdout
    state = json.loads(
        (tmp_path / "ddp" / "checkpoints" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text()
    )
    processes = state["stream"]["processes"]
    train_size = SMALL_RUN_LINES - options["valid_size"] - options["test_size"]
    assert [p["streaming"] for p in processes] == [True, True]
    assert sum(p["read_pairs"] for p in processes) == train_size  # no pair read twice
    assert all(abs(p["read_pairs"] - train_size / 2) <= 1 for p in processes), processes
    assert all(p["position"] == STEPS for p in processes)  # one batch per process and update
    resumed = launch_two_processes(
        {**options, "cache_dir": str(tmp_path / "cache"), "max_steps": STEPS + 1, "resume": True},
        tmp_path / "ddp",
    )
    assert f"Stopped after {STEPS + 1} updates" in resumed.stdout


def test_two_processes_agree_on_the_measured_long_budget_dropout(tokenizer_dir, tmp_path):
    """The small preset's long-budget rule converts --max_minutes into epochs with a batch time that every process
    measures and the main process's figure decides: the launch neither hangs nor disagrees, and the decision is
    recorded (--max_epochs 13 alone would reach the rule's 12 epochs; 3 seconds do not)."""
    pytest.importorskip("accelerate")
    options = small_run_options(
        tokenizer=tokenizer_dir,
        preset="small",
        max_epochs=13,
        max_minutes=0.05,
        cache_dir=str(tmp_path / "cache"),
    )
    proc = launch_two_processes(options, tmp_path / "ddp")
    assert "no long-budget dropout: the budget allows about" in proc.stdout and "measured" in proc.stdout
    recipe = json.loads((tmp_path / "ddp" / "checkpoints" / "recipe.json").read_text())
    assert recipe["dropout"] is None and 0 < recipe["expected_epochs"] < 12
