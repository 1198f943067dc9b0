"""Attention and decoding on the device: every sdpa backend against eager attention (fully padded rows finite in
fp32, fp16 and bf16), generate() on the CPU and on the device, and with the dynamic and the (compiled) static
cache."""

from __future__ import annotations

import pytest
import torch

from .checks import attention_backends, generated_tokens, generation_model

pytestmark = pytest.mark.gpu

# largest |sdpa - eager| / largest |eager logit|, both in the dtype (measured on the CPU: 4e-7, 1.3e-3, 7.6e-3)
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
def test_every_sdpa_backend_agrees_with_eager_and_padded_rows_are_finite(device, dtype):
    results = attention_backends(device, dtype)
    ran = {name for name, r in results.items() if r["ran"]}
    # the math kernel always runs; on CUDA the memory-efficient kernel takes an additive mask in every dtype
    required = {"eager", "MATH"} | ({"EFFICIENT_ATTENTION"} if device.type == "cuda" else set())
    assert required <= ran, results
    for name in ran:
        assert results[name]["finite"], (name, results[name])
        assert results[name]["max_relative"] < TOLERANCE[dtype], (name, results[name])


@pytest.mark.parametrize("num_beams", [1, 4])
def test_generate_on_the_cpu_equals_generate_on_the_device(device, num_beams):
    on_cpu = generated_tokens(generation_model(), torch.device("cpu"), num_beams)
    on_device = generated_tokens(generation_model(), device, num_beams)
    assert torch.equal(on_cpu, on_device)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_static_compiled_cache_equals_dynamic_cache(device, num_beams, monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "0")  # generate() sets it when it compiles; restored after
    dynamic = generated_tokens(generation_model(), device, num_beams)
    static = generated_tokens(generation_model(), device, num_beams, static_cache=True)
    assert torch.equal(dynamic, static)
