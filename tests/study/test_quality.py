"""The quality benchmark end to end on a 300-line slice with the `tiny` preset and a 6-second budget per system
(both systems train, are scored with sacreBLEU signatures, are the same size on the same tokenizer, respect
the budget), the training plots (valid PNGs), the cross-attention matrix (rows are distributions) and the
attention plot script, including the fallback for missing CJK glyphs."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import warnings
from pathlib import Path

import pytest
import torch
from helpers.shared import SMALL_CORPUS_FLAGS

from studies import quality
from studies.quality import QualityConfig, marian_training_arguments, parse_overrides, run_quality_benchmark
from vanilla_transformer.inference.attention import AttentionMap, cross_attention, plot_attention, tick_labels
from vanilla_transformer.training.cli import parse_dataclass
from vanilla_transformer.training.plots import curves_from_history

ROOT = Path(__file__).resolve().parents[2]
BLEU_SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:"
CHRF_SIGNATURE = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:"
BUDGET_MINUTES = 0.1
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_script(name: str):
    return importlib.import_module(f"vanilla_transformer.commands.{name}")


def assert_png(path: Path) -> None:
    from matplotlib.image import imread

    assert path.exists(), path
    assert path.read_bytes()[:8] == PNG_MAGIC
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_quality")
    argv = [
        *SMALL_CORPUS_FLAGS,
        *f"--budget_minutes {BUDGET_MINUTES} --preset tiny --vocab_size 1200 --eval_every 15".split(),
        *"--bleu_samples 2 --num_threads 1".split(),
        "--output_dir",
        str(out),
    ]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert quality.main(argv) == 0
    return out, stdout.getvalue()


def test_quality_study_trains_both_systems_and_prints_scores_with_signatures(bench):
    out, text = bench
    table = text[text.index("\nsystem ") + 1 :].split("\n\n")[0]
    assert table.splitlines()[0].split()[:4] == ["system", "BLEU", "chrF", "len"]
    assert {line.split()[0] for line in table.splitlines()[2:]} == {"ours", "marian"}
    assert text.count(f"  {BLEU_SIGNATURE}") == 2 and text.count(f"  {CHRF_SIGNATURE}") == 2
    assert "marian / ours: tokens/s x" in text and "ratio = " in text
    results = json.loads((out / "results.json").read_text())
    ours, marian = results["systems"]
    assert (ours["name"], marian["name"]) == ("ours", "marian")
    for r in (ours, marian):
        assert r["steps"] > 0 and r["target_tokens"] > 0 and r["tokens_per_second"] > 0 and r["epochs"] > 0
        assert (
            r["test"]["num_sentences"] == 6
            and r["test"]["num_beams"] == 4
            and r["test"]["length_penalty"] == 1.0
        )
        assert r["length_ratio"] == pytest.approx(r["hyp_len"] / r["ref_len"])
        assert f"ratio = {r['length_ratio']:.3f}" in r["test"]["bleu_details"]  # sacreBLEU's own ratio
        # the loop trains until the wall-clock budget is spent (by how much the last update and validation
        # overrun it depends on the machine's speed, so only the lower bound is checked)
        assert r["train_seconds"] >= BUDGET_MINUTES * 60
        assert math.isfinite(r["valid_ppl"])


def test_both_systems_have_the_same_size_tokenizer_and_special_ids(bench):
    out, _ = bench
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    results = json.loads((out / "results.json").read_text())
    ours, marian = results["systems"]
    tok_ours, tok_marian = (json.loads((out / f / "tokenizer.json").read_text()) for f in ("ours", "marian"))
    for part in ("model", "normalizer", "pre_tokenizer", "post_processor", "added_tokens"):
        assert tok_ours[part] == tok_marian[part], part
    m_cfg, o_cfg = (
        AutoConfig.from_pretrained(out / "marian"),
        AutoConfig.from_pretrained(out / "ours", trust_remote_code=True),
    )
    assert m_cfg.model_type == "marian" and o_cfg.model_type == "vanilla_transformer"
    for name in (
        "vocab_size",
        "d_model",
        "encoder_layers",
        "decoder_layers",
        "encoder_ffn_dim",
        "dropout",
        "encoder_attention_heads",
        "pad_token_id",
        "eos_token_id",
        "decoder_start_token_id",
    ):
        assert getattr(m_cfg, name) == getattr(o_cfg, name), name
    assert (m_cfg.pad_token_id, m_cfg.decoder_start_token_id, m_cfg.eos_token_id) == (0, 2, 3)
    # trainable parameters: identical except our trained output bias (Marian's is a frozen buffer)
    assert ours["num_parameters"] == marian["num_parameters"] + o_cfg.vocab_size
    marian_model = AutoModelForSeq2SeqLM.from_pretrained(out / "marian")
    assert marian_model.generation_config.suppress_tokens == [0, 2]
    # both saved models decode as the benchmark scored them
    ours_model = AutoModelForSeq2SeqLM.from_pretrained(out / "ours", trust_remote_code=True)
    for model in (marian_model, ours_model):
        assert (model.generation_config.num_beams, model.generation_config.length_penalty) == (4, 1.0)


def test_training_and_comparison_plots_are_written(bench):
    out, text = bench
    assert_png(out / "plots" / "comparison.png")
    assert_png(out / "ours" / "plots" / "training_curves.png")  # written by training.train itself
    assert str(out / "plots" / "comparison.png") in text


def test_curves_average_windows_and_take_validation_times_from_training_steps():
    history = [{"step": i, "loss": float(i), "seconds": 2.0 * i} for i in range(1, 6)]
    valid = [
        {"step": 4, "valid_bleu": 1.5},
        {"step": 5, "valid_loss": 3.0},
        {"step": 5, "valid_bleu": 2.0, "seconds": 99.0},
    ]
    c = curves_from_history("x", history, valid, window=2)
    assert (
        c.train_steps == [2, 4, 5] and c.train_loss == [1.5, 3.5, 5.0] and c.train_seconds == [4.0, 8.0, 10.0]
    )
    assert c.valid_steps == [4, 5] and c.valid_seconds == [8.0, 99.0] and c.valid_bleu == [1.5, 2.0]
    with pytest.raises(ValueError, match="window=0"):
        curves_from_history("x", history, window=0)


def test_cross_attention_rows_are_distributions_over_the_source(bench):
    out, _ = bench
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out / "ours")
    text = "我爱机器翻译"
    n_source = len(tokenizer(text)["input_ids"])
    for folder in ("ours", "marian"):
        model = AutoModelForSeq2SeqLM.from_pretrained(out / folder, attn_implementation="eager")
        for head in ("mean", 0, -1):
            amap = cross_attention(model, tokenizer, text, layer=-1, head=head, num_beams=2, max_new_tokens=8)
            assert (
                amap.matrix.shape
                == (len(amap.target_ids), n_source)
                == (len(amap.target_tokens), len(amap.source_tokens))
            )
            torch.testing.assert_close(
                torch.from_numpy(amap.matrix.sum(1)), torch.ones(len(amap.target_ids)), rtol=0, atol=1e-5
            )
            assert (amap.matrix >= 0).all() and amap.source_tokens[-1] == "</s>"
    with pytest.raises(ValueError, match="layer=5 is out of range"):
        cross_attention(model, tokenizer, text, layer=5, num_beams=1, max_new_tokens=2)
    with pytest.raises(ValueError, match="head=9 is out of range"):
        cross_attention(model, tokenizer, text, head=9, num_beams=1, max_new_tokens=2)


def test_plot_attention_script_writes_a_png(bench, tmp_path, capsys):
    out, _ = bench
    png = tmp_path / "attention.png"
    # no CJK font on most CI machines: the fallback warning is tested below
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (
            load_script("plot_attention").main(
                [
                    "--model",
                    str(out / "ours"),
                    "--text",
                    "我爱机器翻译",
                    "--max_new_tokens",
                    "6",
                    "-o",
                    str(png),
                ]
            )
            == 0
        )
    assert_png(png)
    assert "我爱机器翻译 -> " in capsys.readouterr().out


def test_tokens_without_a_font_are_labelled_by_id_with_a_warning(monkeypatch, tmp_path):
    import vanilla_transformer.inference.attention as plots

    monkeypatch.setattr(plots, "find_fonts", lambda texts: None)
    with pytest.warns(UserWarning, match="No installed font has glyphs for '我爱'.*labelled by id"):
        labels, fonts = tick_labels(["▁", "我爱", "<0xE7>", "</s>"], [4, 300, 235, 3])
    assert labels == ["▁", "#300", "<0xE7>", "</s>"] and fonts is None
    amap = AttentionMap(
        torch.full((2, 3), 1 / 3).numpy(),
        [300, 301, 3],
        [7, 3],
        ["我", "爱", "</s>"],
        ["hi", "</s>"],
        "hi",
        -1,
        "mean",
    )
    with pytest.warns(UserWarning, match="No installed font"):
        assert_png(plot_attention(amap, tmp_path / "a.png"))


def test_overrides_and_bad_options_are_clear_errors(tmp_path):
    assert parse_overrides("lr_scale=1.0, warmup_steps=400 dropout=none report_to=none") == {
        "lr_scale": 1.0,
        "warmup_steps": 400,
        "dropout": None,
        "report_to": "none",
    }
    with pytest.raises(ValueError, match="'lr=1' is not KEY=VALUE"):
        parse_overrides("lr=1")
    with pytest.raises(ValueError, match="unknown system 'gpt'"):
        run_quality_benchmark(QualityConfig(systems="ours,gpt", output_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="budget_minutes must be > 0"):
        run_quality_benchmark(QualityConfig(budget_minutes=0, output_dir=str(tmp_path)))


def test_marian_keeps_the_anchor_dropout_whatever_our_preset_uses():
    """Our `small` preset trains without dropout (docs/quality.md); the Marian anchor of the quality benchmark
    keeps its 0.1 unless --marian_dropout says otherwise."""
    from vanilla_transformer.benchmarks.marian import marian_config
    from vanilla_transformer.training.presets import PRESETS

    assert PRESETS["small"]["model"]["dropout"] == 0.0
    assert QualityConfig().marian_dropout == 0.1
    assert marian_config("small", 8000).dropout == 0.1
    assert marian_config("small", 8000, dropout=0.3).dropout == 0.3


def test_marian_trains_in_fp32_unless_marian_bf16_asks_for_bf16(tmp_path):
    """The anchor's standard recipe is Seq2SeqTrainer's default fp32; --marian_bf16 gives it bf16 autocast, which
    transformers accepts on a CPU only with use_cpu (without it: "Your setup doesn't support bf16/gpu")."""
    from transformers import Seq2SeqTrainingArguments

    fp32 = marian_training_arguments(QualityConfig(), tmp_path)
    assert not fp32.bf16 and not fp32.fp16 and not fp32.use_cpu
    bf16 = marian_training_arguments(QualityConfig(marian_bf16=True), tmp_path)
    assert bf16.bf16 and bf16.mixed_precision == "bf16"
    assert (bf16.learning_rate, bf16.warmup_steps, bf16.seed) == (
        fp32.learning_rate,
        fp32.warmup_steps,
        fp32.seed,
    )
    if not torch.cuda.is_available():
        assert bf16.use_cpu
        with pytest.raises(ValueError, match="bf16"):
            Seq2SeqTrainingArguments(output_dir=str(tmp_path), bf16=True)


def test_quality_study_config_files_parse_like_its_flags(tmp_path):
    config = tmp_path / "bench.yaml"
    config.write_text("systems: [ours]\nbudget_minutes: 5\n", encoding="utf-8")
    cfg = parse_dataclass(QualityConfig, ["--config", str(config)])
    assert (cfg.systems, cfg.budget_minutes) == ("ours", 5.0)
    config.write_text("budget_minutes: soon\n", encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        parse_dataclass(QualityConfig, ["--config", str(config)])
    assert exit_info.value.code == 2
    assert f"--config {str(config)!r}: budget_minutes: expected a number > 0, got 'soon'" in err.getvalue()
