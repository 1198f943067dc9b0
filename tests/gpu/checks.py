"""The comparisons of the ``gpu`` tests, each parametrised by the device so that the same code runs on a CUDA device
(the tests of this folder, marked ``gpu``) and on the CPU with tiny sizes (the GPU check's dry run, `studies.gpu`).
Each function computes and returns what it compared; the tests hold the tolerances.

- `trainer_history`: updates of the project's `training.loop.Trainer` (accelerate backward, `clip_grad_norm_`
  after unscaling, the optimizer step through accelerate's gradient scaler under fp16) on the `tiny` preset;
  `history_difference` compares two runs step by step (loss, grad_norm).
- `attention_backends`: the sdpa attention under each `torch.nn.attention.sdpa_kernel` backend against eager
  attention in one dtype, with a fully padded source row.
- `generated_tokens`: generate() on a device, with the dynamic cache or with the static cache (greedy search
  compiled by generate's automatic `torch.compile`).
- `save_load_round_trip`: `save_with_remote_code` from a device model, loaded back with `load_model_and_tokenizer`.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import torch
from accelerate.state import AcceleratorState
from transformers import CompileConfig

from vanilla_transformer.benchmarks.workloads import source_batch
from vanilla_transformer.corpus import DEFAULT_DATA
from vanilla_transformer.inference import load_model_and_tokenizer
from vanilla_transformer.modeling import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    save_with_remote_code,
)
from vanilla_transformer.training import TrainConfig
from vanilla_transformer.training.loop import Trainer

# the backends of torch.nn.attention.SDPBackend that compute attention (ERROR and OVERRIDEABLE do not)
SDPA_BACKENDS = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def resolve(device: str | torch.device) -> torch.device:
    """``device`` as a `torch.device`; a CUDA device that is not present is a `ValueError` saying what to do."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device} requested but torch sees no CUDA device; use --device cpu --dry_run."
        )
    return device


# the trainer runs: the tiny preset on the first 300 lines of the shipped corpus, 512-token batches; no validation,
# checkpoint, tracker or export during the compared updates
SHORT_RUN: dict[str, Any] = dict(
    data=str(DEFAULT_DATA), max_lines=300, valid_size=20, test_size=6, preset="tiny", max_tokens=512
)
QUIET_RUN: dict[str, Any] = dict(
    max_minutes=None, eval_every=10**6, bleu_samples=0, report_to="none", export=False
)


def trainer_history(
    device: torch.device,
    mixed_precision: str,
    steps: int,
    output_dir: str | Path,
    clip_norm: float,
    tokenizer: str | None = None,
) -> tuple[Trainer, list[dict]]:
    """``steps`` updates of the `tiny` preset's `Trainer` on the first 300 lines of the shipped corpus (512-token
    batches, dropout 0 so that precisions are comparable, gradients clipped to ``clip_norm``) in ``mixed_precision``
    (accelerate's names: "no", "bf16", "fp16"); returns the trainer and each update's logs (loss, grad_norm, ...;
    an fp16 update whose gradients overflowed has a non-finite grad_norm). ``tokenizer``: a tokenizer folder
    (default: the run trains one). Resets accelerate's process-wide state first (each run has its own precision)."""
    vocabulary: dict[str, Any] = {"vocab_size": 1200}
    cfg = TrainConfig(
        **SHORT_RUN,
        **QUIET_RUN,
        max_steps=steps,
        dropout=0.0,
        clip_norm=clip_norm,
        mixed_precision=mixed_precision,
        cpu=device.type == "cpu",
        num_threads=torch.get_num_threads() if device.type == "cpu" else None,
        tune_cpu_allocator=False,
        tokenizer=tokenizer,
        **({} if tokenizer else vocabulary),
        output_dir=str(output_dir),
    )
    # accelerate keeps one process-wide state, fixed by the first Accelerator: reset it so that every run of the
    # check (one process, several precisions) gets the precision it asks for
    AcceleratorState._reset_state(reset_partial_state=True)
    trainer = Trainer(cfg)
    if trainer.accelerator.device.type != device.type:
        raise ValueError(f"the trainer runs on {trainer.accelerator.device}, not on {device}")
    history = [trainer.train_step(1.0, step) for step in range(steps)]
    return trainer, [logs for logs in history if logs is not None]


def history_difference(reference: list[dict], candidate: list[dict], key: str) -> dict:
    """Step by step ``key`` of two runs: the largest relative difference over the updates before the candidate's
    first non-finite grad_norm (an fp16 update skipped by the scaler; the runs' weights differ after it), and how
    many updates that compares."""
    compared = []
    for ref, got in zip(reference, candidate):
        if not math.isfinite(got.get("grad_norm", 0.0)):
            break
        compared.append(abs(got[key] - ref[key]) / max(abs(ref[key]), 1e-12))
    return {"compared": len(compared), "max_relative": max(compared, default=math.nan)}


STACK = {"layers": 2, "attention_heads": 4, "ffn_dim": 128}  # each stack of `attention_model`


def attention_model(seed: int = 0) -> VanillaTransformerForConditionalGeneration:
    """A small random model whose head width (16) every fused sdpa kernel accepts, non-trivial LayerNorms."""
    stacks: dict[str, Any] = {
        f"{side}_{name}": value for side in ("encoder", "decoder") for name, value in STACK.items()
    }
    config = VanillaTransformerConfig(
        vocab_size=97, d_model=64, max_position_embeddings=64, dropout=0.0, **stacks
    )
    torch.manual_seed(seed)
    model = VanillaTransformerForConditionalGeneration(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.1)
                module.bias.normal_(0.0, 0.1)
    return model


def padded_batch(vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Four sources (full, half, one token, fully padded) and targets (full, padded, full, fully padded) of 12
    tokens, pad id 0."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (4, 12), generator=g)
    tgt = torch.randint(4, vocab, (4, 12), generator=g)
    src_mask = (torch.arange(12)[None] < torch.tensor([12, 6, 1, 0])[:, None]).long()
    tgt_mask = (torch.arange(12)[None] < torch.tensor([12, 5, 12, 0])[:, None]).long()
    return {
        "input_ids": src.masked_fill(src_mask == 0, 0),
        "attention_mask": src_mask,
        "decoder_input_ids": tgt.masked_fill(tgt_mask == 0, 0),
        "decoder_attention_mask": tgt_mask,
    }


def attention_backends(device: torch.device, dtype: torch.dtype, seed: int = 0) -> dict[str, dict]:
    """The logits of `attention_model` with sdpa attention under each backend of `SDPA_BACKENDS` alone
    (`torch.nn.attention.sdpa_kernel`) against eager attention, both in ``dtype`` on ``device``, on
    `padded_batch`: per backend ``ran`` (False: the backend refused these inputs on this device, ``error`` says
    why), ``finite`` (every logit, fully padded rows included) and ``max_relative`` (largest |difference| at the
    real target positions / largest |eager logit| there)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # transformers wraps PreTrainedModel.to with functools.wraps, so checkers see an unbound method
    sdpa = attention_model(seed).to(device=device, dtype=dtype)  # pyright: ignore[reportCallIssue]
    sdpa.set_attn_implementation("sdpa")
    eager = copy.deepcopy(sdpa)
    eager.set_attn_implementation("eager")
    batch = {k: v.to(device) for k, v in padded_batch(sdpa.config.vocab_size, seed).items()}
    real = batch["decoder_attention_mask"].bool()
    with torch.no_grad():
        reference = eager(**batch).logits.float()
    scale = reference[real].abs().max().item()
    results = {"eager": {"ran": True, "finite": bool(torch.isfinite(reference).all()), "max_relative": 0.0}}
    for name in SDPA_BACKENDS:
        try:
            with torch.no_grad(), sdpa_kernel([getattr(SDPBackend, name)]):
                logits = sdpa(**batch).logits.float()
        except RuntimeError as error:  # "No available kernel": the backend does not take these inputs here
            results[name] = {"ran": False, "error": str(error).splitlines()[0][:200]}
            continue
        results[name] = {
            "ran": True,
            "finite": bool(torch.isfinite(logits).all()),
            "max_relative": (logits[real] - reference[real]).abs().max().item() / scale,
        }
    return results


def generation_model(seed: int = 0) -> VanillaTransformerForConditionalGeneration:
    """`attention_model` with sdpa attention, OPUS-MT's special ids (pad = decoder start = 96, eos 0) and a
    non-zero output bias: a model whose generate() is comparable across devices and caches."""
    model = attention_model(seed)
    model.set_attn_implementation("sdpa")
    for name, value in (("pad_token_id", 96), ("decoder_start_token_id", 96), ("eos_token_id", 0)):
        setattr(model.config, name, value)
        setattr(model.generation_config, name, value)
    model.generation_config.bos_token_id = None
    with torch.no_grad():
        model.get_parameter("final_logits_bias").normal_(0, 0.5)
    return model


def generated_tokens(
    model: VanillaTransformerForConditionalGeneration,
    device: torch.device,
    num_beams: int,
    static_cache: bool = False,
    batch: int = 3,
    new_tokens: int = 10,
) -> torch.Tensor:
    """generate()'s tokens (on the CPU) for a fixed random batch of ``batch`` 9-token sources, ``num_beams`` beams,
    ``new_tokens`` new tokens at most, on ``device`` (``model`` is moved there). ``static_cache``: the static
    cache, and for greedy search generate's automatic `torch.compile` of the decoding step (inductor on CUDA;
    dynamo with the ``eager`` backend on the CPU, where generate would not compile by itself), checked to have
    happened (transformers' beam search does not compile). Default: the dynamic cache, not compiled."""
    # transformers wraps PreTrainedModel.to with functools.wraps, so checkers see an unbound method
    model = model.to(device).eval()  # pyright: ignore[reportArgumentType]
    src, mask = source_batch(model.config.vocab_size, batch, 9, seed=11)
    options: dict[str, Any] = dict(
        num_beams=num_beams, do_sample=False, max_new_tokens=new_tokens, length_penalty=1.0
    )
    if static_cache:
        # mode=None is torch.compile's own default, which CompileConfig types as str
        eager = CompileConfig(backend="eager", mode=None)  # pyright: ignore[reportArgumentType]
        compile_config = CompileConfig() if device.type == "cuda" else eager
        # transformers' private switch that lets generate() compile the decoding step off CUDA
        compile_config._compile_all_devices = device.type != "cuda"  # pyright: ignore[reportAttributeAccessIssue]
        options.update(cache_implementation="static", compile_config=compile_config)
    with torch.no_grad():
        tokens = model.generate(input_ids=src.to(device), attention_mask=mask.to(device), **options)
    if static_cache and num_beams == 1 and not hasattr(model, "_compiled_call"):
        raise RuntimeError("generate() did not compile the decoding step with the static cache")
    return tokens.cpu()


def save_load_round_trip(
    model: VanillaTransformerForConditionalGeneration, tokenizer, device: torch.device, folder: str | Path
) -> dict:
    """``model`` (on ``device``) saved with `save_with_remote_code` and loaded back onto ``device`` with
    `load_model_and_tokenizer`: ``weights_equal`` (every tensor of the state dict bit for bit), ``tokens_equal``
    (greedy generate() of both models), ``loaded_device`` (where the loaded weights are)."""
    save_with_remote_code(model, folder, tokenizer)
    loaded, _ = load_model_and_tokenizer(str(folder), device=device)
    assert isinstance(loaded, VanillaTransformerForConditionalGeneration)
    mine, theirs = model.state_dict(), loaded.state_dict()
    same = mine.keys() == theirs.keys() and all(
        torch.equal(mine[k], theirs[k].to(mine[k].device)) for k in mine
    )
    src = tokenizer(
        ["In the beginning", "God created the heaven and the earth."], return_tensors="pt", padding=True
    )
    options = dict(num_beams=1, do_sample=False, max_new_tokens=8)
    with torch.no_grad():
        ours = model.generate(**{k: v.to(device) for k, v in src.items()}, **options)
        back = loaded.generate(**{k: v.to(device) for k, v in src.items()}, **options)
    return {
        "weights_equal": same,
        "tokens_equal": torch.equal(ours.cpu(), back.cpu()),
        "loaded_device": str(next(loaded.parameters()).device),
    }
