"""Translation quality against a peer trained in the same run: our model with our recipe (`training.train`,
the code path of ``vanilla-transformer train``) and transformers' `MarianMTModel` with `Seq2SeqTrainer` and the standard
Hugging Face recipe, at the same size, on the same tokenizer, training split and wall-clock budget, one after
the other on the same machine, then scored on the same held-out split with the same decoding.

Both systems:
    * data: the corpus and its deterministic split as `corpus.DataOptions` reads them (the same flags as
      ``vanilla-transformer train``), training pairs with more than ``max_length`` tokens on a side dropped;
    * tokenizer: `tokenizer.load_or_train_tokenizer` (``--tokenizer``, else one joint BPE trained on the training
      split, as ``vanilla-transformer train`` trains it), ids ``<pad>`` 0, ``<s>`` 2 (decoder start), ``</s>`` 3;
    * architecture: the preset's sizes (``small``: d_model 256, 4 heads, FFN 1024, 3+3 layers, ReLU, post-LN,
      tied embeddings; Marian's config is `benchmarks.marian.marian_config`); dropout: Marian 0.1 (the anchor's, ``marian_dropout``), ours its preset's (``small``: 0);
    * budget: ``budget_minutes`` of the training loop, periodic validation included (every ``eval_every``
      updates: `training.validation.validation_metrics`, perplexity on the validation split, greedy BLEU on its
      first ``bleu_samples`` pairs);
    * test decoding: `inference.evaluate_split` with beam ``num_beams`` and transformers' length penalty
      ``length_penalty`` (sum log-prob / length ** alpha; default 1.0, the value ``vanilla-transformer train`` decodes
      with and transformers' own default), at most ``2 * source length + 10`` new tokens, pad and
      ``<s>`` never generated; sacreBLEU BLEU/chrF with signatures and the output/reference length ratio
      (sacreBLEU's ``sys_len / ref_len``).

Recipes: ours is `TrainConfig`'s defaults for the preset (Adam (0.9, 0.98, 1e-9), the paper's inverse-sqrt
schedule, fairseq label smoothing 0.1, token-budget batches) plus any ``ours`` overrides. Marian's is the
standard `Seq2SeqTrainer` one: AdamW (0.9, 0.98, 1e-9, no weight decay), learning rate ``marian_lr`` with
``marian_warmup_steps`` linear warm-up then inverse-square-root decay (``lr_scheduler_type="inverse_sqrt"``),
``label_smoothing_factor`` 0.1, ``marian_batch_size``-sentence batches grouped by length, gradient clipping at
the `TrainingArguments` default (1.0), fp32 (``marian_bf16``: bf16 autocast). Ours trains in the precision
`vanilla-transformer train` chooses (bf16 autocast on CPUs where it is measured faster: `training.hardware`).

Both systems run in one process with the CPU allocator settings of `training.allocator` (our trainer applies
them when it starts; the Marian run that follows inherits them), so neither gains from them over the other.

In this file, in order: the options, results and prepared data (`QualityConfig`, `QualityResult`, `QualityData`),
the Marian anchor's training (`train_marian`), the run itself (`run_quality_benchmark`: prepares the data, trains
ours, scores both and writes the results) and the command (`main`).

Output folder (``output_dir``): ``tokenizer/``, ``cache/``, ``ours/`` and ``marian/`` (each a loadable model
folder; ``ours/`` also has the trainer's checkpoints and plots), ``plots/comparison.png`` and ``results.json``.

Examples:
    python -m studies.quality                                  # 25 minutes per system, small preset
    python -m studies.quality --budget_minutes 50 --output_dir outputs/bq50
    python -m studies.quality --systems ours --ours "lr_scale=1.0 warmup_steps=400" --output_dir outputs/bq-lr
    python -m studies.quality --budget_minutes 0.2 --preset tiny --max_lines 300 --valid_size 20 \
        --test_size 8 --vocab_size 1200                             # smoke run

All options: python -m studies.quality --help (the fields of `QualityConfig`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vanilla_transformer.benchmarks.marian import marian_config
from vanilla_transformer.corpus import DataOptions
from vanilla_transformer.inference import bleu_tokenizer_for, evaluate_split, length_stats
from vanilla_transformer.modeling import (
    DEFAULT_LENGTH_PENALTY,
    IGNORE_INDEX,
    VanillaTransformerConfig,
    default_generation_config,
)
from vanilla_transformer.tokenizer import load_or_train_tokenizer
from vanilla_transformer.training.cli import parse_dataclass, parse_field_value
from vanilla_transformer.training.data import filter_by_length, tokenize_dataset
from vanilla_transformer.training.hardware import PRECISION_NAMES, available_cores
from vanilla_transformer.training.loop import Event, train
from vanilla_transformer.training.options import TrainConfig, train_option
from vanilla_transformer.training.plots import Curves, curves_from_history, plot_training_curves
from vanilla_transformer.training.presets import preset_names
from vanilla_transformer.training.validation import LENGTH_CAP, validation_metrics

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------------------
# Options, results and the prepared data
# ------------------------------------------------------------------------------------------------------------


SYSTEMS = ("ours", "marian")


def _f(default: Any, help: str, **kw) -> Any:
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class QualityConfig(DataOptions):
    """Options of `run_quality_benchmark` (the flags of python -m studies.quality, same names): the corpus and its
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


# ------------------------------------------------------------------------------------------------------------
# The Marian anchor: MarianMTModel trained by Seq2SeqTrainer with the standard Hugging Face recipe
# ------------------------------------------------------------------------------------------------------------


def _marian_trainer_class():
    from transformers import Seq2SeqTrainer

    class CountingSeq2SeqTrainer(Seq2SeqTrainer):
        """`Seq2SeqTrainer` that counts the target tokens (labels other than IGNORE_INDEX) it trains on."""

        target_tokens = 0

        def training_step(self, model, inputs, num_items_in_batch=None):
            self.target_tokens += int((inputs["labels"] != IGNORE_INDEX).sum())
            return super().training_step(model, inputs, num_items_in_batch)

    return CountingSeq2SeqTrainer


def _marian_monitor(budget_seconds: float, eval_every: int, validate: Callable[[Any], dict], emit: Event):
    from transformers import TrainerCallback

    class Monitor(TrainerCallback):
        """Stops training at the wall-clock budget, validates every ``eval_every`` updates (inside the budget,
        as our trainer does) and at the end, and records the logged training loss with its wall time."""

        def __init__(self):
            self.start = 0.0
            self.seconds = 0.0
            self.history: list[dict] = []
            self.valid_history: list[dict] = []
            self.stopped_at: float | None = None

        def _validate(self, step: int, model) -> None:
            metrics = validate(model)
            if metrics:
                metrics.update(step=step, seconds=self.seconds)
                self.valid_history.append(metrics)
                emit("eval", {**metrics, "system": "marian"})

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.monotonic()

        def on_step_end(self, args, state, control, model=None, **kwargs):
            self.seconds = time.monotonic() - self.start
            if state.global_step % eval_every == 0:
                with torch.random.fork_rng():  # validation must not change the training random stream
                    self._validate(state.global_step, model)
            if time.monotonic() - self.start >= budget_seconds:
                control.should_training_stop = True

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                entry = {
                    "step": state.global_step,
                    "seconds": self.seconds,
                    "loss": float(logs["loss"]),
                    "lr": logs.get("learning_rate"),
                }
                self.history.append(entry)
                emit("step", {**entry, "system": "marian"})

        def on_train_end(self, args, state, control, model=None, **kwargs):
            self.stopped_at = time.monotonic() - self.start
            if not self.valid_history or self.valid_history[-1]["step"] != state.global_step:
                self._validate(state.global_step, model)

    return Monitor()


def marian_training_arguments(cfg: QualityConfig, output_dir: Path):
    """The standard `Seq2SeqTrainer` recipe of the anchor (module docstring), fp32 unless ``cfg.marian_bf16``
    (transformers refuses bf16 without a bf16 GPU unless ``use_cpu`` is set, so a CPU run sets it)."""
    from transformers import Seq2SeqTrainingArguments

    cpu_bf16 = cfg.marian_bf16 and not torch.cuda.is_available()
    return Seq2SeqTrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=cfg.marian_batch_size,
        learning_rate=cfg.marian_lr,
        adam_beta1=0.9,
        adam_beta2=0.98,
        adam_epsilon=1e-9,
        weight_decay=0.0,
        lr_scheduler_type="inverse_sqrt",
        warmup_steps=cfg.marian_warmup_steps,
        label_smoothing_factor=cfg.label_smoothing,
        train_sampling_strategy="group_by_length",
        num_train_epochs=10_000,
        logging_steps=cfg.log_every,
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=cfg.seed,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
        bf16=cfg.marian_bf16,
        use_cpu=cpu_bf16,
    )


def train_marian(
    cfg: QualityConfig, data: QualityData, out: Path, emit: Event, tokenize: str
) -> tuple[Any, dict]:
    from transformers import DataCollatorForSeq2Seq, MarianMTModel, PrinterCallback

    torch.set_num_threads(cfg.num_threads or available_cores())
    torch.manual_seed(cfg.seed)
    model = MarianMTModel(marian_config(cfg.preset, len(data.tokenizer), cfg.marian_dropout))
    # the same decoding as ours: never <pad>/<s>, max_new_tokens, the benchmark's beams and length penalty
    model.generation_config = default_generation_config(model.config)
    model.generation_config.update(num_beams=cfg.num_beams, length_penalty=cfg.length_penalty)
    folder = out / "marian"
    args = marian_training_arguments(cfg, folder / "trainer")
    valid = data.splits["validation"]

    def validate(m) -> dict:
        return validation_metrics(
            m,
            data.tokenizer,
            data.valid_src,
            data.valid_tgt,
            list(valid["source"]),
            list(valid["target"]),
            label_smoothing=cfg.label_smoothing,
            bleu_samples=cfg.bleu_samples,
            length_penalty=cfg.length_penalty,
            batch_size=cfg.eval_batch_size,
            tokenize=tokenize,
        )

    monitor = _marian_monitor(cfg.budget_minutes * 60, cfg.eval_every, validate, emit)
    trainer = _marian_trainer_class()(
        model=model,
        args=args,
        train_dataset=data.train.select_columns(["input_ids", "labels"]),
        data_collator=DataCollatorForSeq2Seq(data.tokenizer, model=model, label_pad_token_id=IGNORE_INDEX),
        processing_class=data.tokenizer,
        callbacks=[monitor],
    )
    trainer.remove_callback(PrinterCallback)  # library code does not print; `event` reports progress
    # trainable parameters: Marian's sinusoidal position tables are frozen nn.Embedding weights
    num_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    emit("start", {"system": "marian", "num_parameters": num_parameters})
    trainer.train()
    seconds = monitor.stopped_at or monitor.seconds
    assert isinstance(trainer.model, MarianMTModel)
    model = trainer.model.eval()
    model.save_pretrained(str(folder))
    data.tokenizer.save_pretrained(str(folder))
    last_valid = monitor.valid_history[-1] if monitor.valid_history else {}
    info = dict(
        description=f"MarianMTModel, Seq2SeqTrainer (AdamW, lr {cfg.marian_lr}, warm-up {cfg.marian_warmup_steps} "
        f"+ inverse sqrt, {cfg.marian_batch_size} sentences/batch, length-grouped, "
        f"{PRECISION_NAMES['bf16' if cfg.marian_bf16 else 'no']})",
        num_parameters=num_parameters,
        steps=trainer.state.global_step,
        target_tokens=trainer.target_tokens,
        train_seconds=seconds,
        tokens_per_second=trainer.target_tokens / max(seconds, 1e-9),
        valid_ppl=last_valid.get("valid_ppl"),
        history=monitor.history,
        valid_history=monitor.valid_history,
        model_dir=str(folder),
    )
    return model, info


# ------------------------------------------------------------------------------------------------------------
# The run: data, ours, scores of both
# ------------------------------------------------------------------------------------------------------------


def _prepare_data(cfg: QualityConfig, out: Path) -> QualityData:
    splits, _ = cfg.load_splits()
    tokenizer_dir = cfg.tokenizer or str(out / "tokenizer")
    tokenizer = load_or_train_tokenizer(cfg.tokenizer, out / "tokenizer", splits["train"], cfg.vocab_size)
    cache = out / "cache"
    train_split, _ = filter_by_length(tokenize_dataset(splits["train"], tokenizer, cache), cfg.max_length)
    valid_src: list[list[int]] = []
    valid_tgt: list[list[int]] = []
    if len(splits["validation"]):
        valid, _ = filter_by_length(tokenize_dataset(splits["validation"], tokenizer, cache), cfg.max_length)
        valid_src, valid_tgt = [list(x) for x in valid["input_ids"]], [list(x) for x in valid["labels"]]
    return QualityData(
        splits,
        tokenizer,
        tokenizer_dir,
        train_split,
        valid_src,
        valid_tgt,
        sum(len(t) for t in train_split["labels"]),
    )


def _train_ours(
    cfg: QualityConfig, data: QualityData, out: Path, emit: Event, tokenize: str
) -> tuple[Any, dict]:
    from vanilla_transformer.modeling import save_with_remote_code

    overrides = parse_overrides(cfg.ours)
    data_options = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(DataOptions)}
    fixed = dict(
        **data_options,
        max_length=cfg.max_length,
        tokenizer=data.tokenizer_dir,
        cache_dir=str(out / "cache"),
        output_dir=str(out / "ours"),
    )
    clash = sorted(set(overrides) & (set(fixed) | {"export", "resume", "overwrite", "max_minutes"}))
    if clash:
        raise ValueError(
            f"--ours cannot set {clash}: the benchmark sets them for both systems (use its own flags)."
        )
    # the benchmark's options that are train's options of the same name
    same_name = ("preset", "label_smoothing", "eval_every", "bleu_samples", "log_every", "length_penalty")
    same_name += ("eval_batch_size", "seed", "num_threads")
    train_cfg = TrainConfig(
        **fixed,
        **{name: getattr(cfg, name) for name in same_name},
        max_minutes=cfg.budget_minutes,
        sacrebleu_tokenize=tokenize,
        report_to="none",
        export=False,
        overwrite=True,
    )
    train_cfg = dataclasses.replace(train_cfg, **overrides)
    result = train(train_cfg, lambda name, info: emit(name, {**info, "system": "ours"}))
    model = result.model.eval()  # the final weights, or their average with the last snapshots (preset recipe)
    model.generation_config.update(num_beams=cfg.num_beams, length_penalty=cfg.length_penalty)  # as scored
    model_dir = save_with_remote_code(model, out / "ours", data.tokenizer)
    history = result.history
    last_valid = result.valid_history[-1] if result.valid_history else {}
    info = dict(
        description=f"VanillaTransformer, our training recipe (preset {cfg.preset}"
        + (f"; {cfg.ours.strip()}" if cfg.ours.strip() else "")
        + (
            f"; averaged updates {result.averaging['steps']}"
            if result.averaging and result.averaging["kept"]
            else ""
        )
        + f"; {PRECISION_NAMES.get(result.mixed_precision, result.mixed_precision)})",
        num_parameters=result.num_parameters,
        steps=result.step,
        target_tokens=result.target_tokens,
        train_seconds=result.train_seconds,
        tokens_per_second=result.target_tokens_per_second,
        valid_ppl=last_valid.get("valid_ppl"),
        history=history,
        valid_history=result.valid_history,
        model_dir=str(model_dir),
    )
    return model, info


def _evaluate(
    cfg: QualityConfig, name: str, model, data: QualityData, info: dict, tokenize: str, emit: Event
) -> SystemResult:
    test = data.splits["test"]
    sources, references = list(test["source"]), list(test["target"])
    emit("test_start", {"system": name, "num_sentences": len(sources)})
    decoding = dict(num_beams=cfg.num_beams, length_penalty=cfg.length_penalty)
    scores, hyps = evaluate_split(
        model,
        data.tokenizer,
        test,
        tokenize=tokenize,
        batch_size=cfg.eval_batch_size,
        **decoding,
        **LENGTH_CAP,
    )
    scores.update(**decoding, split="test")
    ratio, hyp_len, ref_len = length_stats(hyps, references, tokenize)
    samples = [
        {"source": s, "reference": r, "hypothesis": h}
        for s, r, h in list(zip(sources, references, hyps))[: cfg.num_samples]
    ]
    curves = curves_from_history(
        name, info["history"], info["valid_history"], window=cfg.log_every if name == "ours" else 1
    )
    return SystemResult(
        name=name,
        test=scores,
        length_ratio=ratio,
        hyp_len=hyp_len,
        ref_len=ref_len,
        samples=samples,
        curves=curves,
        epochs=info["target_tokens"] / max(data.train_target_tokens, 1),
        **info,
    )


def run_quality_benchmark(cfg: QualityConfig, event: Event | None = None) -> QualityResult:
    """Train and evaluate the systems of ``cfg.systems`` one after the other (module docstring); write
    ``plots/comparison.png`` and ``results.json`` under ``cfg.output_dir``.

    ``event(name, info)`` receives progress ("start", "step", "eval", "test_start", "done", and our trainer's
    other events), each ``info`` with a ``system`` key."""
    defaults = default_generation_config(VanillaTransformerConfig())  # the beams of both systems
    cfg = dataclasses.replace(cfg, num_beams=cfg.num_beams or defaults.num_beams)
    systems = check_quality_options(cfg)
    emit = event or (lambda name, info: None)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenize = bleu_tokenizer_for(cfg.languages()[1], cfg.sacrebleu_tokenize)
    data = _prepare_data(cfg, out)
    results: list[SystemResult] = []
    for name in systems:
        if name == "ours":
            model, info = _train_ours(cfg, data, out, emit, tokenize)
        else:
            model, info = train_marian(cfg, data, out, emit, tokenize)
        result = _evaluate(cfg, name, model, data, info, tokenize, emit)
        results.append(result)
        emit("done", {"system": name, "result": result})
        del model
    plot = plot_training_curves(
        [r.curves for r in results],
        out / "plots" / "comparison.png",
        title=f"{cfg.preset} preset, {cfg.budget_minutes:g} min each, {len(data.train)} training pairs",
    )
    results_file = out / "results.json"
    payload = {
        "config": dataclasses.asdict(cfg),
        "train_pairs": len(data.train),
        "test_pairs": len(data.splits["test"]),
        "systems": [
            {
                k: v
                for k, v in dataclasses.asdict(r).items()
                if k not in ("curves", "history", "valid_history")
            }
            for r in results
        ],
    }
    results_file.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return QualityResult(results, len(data.splits["test"]), len(data.train), str(plot), str(results_file))


# ------------------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------------------


class Progress:
    """Prints one line per logged window of updates, per validation and per phase."""

    def __init__(self, log_every: int):
        self.log_every = log_every

    def __call__(self, name: str, info: dict) -> None:
        system = info.get("system", "")
        if name == "start":
            print(f"[{system}] training {info['num_parameters']:,} parameters", flush=True)
        elif name == "step" and (system == "marian" or info["step"] % self.log_every == 0):
            print(
                f"[{system}] step {info['step']}  {info['seconds'] / 60:.1f} min  loss {info['loss']:.3f}",
                flush=True,
            )
        elif name == "eval":
            text = f"[{system}] step {info['step']}: valid ppl {info['valid_ppl']:.1f}"
            if "valid_bleu" in info:
                text += f", greedy BLEU {info['valid_bleu']} chrF {info['valid_chrf']}"
            print(text, flush=True)
        elif name == "average":
            text = f"[{system}] averaged the weights at updates {info['steps'][0]}..{info['steps'][-1]}"
            if info["valid_ppl_final"] is not None:
                text += f": valid ppl {info['valid_ppl_final']:.2f} -> {info['valid_ppl_averaged']:.2f}, " + (
                    "kept" if info["kept"] else "discarded (final weights kept)"
                )
            print(text, flush=True)
        elif name == "test_start":
            print(f"[{system}] translating {info['num_sentences']} test sentences", flush=True)
        elif name == "info":
            print(f"[{system}] {info['message']}", flush=True)


def report(result: QualityResult) -> str:
    """The side-by-side table, signatures, ratios against the first system, and sample translations."""
    rows = [
        (
            "system",
            "BLEU",
            "chrF",
            "len ratio",
            "updates",
            "tgt tokens",
            "tokens/s",
            "epochs",
            "valid ppl",
            "minutes",
            "params",
        )
    ]
    for r in result.systems:
        ppl = f"{r.valid_ppl:.1f}" if r.valid_ppl is not None else "n/a"
        rows.append(
            (
                r.name,
                f"{r.test['bleu']:.2f}",
                f"{r.test['chrf']:.2f}",
                f"{r.length_ratio:.2f}",
                str(r.steps),
                f"{r.target_tokens:,}",
                f"{r.tokens_per_second:.0f}",
                f"{r.epochs:.2f}",
                ppl,
                f"{r.train_seconds / 60:.1f}",
                f"{r.num_parameters:,}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    first = result.systems[0]
    lines.append(
        f"\nTest: {result.test_pairs} held-out pairs, beam {first.test['num_beams']}, length penalty "
        f"{first.test['length_penalty']}; training split {result.train_pairs} pairs."
    )
    for r in result.systems:
        lines.append(
            f"\n{r.name}: {r.description}\n  BLEU {r.test['bleu']:.2f}  {r.test['bleu_signature']}\n"
            f"  chrF {r.test['chrf']:.2f}  {r.test['chrf_signature']}\n  {r.test['bleu_details']}"
        )
    for other in result.systems[1:]:
        lines.append(
            f"\n{other.name} / {first.name}: tokens/s x{other.tokens_per_second / max(first.tokens_per_second, 1e-9):.2f}, "
            f"updates x{other.steps / max(first.steps, 1):.2f}, tokens seen x{other.target_tokens / max(first.target_tokens, 1):.2f}"
        )
    for r in result.systems:
        for s in r.samples:
            lines.append(
                f"\n[{r.name}] SRC: {s['source']}\n[{r.name}] REF: {s['reference']}\n[{r.name}] HYP: {s['hypothesis']}"
            )
    lines.append(f"\nPlot: {result.plot}\nResults: {result.results_file}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_dataclass(
        QualityConfig, argv, description=(__doc__ or "").split("\n\n")[0], prog="python -m studies.quality"
    )
    result = run_quality_benchmark(cfg, Progress(cfg.log_every))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
