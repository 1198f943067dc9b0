"""The benchmark runs end to end on a tiny preset and its contenders compute the same thing. No timings are
checked here: benchmarks print ratios, tests never assert speed."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from vanilla_transformer.benchmarks.contenders import build_contenders, generation_config
from vanilla_transformer.benchmarks.speed import Settings, format_rows, run_preset
from vanilla_transformer.benchmarks.workloads import generate_call, source_batch

TINY = Settings(
    rounds=1,
    new_tokens=4,
    src_len=6,
    train_batch=2,
    budget_tokens=24,
    gen_batches=(2,),
    beams=(1, 2),
    no_cache=True,
    budget_training=True,
    peak_memory=True,
)


def test_marian_and_ours_generate_the_same_tokens():
    contenders = build_contenders("tiny", with_ct2=False)
    src, mask = source_batch(contenders.hp["vocab"], 3, 7, seed=1)
    for beams in (1, 3):
        config = generation_config(contenders.pad, beams, 5)
        marian = generate_call(contenders.marian, src, mask, config)()
        ours = generate_call(contenders.ours, src, mask, config)()
        assert ours.shape == (3, 6)  # start token + exactly 5 new tokens
        assert torch.equal(marian, ours)


def test_benchmark_runs_on_tiny_preset():
    contenders = build_contenders("tiny", with_ct2=False)
    rows, summary = run_preset(contenders, TINY)
    names = [row.name for row in rows]
    assert names == ["train tiny (2x6)", "train tiny (4x6)", "greedy b2", "greedy b2 no-cache", "beam 2 b2"]
    assert summary[0].startswith("ours and Marian generate identical tokens in every workload")
    assert any(line.startswith("KV-cache speedup") for line in summary)
    assert all(row.ratio["ours"].median > 0 for row in rows)
    table = format_rows(rows)
    assert len(table) > len(rows)


def test_bench_script_cli(capsys):
    """The script on the tiny preset; the process-wide settings it would change (allocator tuning, CPU GEMM) are
    left alone and the thread count is put back."""
    import vanilla_transformer.modeling.kernels_vanilla_transformer as mv

    bench = importlib.import_module("vanilla_transformer.commands.bench_speed")
    threads, gemm = torch.get_num_threads(), mv.cpu_inference_gemm()
    try:
        code = bench.main(
            [
                "--preset",
                "tiny",
                "--rounds",
                "1",
                "--new_tokens",
                "3",
                "--src_len",
                "5",
                "--train_batch",
                "2",
                "--budget_tokens",
                "20",
                "--gen_batches",
                "2",
                "--beams",
                "2",
                "--no_cache_runs",
                "--no_ct2",
                "--no_engines",
                "--threads",
                "1",
                "--allocator",
                "default",
            ]
        )
    finally:
        torch.set_num_threads(threads)
    assert code == 0 and mv.cpu_inference_gemm() == gemm
    out = capsys.readouterr().out
    assert "1 threads" in out and "allocator default" in out
    assert "ours/Marian" in out and "beam 2 b2" in out
    assert "ours and Marian generate identical tokens in every workload" in out


def test_parity_is_checked_with_the_default_gemm_when_ours_decodes_with_onednn(monkeypatch):
    import vanilla_transformer.modeling.kernels_vanilla_transformer as mv

    if not mv._onednn_linear_available():
        pytest.skip("this PyTorch build has no oneDNN")
    monkeypatch.setattr(mv, "ONEDNN_MIN_WEIGHT", 0)
    monkeypatch.setattr(mv, "ONEDNN_MIN_WEIGHT_ONE_ROW", 0)
    mv.set_cpu_inference_gemm("onednn")
    try:
        contenders = build_contenders("tiny", with_ct2=False)
        rows, summary = run_preset(contenders, TINY)
    finally:
        mv.set_cpu_inference_gemm(None)
        mv.release_cpu_inference_weights()
    assert summary[0] == (
        "ours and Marian generate identical tokens in every workload (ours checked with PyTorch's default GEMM, "
        "as Marian)"
    )
    greedy = next(row for row in rows if row.name == "greedy b2")
    assert "ours with the oneDNN GEMM: output = Marian's for 2/2 sentences" in greedy.notes
    assert any(note.startswith("ours with PyTorch's default GEMM, same rounds: ") for note in greedy.notes)


def test_training_workloads_leave_the_compared_weights_untouched():
    from vanilla_transformer.benchmarks.speed import bench_training

    contenders = build_contenders("tiny", with_ct2=False)
    before = {
        n: {k: v.clone() for k, v in m.state_dict().items()}
        for n, m in (("marian", contenders.marian), ("ours", contenders.ours))
    }
    row = bench_training(contenders, TINY, 2, "tiny")
    assert row.ratio["ours"].median > 0
    for name, model in (("marian", contenders.marian), ("ours", contenders.ours)):
        for key, value in model.state_dict().items():
            assert torch.equal(value, before[name][key]), f"{name} {key} changed"


def test_exported_engines_are_timed_and_agree_with_generate():
    """Ours exported to CTranslate2 fp32 and int8 (and ONNX Runtime once its engine exists) are columns of the
    generation workloads, with their token agreement against our generate()."""
    pytest.importorskip("ctranslate2")
    contenders = build_contenders("tiny", with_ct2=False, with_engines=True, new_tokens=TINY.new_tokens)
    assert {"ct2_fp32", "ct2_int8"} <= set(contenders.engines)
    rows, _ = run_preset(contenders, TINY)
    greedy = next(row for row in rows if row.name == "greedy b2")
    assert {"ct2_fp32", "ct2_int8"} <= set(greedy.ratio)
    assert "ct2_fp32" not in next(row for row in rows if row.name == "greedy b2 no-cache").ratio
    agreement = next(note for note in greedy.notes if note.startswith("sentences equal to ours"))
    assert "ct2_fp32 2/2" in agreement
    beam = next(row for row in rows if row.name == "beam 2 b2")
    assert "ct2_fp32 2/2" in next(note for note in beam.notes if note.startswith("sentences equal to ours"))
    table = "\n".join(format_rows(rows))
    assert "ct2_fp32/Marian" in table and "ct2_int8/Marian" in table
    if importlib.util.find_spec(
        "vanilla_transformer.inference.engine_onnx"
    ) is not None and importlib.util.find_spec("onnxruntime"):
        assert {"onnx", "onnx_int8"} <= set(greedy.ratio), contenders.engine_notes
        assert "onnx 2/2" in agreement and "onnx_int8 " in agreement
    assert "torch_int8" in greedy.ratio and "torch_int8 " in agreement and "torch_int8/Marian" in table
