"""The options and results of the quality benchmark (`benchmarks.quality`), and the prepared data both systems
train on."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from vanilla_transformer.corpus import DataOptions
from vanilla_transformer.training.cli import parse_field_value
from vanilla_transformer.training.options import DEFAULT_LENGTH_PENALTY, TrainConfig, train_option
from vanilla_transformer.training.plots import Curves
from vanilla_transformer.training.presets import preset_names

SYSTEMS = ("ours", "marian")


def _f(default: Any, help: str, **kw) -> Any:
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class QualityConfig(DataOptions):
    """Options of `run_quality_benchmark` (the flags of vanilla-transformer bench quality, same names): the corpus and its
    split (`corpus.DataOptions`, as vanilla-transformer train), then the benchmark's own."""

    budget_minutes: float = _f(
        25.0, "wall-clock budget of each system's training loop (validation included)", gt=0
    )
    systems: str = _f(
        "ours,marian", "comma-separated systems to train, in this order: ours, marian", separator=","
    )
    max_length: int = _f(256, "drop training/validation pairs with more tokens than this on a side")
    tokenizer: str | None = _f(None, "tokenizer folder; default: train a joint BPE into OUTPUT_DIR/tokenizer")
    vocab_size: int = _f(8000, "joint BPE vocabulary size when the tokenizer is trained here")
    preset: str = _f("small", "architecture preset of both systems", choices=tuple(preset_names()))
    ours: str = _f(
        "",
        "overrides of our TrainConfig, e.g. 'lr_scale=1.0 warmup_steps=400' (vanilla-transformer train flags)",
    )
    marian_lr: float = _f(7e-4, "Marian: peak learning rate")
    marian_warmup_steps: int = _f(200, "Marian: linear warm-up updates before the inverse-sqrt decay")
    marian_batch_size: int = _f(64, "Marian: sentences per batch (length-grouped)", ge=1)
    marian_dropout: float = _f(0.1, "Marian: dropout (the anchor's; ours follows its preset)")
    marian_bf16: bool = _f(
        False,
        "Marian: bf16 autocast (Seq2SeqTrainingArguments bf16=True, with use_cpu on a CPU) instead of the "
        "standard recipe's fp32; ours chooses its precision as vanilla-transformer train does (--ours mixed_precision=no: fp32)",
    )
    label_smoothing: float = _f(0.1, "label smoothing of both systems")
    eval_every: int = _f(500, "validate both systems every N updates (and at the end)", ge=1)
    bleu_samples: int = _f(200, "validation pairs translated greedily for the periodic BLEU (0 = loss only)")
    log_every: int = _f(10, "training loss is logged (and plotted) per N updates", ge=1)
    num_beams: int | None = _f(
        None, "beams for the test translation; default: the generation config's (4)", ge=1
    )
    length_penalty: float = _f(
        DEFAULT_LENGTH_PENALTY,
        "length penalty alpha (transformers': log-prob / length**alpha) of both systems, "
        "no search on validation; vanilla-transformer train's default",
    )
    eval_batch_size: int = train_option("eval_batch_size")
    sacrebleu_tokenize: str | None = train_option("sacrebleu_tokenize")
    num_threads: int | None = _f(None, "torch CPU threads for both systems (default: available cores)")
    seed: int = _f(1, "seed of initialisation, dropout and batch order (both systems)")
    num_samples: int = _f(3, "test translations kept per system as examples")
    output_dir: str = _f("outputs/bench_quality", "where models, plots and results.json go")


@dataclass
class SystemResult:
    """One trained and evaluated system. ``epochs`` = target tokens seen / target tokens of the training split."""

    name: str
    description: str
    num_parameters: int
    steps: int
    target_tokens: int
    train_seconds: float
    tokens_per_second: float
    epochs: float
    valid_ppl: float | None
    test: dict
    length_ratio: float
    hyp_len: int
    ref_len: int
    samples: list[dict]
    model_dir: str
    curves: Curves = field(repr=False)
    history: list[dict] = field(default_factory=list, repr=False)
    valid_history: list[dict] = field(default_factory=list, repr=False)


@dataclass
class QualityResult:
    systems: list[SystemResult]
    test_pairs: int
    train_pairs: int
    plot: str | None
    results_file: str


def parse_overrides(text: str) -> dict[str, Any]:
    """``"lr_scale=1.0 warmup_steps=400"`` (spaces or commas) -> typed `TrainConfig` overrides."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    out: dict[str, Any] = {}
    for item in re.split(r"[\s,]+", text.strip()):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or key not in names:
            raise ValueError(
                f"--ours: {item!r} is not KEY=VALUE with KEY a vanilla-transformer train option (e.g. 'lr_scale=1.0')."
            )
        try:
            out[key] = parse_field_value(TrainConfig, key, value)
        except ValueError as error:
            raise ValueError(f"--ours: {error}") from error
    return out


def check_quality_options(cfg: QualityConfig) -> list[str]:
    systems = [s.strip() for s in cfg.systems.split(",") if s.strip()]
    problems = cfg.check() + [
        f"unknown system {s!r} (choose from {', '.join(SYSTEMS)})" for s in systems if s not in SYSTEMS
    ]
    if not systems:
        problems.append("--systems is empty; pass 'ours,marian', 'ours' or 'marian'")
    if cfg.test_size < 1:
        problems.append(f"--test_size must be >= 1 (the systems are scored on it), got {cfg.test_size}")
    if problems:
        raise ValueError("Invalid quality-benchmark options: " + "; ".join(problems) + ".")
    return systems


@dataclass
class QualityData:
    """The tokenizer and the tokenised, length-filtered splits both systems train and validate on."""

    splits: Any
    tokenizer: Any
    tokenizer_dir: str
    train: Any  # tokenised, length-filtered: input_ids, labels
    valid_src: list[list[int]]
    valid_tgt: list[list[int]]
    train_target_tokens: int
