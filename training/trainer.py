"""The training loop: data → token-budget batches → label-smoothed loss → Adam + inverse-sqrt schedule, with
accelerate (single process, multi-process DDP, mixed precision), periodic validation, atomic checkpoints,
exact resume, a final test evaluation and export of a self-contained model folder with a model card.

Loss normalisation (fairseq's): every optimizer update sums the label-smoothed loss over all target tokens of
all its batches — ``grad_accum`` batches on each of ``num_processes`` processes — and divides by the total
number of those target tokens (all-reduced across processes). So 2 processes x 1 batch and 1 process x 2
accumulated batches compute the same update from the same global batches (up to float summation order).

Output folder layout (``output_dir``)::

    config.json, model.safetensors, *.py, tokenizer files, README.md   the final model (save_with_remote_code)
    eval_results.json        test-set scores with sacreBLEU signatures
    checkpoints/             checkpoint-<step>/, latest, best, tokenizer/, train_config.json
    runs/                    TensorBoard logs
    plots/                   training_curves.png: loss and validation BLEU against updates and minutes
    cache/                   tokenised data (keyed by tokenizer and data hashes)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from modeling import (
    VanillaTransformerForConditionalGeneration,
    release_cpu_inference_weights,
    save_with_remote_code,
    shift_tokens_right,
)

from . import checkpoint as ckpt
from .allocator import tune_cpu_allocator
from .batching import BatchStream, TokenBudgetBatchSampler, collate
from .data import (
    DEFAULT_DATA,
    filter_by_length,
    load_parallel_corpus,
    split_corpus,
    tokenize_dataset,
)
from .evaluation import evaluate_translation, score_translations, translate
from .loss import label_smoothed_nll_loss
from .model_card import load_template, render_model_card
from .presets import budget_dropout, build_config, preset_names, recipe_defaults
from .schedule import build_optimizer, build_scheduler

logger = logging.getLogger(__name__)

Event = Callable[[str, dict], None]


def _f(default: Any, help: str, **kw) -> Any:
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class TrainConfig:
    """Every option of a training run (the command-line flags of scripts/train.py, same names)."""

    # data
    data: str = _f(
        str(DEFAULT_DATA), "parallel file (.tsv/.csv/.jsonl, optionally .xz/.gz/.bz2) or Hub dataset name"
    )
    source_column: str | None = _f(
        None, "TSV column index (default 0) or CSV/JSONL/Hub column name (default 'source')"
    )
    target_column: str | None = _f(
        None, "TSV column index (default 1) or CSV/JSONL/Hub column name (default 'target')"
    )
    source_lang: str | None = _f(
        None, "source language (key in a 'translation' column; default: from the file name, e.g. zh)"
    )
    target_lang: str | None = _f(None, "target language (default: from the file name, e.g. en)")
    hub_config: str | None = _f(None, "configuration of a Hub dataset")
    hub_split: str = _f("train", "split of a Hub dataset to read")
    max_lines: int | None = _f(None, "use only the first N pairs of the corpus (a slice for smoke runs)")
    on_bad_line: str = _f(
        "skip",
        "a line with the wrong number of columns: 'skip' (counted, reported) or 'error'",
        choices=("skip", "error"),
    )
    valid_size: int = _f(500, "validation pairs held out from the corpus")
    test_size: int = _f(1000, "test pairs held out from the corpus")
    split_block_size: int = _f(
        20, "held-out pairs are chosen as random blocks of this many consecutive lines"
    )
    split_seed: int = _f(1234, "seed of the train/validation/test split (independent of --seed)")
    max_length: int = _f(
        256, "drop (and count) training/validation pairs with more tokens than this on a side"
    )
    # tokenizer
    tokenizer: str | None = _f(
        None, "tokenizer folder; default: train a joint BPE on the training split (or reuse it)"
    )
    vocab_size: int = _f(8000, "joint BPE vocabulary size when the tokenizer is trained here")
    # model
    preset: str = _f("small", "architecture preset", choices=tuple(preset_names()))
    dropout: float | None = _f(
        None,
        "override the preset's dropout (default: the preset's; small: 0.0, or 0.1 when --max_minutes >= 60, "
        "where no dropout overfits)",
    )
    init_std: float | None = _f(
        None, "std of the normal initialisation of the embeddings (default: the preset's, else d_model**-0.5)"
    )
    linear_init_std: float | None = _f(
        None, "std of the normal initialisation of linear layers (default: the preset's, else Xavier-uniform)"
    )
    # batching and optimisation
    max_tokens: int | None = _f(
        None, "token budget per batch (batch size x longest side); default: the preset's"
    )
    skip_too_long: bool = _f(False, "skip (and count) pairs longer than --max_tokens instead of failing")
    grad_accum: int = _f(1, "batches accumulated per optimizer update (per process)")
    lr_scale: float | None = _f(None, "scale of the paper's learning-rate formula; default: the preset's")
    warmup_steps: int | None = _f(None, "warm-up updates of the schedule; default: the preset's")
    label_smoothing: float = _f(0.1, "label smoothing epsilon")
    weight_decay: float = _f(0.0, "AdamW weight decay (0 = Adam, as in the paper)")
    clip_norm: float | None = _f(None, "clip the gradient norm to this value (0 = off); default: the preset's")
    cooldown: float | None = _f(
        None,
        "fraction of the budget at its end over which the learning rate decays linearly to 0 (the budget that stops "
        "the run first: --max_minutes of this invocation, --max_steps or --max_epochs); 0 = off; default: the "
        "preset's",
    )
    # budget
    max_steps: int | None = _f(None, "stop after this many optimizer updates (in total, across resumes)")
    max_epochs: int | None = _f(None, "stop after this many epochs")
    max_minutes: float | None = _f(
        25.0, "wall-clock budget of the training loop of this invocation (0/None = none)"
    )
    seed: int = _f(1, "seed of model initialisation, dropout and batch order")
    # hardware
    mixed_precision: str = _f("no", "mixed precision on GPU", choices=("no", "bf16", "fp16"))
    cpu: bool = _f(False, "force the CPU even if a GPU is present")
    num_threads: int | None = _f(None, "torch CPU threads per process (default: available cores / processes)")
    tune_cpu_allocator: bool = _f(
        True, "on CPU, keep freed memory mapped for reuse (glibc mallopt; ~13% faster small-model steps; "
        "training.allocator)"
    )
    # logging, validation, checkpoints
    output_dir: str = _f("outputs/default", "where checkpoints, logs and the final model go")
    cache_dir: str | None = _f(None, "tokenisation cache (default: OUTPUT_DIR/cache)")
    log_every: int = _f(10, "log training loss every N updates")
    eval_every: int = _f(500, "validate and save a checkpoint every N updates (and at the end)")
    keep_last: int = _f(3, "keep the newest K checkpoints (plus the best)")
    average_last: int | None = _f(
        None,
        "export the average of the weights at the last N snapshots (one every --average_every updates, the final "
        "weights included) when it lowers the validation loss; 0 or 1 = off; default: the preset's",
    )
    average_every: int | None = _f(None, "updates between the snapshots that are averaged; default: the preset's")
    export_at_minutes: str = _f(
        "",
        "comma-separated training minutes at which to also export the model as if the run stopped there (averaging "
        "included) to OUTPUT_DIR/minute-M/, e.g. '25,60' in a 120-minute run; training is not changed (the run's "
        "dropout is the run's: the small preset's long-budget dropout applies to the whole run)",
    )
    bleu_samples: int = _f(
        200, "validation pairs translated (greedy) for the periodic BLEU/chrF; 0 = loss only"
    )
    valid_beams: int = _f(1, "beams for the periodic validation BLEU")
    test_beams: int = _f(4, "beams for the final test evaluation")
    length_penalty: float | None = _f(
        None,
        "length penalty alpha (transformers': log-prob / length**alpha) of the test translation and of the exported "
        "generation config; default: the candidate with the best BLEU on the validation split",
    )
    length_penalty_candidates: str = _f(
        "0.6,1.0,1.4", "comma-separated length penalties tried on the validation split when --length_penalty is unset"
    )
    eval_batch_size: int = _f(64, "sentences per generate() batch")
    sacrebleu_tokenize: str | None = _f(
        None, "sacreBLEU tokeniser (default: 'zh' for Chinese targets, else '13a')"
    )
    tensorboard: bool = _f(True, "log to TensorBoard (OUTPUT_DIR/runs) through accelerate's tracker")
    num_samples: int = _f(3, "sample test translations returned (and printed by the script)")
    sample_sentences: str | None = _f(
        None,
        "extra source sentences to translate at the end, separated by '|' (default for zh: 我爱机器翻译)",
    )
    model_card: str | None = _f(None, "model card template (default: the repository's model_card.md)")
    resume: bool = _f(False, "continue from OUTPUT_DIR/checkpoints/latest")
    overwrite: bool = _f(False, "start from scratch even if OUTPUT_DIR has checkpoints (they are deleted)")
    export: bool = _f(True, "evaluate on the test split and export the final model to OUTPUT_DIR")


# options that must not change when a run is resumed
_RESUME_KEYS = ("data", "max_lines", "valid_size", "test_size", "split_block_size", "split_seed", "max_length",
                "preset", "dropout", "init_std", "linear_init_std", "seed", "grad_accum", "label_smoothing", "source_column", "target_column")  # fmt: skip


@dataclass
class TrainResult:
    step: int = 0
    epoch: int = 0
    history: list[dict] = field(default_factory=list)
    valid_history: list[dict] = field(default_factory=list)
    test_metrics: dict | None = None
    samples: list[dict] = field(default_factory=list)
    stopped_because: str = ""
    target_tokens_per_second: float = 0.0
    train_seconds: float = 0.0
    num_parameters: int = 0
    data_summary: str = ""
    output_dir: str = ""
    last_checkpoint: str | None = None
    averaging: dict | None = None  # what checkpoint averaging did (see Trainer.average_snapshots)
    model: Any = field(default=None, repr=False)  # the final (possibly averaged) model, unwrapped, in memory
    length_penalty: float | None = None  # used for the test split and written to the exported generation config
    length_penalty_search: list[dict] = field(default_factory=list)  # validation BLEU/chrF per candidate
    exports: list[dict] = field(default_factory=list)  # the --export_at_minutes models


def _languages(cfg: TrainConfig) -> tuple[str | None, str | None]:
    src, tgt = cfg.source_lang, cfg.target_lang
    m = re.search(r"[._-]([a-z]{2,3})-([a-z]{2,3})\.", Path(cfg.data).name)
    if m:
        src = src or m.group(1)
        tgt = tgt or m.group(2)
    return src, tgt


def _float_list(text: str, option: str, what: str, positive: bool = False) -> list[float]:
    """Parse a comma-separated option such as ``"0.6, 1.0"``; raises ValueError naming ``option``."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        values = [math.nan]
    if any(not math.isfinite(v) or (positive and v <= 0) for v in values):
        raise ValueError(f"--{option} must be comma-separated {what}, got {text!r}.")
    return values


def _length_penalties(cfg: TrainConfig) -> list[float]:
    values = _float_list(cfg.length_penalty_candidates, "length_penalty_candidates", "numbers")
    if not values:
        raise ValueError("--length_penalty_candidates must be comma-separated numbers, got an empty list.")
    return values


def _minute_marks(cfg: TrainConfig) -> list[float]:
    return sorted(_float_list(cfg.export_at_minutes, "export_at_minutes", "positive minutes", positive=True))


def _check_config(cfg: TrainConfig) -> None:
    problems = []
    for name in (
        "grad_accum",
        "log_every",
        "eval_every",
        "keep_last",
        "eval_batch_size",
        "test_beams",
        "valid_beams",
    ):
        if getattr(cfg, name) < 1:
            problems.append(f"--{name} must be >= 1, got {getattr(cfg, name)}")
    if cfg.length_penalty is not None and not math.isfinite(cfg.length_penalty):
        problems.append(f"--length_penalty must be a finite number, got {cfg.length_penalty}")
    _length_penalties(cfg)
    _minute_marks(cfg)
    if cfg.average_last is not None and cfg.average_last < 0:
        problems.append(f"--average_last must be >= 0, got {cfg.average_last}")
    if cfg.cooldown is not None and not 0.0 <= cfg.cooldown < 1.0:
        problems.append(f"--cooldown must be in [0, 1), got {cfg.cooldown}")
    if cfg.average_every is not None and cfg.average_every < 1:
        problems.append(f"--average_every must be >= 1, got {cfg.average_every}")
    if cfg.max_length < 2:
        problems.append(f"--max_length must be >= 2, got {cfg.max_length}")
    if cfg.on_bad_line not in ("skip", "error"):
        problems.append(f"--on_bad_line must be 'skip' or 'error', got {cfg.on_bad_line!r}")
    if not (cfg.max_steps or cfg.max_epochs or cfg.max_minutes):
        problems.append("no stopping rule: pass --max_steps, --max_epochs or --max_minutes")
    if cfg.resume and cfg.overwrite:
        problems.append("--resume and --overwrite contradict each other; pass one")
    if problems:
        raise ValueError("Invalid training options: " + "; ".join(problems) + ".")


def _load_or_train_tokenizer(cfg: TrainConfig, train_split, ckpt_root: Path):
    from transformers import AutoTokenizer

    if cfg.tokenizer is not None:
        return AutoTokenizer.from_pretrained(cfg.tokenizer)
    folder = ckpt_root / "tokenizer"
    if (folder / "tokenizer.json").exists():
        logger.info("Reusing the tokenizer in %s", folder)
        return AutoTokenizer.from_pretrained(str(folder))
    from tokenizer.bpe import train_bpe_tokenizer

    logger.info(
        "Training a %d-token joint BPE tokenizer on %d training pairs", cfg.vocab_size, len(train_split)
    )
    texts = list(train_split["source"]) + list(train_split["target"])
    tok = train_bpe_tokenizer(texts, vocab_size=cfg.vocab_size)
    tok.save_pretrained(str(folder))
    return tok


class _Trainer:
    def __init__(self, cfg: TrainConfig, event: Event | None):
        from accelerate import Accelerator
        from accelerate.utils import set_seed

        _check_config(cfg)
        self.cfg = cfg
        self.emit = event or (lambda name, info: None)
        self.out = Path(cfg.output_dir)
        self.ckpt_root = self.out / "checkpoints"
        recipe = recipe_defaults(cfg.preset)
        self.max_tokens = cfg.max_tokens or recipe["max_tokens"]
        self.warmup = cfg.warmup_steps or recipe["warmup_steps"]
        self.lr_scale = cfg.lr_scale if cfg.lr_scale is not None else recipe["lr_scale"]
        self.clip_norm = cfg.clip_norm if cfg.clip_norm is not None else recipe["clip_norm"]
        self.average_last = cfg.average_last if cfg.average_last is not None else recipe["average_last"]
        self.average_every = cfg.average_every or recipe["average_every"]
        self.cooldown = cfg.cooldown if cfg.cooldown is not None else recipe["cooldown"]
        # --dropout, else the preset's long-budget rule (resume keeps the value the run started with)
        self.dropout = budget_dropout(cfg.preset, cfg.dropout, cfg.max_minutes)
        self.lr_factor = 1.0  # the cooldown's multiplier of the scheduled learning rate for the next update
        self.snapshots: list[tuple[int, dict[str, torch.Tensor]]] = []
        self.lp_candidates = _length_penalties(cfg)
        self.export_marks = _minute_marks(cfg)
        self.length_penalty = cfg.length_penalty if cfg.length_penalty is not None else self.lp_candidates[0]
        accelerated = torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())
        self.accelerator = Accelerator(
            mixed_precision=cfg.mixed_precision,
            # without cpu=True, accelerate ignores a multi-process launch on a machine with no GPU
            cpu=cfg.cpu or not accelerated,
            log_with="tensorboard" if cfg.tensorboard else None,
            project_dir=str(self.out / "runs"),
            step_scheduler_with_optimizer=False,  # we step it once per update; see module docstring
        )
        acc = self.accelerator
        launched = int(os.environ.get("WORLD_SIZE", "1"))
        if launched != acc.num_processes:
            raise RuntimeError(
                f"Launched as {launched} processes but accelerate runs {acc.num_processes}; each process would train "
                "alone. On CPU use `accelerate launch --multi_gpu --num_processes N` (gloo) and leave --cpu to the "
                "trainer; check `accelerate env`."
            )
        if acc.device.type == "cpu":
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
            torch.set_num_threads(cfg.num_threads or max(1, cores // acc.num_processes))
            if cfg.tune_cpu_allocator:
                tune_cpu_allocator()
        elif cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        if acc.is_main_process:
            self._prepare_output_dir()
        acc.wait_for_everyone()
        if cfg.resume:  # every process takes the dropout the main process settled on
            saved = json.loads((self.ckpt_root / "train_config.json").read_text(encoding="utf-8"))
            self.dropout = saved.get("effective_dropout", self.dropout)
        if cfg.dropout is None and self.dropout is not None:
            threshold = recipe["long_budget_minutes"]
            early = [m for m in self.export_marks if m < threshold]
            self.emit("info", {"message": (
                f"dropout {self.dropout} (the {cfg.preset} preset's long-budget dropout for --max_minutes >= "
                f"{threshold}; pass --dropout to choose)"
                + (f"; the minute-{early[0]:g} export is this run's state, not what a {early[0]:g}-minute run "
                   "(no long-budget dropout) would give" if early else "")
            )})  # fmt: skip
        set_seed(cfg.seed)

    # ------------------------------------------------------------------------------------------------ setup
    def _prepare_output_dir(self) -> None:
        cfg = self.cfg
        existing = ckpt.list_checkpoints(self.ckpt_root)
        if existing and not cfg.resume:
            if not cfg.overwrite:
                raise ValueError(
                    f"{str(self.ckpt_root)!r} already has {len(existing)} checkpoint(s) (newest "
                    f"{existing[-1].name}). Pass --resume to continue that run, --overwrite to delete them and start "
                    "over, or a different --output_dir."
                )
            import shutil

            shutil.rmtree(self.ckpt_root)
        if cfg.resume and not existing:
            raise ValueError(
                f"--resume: no checkpoint in {str(self.ckpt_root)!r}. Run without --resume to start a new run there."
            )
        self.ckpt_root.mkdir(parents=True, exist_ok=True)
        saved = self.ckpt_root / "train_config.json"
        if cfg.resume and saved.exists():
            old = json.loads(saved.read_text(encoding="utf-8"))
            diff = {k: (old.get(k), getattr(cfg, k)) for k in _RESUME_KEYS if old.get(k) != getattr(cfg, k)}
            if diff:
                raise ValueError(
                    "Cannot resume with different options (checkpoint value, this run): "
                    + ", ".join(f"--{k} {a!r} vs {b!r}" for k, (a, b) in diff.items())
                    + ". Resume with the original options or start a new --output_dir."
                )
            if cfg.dropout is None and "effective_dropout" in old:
                self.dropout = old["effective_dropout"]  # not re-decided from this invocation's --max_minutes
        ckpt.write_json_atomic(saved, {**dataclasses.asdict(self.cfg), "effective_dropout": self.dropout})

    def prepare_data(self) -> None:
        cfg, acc = self.cfg, self.accelerator
        with acc.main_process_first():
            corpus, report = load_parallel_corpus(
                cfg.data,
                source_column=cfg.source_column,
                target_column=cfg.target_column,
                source_lang=cfg.source_lang,
                target_lang=cfg.target_lang,
                hub_config=cfg.hub_config,
                hub_split=cfg.hub_split,
                max_lines=cfg.max_lines,
                on_bad_line=cfg.on_bad_line,  # type: ignore[arg-type]
            )
            splits = split_corpus(corpus, cfg.valid_size, cfg.test_size, cfg.split_block_size, cfg.split_seed)
            self.tokenizer = _load_or_train_tokenizer(cfg, splits["train"], self.ckpt_root)
            cache = Path(cfg.cache_dir) if cfg.cache_dir else self.out / "cache"
            train = tokenize_dataset(splits["train"], self.tokenizer, cache)
            valid = (
                tokenize_dataset(splits["validation"], self.tokenizer, cache)
                if len(splits["validation"])
                else None
            )
        self.splits = splits
        self.data_report = report
        train, dropped_train = filter_by_length(train, cfg.max_length)
        dropped_valid = 0
        if valid is not None:
            valid, dropped_valid = filter_by_length(valid, cfg.max_length)
        self.train_src = [list(x) for x in train["input_ids"]]
        self.train_tgt = [list(x) for x in train["labels"]]
        self.valid_src = [list(x) for x in valid["input_ids"]] if valid is not None else []
        self.valid_tgt = [list(x) for x in valid["labels"]] if valid is not None else []
        self.sampler = TokenBudgetBatchSampler(
            [len(s) for s in self.train_src], [len(t) for t in self.train_tgt], self.max_tokens, seed=cfg.seed,
            skip_too_long=cfg.skip_too_long,
        )  # fmt: skip
        self.stream = BatchStream(self.sampler)
        summary = report.summary() + (
            f". Split (seeded random blocks of {cfg.split_block_size} lines, seed {cfg.split_seed}): "
            f"{len(splits['train'])} train / {len(splits['validation'])} validation / {len(splits['test'])} test"
        )
        if dropped_train or dropped_valid:
            summary += (
                f". Dropped pairs longer than --max_length={cfg.max_length} tokens: {dropped_train} train, "
                f"{dropped_valid} validation"
            )
        if self.sampler.num_skipped:
            summary += f". Skipped {self.sampler.num_skipped} training pairs longer than --max_tokens={self.max_tokens}"
        self.data_summary = summary.replace(str(cfg.data), Path(cfg.data).name)
        self.emit("info", {"message": summary})

    def build_model(self) -> None:
        cfg, acc = self.cfg, self.accelerator
        vocab = len(self.tokenizer)
        config = build_config(
            cfg.preset, vocab, dropout=self.dropout, init_std=cfg.init_std, linear_init_std=cfg.linear_init_std
        )
        if cfg.max_length > config.max_position_embeddings:
            raise ValueError(
                f"--max_length={cfg.max_length} exceeds the preset's max_position_embeddings="
                f"{config.max_position_embeddings}; lower --max_length."
            )
        model = VanillaTransformerForConditionalGeneration(config)
        self.num_parameters = sum(p.numel() for p in model.parameters())
        optimizer = build_optimizer(model, self.lr_scale, weight_decay=cfg.weight_decay)
        scheduler = build_scheduler(optimizer, config.d_model, self.warmup)
        self.model, self.optimizer, self.scheduler = acc.prepare(model, optimizer, scheduler)
        self.config = config

    # ------------------------------------------------------------------------------------------------ loop
    def _batch(self, indices: list[int], src: list, tgt: list) -> dict[str, torch.Tensor]:
        batch = collate([src[i] for i in indices], [tgt[i] for i in indices], self.config.pad_token_id)
        batch["decoder_input_ids"] = shift_tokens_right(
            batch["labels"], self.config.pad_token_id, self.config.decoder_start_token_id
        )
        return {k: v.to(self.accelerator.device) for k, v in batch.items()}

    def _forward_loss(self, model, batch) -> tuple[torch.Tensor, torch.Tensor]:
        logits = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["decoder_input_ids"],
            use_cache=False,
        ).logits
        return label_smoothed_nll_loss(logits, batch["labels"], self.cfg.label_smoothing)

    def train_step(self) -> dict:
        acc, cfg = self.accelerator, self.cfg
        world, rank = acc.num_processes, acc.process_index
        batches = self.stream.take(cfg.grad_accum * world)
        mine = [
            self._batch(b, self.train_src, self.train_tgt)
            for b in batches[rank * cfg.grad_accum :][: cfg.grad_accum]
        ]
        local = torch.stack([b["ntokens"] for b in mine]).sum()
        total = acc.reduce(local.clone(), reduction="sum") if world > 1 else local
        self.model.train()
        loss_sum = torch.zeros((), device=acc.device)
        nll_sum = torch.zeros((), device=acc.device)
        for j, batch in enumerate(mine):
            sync = j == len(mine) - 1
            with nullcontext() if sync else acc.no_sync(self.model):
                loss, nll = self._forward_loss(self.model, batch)
                acc.backward(loss * world / total.float())
            loss_sum += loss.detach()
            nll_sum += nll.detach()
        grad_norm = None
        if self.clip_norm > 0:
            grad_norm = acc.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        scheduled = self.scheduler.get_last_lr()
        for group, value in zip(self.optimizer.param_groups, scheduled):
            group["lr"] = value * self.lr_factor  # the scheduler's next step() sets the unscaled value again
        lr = scheduled[0] * self.lr_factor
        self.optimizer.step()
        if not getattr(self.optimizer, "step_was_skipped", False):
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        sums = torch.stack([loss_sum, nll_sum, total.float().to(acc.device)])
        if world > 1:
            sums[:2] = acc.reduce(sums[:2].clone(), reduction="sum")
        loss_v, nll_v, ntok = (float(x) for x in sums)
        out = {"loss": loss_v / ntok, "nll_loss": nll_v / ntok, "ppl": math.exp(min(nll_v / ntok, 50.0)), "lr": lr,
               "ntokens": int(ntok)}  # fmt: skip
        if grad_norm is not None:
            out["grad_norm"] = float(grad_norm)
        return out

    @torch.no_grad()
    def validate(self, bleu: bool = True) -> dict:
        acc, cfg = self.accelerator, self.cfg
        if not self.valid_src:
            return {}
        model = acc.unwrap_model(self.model)
        model.eval()
        sampler = TokenBudgetBatchSampler(
            [len(s) for s in self.valid_src], [len(t) for t in self.valid_tgt], max(self.max_tokens, cfg.max_length),
            shuffle=False,
        )  # fmt: skip
        sums = torch.zeros(3, device=acc.device)
        for b in sampler.batches(0)[acc.process_index :: acc.num_processes]:
            batch = self._batch(b, self.valid_src, self.valid_tgt)
            with acc.autocast():
                loss, nll = self._forward_loss(model, batch)
            sums += torch.stack([loss, nll, batch["ntokens"].float()])
        if acc.num_processes > 1:
            sums = acc.reduce(sums, reduction="sum")
        loss_v, nll_v, ntok = (float(x) for x in sums)
        metrics = {
            "valid_loss": loss_v / ntok,
            "valid_nll_loss": nll_v / ntok,
            "valid_ppl": math.exp(min(nll_v / ntok, 50)),
        }
        if bleu and cfg.bleu_samples > 0 and acc.is_main_process:
            n = min(cfg.bleu_samples, len(self.splits["validation"]))
            part = self.splits["validation"].select(range(n))
            scores, _ = evaluate_translation(
                model, self.tokenizer, list(part["source"]), list(part["target"]), tokenize=self.bleu_tokenize,
                num_beams=cfg.valid_beams, length_penalty=self.length_penalty, batch_size=cfg.eval_batch_size,
            )  # fmt: skip
            metrics.update(
                valid_bleu=scores["bleu"], valid_chrf=scores["chrf"], bleu_signature=scores["bleu_signature"]
            )
        release_cpu_inference_weights()  # packed copies (CPU decoding) of weights that the next update changes
        acc.wait_for_everyone()
        return metrics

    def _trainer_state(self, step: int, best: dict) -> dict:
        return {
            "step": step,
            "stream": self.stream.state_dict(),
            "best": best,
            "train_seconds": self.train_seconds + (time.monotonic() - self.start_time),
            "target_tokens": self.target_tokens,
            "num_processes": self.accelerator.num_processes,
        }

    def validate_and_save(self, step: int, best: dict, result: TrainResult) -> None:
        acc = self.accelerator
        device_ids = [acc.device.index or 0] if acc.device.type == "cuda" else []
        with torch.random.fork_rng(devices=device_ids):  # validation must not change the training RNG stream
            metrics = self.validate()
        if metrics:
            metrics["step"] = step
            result.valid_history.append(metrics)
            acc.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)
            self.emit("eval", metrics)
            if best.get("valid_loss") is None or metrics["valid_loss"] < best["valid_loss"]:
                best.update(valid_loss=metrics["valid_loss"], checkpoint=f"{ckpt.PREFIX}{step}", step=step)
        path = ckpt.save_checkpoint(
            acc, self.ckpt_root, step, self._trainer_state(step, best), self.config.to_json_string()
        )
        if acc.is_main_process:
            if best.get("checkpoint"):
                (self.ckpt_root / "best").write_text(best["checkpoint"] + "\n", encoding="utf-8")
            ckpt.prune_checkpoints(
                self.ckpt_root,
                self.cfg.keep_last,
                keep=[best["checkpoint"]] if best.get("checkpoint") else [],
            )
        acc.wait_for_everyone()
        result.last_checkpoint = str(path)
        self.emit("checkpoint", {"path": str(path), "step": step})

    def run(self) -> TrainResult:
        cfg, acc = self.cfg, self.accelerator
        self.prepare_data()
        self.build_model()
        src_lang, tgt_lang = _languages(cfg)
        self.languages = (src_lang, tgt_lang)
        self.bleu_tokenize = cfg.sacrebleu_tokenize or ("zh" if tgt_lang == "zh" else "13a")
        result = TrainResult(
            output_dir=str(self.out), num_parameters=self.num_parameters, data_summary=self.data_summary
        )
        step, best = 0, {}
        self.train_seconds, self.target_tokens, self.start_time = 0.0, 0, time.monotonic()
        if cfg.resume:
            path = ckpt.latest_checkpoint(self.ckpt_root)
            if path is None:
                raise ValueError(f"--resume: no checkpoint in {str(self.ckpt_root)!r}.")
            state = ckpt.load_checkpoint(acc, path)
            if state.get("num_processes") != acc.num_processes:
                raise ValueError(
                    f"Checkpoint {str(path)!r} was written by {state.get('num_processes')} process(es), this run has "
                    f"{acc.num_processes}; resume with the same number of processes."
                )
            self.stream.load_state_dict(state["stream"])
            step, best = int(state["step"]), dict(state.get("best") or {})
            self.train_seconds, self.target_tokens = (
                float(state["train_seconds"]),
                int(state["target_tokens"]),
            )
            self.emit("info", {"message": f"Resumed from {path} at step {step}, epoch {self.stream.epoch}"})
        if cfg.tensorboard:
            hparams = {
                k: (v if isinstance(v, (int, float, str, bool)) else str(v))
                for k, v in dataclasses.asdict(cfg).items()
            }
            acc.init_trackers("train", config=hparams)
        self.emit("start", {"step": step, "max_steps": cfg.max_steps, "num_parameters": self.num_parameters,
                            "max_tokens": self.max_tokens, "num_processes": acc.num_processes})  # fmt: skip
        self.export_marks = [m for m in self.export_marks if m * 60 > self.train_seconds]  # passed before a resume
        start = self.start_time = time.monotonic()
        session_tokens, last_saved = 0, step if cfg.resume else None
        stopped = ""
        while True:
            if cfg.max_steps is not None and step >= cfg.max_steps:
                stopped = f"max_steps={cfg.max_steps}"
            elif cfg.max_epochs is not None and self.stream.epoch >= cfg.max_epochs:
                stopped = f"max_epochs={cfg.max_epochs}"
            elif cfg.max_minutes and time.monotonic() - start >= cfg.max_minutes * 60:
                stopped = f"max_minutes={cfg.max_minutes}"
            progress = self.budget_progress(step, time.monotonic() - start) if self.cooldown else 0.0
            if acc.num_processes > 1:  # every process must stop at the same update, with the same learning rate
                flags = torch.tensor([1.0 if stopped else 0.0, progress], device=acc.device)
                flags = acc.reduce(flags, reduction="sum")
                if float(flags[0]) > 0 and not stopped:
                    stopped = "another process stopped"
                progress = float(flags[1]) / acc.num_processes
            if stopped:
                break
            if self.cooldown:
                self.lr_factor = min(1.0, max(0.0, (1.0 - progress) / self.cooldown))
            logs = self.train_step()
            step += 1
            session_tokens += logs["ntokens"]
            self.target_tokens += logs["ntokens"]
            logs["step"] = step
            logs["epoch"] = self.stream.epoch
            logs["seconds"] = self.train_seconds + time.monotonic() - start  # training time, for plots
            result.history.append(logs)
            self.emit("step", logs)
            if step % cfg.log_every == 0:
                acc.log({f"train/{k}": v for k, v in logs.items() if k != "step"}, step=step)
            if step % cfg.eval_every == 0:
                self.validate_and_save(step, best, result)
                last_saved = step
            if self.average_last > 1 and step % self.average_every == 0:
                self.take_snapshot(step)
            if self.export_marks:
                minutes = (self.train_seconds + time.monotonic() - start) / 60
                due = torch.tensor([1.0 if minutes >= self.export_marks[0] else 0.0], device=acc.device)
                if acc.num_processes > 1:  # every process must export at the same update
                    due = acc.reduce(due, reduction="sum")
                if float(due) > 0:
                    self.export_at_mark(step, self.export_marks.pop(0), result)
        elapsed = time.monotonic() - start
        result.target_tokens_per_second = session_tokens / max(elapsed, 1e-9)
        result.step, result.epoch, result.stopped_because = step, self.stream.epoch, stopped
        if last_saved != step:
            self.validate_and_save(step, best, result)
        result.train_seconds = self.train_seconds + elapsed
        if self.average_last > 1:
            self.average_snapshots(step, result)
        result.model = acc.unwrap_model(self.model)
        if cfg.export:
            self.finish(result, best)
        if acc.is_main_process:
            from .plots import write_training_plots

            write_training_plots(result, self.out / "plots", window=cfg.log_every)
        acc.end_training()
        return result

    def budget_progress(self, step: int, seconds: float) -> float:
        """The fraction of the budget done before the next update: the largest of step / --max_steps, epochs /
        --max_epochs and this invocation's training seconds / --max_minutes (the rule that stops the run first)."""
        cfg, done = self.cfg, [0.0]
        if cfg.max_steps:
            done.append(step / cfg.max_steps)
        if cfg.max_epochs:
            done.append(self.epochs_done() / cfg.max_epochs)
        if cfg.max_minutes:
            done.append(seconds / (cfg.max_minutes * 60))
        return min(1.0, max(done))

    # ------------------------------------------------------------------------------ checkpoint averaging
    def _weights(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the model's weights."""
        model = self.accelerator.unwrap_model(self.model)
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}

    def take_snapshot(self, step: int) -> None:
        """Keep a CPU copy of the weights at ``step``; only the newest ``average_last`` are kept (in memory, so a
        resumed run averages the snapshots taken since it resumed)."""
        self.snapshots.append((step, self._weights()))
        del self.snapshots[: -self.average_last]

    def average_snapshots(self, step: int, result: TrainResult) -> None:
        """Checkpoint averaging (paper, section 6.1, on in-memory snapshots): replace the final weights by the
        mean of the last ``average_last`` snapshots (the final weights included) if that lowers the validation
        loss (or, without a validation split, always). The saved checkpoints keep the un-averaged training state,
        so resuming is unaffected; only the exported model is averaged."""
        if not self.snapshots or self.snapshots[-1][0] != step:
            self.take_snapshot(step)
        info = self._average_into_model(self.snapshots)
        if info is not None:
            result.averaging = info
            self.emit("average", info)

    def _average_into_model(self, snapshots: list) -> dict | None:
        """Leave the mean of ``snapshots`` in the model if it validates better than the current weights (or there
        is no validation split), else the current weights. None (model untouched) when there is nothing to
        average."""
        if len(snapshots) < 2:
            return None
        model = self.accelerator.unwrap_model(self.model)
        current = self._weights()
        device_ids = [self.accelerator.device.index or 0] if self.accelerator.device.type == "cuda" else []
        with torch.random.fork_rng(devices=device_ids):
            before = self.validate(bleu=False)
            ckpt.load_weights_into(model, ckpt.average_state_dicts([w for _, w in snapshots]))
            after = self.validate(bleu=False)
        kept = not before or after["valid_loss"] < before["valid_loss"]
        if not kept:
            ckpt.load_weights_into(model, current)
        return {
            "steps": [s for s, _ in snapshots],
            "kept": kept,
            "valid_loss_final": before.get("valid_loss"),
            "valid_loss_averaged": after.get("valid_loss"),
            "valid_ppl_final": before.get("valid_ppl"),
            "valid_ppl_averaged": after.get("valid_ppl"),
        }

    def export_at_mark(self, step: int, minutes: float, result: TrainResult) -> None:
        """Export the model as the run would if it stopped now (final weights, or their average with the last
        snapshots when that validates better) to OUTPUT_DIR/minute-M/, then put the training weights back."""
        from modeling import save_with_remote_code

        current = self._weights()
        snapshots = []
        if self.average_last > 1:
            snapshots = [s for s in self.snapshots if s[0] != step] + [(step, current)]
        info = self._average_into_model(snapshots[-self.average_last :])
        averaged = info is not None and info["kept"]
        folder = self.out / f"minute-{minutes:g}"
        if self.accelerator.is_main_process:
            save_with_remote_code(self.accelerator.unwrap_model(self.model), folder, self.tokenizer)
        if averaged:
            ckpt.load_weights_into(self.accelerator.unwrap_model(self.model), current)
        self.accelerator.wait_for_everyone()
        record = {"minutes": minutes, "step": step, "path": str(folder),
                  "averaged_steps": info["steps"] if averaged else None}  # fmt: skip
        result.exports.append(record)
        self.emit("export_at", record)

    def epochs_done(self) -> float:
        return self.stream.epoch + self.sampler.position / max(
            1, len(self.sampler.batches(self.stream.epoch))
        )

    # ------------------------------------------------------------------------------------------------ end
    @torch.no_grad()
    def choose_length_penalty(self, model, result: TrainResult, max_sentences: int = 500) -> None:
        """Translate (up to ``max_sentences`` of) the validation split with --test_beams beams once per candidate
        length penalty and keep the one with the best BLEU (then chrF); skipped when --length_penalty is given,
        with greedy test decoding, or without a validation split."""
        cfg, valid = self.cfg, self.splits["validation"]
        result.length_penalty = self.length_penalty
        if cfg.length_penalty is not None or cfg.test_beams < 2 or not len(valid) or len(self.lp_candidates) < 2:
            return
        part = valid.select(range(min(max_sentences, len(valid))))
        model.eval()
        for lp in self.lp_candidates:
            scores, _ = evaluate_translation(
                model, self.tokenizer, list(part["source"]), list(part["target"]), tokenize=self.bleu_tokenize,
                num_beams=cfg.test_beams, length_penalty=lp, batch_size=cfg.eval_batch_size,
            )  # fmt: skip
            result.length_penalty_search.append({"length_penalty": lp, "bleu": scores["bleu"], "chrf": scores["chrf"]})
        best = max(result.length_penalty_search, key=lambda r: (r["bleu"], r["chrf"]))
        self.length_penalty = result.length_penalty = best["length_penalty"]
        self.emit("length_penalty", {"search": result.length_penalty_search, "chosen": self.length_penalty,
                                     "num_sentences": len(part)})  # fmt: skip

    def finish(self, result: TrainResult, best: dict) -> None:
        cfg, acc = self.cfg, self.accelerator
        model = acc.unwrap_model(self.model)
        test = self.splits["test"]
        if acc.is_main_process:
            self.choose_length_penalty(model, result)
            model.generation_config.length_penalty = self.length_penalty
            if len(test):
                self.emit("test_start", {"num_sentences": len(test)})
                hyps = translate(
                    model, self.tokenizer, list(test["source"]), num_beams=cfg.test_beams,
                    length_penalty=self.length_penalty, batch_size=cfg.eval_batch_size,
                    progress=lambda n: self.emit("test_progress", {"n": n}),
                )  # fmt: skip
                result.test_metrics = score_translations(
                    hyps, list(test["target"]), tokenize=self.bleu_tokenize
                )
                result.test_metrics.update(
                    num_beams=cfg.test_beams, length_penalty=self.length_penalty, split="test"
                )
                result.samples = [
                    {"source": s, "reference": r, "hypothesis": h}
                    for s, r, h in list(zip(test["source"], test["target"], hyps))[: cfg.num_samples]
                ]
                extra = cfg.sample_sentences
                if extra is None and self.languages[0] == "zh":
                    extra = "我爱机器翻译"
                texts = [t.strip() for t in (extra or "").split("|") if t.strip()]
                if texts:
                    outs = translate(
                        model,
                        self.tokenizer,
                        texts,
                        num_beams=cfg.test_beams,
                        length_penalty=self.length_penalty,
                    )
                    result.samples += [
                        {"source": s, "reference": None, "hypothesis": h} for s, h in zip(texts, outs)
                    ]
                acc.log(
                    {"test/bleu": result.test_metrics["bleu"], "test/chrf": result.test_metrics["chrf"]},
                    step=result.step,
                )
                ckpt.write_json_atomic(self.out / "eval_results.json", result.test_metrics)
            save_with_remote_code(model, self.out, self.tokenizer)
            card = render_model_card(
                load_template(cfg.model_card), self.card_values(result, best), strict=False
            )
            (self.out / "README.md").write_text(card, encoding="utf-8")
            self.emit("exported", {"path": str(self.out)})
        acc.wait_for_everyone()

    def card_values(self, result: TrainResult, best: dict) -> dict:
        cfg = self.cfg
        src, tgt = self.languages
        m = result.test_metrics or {}
        c = self.config
        recipe = (
            f"Preset `{cfg.preset}`: d_model {c.d_model}, {c.encoder_attention_heads} heads, d_ff {c.encoder_ffn_dim}, "
            f"{c.encoder_layers}+{c.decoder_layers} layers, dropout {c.dropout}, vocabulary {c.vocab_size} (joint BPE), "
            f"{self.num_parameters:,} parameters. Adam (0.9, 0.98, 1e-9), lr = {self.lr_scale} * d_model^-0.5 * "
            f"min(step^-0.5, step * {self.warmup}^-1.5), label smoothing {cfg.label_smoothing}, gradient clipping "
            f"{self.clip_norm or 'off'}, "
            + (f"linear learning-rate cooldown to 0 over the last {self.cooldown:.0%} of the budget, " if self.cooldown else "")
            + f"token budget "
            f"{self.max_tokens} x {cfg.grad_accum} accumulation x {self.accelerator.num_processes} process(es), "
            f"{result.step} updates ({self.epochs_done():.2f} epochs), {self.target_tokens:,} target tokens, "
            f"{result.train_seconds / 60:.1f} min on {self.accelerator.device.type}, seed {cfg.seed}."
        )
        avg = result.averaging
        if avg:
            recipe += (
                f" Checkpoint averaging: the exported weights are the average of the weights at updates "
                f"{', '.join(map(str, avg['steps']))}" if avg["kept"] else
                f" Checkpoint averaging of updates {', '.join(map(str, avg['steps']))} did not lower the validation "
                f"loss; the exported weights are the final ones"
            ) + (
                f" (validation perplexity {avg['valid_ppl_final']:.2f} final, {avg['valid_ppl_averaged']:.2f} averaged)."
                if avg["valid_ppl_final"] is not None else "."
            )  # fmt: skip
        if m:
            metrics = (
                f"| split | sentences | BLEU | chrF |\n|---|---|---|---|\n| test | {m['num_sentences']} | {m['bleu']} | "
                f"{m['chrf']} |\n\nBeam {m['num_beams']}, length penalty {m['length_penalty']}"
            )
            if result.length_penalty_search:
                tried = ", ".join(
                    f"{r['length_penalty']} (BLEU {r['bleu']}, chrF {r['chrf']})" for r in result.length_penalty_search
                )
                metrics += f", chosen on the validation split among {tried}"
            metrics += ". The exported `generation_config.json` uses the same settings."
        else:
            metrics = "No test split was evaluated."
        return {
            "model_name": self.out.name,
            "source_lang": src or "source",
            "target_lang": tgt or "target",
            "data": self.data_summary,
            "recipe": recipe,
            "metrics": metrics,
            "bleu": m.get("bleu", "n/a"),
            "chrf": m.get("chrf", "n/a"),
            "bleu_signature": m.get("bleu_signature", "n/a"),
            "chrf_signature": m.get("chrf_signature", "n/a"),
            "preset": cfg.preset,
            "num_parameters": f"{self.num_parameters:,}",
            "steps": result.step,
            "train_minutes": f"{result.train_seconds / 60:.1f}",
            "valid_loss": f"{best['valid_loss']:.3f}" if best.get("valid_loss") is not None else "n/a",
            "train_pairs": len(self.splits["train"]),
            "valid_pairs": len(self.splits["validation"]),
            "test_pairs": len(self.splits["test"]),
            "data_file": Path(cfg.data).name,
            "samples": "\n".join(
                f"- {s['source']} → {s['hypothesis']}"
                + (f" (reference: {s['reference']})" if s["reference"] else "")
                for s in result.samples
            )
            or "n/a",
        }


def train(cfg: TrainConfig, event: Event | None = None) -> TrainResult:
    """Run a training job described by ``cfg``; ``event(name, info)`` receives progress events ("info",
    "start", "step", "eval", "checkpoint", "test_start", "test_progress", "exported") for a progress display.

    Works unchanged under ``accelerate launch`` (any number of processes)."""
    return _Trainer(cfg, event).run()
