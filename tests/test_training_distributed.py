"""Data parallelism: the training function under `accelerate launch --multi_gpu --num_processes 2` on CPU
(torchrun + gloo; without --multi_gpu accelerate starts a single process on a machine with no GPU) makes
the same updates as one process accumulating 2 batches per update, because every update sums the loss over
the same global batches and divides by their total target-token count (dropout off so that the two runs
draw no random numbers; tolerance: float32 summation order of the gradient all-reduce)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from corpus import DEFAULT_DATA, load_parallel_corpus
from training import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]
STEPS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one_process_with_gradient_accumulation(tmp_path):
    pytest.importorskip("accelerate")
    from tokenizer.bpe import train_bpe_tokenizer

    ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=300)
    tok = tmp_path / "tok"
    train_bpe_tokenizer(list(ds["source"]) + list(ds["target"]), vocab_size=1200).save_pretrained(tok)
    common = dict(
        data=str(DEFAULT_DATA), max_lines=300, valid_size=20, test_size=6, preset="tiny", tokenizer=str(tok),
        max_tokens=512, max_minutes=None, max_steps=STEPS, eval_every=100, bleu_samples=0, dropout=0.0, cooldown=0.5,
        tensorboard=False, export=False, cache_dir=str(tmp_path / "cache"),
    )  # fmt: skip
    single = train(TrainConfig(**common, grad_accum=2, num_threads=1, output_dir=str(tmp_path / "single")))

    args = [f"--{k}={v}" for k, v in common.items() if k not in ("tensorboard", "export")]
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(free_port()), str(ROOT / "scripts" / "train.py"),
        *args, "--no-tensorboard", "--no-export", "--grad_accum=1", "--num_threads=1",
        f"--output_dir={tmp_path / 'ddp'}",
    ]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"Stopped after {STEPS} updates" in proc.stdout
    assert "2 process(es)" in proc.stdout, proc.stdout  # really distributed (torchrun + gloo)

    ckpt = f"checkpoint-{STEPS}"
    a = load_file(tmp_path / "single" / "checkpoints" / ckpt / "model.safetensors")
    b = load_file(tmp_path / "ddp" / "checkpoints" / ckpt / "model.safetensors")
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5, msg=key)
    assert (tmp_path / "ddp" / "checkpoints" / ckpt / "random_states_1.pkl").exists()
    assert single.history[-1]["ntokens"] > 0
