"""Training survives being killed: SIGKILL at random moments of a run and at every step of a checkpoint write,
each followed by --resume, ends with weights bit-identical to an uninterrupted run (CPU, deterministic), and after
every kill each checkpoint on disk verifies and loads. A full disk during a save (a writer raising
OSError(ENOSPC)) reports the error and leaves the previous checkpoint intact.

The killed runs are children of a fork server (tests/helpers/kill_server.py: a fresh interpreter that imports the trainer
once), each bounded by a timeout. A random kill is sent once the child has logged a randomly chosen update (before
the last one) plus a random delay, and counts only if it landed while the run was still going."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from conftest import small_run
from safetensors.torch import load_file

from vanilla_transformer.training import TrainConfig, train
from vanilla_transformer.training import checkpoint as ckpt

STEPS = 12
CHILD_TIMEOUT = 120  # seconds for one training child (a run takes a few seconds)
_CHECKPOINT_DIR = re.compile(r"^checkpoint-\d+$")


def run_config(out: Path, tokenizer: str, cache: Path, **overrides) -> TrainConfig:
    """The shared short run of STEPS updates with a checkpoint after every update (the last 2 kept)."""
    return small_run(
        out,
        **{
            "max_steps": STEPS,
            "eval_every": 1,
            "keep_last": 2,
            "tokenizer": tokenizer,
            "cache_dir": str(cache),
            **overrides,
        },
    )


@pytest.fixture(scope="module")
def reference(tokenizer_dir, tmp_path_factory) -> tuple[dict[int, dict[str, torch.Tensor]], Path]:
    """Weights after every update of an uninterrupted run, and the (warm) tokenisation cache."""
    root = tmp_path_factory.mktemp("reference")
    weights = {}

    def keep(name: str, info: dict) -> None:
        if name == "checkpoint":
            weights[info["step"]] = load_file(Path(info["path"]) / ckpt.MODEL_FILE)

    train(run_config(root / "out", tokenizer_dir, root / "cache"), keep)
    assert sorted(weights) == list(range(1, STEPS + 1))
    return weights, root / "cache"


# ------------------------------------------------------------------------------------------ the children


class KillServer:
    """The fork server (tests/helpers/kill_server.py) as a subprocess: `run` sends one request and waits, bounded, for its
    outcome ('finished', 'killed', 'failed' or 'timeout')."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).parents[1] / "helpers" / "kill_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        self.pending = b""

    def run(
        self,
        cfg: TrainConfig,
        log: Path,
        point: str | None = None,
        nth: int = 1,
        kill_after_step: int | None = None,
        delay: float = 0.0,
    ) -> str:
        job = {
            "config": dataclasses.asdict(cfg),
            "log": str(log),
            "point": point,
            "nth": nth,
            "kill_after_step": kill_after_step,
            "delay": delay,
            "timeout": CHILD_TIMEOUT,
        }
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + CHILD_TIMEOUT + 60  # the server enforces CHILD_TIMEOUT itself
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                self.close()
                pytest.fail(f"the fork server died or did not answer in time; child log:\n{log.read_text()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)["outcome"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def kill_server() -> Iterator[KillServer]:
    server = KillServer()
    yield server
    server.close()


def phase_of(log: Path) -> str:
    """Where the child was when it died: 'saving' (inside a checkpoint write) or 'training'."""
    marks = [line for line in log.read_text().splitlines() if line.startswith("save-")]
    return "saving" if marks and marks[-1].startswith("save-begin") else "training"


def assert_every_checkpoint_readable(root: Path) -> None:
    """Every visible checkpoint directory verifies against its manifest and its weights load; `latest`
    names one of them (hidden .tmp-/.del- directories are work in progress and never read)."""
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and _CHECKPOINT_DIR.match(p.name)):
        ckpt.load_model_weights(folder)  # verify_checkpoint + safetensors load
        torch.load(folder / "optimizer.bin", weights_only=True)
    latest = ckpt.latest_checkpoint(root)
    if latest is not None:
        ckpt.verify_checkpoint(latest)


# -------------------------------------------------------------------------------------------- tests


INJECTED = [
    ("update", 2),  # killed after an optimizer update that no checkpoint holds yet
    ("model.safetensors", 1),  # killed half-way through writing the weights
    ("optimizer.bin", 2),  # ... the optimizer state
    ("trainer_state.json", 1),  # before our JSON state is in place
    ("manifest.json", 2),  # before the manifest (the completion mark) is in place
    ("rename", 1),  # before the temporary directory becomes checkpoint-<step>
    ("latest", 2),  # after the rename, before `latest` points at it (the next run re-saves that step)
    ("prune", 3),  # while deleting an old checkpoint (a fresh run's third save prunes its first checkpoint)
]
RANDOM_KILLS = 6


def resumable_step(root: Path) -> int:
    """The update a run in `root` resumes after (0 for a fresh run)."""
    latest = ckpt.latest_checkpoint(root)
    return int(latest.name.split("-")[1]) if latest is not None else 0


def test_sigkill_at_random_points_and_during_checkpoint_writes_then_resume_exactly(
    reference, tokenizer_dir, tmp_path, kill_server
):
    weights, cache = reference
    out, log = tmp_path / "out", tmp_path / "child.log"
    root = out / "checkpoints"
    rng = random.Random(6)
    plan = [(point, nth) for point, nth in INJECTED] + [(None, 0)] * RANDOM_KILLS
    rng.shuffle(plan)
    kills = {"saving": 0, "training": 0}
    injected_hit, random_landed = set(), 0
    for point, nth in plan:
        for _attempt in range(2):
            if STEPS - resumable_step(root) <= max(nth, 1):
                shutil.rmtree(out)  # too little of the run is left for this kill: start over
            cfg = run_config(out, tokenizer_dir, cache, resume=resumable_step(root) > 0)
            if point is None:  # after a random update of this run (not the last one), a random delay later
                target = rng.randint(resumable_step(root) + 1, STEPS - 1)
                outcome = kill_server.run(cfg, log, kill_after_step=target, delay=rng.uniform(0.0, 0.03))
            else:
                outcome = kill_server.run(cfg, log, point, nth)
            assert outcome in ("finished", "killed"), f"{outcome}: {log.read_text()}"
            if outcome == "killed":
                break
            # the run ended before the kill came (a resumed run with fewer than `nth` events left, or a random
            # kill that came too late): nothing was interrupted; start over on a fresh run
            shutil.rmtree(out)
        else:
            pytest.fail(f"the kill at {point or 'a random moment'!r} never landed, even on a fresh run")
        assert "train-done" not in log.read_text(), "the kill landed after the run had ended"
        kills[phase_of(log)] += 1
        if point is None:
            random_landed += 1
        else:
            injected_hit.add(point)
        assert_every_checkpoint_readable(root)
    assert injected_hit == {point for point, _ in INJECTED} and random_landed == RANDOM_KILLS
    # six injected points lie inside save_checkpoint (weights, optimizer, trainer state, manifest, rename, latest)
    # and always count as "saving"; "update" and "prune" count as "training"; random kills land in either phase
    assert kills["saving"] >= 6 and kills["training"] >= 2, kills
    outcome = kill_server.run(run_config(out, tokenizer_dir, cache, resume=resumable_step(root) > 0), log)
    assert outcome == "finished", log.read_text()
    assert_every_checkpoint_readable(root)
    final = load_file(root / f"checkpoint-{STEPS}" / ckpt.MODEL_FILE)
    assert final.keys() == weights[STEPS].keys()
    for name, tensor in final.items():
        assert torch.equal(tensor, weights[STEPS][name]), name


def test_sigkill_of_a_streamed_run_then_resume_exactly(tokenizer_dir, tmp_path, kill_server):
    """--streaming: SIGKILL after an update that no checkpoint holds and inside a checkpoint write, each followed by
    --resume, ends with the weights of an uninterrupted streamed run (the stream's position is in the checkpoint)."""
    cache, final = tmp_path / "cache", {}

    def keep(name: str, info: dict) -> None:
        if name == "checkpoint" and info["step"] == STEPS:
            final.update(load_file(Path(info["path"]) / ckpt.MODEL_FILE))

    train(run_config(tmp_path / "reference", tokenizer_dir, cache, streaming=True), keep)
    out, log = tmp_path / "out", tmp_path / "child.log"
    root = out / "checkpoints"
    for point, nth in [("update", 4), ("trainer_state.json", 3)]:
        cfg = run_config(out, tokenizer_dir, cache, streaming=True, resume=resumable_step(root) > 0)
        assert kill_server.run(cfg, log, point, nth) == "killed", log.read_text()
        assert_every_checkpoint_readable(root)
    assert 0 < resumable_step(root) < STEPS
    outcome = kill_server.run(run_config(out, tokenizer_dir, cache, streaming=True, resume=True), log)
    assert outcome == "finished", log.read_text()
    resumed = load_file(root / f"checkpoint-{STEPS}" / ckpt.MODEL_FILE)
    assert resumed.keys() == final.keys() and all(torch.equal(resumed[k], final[k]) for k in final)


@pytest.mark.parametrize("failing_file", ["optimizer.bin", "manifest.json"])
def test_disk_full_during_a_save_keeps_the_previous_checkpoint(
    reference, tokenizer_dir, tmp_path, monkeypatch, failing_file
):
    import accelerate.checkpointing

    weights, cache = reference
    out = tmp_path / "out"
    root = out / "checkpoints"
    train(run_config(out, tokenizer_dir, cache, max_steps=2))
    before = (root / "latest").read_text()

    def full(path: Path) -> None:
        path.write_bytes(b"\0" * 100)  # a partial file, then the device is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    if failing_file == "optimizer.bin":
        real_save = accelerate.checkpointing.save

        def save(obj, path, *args, **kwargs):
            if Path(path).name == failing_file:
                full(Path(path))
            return real_save(obj, path, *args, **kwargs)

        monkeypatch.setattr(accelerate.checkpointing, "save", save)
    else:
        real_write = ckpt.write_json_atomic

        def write_json_atomic(path: Path, data: dict) -> None:
            if path.name == failing_file:
                full(path.with_name(f".{path.name}.tmp"))
            real_write(path, data)

        monkeypatch.setattr(ckpt, "write_json_atomic", write_json_atomic)
    with pytest.raises(
        OSError,
        match=r"Could not save checkpoint '.*checkpoint-3' \(No space left on device\); "
        r"the previous checkpoint checkpoint-2 is intact; free disk space",
    ) as err:
        train(run_config(out, tokenizer_dir, cache, max_steps=4, resume=True))
    assert err.value.errno == errno.ENOSPC
    assert (root / "latest").read_text() == before
    assert not (root / "checkpoint-3").exists() and not list(root.glob(".tmp-*"))  # the partial copy is gone
    assert_every_checkpoint_readable(root)
    monkeypatch.undo()
    train(run_config(out, tokenizer_dir, cache, max_steps=4, resume=True))  # space freed: resume
    final = load_file(root / "checkpoint-4" / ckpt.MODEL_FILE)
    assert all(torch.equal(final[k], weights[4][k]) for k in final)
