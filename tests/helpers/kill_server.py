"""The fork server of tests/reliability/test_fault_tolerance.py: a fresh, single-threaded interpreter that imports the trainer
once, then forks one training child per request and reports how it ended. Forking from here (not from the
pytest process, whose earlier tests may have left threads holding locks) keeps the children free of fork
deadlocks without paying an interpreter start-up per kill.

Protocol, one JSON object per line. Request on stdin: ``{"config": <TrainConfig fields>, "log": path, "point":
name or null, "nth": n, "kill_after_step": k or null, "delay": seconds, "timeout": seconds}``. Replies on stdout:
``{"outcome": "finished" | "killed" | "failed" | "timeout"}``. The child appends progress marks to ``log``:
``start S``, ``step N``, ``save-begin N``, ``save-end N``, ``train-done``, or ``FAILED <traceback>``.

A child dies by SIGKILL: sent by this server once ``step k`` is in its log plus ``delay`` seconds (a kill from
outside, at a moment the run is still in progress), or sent by the child itself at an injected point: inside the
writer of a checkpoint file, before each `os.replace` of the commit sequence, during pruning, or right after the
``nth`` optimizer update. The server owns the child's pid until it reaps it, so a kill never reaches a reused pid.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

import accelerate.checkpointing
import torch

from vanilla_transformer.training import TrainConfig, train
from vanilla_transformer.training import checkpoint as ckpt

_CHECKPOINT_DIR = re.compile(r"^checkpoint-\d+$")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install_kill_point(point: str, nth: int) -> None:
    """In the child: SIGKILL this process at `point` during its `nth` checkpoint save."""
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
            hit = dst.name == point or (
                point == "rename"
                and src.name.startswith(".tmp-checkpoint-")
                and _CHECKPOINT_DIR.match(dst.name)
            )
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
        raise ValueError(f"unknown kill point {point!r}")


def _child(job: dict) -> None:
    """Train with the request's options, writing progress marks to its log; dies at the injected point."""
    fd = os.open(job["log"], os.O_WRONLY | os.O_APPEND)
    point, nth = job["point"], job["nth"]
    first_step = [0]

    def event(name: str, info: dict) -> None:
        if name == "start":
            first_step[0] = info["step"]
            os.write(fd, f"start {info['step']}\n".encode())
        elif name == "step":
            os.write(fd, f"step {info['step']}\n".encode())
            if point == "update" and info["step"] - first_step[0] == nth:
                _die()  # the update is in memory, not yet in a checkpoint

    if point is not None:
        _install_kill_point(point, nth)
    real = ckpt.save_checkpoint

    def marked_save(accelerator, root, step, *args, **kwargs):
        os.write(fd, f"save-begin {step}\n".encode())
        path = real(accelerator, root, step, *args, **kwargs)
        os.write(fd, f"save-end {step}\n".encode())
        return path

    ckpt.save_checkpoint = marked_save
    try:
        train(TrainConfig(**job["config"]), event)
        os.write(fd, b"train-done\n")
    except BaseException:
        os.write(fd, ("FAILED " + traceback.format_exc()).encode())
        raise


def _seen_step(log: str, step: int) -> bool:
    return f"step {step}\n" in Path(log).read_text()


def serve_one(job: dict) -> str:
    """Fork a child for `job`, kill it when the request says so, reap it; return how it ended."""
    Path(job["log"]).write_text("")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _child(job)
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + job["timeout"]
    kill_at = None  # when the external kill is due, once `step k` is in the log
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if now > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        if job["kill_after_step"] is not None:
            if kill_at is None and _seen_step(job["log"], job["kill_after_step"]):
                kill_at = now + job["delay"]
            if kill_at is not None and now >= kill_at:
                os.kill(pid, signal.SIGKILL)  # the child is not reaped yet: the pid is still its own
        time.sleep(0.002)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    return "finished" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "failed"


def main() -> None:
    torch.set_num_threads(1)
    for line in sys.stdin:
        outcome = serve_one(json.loads(line))
        sys.stdout.write(json.dumps({"outcome": outcome}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
