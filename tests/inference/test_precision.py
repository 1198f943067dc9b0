"""The run's precision and bf16 inference: which precision a training run picks (the command line, then accelerate's
configuration, then a short timing on the machine, simulated here), bf16 loading and decoding against fp32, and the
oneDNN bf16 linear against `torch.nn.functional.linear`.

The automatic choice is tested with the timing replaced (`inference.precision`'s `cpu_bf16_flags` and
`training_speeds` / `decoding_speeds`), so that every branch runs on any machine; bf16 autocast training itself
goes to a fresh process, because accelerate's state is one object per process (see test_training_numerics.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
import vanilla_transformer.inference.precision as precision
from conftest import ROOT, SMALL_RUN_LINES, small_run, small_run_options, tiny_model
from vanilla_transformer.inference.precision import BF16_MIN_SPEEDUP, Speeds
from vanilla_transformer.training import TrainConfig
from vanilla_transformer.training.hardware import PRECISION_ENV, choose_mixed_precision

FASTER = Speeds(fp32_seconds=1.0, bf16_seconds=0.25)  # bf16 4x as fast
SLOWER = Speeds(fp32_seconds=1.0, bf16_seconds=1.25)
CPU = torch.device("cpu")


def simulate(monkeypatch, flags: list[str], speeds: Speeds | None) -> list[str]:
    """Make `inference.precision` see a CPU with ``flags`` whose bf16 timings give ``speeds`` (None: timing is an
    error); returns the list of probes called."""
    called: list[str] = []

    def probe(name: str):
        def run(*args, **kwargs) -> Speeds:
            called.append(name)
            if speeds is None:
                raise AssertionError(f"{name} must not run here")
            return speeds

        return run

    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: list(flags))
    monkeypatch.setattr(precision, "training_speeds", probe("training_speeds"))
    monkeypatch.setattr(precision, "decoding_speeds", probe("decoding_speeds"))
    return called


# ---- the training run's choice --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "env", "flags", "speeds", "expected", "source"),
    [
        (None, None, ["avx512_bf16"], FASTER, "bf16", "automatic"),
        (None, None, ["amx_bf16", "avx512_bf16"], SLOWER, "no", "automatic"),
        (None, None, [], None, "no", "automatic"),  # no bf16 feature: no timing at all
        ("no", None, ["amx_bf16"], FASTER, "no", "command line"),
        ("bf16", None, [], None, "bf16", "command line"),
        (None, "no", ["amx_bf16"], FASTER, "no", "accelerate"),
        (None, "bf16", ["avx512_bf16"], SLOWER, "bf16", "accelerate"),
        ("no", "bf16", ["avx512_bf16"], FASTER, "no", "command line"),
    ],
    ids=[
        "faster-bf16",
        "slower-fp32",
        "no-flag-fp32",
        "flag-no-wins",
        "flag-bf16-wins",
        "accelerate-no-wins",
        "accelerate-bf16-wins",
        "flag-beats-accelerate",
    ],
)
def test_choice_order_command_line_then_accelerate_then_measured(
    monkeypatch, flag, env, flags, speeds, expected, source
):
    called = simulate(monkeypatch, flags, speeds)
    if env is None:
        monkeypatch.delenv(PRECISION_ENV, raising=False)
    else:
        monkeypatch.setenv(PRECISION_ENV, env)
    choice = choose_mixed_precision(TrainConfig(mixed_precision=flag, max_steps=1), CPU)
    assert (choice.mixed_precision, choice.source) == (expected, source)
    measured = source == "automatic" and bool(flags)
    assert called == (["training_speeds"] if measured else [])
    if measured:  # the reason says what was measured and the rule
        assert (
            f"{speeds.bf16_speedup:.2f}x as fast as fp32" in choice.reason
            and str(BF16_MIN_SPEEDUP) in choice.reason
        )
        assert ", ".join(flags) in choice.reason
    if source == "automatic" and not flags:
        assert "neither AMX-BF16 nor AVX512-BF16" in choice.reason


def test_the_speedup_threshold_is_inclusive(monkeypatch):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    cfg = TrainConfig(max_steps=1)
    simulate(monkeypatch, ["avx512_bf16"], Speeds(BF16_MIN_SPEEDUP, 1.0))
    assert choose_mixed_precision(cfg, CPU).mixed_precision == "bf16"
    simulate(monkeypatch, ["avx512_bf16"], Speeds(BF16_MIN_SPEEDUP * 0.99, 1.0))
    assert choose_mixed_precision(cfg, CPU).mixed_precision == "no"


def test_a_resumed_run_keeps_the_precision_it_started_with(monkeypatch):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    simulate(monkeypatch, ["avx512_bf16"], None)  # no new timing
    saved = {"mixed_precision": "bf16", "source": "automatic", "reason": "bf16 ran 3.00x as fast"}
    choice = choose_mixed_precision(TrainConfig(max_steps=1), CPU, saved)
    assert (choice.mixed_precision, choice.source) == ("bf16", "automatic")
    assert "kept from the run's start: bf16 ran 3.00x as fast" in choice.reason
    monkeypatch.setenv(PRECISION_ENV, "no")  # an explicit setting still wins on resume
    assert choose_mixed_precision(TrainConfig(max_steps=1), CPU, saved).mixed_precision == "no"


@pytest.mark.parametrize(("bf16", "expected"), [(True, "bf16"), (False, "fp16")])
def test_cuda_uses_bf16_where_supported_else_fp16(monkeypatch, bf16, expected):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    simulate(monkeypatch, [], None)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Simulated GPU")
    choice = choose_mixed_precision(TrainConfig(max_steps=1), torch.device("cuda", 0))
    assert choice.mixed_precision == expected and "Simulated GPU" in choice.reason


def test_the_training_probe_times_both_precisions_on_the_model_sizes():
    speeds = precision.training_speeds(64, 128, 97, tokens=64)
    assert 0 < speeds.fp32_seconds < 10 and 0 < speeds.bf16_seconds < 10
    assert math.isfinite(speeds.bf16_speedup)


def test_an_automatic_fp32_choice_is_saved_in_the_recipe(tokenizer_dir, tmp_path, monkeypatch):
    """In this process (fp32 needs no fresh accelerate state): the simulated timing says bf16 is slower."""
    from vanilla_transformer.training import Trainer

    monkeypatch.delenv(PRECISION_ENV, raising=False)
    simulate(monkeypatch, ["avx512_bf16"], SLOWER)
    trainer = Trainer(small_run(tmp_path / "run", tokenizer=tokenizer_dir, max_steps=1))
    assert trainer.accelerator.mixed_precision == "no"
    recipe = json.loads((tmp_path / "run" / "checkpoints" / "recipe.json").read_text())
    assert recipe["precision"]["mixed_precision"] == "no" and recipe["precision"]["source"] == "automatic"
    assert "0.80x as fast as fp32" in recipe["precision"]["reason"]


# a run whose timing is simulated (bf16 4x as fast) and whose Linear layers report the dtype they compute in
DRIVER = """
import json, sys
import torch
import vanilla_transformer.inference.precision as precision
from vanilla_transformer.training import Trainer, TrainConfig
from vanilla_transformer.training.cli import parse_dataclass

precision.cpu_bf16_flags = lambda: ["avx512_bf16"]
precision.training_speeds = lambda *a, **k: precision.Speeds(1.0, 0.25)
trainer = Trainer(parse_dataclass(TrainConfig, sys.argv[1:]))
dtypes = set()
for module in trainer.unwrapped.modules():
    if isinstance(module, torch.nn.Linear):
        module.register_forward_hook(lambda m, a, out: dtypes.add(str(out.dtype)) if m.training else None)
messages = []
trainer.emit = lambda name, info: messages.append(info.get("message")) if name == "info" else None
result = trainer.run()
print(json.dumps({"linear_outputs": sorted(dtypes), "precision": result.precision,
                  "losses": [log["loss"] for log in result.history]}))
"""


def test_automatic_bf16_trains_under_autocast_and_says_so(tokenizer_dir, tmp_path):
    out = tmp_path / "run"
    options = small_run_options(
        tokenizer=tokenizer_dir,
        max_steps=2,
        output_dir=str(out),
        export=True,
        length_penalty=1.0,
        test_beams=1,
    )
    env = {k: v for k, v in os.environ.items() if k != PRECISION_ENV}
    env.update(
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    args = [
        f"--{k}={'none' if v is None else str(v).lower() if isinstance(v, bool) else v}"
        for k, v in options.items()
    ]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=240, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["linear_outputs"] == ["torch.bfloat16"]
    assert report["precision"]["mixed_precision"] == "bf16" and report["precision"]["source"] == "automatic"
    assert all(math.isfinite(loss) for loss in report["losses"])
    recipe = json.loads((out / "checkpoints" / "recipe.json").read_text())
    assert recipe["precision"] == report["precision"]
    assert "4.00x as fast as fp32" in recipe["precision"]["reason"]
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "with bf16 mixed precision (chosen automatically: CPU with avx512_bf16: bf16 ran" in card


# ---- inference in bf16 ------------------------------------------------------------------------------------------
def test_from_pretrained_in_bfloat16_matches_the_fp32_model(tmp_path):
    """Every floating tensor in bf16, the rebuilt sinusoidal table included, and logits within bf16 rounding of
    the fp32 model's (tolerance: 5e-2 absolute on logits of magnitude ~1, about 8 bf16 ulps)."""
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

    model = tiny_model()
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    assert {t.dtype for t in [*loaded.parameters(), *loaded.buffers()] if t.is_floating_point()} == {
        torch.bfloat16
    }
    table = loaded.model.encoder.embed_positions.table
    torch.testing.assert_close(
        table, model.model.encoder.embed_positions.table.to(torch.bfloat16), rtol=0, atol=0
    )
    ids = torch.randint(4, 97, (3, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :5]).logits
        got = loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :5]).logits
    assert got.dtype == torch.bfloat16 and torch.isfinite(got).all()
    torch.testing.assert_close(got.float(), want, rtol=0, atol=5e-2)


def test_bf16_cached_decoding_keeps_fp32_caches_and_matches_full_recomputation():
    """A bf16 model on the CPU decodes one token at a time with fp32 attention and fp32 K/V caches (self and
    cross); its logits equal a full bf16 recomputation of the same prefix (no cache, bf16 attention) to bf16
    rounding (atol 5e-2 on logits of magnitude ~1)."""
    from transformers import EncoderDecoderCache

    model = tiny_model().to(torch.bfloat16)
    ids = torch.randint(4, 97, (2, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    decoder = torch.randint(4, 97, (2, 5), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        encoder = model.get_encoder()(input_ids=ids, attention_mask=mask)
        full = model(encoder_outputs=encoder, attention_mask=mask, decoder_input_ids=decoder).logits
        cache = None
        steps = []
        for t in range(decoder.shape[1]):
            out = model(
                encoder_outputs=encoder,
                attention_mask=mask,
                decoder_input_ids=decoder[:, t : t + 1],
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            steps.append(out.logits)
    assert isinstance(cache, EncoderDecoderCache)
    layers = [*cache.self_attention_cache.layers, *cache.cross_attention_cache.layers]
    assert {t.dtype for layer in layers for t in (layer.keys, layer.values)} == {torch.float32}
    incremental = torch.cat(steps, dim=1)
    assert incremental.dtype == torch.bfloat16
    torch.testing.assert_close(incremental.float(), full.float(), rtol=0, atol=5e-2)


def test_bf16_autocast_gradients_are_close_to_fp32s():
    """Training under bf16 autocast (attention in fp32 on the CPU, the rest in bf16): the loss within 1% of fp32's,
    the gradient within 5% in norm and pointing the same way (cosine > 0.99)."""
    torch.manual_seed(0)
    model = tiny_model()
    model.train()
    ids = torch.randint(4, 97, (4, 9), generator=torch.Generator().manual_seed(3))
    labels = torch.randint(4, 97, (4, 6), generator=torch.Generator().manual_seed(4))

    def gradient(autocast: bool) -> tuple[float, torch.Tensor]:
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        return loss.item(), torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])

    loss32, grad32 = gradient(False)
    loss16, grad16 = gradient(True)
    assert loss16 == pytest.approx(loss32, rel=1e-2)
    assert torch.isfinite(grad16).all()
    assert grad16.norm().item() == pytest.approx(grad32.norm().item(), rel=5e-2)
    assert torch.nn.functional.cosine_similarity(grad16, grad32, dim=0).item() > 0.99


def test_the_benchmark_has_bf16_columns_and_each_systems_best_precision():
    from vanilla_transformer.benchmarks.contenders import build_contenders
    from vanilla_transformer.benchmarks.speed import Settings, format_rows, run_preset

    settings = Settings(
        rounds=1,
        new_tokens=3,
        src_len=5,
        train_batch=2,
        gen_batches=(2,),
        beams=(1,),
        no_cache=False,
        budget_training=False,
        peak_memory=False,
    )
    rows, summary = run_preset(build_contenders("tiny", with_ct2=False), settings)
    assert [row.name for row in rows] == ["train tiny (2x5)", "greedy b2"]
    for row in rows:
        assert {"marian", "ours", "marian_bf16", "ours_bf16"} <= set(row.throughput)
    greedy = rows[1]
    assert "bf16 output = the same system's fp32 output for: marian 2/2, ours 2/2" in greedy.notes
    table = "\n".join(format_rows(rows))
    assert all(column in table for column in ("Marian bf16/fp32", "ours bf16/fp32", "ours/Marian bf16"))
    assert any(line.startswith("best precision of ours on this machine") for line in summary)
    assert any(line.startswith("best precision of Marian on this machine") for line in summary)
    fp32_only = Settings(**{**settings.__dict__, "bf16": False})
    rows, summary = run_preset(build_contenders("tiny", with_ct2=False, with_bf16=False), fp32_only)
    assert all("ours_bf16" not in row.throughput for row in rows)
    assert "ours bf16/fp32" not in "\n".join(format_rows(rows))


@pytest.mark.parametrize(("rows", "shape"), [(1, (512, 256)), (16, (1024, 64)), (7, (64, 300))])
def test_onednn_linear_in_bf16_equals_torch_linear(monkeypatch, rows, shape):
    """The packed oneDNN path of a bf16 decoding step gives F.linear's bf16 result (oneDNN computes both), to one
    bf16 rounding step (rtol 2**-7)."""
    import vanilla_transformer.modeling.kernels_vanilla_transformer as kernels

    if not kernels._onednn_bf16_available():
        pytest.skip("this PyTorch build or CPU has no oneDNN bf16 kernels")
    monkeypatch.setattr(kernels, "_cpu_gemm", {"mode": "onednn", "onednn": True})
    monkeypatch.setattr(kernels, "_packed_weights", type(kernels._packed_weights)())
    g = torch.Generator().manual_seed(rows)
    weight = torch.randn(*shape, generator=g).to(torch.bfloat16)
    bias = torch.randn(shape[0], generator=g).to(torch.bfloat16)
    x = torch.randn(rows, 1, shape[1], generator=g).to(torch.bfloat16)
    with torch.no_grad():
        got = kernels.linear(x, weight, bias)
        assert weight in kernels._packed_weights  # the packed path ran
        want = torch.nn.functional.linear(x, weight, bias)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=2**-7, atol=2**-7)


def test_bf16_decoding_step_without_onednn_bf16_kernels_uses_torch_linear(monkeypatch):
    """On a CPU without oneDNN's bf16 kernels (AVX2 only), packing a bf16 weight raises: a bf16 decoding step
    then runs F.linear, with the oneDNN GEMM chosen for fp32."""
    import vanilla_transformer.modeling.kernels_vanilla_transformer as kernels

    monkeypatch.setattr(kernels, "_cpu_gemm", {"mode": "onednn", "onednn": True})
    monkeypatch.setattr(kernels, "_packed_weights", type(kernels._packed_weights)())
    monkeypatch.setattr(kernels, "_onednn_bf16_available", lambda: False)
    g = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(512, 256, generator=g).bfloat16(), torch.randn(512, generator=g).bfloat16()
    x = torch.randn(2, 1, 256, generator=g).bfloat16()
    with torch.no_grad():
        got = kernels.linear(x, weight, bias)
        assert torch.equal(got, torch.nn.functional.linear(x, weight, bias))
    assert weight not in kernels._packed_weights


@pytest.mark.parametrize(("speeds", "expected"), [(FASTER, torch.bfloat16), (SLOWER, torch.float32)])
def test_auto_dtype_loads_in_bf16_only_where_measured_faster(export, monkeypatch, speeds, expected):
    from vanilla_transformer.inference import load_model_and_tokenizer

    called = simulate(monkeypatch, ["avx512_bf16"], speeds)
    model, _ = load_model_and_tokenizer(str(export), dtype="auto", batch_size=8, num_beams=2)
    assert next(model.parameters()).dtype == expected and called == ["decoding_speeds"]


def test_auto_dtype_measures_the_decoding_rows_in_use(export, monkeypatch):
    """auto times batch_size x num_beams rows, the generation config's beams when num_beams is not given."""
    from vanilla_transformer.inference import load_model_and_tokenizer

    seen = []
    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: ["amx_bf16"])
    monkeypatch.setattr(precision, "decoding_speeds", lambda model, rows: seen.append(rows) or SLOWER)
    load_model_and_tokenizer(str(export), dtype="auto", batch_size=8, num_beams=3)
    model, _ = load_model_and_tokenizer(str(export), dtype="auto", batch_size=5)
    assert seen == [24, 5 * model.generation_config.num_beams]


def test_the_decoding_probe_times_both_dtypes(loaded):
    model, _ = loaded
    speeds = precision.decoding_speeds(model, rows=2, new_tokens=2, source_length=4)
    assert speeds.fp32_seconds > 0 and speeds.bf16_seconds > 0
    assert next(model.parameters()).dtype == torch.float32  # the model itself is not converted


def test_an_unknown_dtype_is_refused_with_the_choices(export):
    from vanilla_transformer.inference import load_model_and_tokenizer

    with pytest.raises(
        ValueError, match=r"dtype='float16' is invalid: expected one of auto, float32, bfloat16"
    ):
        load_model_and_tokenizer(str(export), dtype="float16")


# ---- bf16 translations of a trained model agree with fp32 --------------------------------------------------------
PAIRS = 64  # the shortest pairs of the first SMALL_RUN_LINES lines, learnt by heart in the fixture
STEPS = 100


@pytest.fixture(scope="module")
def trained(tmp_path_factory, bpe_tokenizer_dir):
    """A small model trained here (full-batch Adam, lr 3e-3) on the 64 shortest pairs until it translates them
    (training loss ~0.02), exported; and those pairs."""
    from transformers import AutoTokenizer
    from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration, save_with_remote_code
    from vanilla_transformer.training.presets import build_config

    tokenizer = AutoTokenizer.from_pretrained(bpe_tokenizer_dir(1200))
    ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=SMALL_RUN_LINES)
    pairs = sorted(zip(ds["source"], ds["target"]), key=lambda p: len(p[0]) + len(p[1]))[:PAIRS]
    sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    torch.manual_seed(0)
    config = build_config(
        "tiny", len(tokenizer), dropout=0.0, max_position_embeddings=128
    )  # 2+2 layers, width 64
    model = VanillaTransformerForConditionalGeneration(config)
    batch = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    labels = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(STEPS):
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    model.generation_config.max_new_tokens = 48
    folder = save_with_remote_code(model, tmp_path_factory.mktemp("trained"), tokenizer)
    return folder, sources, targets


@pytest.mark.parametrize("beams", [1, 4])
def test_bf16_translations_agree_with_fp32(trained, beams):
    """Through the loader's dtype (as translate.py --dtype bfloat16): most sentences identical (>= 90%) and
    BLEU within 0.5 of fp32's."""
    import sacrebleu
    from vanilla_transformer.inference import load_model_and_tokenizer, translate

    folder, sources, targets = trained
    fp32, tokenizer = load_model_and_tokenizer(str(folder), dtype="float32")
    bf16, _ = load_model_and_tokenizer(str(folder), dtype="bfloat16")
    assert next(bf16.parameters()).dtype == torch.bfloat16
    want = translate(fp32, tokenizer, sources, num_beams=beams, batch_size=32)
    got = translate(bf16, tokenizer, sources, num_beams=beams, batch_size=32)
    same = sum(a == b for a, b in zip(want, got))
    assert same >= 0.9 * len(sources), list(zip(want, got))
    bleu32 = sacrebleu.corpus_bleu(want, [targets]).score
    bleu16 = sacrebleu.corpus_bleu(got, [targets]).score
    assert bleu32 > 30  # the model did learn the pairs: agreement is not agreement on noise
    assert abs(bleu16 - bleu32) <= 0.5, (bleu16, bleu32)


def test_translate_cli_dtype_bfloat16(trained):
    """vanilla-transformer translate --dtype bfloat16 decodes like the fp32 model on most lines; an exported engine refuses
    --dtype (it computes in the precision it was exported in)."""
    from vanilla_transformer.inference import load_model_and_tokenizer, translate
    from vanilla_transformer.inference.engines import load_engine

    folder, sources, _ = trained
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "vanilla_transformer",
        "translate",
        "--model",
        str(folder),
        "--num_beams",
        "1",
        "--dtype",
        "bfloat16",
    ]
    proc = subprocess.run(
        command, input="\n".join(sources[:8]) + "\n", capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    fp32, tokenizer = load_model_and_tokenizer(str(folder))
    want = translate(fp32, tokenizer, sources[:8], num_beams=1)
    got = proc.stdout.splitlines()
    assert len(got) == 8 and sum(a == b for a, b in zip(want, got)) >= 7, list(zip(want, got))
    with pytest.raises(
        ValueError, match="--engine ct2 computes in the precision it was exported in; leave out --dtype"
    ):
        load_engine("ct2", folder, dtype="bfloat16")
