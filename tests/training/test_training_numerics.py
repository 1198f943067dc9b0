"""The arithmetic of an update that the default user path turns on: gradient clipping (the `small` preset clips
at 1.0) and mixed precision chosen by accelerate's configuration (bf16 autocast on the CPU, its losses close to
fp32's; fp16, which accelerate does not support on the CPU, refused). The automatic choice is in
test_precision.py.

Mixed-precision runs go to a fresh process: accelerate's state is one object per process, fixed by the first
`Accelerator`, so a run in this process would get the precision of whichever test trained first."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import small_run, small_run_options
from safetensors.torch import load_file

from vanilla_transformer.training import TrainConfig, Trainer
from vanilla_transformer.training.options import check_options

ROOT = Path(__file__).resolve().parents[2]


# ---- gradient clipping ------------------------------------------------------------------------------------------
def gradients_and_logs(trainer: Trainer, updates: int) -> tuple[list[torch.Tensor], list[dict]]:
    """The gradient (all parameters, flattened) the optimizer receives at each of ``updates`` updates, and the
    updates' logs."""
    params = [p for group in trainer.optimizer.param_groups for p in group["params"]]
    seen: list[torch.Tensor] = []

    def record(optimizer, args, kwargs):
        seen.append(torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None]).clone())

    # the torch optimizer accelerate wraps
    handle = trainer.optimizer.optimizer.register_step_pre_hook(record)
    try:
        logs = []
        for _ in range(updates):
            log = trainer.train_step(1.0)
            # every batch here has target tokens to score, so every update runs and logs
            assert log is not None
            logs.append(log)
    finally:
        handle.remove()
    return seen, logs


def weights(trainer: Trainer) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in trainer.unwrapped.parameters()])


def test_clipping_scales_the_gradient_to_the_clip_norm_and_changes_the_update(tokenizer_dir, tmp_path):
    """Reference by hand: the optimizer steps with g * c / ||g||_2 when ||g||_2 > c (torch's clip_grad_norm_ adds
    1e-6 to the norm), ||g||_2 taken over all parameters together, so the gradient it steps with has norm c.
    Adam divides by the gradient's running RMS, so a constant factor changes its update only through eps (1e-9,
    large next to near-zero gradients) and through factors that differ between updates: after 2 updates the
    weights still differ (measured: the largest difference is ~40% of the largest update)."""
    run = dict(
        tokenizer=tokenizer_dir,
        max_steps=2,
        dropout=0.0,
        cache_dir=str(tmp_path / "cache"),
        mixed_precision="no",
    )
    free = Trainer(small_run(tmp_path / "free", clip_norm=0.0, **run))
    start = weights(free)
    free_grads, free_logs = gradients_and_logs(free, 2)
    assert "grad_norm" not in free_logs[0]  # clipping off: the loop does not even measure the norm
    norm = torch.linalg.vector_norm(free_grads[0].double()).item()
    clip = norm / 4  # clips the first update by 1/4

    clipped = Trainer(small_run(tmp_path / "clipped", clip_norm=clip, **run))
    torch.testing.assert_close(weights(clipped), start, rtol=0, atol=0)  # the same start
    grads, logs = gradients_and_logs(clipped, 2)

    # the logged norm is the norm before clipping
    assert logs[0]["grad_norm"] == pytest.approx(norm, rel=1e-5)
    torch.testing.assert_close(grads[0], free_grads[0] * (clip / (norm + 1e-6)), rtol=1e-5, atol=1e-9)
    for g, log in zip(grads, logs):
        assert log["grad_norm"] > clip
        assert torch.linalg.vector_norm(g.double()).item() == pytest.approx(clip, rel=1e-5)
    assert logs[1]["grad_norm"] != pytest.approx(norm, rel=1e-3)  # a different clip factor in update 2

    update_free, update_clipped = weights(free) - start, weights(clipped) - start
    assert (update_clipped - update_free).abs().max() > 1e-2 * update_free.abs().max()


# ---- mixed precision ----------------------------------------------------------------------------------------------
# vanilla-transformer train's parsing and a Trainer whose Linear layers report the dtype of what they compute in training
DRIVER = """
import json, sys
import torch
from vanilla_transformer.training import Trainer, TrainConfig
from vanilla_transformer.training.cli import parse_dataclass

trainer = Trainer(parse_dataclass(TrainConfig, sys.argv[1:]))
dtypes = set()

def record(module, args, output):
    if module.training:
        dtypes.add(str(output.dtype).removeprefix("torch."))

for module in trainer.unwrapped.modules():
    if isinstance(module, torch.nn.Linear):
        module.register_forward_hook(record)
result = trainer.run()
print(json.dumps({"linear_outputs": sorted(dtypes), "mixed_precision": result.mixed_precision,
                  "losses": [log["loss"] for log in result.history], "step": result.step}))
"""


def flags(options: dict) -> list[str]:
    """``options`` as vanilla-transformer train's command line."""
    out = []
    for key, value in options.items():
        text = str(value).lower() if isinstance(value, bool) else "none" if value is None else value
        out.append(f"--{key}={text}")
    return out


def run_in_fresh_process(args: list[str], accelerate_precision: str) -> subprocess.CompletedProcess:
    """``python args`` with ``ACCELERATE_MIXED_PRECISION`` set as ``accelerate launch --mixed_precision`` sets
    it, on the CPU."""
    env = {
        **os.environ,
        "ACCELERATE_MIXED_PRECISION": accelerate_precision,
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=240, env=env, cwd=ROOT
    )


@pytest.fixture(scope="module")
def precision_runs(tokenizer_dir, tmp_path_factory) -> dict[str, tuple[dict, object]]:
    """Two 3-update runs from the same initialisation and batches, both with accelerate configured for bf16
    (``ACCELERATE_MIXED_PRECISION=bf16``): "bf16" takes it (and exports), "fp32" overrides it with
    ``--mixed_precision no``. Each: (the driver's report, the output folder)."""
    runs = {}
    for name, command_line in (("bf16", {}), ("fp32", {"mixed_precision": "no"})):
        out = tmp_path_factory.mktemp(name) / "run"
        options = small_run_options(
            tokenizer=tokenizer_dir,
            max_steps=3,
            output_dir=str(out),
            export=name == "bf16",
            length_penalty=1.0,
            test_beams=1,
            **command_line,
        )
        proc = run_in_fresh_process(["-c", DRIVER, *flags(options)], accelerate_precision="bf16")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[name] = json.loads(proc.stdout.strip().splitlines()[-1]), out
    return runs


@pytest.mark.parametrize(
    ("name", "autocast"),
    [("bf16", "bfloat16"), ("fp32", "float32")],
    ids=["accelerate-config-bf16", "command-line-no-wins"],
)
def test_accelerate_mixed_precision_unless_the_command_line_says_otherwise(precision_runs, name, autocast):
    report, out = precision_runs[name]
    assert report["linear_outputs"] == [autocast]  # every Linear layer computed in this dtype while training
    assert report["mixed_precision"] == ("bf16" if autocast == "bfloat16" else "no")
    assert report["step"] == 3 and all(math.isfinite(loss) for loss in report["losses"])
    saved = json.loads((out / "checkpoints" / "recipe.json").read_text())["precision"]
    assert saved["mixed_precision"] == report["mixed_precision"]
    assert saved["source"] == ("accelerate" if name == "bf16" else "command line")


def test_bf16_training_losses_are_close_to_fp32s(precision_runs):
    """Same start, same batches: the loss of each of the 3 updates under bf16 autocast is within 1% of the fp32
    run's (bf16 keeps 8 mantissa bits, a relative rounding of 2**-9 per operation; the softmax and the loss are
    computed in fp32 under autocast), and the updates move both runs the same way."""
    bf16, fp32 = precision_runs["bf16"][0]["losses"], precision_runs["fp32"][0]["losses"]
    assert len(bf16) == len(fp32) == 3
    for a, b in zip(bf16, fp32):
        assert a == pytest.approx(b, rel=1e-2)
    assert bf16 != fp32  # bf16 really computed something else
    assert (bf16[-1] < bf16[0]) == (fp32[-1] < fp32[0])


def test_a_bf16_run_exports_fp32_weights_that_reload_and_translate(precision_runs):
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

    _, out = precision_runs["bf16"]
    model, tokenizer = load_model_and_tokenizer(str(out))
    assert isinstance(model, VanillaTransformerForConditionalGeneration)
    trained = load_file(out / "checkpoints" / "checkpoint-3" / "model.safetensors")
    state = model.state_dict()
    for key, value in trained.items():  # the float32 weights bf16 training updated, exported as they are
        assert value.dtype == torch.float32
        torch.testing.assert_close(state[key], value, rtol=0, atol=0, msg=key)
    batch = tokenizer(["起初神创造天地。"], return_tensors="pt")
    tokens = model.generate(**batch, num_beams=1, max_new_tokens=5)
    assert tokens.shape[0] == 1 and 1 < tokens.shape[1] <= 6
    # and in bf16, as translate.py --dtype does
    bf16, _ = load_model_and_tokenizer(str(out), dtype="bfloat16")
    assert isinstance(bf16, VanillaTransformerForConditionalGeneration)
    assert bf16.generate(**batch, num_beams=1, max_new_tokens=5).shape == tokens.shape


def test_unknown_mixed_precision_is_an_option_error():
    with pytest.raises(ValueError, match=r"--mixed_precision must be one of no, bf16, fp16, got 'fp8'"):
        check_options(TrainConfig(mixed_precision="fp8", max_steps=1))


def test_fp16_on_the_cpu_is_refused_with_the_fix(tmp_path):
    """accelerate runs fp16 on the CPU as float32 (no autocast, no scaler) without a word; the trainer refuses."""
    options = small_run_options(max_steps=1, output_dir=str(tmp_path / "run"))
    proc = run_in_fresh_process(
        ["-m", "vanilla_transformer", "train", *flags(options)], accelerate_precision="fp16"
    )
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("error: fp16 mixed precision") and "use bf16 on the CPU" in error, proc.stderr
