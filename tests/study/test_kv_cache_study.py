"""The KV-cache study (`python -m studies.kv_cache`): its FLOP counts against a step-by-step
count of the work of every decoder call and against PyTorch's FLOP counter on a real `generate()`, its ratios
against their closed forms, its memory formula against the cache tensors of a real `generate()`, and the quick
study end to end. No timing is checked: tests never assert speed."""

from __future__ import annotations

import csv
import importlib.util
from fractions import Fraction

import pytest
import torch
from conftest import tiny_model
from torch.utils.flop_counter import FlopCounterMode

from studies import kv_cache
from studies.kv_cache import (
    COMPONENTS,
    SEVEN_B,
    Sizes,
    cache_tensor_bytes,
    closed_form_ratio,
    decoding_flops,
    greedy_config,
    kv_cache_bytes,
    memory_rows,
    source_ids,
)
from vanilla_transformer.modeling import cpu_inference_gemm, set_cpu_inference_gemm

SIZES = [
    Sizes(d_model=64, layers=2, ffn=128, vocab=97, encoder_layers=2, encoder_ffn=128, source_length=8),
    Sizes(d_model=256, layers=3, ffn=1024, vocab=8000, encoder_layers=3, encoder_ffn=1024, source_length=32),
    Sizes(d_model=48, layers=5, ffn=80, vocab=31, encoder_layers=1, encoder_ffn=16, source_length=17),
]


def counted_step_by_step(sizes: Sizes, new_tokens: int, use_cache: bool) -> dict[str, int]:
    """The work of each decoder call counted one by one: call t (1-based) runs `queries` positions of the t
    target positions; each query position pays its linear layers; each (query, key) pair a causal query sees
    (counted by enumerating them) pays QK^T and AV; the encoder K/V projections run in every uncached call and in
    the first cached one; the encoder runs once."""
    d, f, s, v = sizes.d_model, sizes.ffn, sizes.source_length, sizes.vocab
    totals: dict[str, int] = dict.fromkeys(COMPONENTS, 0)
    for t in range(1, new_tokens + 1):
        first_query = t - 1 if use_cache else 0  # positions 0 .. t-1 exist; the cache holds 0 .. t-2
        queries = range(first_query, t)
        pairs = sum(1 for q in queries for k in range(t) if k <= q)
        for _ in range(sizes.layers):
            linear = 0
            # self q,k,v,o; cross q,o; fc1, fc2
            for d_in, d_out in [(d, d)] * 4 + [(d, d)] * 2 + [(d, f), (f, d)]:
                linear += 2 * d_in * d_out
            totals["projections_ffn"] += len(queries) * linear
            totals["self_attention"] += pairs * (2 * d + 2 * d)  # q.k and weight * v
            encoder_kv = 2 * (2 * s * d * d) if (not use_cache or t == 1) else 0
            totals["cross_attention"] += encoder_kv + len(queries) * s * (2 * d + 2 * d)
        totals["output_layer"] += len(queries) * 2 * d * v
    e_ffn = sizes.encoder_ffn
    totals["encoder"] = sizes.encoder_layers * (s * (4 * 2 * d * d + 2 * 2 * d * e_ffn) + s * s * 4 * d)
    return totals


@pytest.mark.parametrize("sizes", SIZES)
def test_flops_equal_the_step_by_step_count_and_the_ratios_their_closed_forms(sizes):
    for t in [1, 2, 3, 5, 8, 16, 31, 64]:
        uncached, cached = decoding_flops(sizes, t, False), decoding_flops(sizes, t, True)
        assert uncached == counted_step_by_step(sizes, t, False)
        assert cached == counted_step_by_step(sizes, t, True)
        for name in COMPONENTS:
            assert Fraction(uncached[name], cached[name]) == closed_form_ratio(name, t, sizes.d_model), (
                t,
                name,
            )
        # the explicit formulas of the closed forms, written out here
        assert closed_form_ratio("projections_ffn", t, sizes.d_model) == Fraction(t + 1, 2)
        assert closed_form_ratio("self_attention", t, sizes.d_model) == Fraction(t + 2, 3)
        assert closed_form_ratio("output_layer", t, sizes.d_model) == Fraction(t + 1, 2)
        d = sizes.d_model
        assert closed_form_ratio("cross_attention", t, d) == Fraction(t * (2 * d + t + 1), 2 * (d + t))
        assert closed_form_ratio("encoder", t, d) == 1


def test_ratios_approach_the_notes_approximations():
    """(T+1)/2 and (T+2)/3 are the notes' T/2 and T/3 plus constants: relative gaps 1/T and 2/T."""
    for t in (16, 256, 4096):
        assert closed_form_ratio("projections_ffn", t, 256) - Fraction(t, 2) == Fraction(1, 2)
        assert closed_form_ratio("self_attention", t, 256) - Fraction(t, 3) == Fraction(2, 3)
    # T >> d: ~T/2
    assert abs(float(closed_form_ratio("cross_attention", 10**6, 64)) / (10**6 / 2) - 1) < 1e-3
    assert abs(float(closed_form_ratio("cross_attention", 4, 10**6)) / 4 - 1) < 1e-3  # T << d: ~T


@pytest.mark.parametrize("use_cache", [True, False])
def test_flops_equal_pytorchs_flop_counter_on_a_real_generate(use_cache):
    """Eager attention computes every score of the t x t matrix: `causal=False`. The FLOP counter sees
    matmuls through PyTorch's default GEMM (not the oneDNN packed-weight path of CPU decoding)."""
    model = tiny_model(attn="eager")
    source_length, new_tokens = 5, 7
    src, mask = source_ids(model, 1, source_length)
    before = cpu_inference_gemm()
    set_cpu_inference_gemm("default")
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = model.generate(
                input_ids=src,
                attention_mask=mask,
                generation_config=greedy_config(model, new_tokens, use_cache),
            )
    finally:
        set_cpu_inference_gemm(before)
    assert out.shape == (1, new_tokens + 1)
    expected = decoding_flops(
        Sizes.from_config(model.config, source_length), new_tokens, use_cache, causal=False
    )
    assert counter.get_total_flops() == sum(expected.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_memory_formula_equals_the_cache_tensors_of_generate(dtype):
    model = tiny_model().to(dtype)  # 3 decoder layers of 2 heads, head dim 16; 2 encoder layers of 4 heads
    config = model.config
    batch, source_length, new_tokens = 3, 6, 9
    src, mask = source_ids(model, batch, source_length)
    with torch.no_grad():
        out = model.generate(
            input_ids=src,
            attention_mask=mask,
            return_dict_in_generate=True,
            generation_config=greedy_config(model, new_tokens, True),
        )
    cache = out.past_key_values
    assert cache.get_seq_length() == new_tokens  # the start token and all generated tokens but the last
    held = cache_tensor_bytes(cache)
    shape = (
        config.decoder_layers,
        config.decoder_attention_heads,
        config.d_model // config.decoder_attention_heads,
    )
    size = torch.finfo(dtype).bits // 8
    assert held["self_attention"] == kv_cache_bytes(*shape, new_tokens, size, batch)
    assert held["cross_attention"] == kv_cache_bytes(*shape, source_length, size, batch)


def test_memory_rows_use_the_formula_for_presets_and_the_7b_config():
    rows = {row.name.split(" ")[0]: row for row in memory_rows([128, 4096], source_length=32)}
    seven_b = rows["7B-class"]
    # 2 GiB at T = 4096, fp16
    assert seven_b.self_attention[4096] == 2 * 32 * 32 * 4096 * 128 * 2 == 2 * 2**30
    assert seven_b.per_position == 512 * 2**10 and seven_b.cross_attention is None
    assert (seven_b.layers, seven_b.heads, seven_b.head_dim, seven_b.bytes_per_value) == (
        SEVEN_B["layers"],
        SEVEN_B["heads"],
        SEVEN_B["head_dim"],
        SEVEN_B["bytes_per_value"],
    )
    small = rows["small"]  # 3 decoder layers, 4 heads of 64, float32
    assert (
        small.self_attention[128] == 2 * 3 * 4 * 128 * 64 * 4
        and small.cross_attention == 2 * 3 * 4 * 32 * 64 * 4
    )
    # the distillation student: small's width with two decoder layers, two thirds of small's cache
    assert rows["student"].self_attention[128] * 3 == small.self_attention[128] * 2
    assert set(rows) == {"tiny", "small", "student", "base", "big", "7B-class"}


def test_quick_study_runs_end_to_end(tmp_path, capsys):
    plot, table = tmp_path / "img" / "kv_cache.png", tmp_path / "kv_cache.csv"
    code = kv_cache.main(["--quick", "--threads", "1", "--plot", str(plot), "--csv", str(table)])
    out = capsys.readouterr().out
    assert code == 0
    assert "projections + FFN" in out and "(T+2)/3" in out and "7B-class" in out
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Measured")) + 2  # after the header
    # T, FLOP ratio, wall and CPU speed-ups (median and range each), CPU ms/token and GFLOP/s with and without
    # cache, same tokens
    speedups = [line.split() for line in lines[start : start + 2]]
    assert [line[0] for line in speedups] == ["8", "16"] and all(line[-1] == "yes" for line in speedups)
    assert all(len(line) == 11 and float(line[2]) > 0 and float(line[4]) > 0 for line in speedups)
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert len(rows) == 2 * (len(COMPONENTS) + 1)
    assert {r["ratio"] for r in rows if r["component"] == "projections_ffn"} == {"4.5000", "8.5000"}
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_study_refuses_lengths_beyond_the_position_table(capsys):
    code = kv_cache.main(["--quick", "--threads", "1", "--lengths", "8", "600"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "max_position_embeddings=512" in err
