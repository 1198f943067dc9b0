"""Small helpers that several test folders use: a word-level tokenizer for the tiny models, the translate command
run in this process, the command-line form of the small run's corpus, checked subprocesses, and fresh interpreters
that cannot import the package (remote code only)."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from conftest import SMALL_RUN_LINES, random_batch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast


def word_tokenizer(vocab_size: int = 97) -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    vocab.update({f"w{i}": i for i in range(4, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def run_in_process(command: str, capsys, *argv) -> tuple[int | str | None, str]:
    """`vanilla-transformer COMMAND ARGV` in this process (`command`: its module's name in
    `vanilla_transformer.commands`): (exit code, stderr); argparse errors exit too."""
    capsys.readouterr()
    try:
        code = importlib.import_module(f"vanilla_transformer.commands.{command}").main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


def run_main(monkeypatch, capsys, *args: str, stdin: str = "") -> tuple[int | str | None, str, str]:
    """`vanilla-transformer translate ARGS` in this process (fast): (exit code, stdout, stderr); the parser's own
    exit (argparse: 2 for a bad option) is the exit code."""
    script = importlib.import_module("vanilla_transformer.commands.translate")
    stdout = io.BytesIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(stdout))
    try:
        code = script.main(list(args))
    except SystemExit as exited:
        code = exited.code
    return code, stdout.getvalue().decode("utf-8"), capsys.readouterr().err


BLOCK_PROJECT = textwrap.dedent(
    """
    import sys
    sys.modules["vanilla_transformer"] = None  # importing the package now raises ImportError: only remote code can be used
    """
)
CODE_FILES = (
    "modeling_vanilla_transformer.py",
    "configuration_vanilla_transformer.py",
    "configuration_vanilla_base.py",
    "masks_vanilla_transformer.py",
    "stack_vanilla_transformer.py",
    "cache_vanilla_transformer.py",
    "kernels_vanilla_transformer.py",
    "checks_vanilla_transformer.py",
    "decoding_vanilla_transformer.py",
    "positions_vanilla_transformer.py",
    "pipeline_vanilla_transformer.py",
)
SRC, MASK = random_batch(97, 2, 7, seed=61)
# small_run_options' corpus as command-line flags: the first 300 lines of the shipped corpus, 20 validation, 6 test
SMALL_CORPUS_FLAGS = f"--max_lines {SMALL_RUN_LINES} --valid_size 20 --test_size 6".split()
TEXT = "w5 w9 w17 w33"


def scored_generate(model, ids: torch.Tensor, mask: torch.Tensor, **decoding):
    """generate() on the batch with `decoding`, returning its dict output with the processed scores and the raw
    logits of every step (the reference an exported engine's ids and scores are compared with)."""
    scored = dict(output_scores=True, output_logits=True, return_dict_in_generate=True)
    return model.generate(input_ids=ids, attention_mask=mask, **scored, **decoding)


def run_command(
    command: str, *args: str, stdin: str = "", timeout: float = 180
) -> subprocess.CompletedProcess:
    """`vanilla-transformer COMMAND ARGS` in a subprocess (the real entry point: exit code, stdout, stderr as bytes),
    offline, on one thread, with `stdin` as its input."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", command, *args],
        input=stdin.encode(),
        capture_output=True,
        env=env,
        timeout=timeout,
    )


def run_checked(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run `args` (stdout and stderr captured as text; `env` defaults to this process's) and assert that it exits
    with status 0, showing the end of its stderr when it does not."""
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def run_python(code: str, cwd: Path, block_project: bool = True, env: dict[str, str] | None = None) -> str:
    """Run `code` in a fresh interpreter (its stdout); with `block_project`, importing the package fails there, so
    only remote code can be used. `env` defaults to this process's environment, offline, with its own HF_HOME
    (so no remote-code module cached by another process is reused)."""
    if env is None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(cwd / "hf-home")}
    code = (BLOCK_PROJECT if block_project else "") + textwrap.dedent(code)
    return run_checked([sys.executable, "-c", code], cwd, env).stdout


def accelerate_cpu_launcher(num_processes: int = 2) -> list[str]:
    """``accelerate launch`` of ``num_processes`` CPU processes in one gloo group, on a free port: ``--multi_gpu``
    (torchrun), since ``--cpu`` starts a single process; run it with ``CUDA_VISIBLE_DEVICES=""``."""
    from helpers.serving import free_port

    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        str(num_processes),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
    ]
