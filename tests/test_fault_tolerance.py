"""Training survives being killed: SIGKILL at random moments and at every step of a checkpoint write, each
followed by --resume, ends with weights bit-identical to an uninterrupted run (CPU, deterministic), and after
every kill each checkpoint on disk verifies and loads. A full disk during a save (a writer raising
OSError(ENOSPC)) reports the error and leaves the previous checkpoint intact.

The runs are children forked from the test process (no interpreter start-up per kill). A child dies either
by an external SIGKILL after a random delay, or by sending itself SIGKILL at an injected point: inside the
writer of a checkpoint file, before each `os.replace` of the commit sequence, during pruning, or right after
an optimizer update."""

from __future__ import annotations

import errno
import os
import random
import re
import shutil
import signal
import time
import traceback
from pathlib import Path

import pytest
import torch
from conftest import small_run
from safetensors.torch import load_file

from training import TrainConfig, train
from training import checkpoint as ckpt

STEPS = 12
_CHECKPOINT_DIR = re.compile(r"^checkpoint-\d+$")


def run_config(out: Path, tokenizer: str, cache: Path, **overrides) -> TrainConfig:
    """The shared short run of STEPS updates with a checkpoint after every update (the last 2 kept)."""
    return small_run(out, **{"max_steps": STEPS, "eval_every": 1, "keep_last": 2, "tokenizer": tokenizer,
                             "cache_dir": str(cache), **overrides})  # fmt: skip


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


# ------------------------------------------------------------------------------------------ the child


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install_kill_point(point: str, nth: int) -> None:
    """In the child: SIGKILL this process at `point` during its `nth` checkpoint save (or `nth` update)."""
    import accelerate.checkpointing

    saves = {"n": 0}
    real_save_checkpoint = ckpt.save_checkpoint

    def counting_save(*args, **kwargs):
        saves["n"] += 1
        return real_save_checkpoint(*args, **kwargs)

    ckpt.save_checkpoint = counting_save  # the trainer calls it through the module
    armed = lambda: saves["n"] == nth  # noqa: E731

    if point in ("model.safetensors", "optimizer.bin"):
        real_save = accelerate.checkpointing.save

        def half_written(obj, path, *args, **kwargs):
            if armed() and Path(path).name == point:
                real_save(obj, path, *args, **kwargs)
                data = Path(path).read_bytes()
                Path(path).write_bytes(data[: len(data) // 2])  # the kill lands mid-file
                _die()
            return real_save(obj, path, *args, **kwargs)

        accelerate.checkpointing.save = half_written
    elif point in ("trainer_state.json", "manifest.json", "rename", "latest"):
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):
            src, dst = Path(src), Path(dst)
            hit = (
                dst.name == point
                or (point == "rename" and src.name.startswith(".tmp-checkpoint-") and _CHECKPOINT_DIR.match(dst.name))
            )  # fmt: skip
            if armed() and hit:
                _die()
            return real_replace(src, dst, *args, **kwargs)

        os.replace = replace
    elif point == "prune":
        real_rmtree = shutil.rmtree

        def rmtree(path, *args, **kwargs):
            path = Path(path)
            if armed() and re.search(r"checkpoint-\d+$", path.name) and not path.name.startswith(".tmp-"):
                (path / ckpt.MODEL_FILE).unlink()  # deletion under way
                _die()
            return real_rmtree(path, *args, **kwargs)

        shutil.rmtree = rmtree
    elif point != "update":
        raise ValueError(point)


def run_child(
    cfg: TrainConfig, log: Path, point: str | None = None, nth: int = 1, delay: float | None = None
) -> str:
    """Fork a child that trains with `cfg`; return 'finished', 'killed' or 'failed: <traceback>'."""
    log.write_text("")
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND)

            def event(name: str, info: dict) -> None:
                if name == "step":
                    os.write(fd, f"step {info['step']}\n".encode())
                    if point == "update" and info["step"] - first_step[0] == nth:
                        _die()  # the update is in memory, not yet in a checkpoint
                elif name == "start":
                    first_step[0] = info["step"]

            first_step = [0]
            if point is not None:
                _install_kill_point(point, nth)
            real = ckpt.save_checkpoint

            def marked_save(accelerator, root, step, *args, **kwargs):
                os.write(fd, f"save-begin {step}\n".encode())
                path = real(accelerator, root, step, *args, **kwargs)
                os.write(fd, f"save-end {step}\n".encode())
                return path

            ckpt.save_checkpoint = marked_save
            train(cfg, event)
            code = 0
        except BaseException:
            os.write(fd, ("FAILED " + traceback.format_exc()).encode())
        finally:
            os._exit(code)
    done, status = 0, 0
    if delay is not None:
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:  # the child ended before the kill (and is reaped now)
                break
            time.sleep(0.005)
        else:
            os.kill(pid, signal.SIGKILL)
    if not done:
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return "finished"
    return "failed: " + log.read_text()


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
    ("prune", 1),  # while deleting an old checkpoint
]
RANDOM_KILLS = 6


def test_sigkill_at_random_points_and_during_checkpoint_writes_then_resume_exactly(
    reference, tokenizer_dir, tmp_path
):
    weights, cache = reference
    out, log = tmp_path / "out", tmp_path / "child.log"
    root = out / "checkpoints"
    rng = random.Random(6)
    plan = [(point, nth, None) for point, nth in INJECTED]
    plan += [(None, 1, rng.uniform(0.1, 1.0)) for _ in range(RANDOM_KILLS)]
    rng.shuffle(plan)
    kills = {"saving": 0, "training": 0}
    injected_hit = set()
    for point, nth, delay in plan:
        for _attempt in range(2):
            resume = bool(ckpt.list_checkpoints(root))
            outcome = run_child(run_config(out, tokenizer_dir, cache, resume=resume), log, point, nth, delay)
            assert not outcome.startswith("failed"), outcome
            if outcome != "finished":
                break
            # the run ended before the kill came (a late random kill, or a resumed run with fewer than `nth`
            # events left): nothing left to interrupt; start over, and give an injected point a fresh run
            shutil.rmtree(out)
            if point is None:
                break
        else:
            pytest.fail(f"the injected kill at {point!r} (occurrence {nth}) never fired, even on a fresh run")
        if outcome == "finished":
            continue
        kills[phase_of(log)] += 1
        if point is not None:
            injected_hit.add(point)
        assert_every_checkpoint_readable(root)
    assert injected_hit == {point for point, _ in INJECTED}
    # six injected points lie inside save_checkpoint (weights, optimizer, trainer state, manifest, rename, latest)
    # and always count as "saving"; "update" and "prune" count as "training"; random kills land in either phase
    assert kills["saving"] >= 6 and kills["training"] >= 2, kills
    outcome = run_child(run_config(out, tokenizer_dir, cache, resume=bool(ckpt.list_checkpoints(root))), log)
    assert outcome == "finished", outcome
    assert_every_checkpoint_readable(root)
    final = load_file(root / f"checkpoint-{STEPS}" / ckpt.MODEL_FILE)
    assert final.keys() == weights[STEPS].keys()
    for name, tensor in final.items():
        assert torch.equal(tensor, weights[STEPS][name]), name


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
    with pytest.raises(OSError, match=r"Could not save checkpoint '.*checkpoint-3' \(No space left on device\); "
                                      r"the previous checkpoint checkpoint-2 is intact; free disk space") as err:  # fmt: skip
        train(run_config(out, tokenizer_dir, cache, max_steps=4, resume=True))
    assert err.value.errno == errno.ENOSPC
    assert (root / "latest").read_text() == before
    assert not (root / "checkpoint-3").exists() and not list(root.glob(".tmp-*"))  # the partial copy is gone
    assert_every_checkpoint_readable(root)
    monkeypatch.undo()
    train(run_config(out, tokenizer_dir, cache, max_steps=4, resume=True))  # space freed: resume
    final = load_file(root / "checkpoint-4" / ckpt.MODEL_FILE)
    assert all(torch.equal(final[k], weights[4][k]) for k in final)
