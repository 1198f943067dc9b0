"""The training loop: token-budget batches -> label-smoothed loss -> Adam + inverse-sqrt schedule, with accelerate
(single process, multi-process DDP, mixed precision), periodic validation, atomic checkpoints and exact resume.

The objective (``--objective``) chooses the model family (`presets.build_family_config`, `objective_model`), the
examples and their batches (`validation.Objective`) and the positions the loss scores (`validation.forward_loss`);
everything else — batching by token budget, the update, resume, averaging, export — is the same for all. The
random spans or masks of the batch numbered j of update s are drawn from ``batch_generator(seed, s, j)``, so a
resumed run draws the same ones.

Loss normalisation (fairseq's): every optimizer update sums the label-smoothed loss over all target tokens of all
its batches — ``grad_accum`` batches on each of ``num_processes`` processes — and divides by the total number of
those target tokens (all-reduced across processes). So 2 processes x 1 batch and 1 process x 2 accumulated batches
compute the same update from the same global batches (up to float summation order).

One run, in order: options checked -> output folder prepared (`RunDir`) -> `Recipe` resolved once -> data
(`TrainingData`) -> model, optimizer, scheduler -> resume from the latest checkpoint (`TrainState` + accelerate's
model/optimizer/scheduler/RNG state) -> updates until a budget ends, validating and checkpointing every
``eval_every`` updates -> averaging (`training.averaging`) -> test score and export (`training.finish`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from vanilla_transformer.export.ct2 import check_expressible, export_ct2
from vanilla_transformer.inference import bleu_tokenizer_for
from vanilla_transformer.modeling import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerPreTrainedModel,
    save_with_remote_code,
)

from . import checkpoint as ckpt
from .averaging import Snapshots, Weights, average_if_better, weights_copy
from .batching import batch_generator
from .card import card_values
from .data import TrainingData, prepare_training_data
from .finish import Evaluation, evaluate_run, export_model, score_test_loss
from .hardware import setup_accelerator
from .options import TrainConfig, check_options
from .plots import write_training_plots
from .recipe import (
    Recipe,
    budget_dropout_decision,
    dropout_pending,
    resolve_recipe,
    resume_changes,
    warmup_note,
)
from .run_dir import RunDir, options_dict
from .schedule import budget_progress, build_optimizer, build_scheduler, cooldown_factor
from .validation import SEQ2SEQ_OBJECTIVES, forward_loss, validation_metrics

Event = Callable[[str, dict], None]


def objective_model_class(objective: str) -> type[VanillaTransformerPreTrainedModel]:
    """The model class an objective trains: the encoder-decoder with its LM head (translation, span corruption),
    `VanillaDecoderOnlyForCausalLM` (causal_lm) or `VanillaEncoderOnlyForMaskedLM` (masked_lm)."""
    if objective in SEQ2SEQ_OBJECTIVES:
        return VanillaTransformerForConditionalGeneration
    if objective == "causal_lm":
        from vanilla_transformer.modeling import VanillaDecoderOnlyForCausalLM

        return VanillaDecoderOnlyForCausalLM
    if objective == "masked_lm":
        from vanilla_transformer.modeling import VanillaEncoderOnlyForMaskedLM

        return VanillaEncoderOnlyForMaskedLM
    raise ValueError(
        f"Unknown objective {objective!r}; choose translation, causal_lm, masked_lm or span_corruption."
    )


def objective_model(cfg: TrainConfig, recipe: Recipe, vocab_size: int) -> VanillaTransformerPreTrainedModel:
    """A new model for ``cfg.objective`` (the recipe's architecture), or the weights of ``--init_from`` (its
    architecture, with the recipe's dropout when ``--dropout`` or the long-budget rule set one).

    Raises:
        ValueError: the ``--init_from`` model is not of the objective's family, or its vocabulary is smaller than the
            tokenizer's.
    """
    model_class = objective_model_class(cfg.objective)
    if cfg.init_from is None:
        return model_class(recipe.model_config(vocab_size))
    from transformers import AutoConfig

    found = AutoConfig.from_pretrained(cfg.init_from)
    if not isinstance(found, model_class.config_class):
        raise ValueError(
            f"--init_from {cfg.init_from!r} holds a {type(found).__name__} model; --objective {cfg.objective} trains a "
            f"{model_class.__name__}. Start from a model of that family, or drop --init_from."
        )
    overrides = {"dropout": recipe.dropout} if recipe.dropout is not None else {}
    model = model_class.from_pretrained(cfg.init_from, **overrides)
    if model.config.vocab_size < vocab_size:
        raise ValueError(
            f"--init_from {cfg.init_from!r} has a vocabulary of {model.config.vocab_size} tokens, the tokenizer "
            f"{vocab_size}; use the folder's own tokenizer (leave --tokenizer unset)."
        )
    return model


@dataclass
class TrainState:
    """Everything of a run's progress that is not a tensor: exactly what a checkpoint saves as
    ``trainer_state.json`` (model, optimizer, scheduler and RNG states are saved by accelerate)."""

    step: int = 0  # optimizer updates done, across resumes
    stream: dict = field(
        default_factory=dict
    )  # the batch order's position: epoch, position, seed, max_tokens
    best: dict = field(default_factory=dict)  # valid_loss, checkpoint and step of the best validation so far
    train_seconds: float = 0.0  # seconds in the training loop, all invocations
    target_tokens: int = 0  # target tokens trained on, all invocations
    num_processes: int = 1


@dataclass
class TrainResult:
    step: int = 0
    epoch: int = 0
    epochs: float = 0.0  # epochs done, fractional
    history: list[dict] = field(default_factory=list)
    valid_history: list[dict] = field(default_factory=list)
    test_metrics: dict | None = None
    samples: list[dict] = field(default_factory=list)
    stopped_because: str = ""
    target_tokens_per_second: float = 0.0  # this invocation's
    target_tokens: int = 0
    train_seconds: float = 0.0
    num_parameters: int = 0
    num_processes: int = 1
    device: str = "cpu"
    mixed_precision: str = (
        "no"  # what the run used: --mixed_precision, else accelerate's configuration, else automatic
    )
    precision: dict = field(
        default_factory=dict
    )  # training.hardware.PrecisionChoice: mixed_precision, source, reason
    data_summary: str = ""
    split_sizes: dict = field(default_factory=dict)
    split_origin: dict = field(
        default_factory=dict
    )  # where each split came from (the data's own, or held out)
    best_valid_loss: float | None = None
    output_dir: str = ""
    last_checkpoint: str | None = None
    averaging: dict | None = None  # what checkpoint averaging did (training.averaging.average_if_better)
    model: Any = field(default=None, repr=False)  # the final (possibly averaged) model, unwrapped, in memory
    length_penalty: float | None = (
        None  # used for the test split and written to the exported generation config
    )
    length_penalty_search: list[dict] = field(default_factory=list)  # validation BLEU/chrF per candidate
    exports: list[dict] = field(default_factory=list)  # the --export_at_minutes models


class Trainer:
    """One training run of ``cfg`` (see the module docstring); ``run()`` returns its `TrainResult`."""

    def __init__(self, cfg: TrainConfig, event: Event | None = None):
        from accelerate.utils import set_seed

        check_options(cfg)
        self.cfg = cfg
        self.emit = event or (lambda name, info: None)
        self.run_dir = RunDir(cfg.output_dir, cfg.cache_dir)
        saved_precision = (self.run_dir.saved_recipe() or {}).get("precision") if cfg.resume else None
        self.accelerator, self.precision = setup_accelerator(cfg, self.run_dir.runs, saved_precision)
        acc = self.accelerator
        if acc.is_main_process:
            self.run_dir.prepare(cfg)
        acc.wait_for_everyone()
        saved_recipe = self.run_dir.saved_recipe() if cfg.resume else None
        self.recipe: Recipe = dataclasses.replace(
            resolve_recipe(cfg, saved_recipe), precision=self.precision.to_dict()
        )
        notes = [resume_changes(saved_recipe, self.recipe)]
        set_seed(cfg.seed)
        self.data: TrainingData = prepare_training_data(cfg, self.recipe, self.run_dir, acc)
        self.emit("info", {"message": self.data.summary})
        if dropout_pending(cfg, saved_recipe):
            self.recipe, note = budget_dropout_decision(
                cfg, self.recipe, len(self.data.sampler.batches(0)), acc.num_processes, self.seconds_per_batch
            )
            notes.append(note)
        if acc.is_main_process:
            self.run_dir.save(cfg, self.recipe)
        for note in notes:
            if note:
                self.emit("info", {"message": note})
        model = objective_model(cfg, self.recipe, len(self.data.tokenizer))
        self.config = model.config
        if cfg.export_ct2:
            check_expressible(self.config)  # before training, not after it
        if cfg.max_length > self.config.max_position_embeddings:
            raise ValueError(
                f"--max_length={cfg.max_length} exceeds the preset's max_position_embeddings="
                f"{self.config.max_position_embeddings}; lower --max_length."
            )
        self.num_parameters = sum(p.numel() for p in model.parameters())
        optimizer = build_optimizer(model, self.recipe.lr_scale, weight_decay=cfg.weight_decay)
        scheduler = build_scheduler(optimizer, self.config.d_model, self.recipe.warmup_steps)
        self.model, self.optimizer, self.scheduler = acc.prepare(model, optimizer, scheduler)
        self.emit("info", {"message": self.precision.describe()})
        self.snapshots = Snapshots(self.recipe.average_last, self.recipe.average_every)
        self.languages = cfg.languages()
        self.bleu_tokenize = bleu_tokenizer_for(self.languages[1], cfg.sacrebleu_tokenize)

    def seconds_per_batch(self, batches: int = 4) -> float:
        """Seconds of one training batch's forward and backward pass here, for the long-budget dropout rule
        (`recipe.budget_dropout_decision`): a throwaway model of the run's architecture, built in a forked RNG so
        that training is unchanged, passes over one untimed batch (allocator warm-up) and ``batches`` timed ones
        spread over the first epoch, in the run's precision. Every process measures at once (they share the
        machine as in training) and all use the main process's figure."""
        acc, cfg, data = self.accelerator, self.cfg, self.data
        epoch = data.sampler.batches(0)
        if not epoch:  # nothing to time (every pair skipped): the minutes cannot be converted
            return 0.0
        picks = [epoch[i * len(epoch) // (batches + 1)] for i in range(batches + 1)]
        with torch.random.fork_rng(devices=[acc.device.index or 0] if acc.device.type == "cuda" else []):
            model = objective_model(cfg, self.recipe, len(data.tokenizer)).to(acc.device).train()
            for j, indices in enumerate(picks):
                if j == 1:
                    start = time.perf_counter()
                batch = data.objective.batch(
                    indices,
                    *data.train_examples(0),
                    model.config,
                    acc.device,
                    batch_generator(cfg.seed, 0, j),
                )
                with acc.autocast():
                    loss, _ = forward_loss(model, batch, cfg.label_smoothing, data.objective.name)
                loss.backward()
            if acc.device.type == "cuda":
                torch.cuda.synchronize(acc.device)
            seconds = (time.perf_counter() - start) / batches
        del model
        if acc.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            box = [seconds]
            broadcast_object_list(box)
            seconds = box[0]
        return seconds

    @property
    def unwrapped(self) -> VanillaTransformerPreTrainedModel:
        return self.accelerator.unwrap_model(self.model)

    # ------------------------------------------------------------------------------------------------ updates
    def train_step(self, lr_factor: float, step: int = 0) -> dict:
        """Optimizer update ``step + 1`` over the next ``grad_accum x num_processes`` batches, the scheduled learning
        rate multiplied by ``lr_factor`` (the cool-down); returns its logs (per-token loss, nll, ppl, lr, ...)."""
        acc, cfg, data = self.accelerator, self.cfg, self.data
        world, rank = acc.num_processes, acc.process_index
        batches = data.stream.take(cfg.grad_accum * world)
        first = rank * cfg.grad_accum
        mine = [
            data.objective.batch(
                b,
                *data.train_examples(epoch),
                self.config,
                acc.device,
                batch_generator(cfg.seed, step, first + j),
            )
            for j, (epoch, b) in enumerate(batches[first:][: cfg.grad_accum])
        ]
        local = torch.stack([b["ntokens"] for b in mine]).sum()
        total = acc.reduce(local.clone(), reduction="sum") if world > 1 else local
        self.model.train()
        loss_sum = torch.zeros((), device=acc.device)
        nll_sum = torch.zeros((), device=acc.device)
        for j, batch in enumerate(mine):
            sync = j == len(mine) - 1
            with nullcontext() if sync else acc.no_sync(self.model):
                loss, nll = forward_loss(self.model, batch, cfg.label_smoothing, data.objective.name)
                acc.backward(loss * world / total.float())
            loss_sum += loss.detach()
            nll_sum += nll.detach()
        grad_norm = None
        if self.recipe.clip_norm > 0:
            grad_norm = acc.clip_grad_norm_(self.model.parameters(), self.recipe.clip_norm)
        scheduled = self.scheduler.get_last_lr()
        for group, value in zip(self.optimizer.param_groups, scheduled):
            group["lr"] = value * lr_factor  # the scheduler's next step() sets the unscaled value again
        self.optimizer.step()
        if not getattr(self.optimizer, "step_was_skipped", False):
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        sums = torch.stack([loss_sum, nll_sum, total.float().to(acc.device)])
        if world > 1:
            sums[:2] = acc.reduce(sums[:2].clone(), reduction="sum")
        loss_v, nll_v, ntok = (float(x) for x in sums)
        out = {
            "loss": loss_v / ntok,
            "nll_loss": nll_v / ntok,
            "ppl": math.exp(min(nll_v / ntok, 50.0)),
            "lr": scheduled[0] * lr_factor,
            "ntokens": int(ntok),
        }
        if grad_norm is not None:
            out["grad_norm"] = float(grad_norm)
        return out

    # ------------------------------------------------------------------------------------- validation, saving
    def validate(self, bleu: bool = True) -> dict:
        """Validation metrics of the current weights (`training.validation`); {} without a validation split."""
        cfg, data = self.cfg, self.data
        if not data.valid_src:
            return {}
        valid = data.splits["validation"]
        metrics = validation_metrics(
            self.unwrapped,
            data.tokenizer,
            data.valid_src,
            data.valid_tgt,
            valid["source"],
            valid["target"],
            label_smoothing=cfg.label_smoothing,
            bleu_samples=cfg.bleu_samples if bleu else 0,
            length_penalty=self.recipe.length_penalty,
            batch_size=cfg.eval_batch_size,
            tokenize=self.bleu_tokenize,
            num_beams=cfg.valid_beams,
            max_tokens=max(self.recipe.max_tokens, cfg.max_length),
            accelerator=self.accelerator,
            objective=data.objective,
        )
        self.accelerator.wait_for_everyone()
        return metrics

    def validate_and_save(self, state: TrainState) -> tuple[dict, str]:
        """Validate (in a forked RNG: validation must not change the training random stream), update
        ``state.best``, save a checkpoint and prune old ones; returns (metrics, checkpoint path)."""
        acc = self.accelerator
        with torch.random.fork_rng(devices=[acc.device.index or 0] if acc.device.type == "cuda" else []):
            metrics = self.validate()
        if metrics:
            metrics["step"] = state.step
            acc.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=state.step)
            self.emit("eval", metrics)
            if state.best.get("valid_loss") is None or metrics["valid_loss"] < state.best["valid_loss"]:
                state.best = {
                    "valid_loss": metrics["valid_loss"],
                    "checkpoint": f"{ckpt.PREFIX}{state.step}",
                    "step": state.step,
                }
        root = self.run_dir.checkpoints
        path = ckpt.save_checkpoint(
            acc, root, state.step, dataclasses.asdict(state), self.config.to_json_string()
        )
        if acc.is_main_process:
            best = state.best.get("checkpoint")
            if best:
                (root / "best").write_text(best + "\n", encoding="utf-8")
            ckpt.prune_checkpoints(root, self.cfg.keep_last, keep=[best] if best else [])
        acc.wait_for_everyone()
        self.emit("checkpoint", {"path": str(path), "step": state.step})
        return metrics, str(path)

    def resume_state(self) -> TrainState:
        """A fresh `TrainState`, or the one of the latest checkpoint (which is loaded into model, optimizer,
        scheduler and RNG) with ``--resume``."""
        acc = self.accelerator
        state = TrainState(stream=self.data.stream.state_dict(), num_processes=acc.num_processes)
        if not self.cfg.resume:
            return state
        path = ckpt.latest_checkpoint(self.run_dir.checkpoints)
        if path is None:
            raise ValueError(f"--resume: no checkpoint in {str(self.run_dir.checkpoints)!r}.")
        saved = ckpt.load_checkpoint(acc, path)
        if saved.get("num_processes") != acc.num_processes:
            raise ValueError(
                f"Checkpoint {str(path)!r} was written by {saved.get('num_processes')} process(es), this run has "
                f"{acc.num_processes}; resume with the same number of processes."
            )
        state = TrainState(
            **{f.name: saved[f.name] for f in dataclasses.fields(TrainState) if f.name in saved}
        )
        state.best = dict(state.best or {})
        self.data.stream.load_state_dict(state.stream)
        self.emit(
            "info", {"message": f"Resumed from {path} at step {state.step}, epoch {self.data.stream.epoch}"}
        )
        return state

    # ------------------------------------------------------------------------------------------- exports
    def average(self, step: int, current: Weights) -> dict | None:
        """Leave the average of the newest snapshots in the model when it validates better (`training.averaging`);
        ``current`` is a copy of the weights at ``step``."""
        window = self.snapshots.window(step, current)
        return average_if_better(self.unwrapped, window, current, lambda: self.validate(bleu=False))

    def export_at_mark(self, step: int, minutes: float) -> dict:
        """Export the model as the run would if it stopped now (averaging included) to OUTPUT_DIR/minute-M/, then
        put the training weights back. Its generation config decodes with the run's ``--length_penalty`` (default
        1.0; a search on validation runs only at the end of the run)."""
        current = weights_copy(self.unwrapped) if self.snapshots.enabled else {}
        info = self.average(step, current) if self.snapshots.enabled else None
        averaged = info is not None and info["kept"]
        folder = self.run_dir.minute_export(minutes)
        if self.accelerator.is_main_process:
            generation = self.unwrapped.generation_config
            if self.cfg.objective == "translation" and generation.num_beams > 1:
                generation.length_penalty = self.recipe.length_penalty
            save_with_remote_code(self.unwrapped, folder, self.data.tokenizer)
        if averaged:
            ckpt.load_weights_into(self.unwrapped, current)
        self.accelerator.wait_for_everyone()
        return {
            "minutes": minutes,
            "step": step,
            "path": str(folder),
            "averaged_steps": info["steps"] if averaged else None,
        }

    def epochs_done(self) -> float:
        sampler = self.data.sampler
        return self.data.stream.epoch + sampler.position / max(
            1, len(sampler.batches(self.data.stream.epoch))
        )

    # ------------------------------------------------------------------------------------------------ the run
    def stop_reason(self, step: int, seconds: float) -> str:
        """Why the run stops before the next update ("" to go on); ``seconds``: this invocation's training time."""
        cfg = self.cfg
        if cfg.max_steps is not None and step >= cfg.max_steps:
            return f"max_steps={cfg.max_steps}"
        if cfg.max_epochs is not None and self.data.stream.epoch >= cfg.max_epochs:
            return f"max_epochs={cfg.max_epochs}"
        if cfg.max_minutes and seconds >= cfg.max_minutes * 60:
            return f"max_minutes={cfg.max_minutes}"
        return ""

    def agree(self, stopped: str, progress: float) -> tuple[str, float]:
        """Every process stops at the same update, with the same budget progress (the mean of the processes')."""
        acc = self.accelerator
        if acc.num_processes == 1:
            return stopped, progress
        flags = acc.reduce(
            torch.tensor([1.0 if stopped else 0.0, progress], device=acc.device), reduction="sum"
        )
        if float(flags[0]) > 0 and not stopped:
            stopped = "another process stopped"
        return stopped, float(flags[1]) / acc.num_processes

    def mark_due(self, mark: float, seconds: float) -> bool:
        """Whether the export mark (minutes of training, all invocations) is reached, agreed by every process."""
        acc = self.accelerator
        due = torch.tensor([1.0 if seconds / 60 >= mark else 0.0], device=acc.device)
        if acc.num_processes > 1:
            due = acc.reduce(due, reduction="sum")
        return float(due) > 0

    def run(self) -> TrainResult:
        cfg, acc, recipe, data = self.cfg, self.accelerator, self.recipe, self.data
        state = self.resume_state()
        result = TrainResult(
            output_dir=str(self.run_dir.root),
            num_parameters=self.num_parameters,
            data_summary=data.summary,
            num_processes=acc.num_processes,
            device=acc.device.type,
            mixed_precision=acc.mixed_precision,
            precision=self.precision.to_dict(),
            split_sizes={name: len(split) for name, split in data.splits.items()},
            split_origin=data.split_origin,
        )
        if acc.log_with:
            hparams = {
                k: (v if isinstance(v, (int, float, str, bool)) else str(v))
                for k, v in options_dict(cfg).items()
            }
            hparams["mixed_precision"] = acc.mixed_precision  # also when accelerate's configuration chose it
            acc.init_trackers("train", config=hparams)
        self.emit(
            "start",
            {
                "step": state.step,
                "max_steps": cfg.max_steps,
                "num_parameters": self.num_parameters,
                "max_tokens": recipe.max_tokens,
                "num_processes": acc.num_processes,
            },
        )
        marks = [m for m in recipe.export_marks if m * 60 > state.train_seconds]  # passed before a resume
        before, start = state.train_seconds, time.monotonic()
        tokens_now, last_saved = 0, state.step if cfg.resume else None
        while True:
            seconds = time.monotonic() - start
            progress = budget_progress(
                step=state.step,
                epochs=self.epochs_done(),
                seconds=seconds,
                max_steps=cfg.max_steps,
                max_epochs=cfg.max_epochs,
                max_minutes=cfg.max_minutes,
            )
            stopped, progress = self.agree(self.stop_reason(state.step, seconds), progress)
            if stopped:
                break
            logs = self.train_step(cooldown_factor(progress, recipe.cooldown), state.step)
            state.step += 1
            state.stream = data.stream.state_dict()
            state.target_tokens += logs["ntokens"]
            state.train_seconds = before + time.monotonic() - start
            tokens_now += logs["ntokens"]
            logs.update(
                step=state.step, epoch=data.stream.epoch, seconds=state.train_seconds, budget=progress
            )
            result.history.append(logs)
            self.emit("step", logs)
            if state.step % cfg.log_every == 0:
                acc.log({f"train/{k}": v for k, v in logs.items() if k != "step"}, step=state.step)
            if state.step % cfg.eval_every == 0:
                last_saved = self.save(state, result, before + time.monotonic() - start)
            self.snapshots.after_update(state.step, self.unwrapped)
            if marks and self.mark_due(marks[0], before + time.monotonic() - start):
                record = self.export_at_mark(state.step, marks.pop(0))
                result.exports.append(record)
                self.emit("export_at", record)
        elapsed = time.monotonic() - start
        result.target_tokens_per_second = tokens_now / max(elapsed, 1e-9)
        result.step, result.epoch, result.stopped_because = state.step, data.stream.epoch, stopped
        if (note := warmup_note(recipe, state.step)) is not None:
            self.emit("info", {"message": note})
        if last_saved != state.step:
            self.save(state, result, before + time.monotonic() - start)
        result.train_seconds = before + elapsed
        result.epochs, result.target_tokens = self.epochs_done(), state.target_tokens
        result.best_valid_loss = state.best.get("valid_loss")
        if self.snapshots.enabled:
            result.averaging = self.average(state.step, weights_copy(self.unwrapped))
            if result.averaging is not None:
                self.emit("average", result.averaging)
        result.model = self.unwrapped
        if cfg.export:
            evaluation = self.finish(result)
            if evaluation is not None:
                result.length_penalty = evaluation.length_penalty
                result.length_penalty_search = evaluation.length_penalty_search
                result.test_metrics, result.samples = evaluation.test_metrics, evaluation.samples
                self.export(result)
            acc.wait_for_everyone()
        if acc.is_main_process:
            write_training_plots(result, self.run_dir.plots, window=cfg.log_every)
        acc.end_training()
        return result

    def save(self, state: TrainState, result: TrainResult, train_seconds: float) -> int:
        """Validate and checkpoint at ``state.step`` (training time so far: ``train_seconds``); returns the step."""
        state.train_seconds = train_seconds
        metrics, result.last_checkpoint = self.validate_and_save(state)
        if metrics:
            result.valid_history.append(metrics)
        return state.step

    def finish(self, result: TrainResult) -> Evaluation | None:
        """Length penalty and test score (`training.finish.evaluate_run`) on the main process (None elsewhere); the
        test loss and perplexity (`training.finish.score_test_loss`) for the other objectives."""
        cfg, acc, data = self.cfg, self.accelerator, self.data
        evaluation = None
        if cfg.objective != "translation":
            evaluation = score_test_loss(
                self.unwrapped,
                data.test_src,
                data.test_tgt,
                objective=data.objective,
                label_smoothing=cfg.label_smoothing,
                accelerator=acc,
                max_tokens=max(self.recipe.max_tokens, cfg.max_length),
            )
            if evaluation.test_metrics and acc.is_main_process:
                acc.log({"test/ppl": evaluation.test_metrics["perplexity"]}, step=result.step)
            return evaluation if acc.is_main_process else None
        if acc.is_main_process:
            model = self.unwrapped
            extra = cfg.sample_sentences
            if extra is None and self.languages[0] == "zh":
                extra = "我爱机器翻译"
            evaluation = evaluate_run(
                model,
                data.tokenizer,
                data.splits,
                candidates=self.recipe.length_penalty_candidates,
                length_penalty=None if self.recipe.length_penalty_candidates else self.recipe.length_penalty,
                num_beams=cfg.test_beams or model.generation_config.num_beams,
                batch_size=cfg.eval_batch_size,
                tokenize=self.bleu_tokenize,
                num_samples=cfg.num_samples,
                extra_sentences=[t.strip() for t in (extra or "").split("|") if t.strip()],
                emit=self.emit,
            )
            if evaluation.test_metrics:
                acc.log(
                    {
                        "test/bleu": evaluation.test_metrics["bleu"],
                        "test/chrf": evaluation.test_metrics["chrf"],
                    },
                    step=result.step,
                )
        return evaluation

    def export(self, result: TrainResult) -> None:
        """Save the final model folder with eval_results.json and the model card (main process)."""
        values = card_values(self.cfg, self.recipe, self.config, result)
        export_model(
            self.unwrapped,
            self.data.tokenizer,
            self.run_dir.root,
            values,
            self.cfg.model_card,
            result.test_metrics,
        )
        self.emit("exported", {"path": str(self.run_dir.root)})
        if self.cfg.export_ct2:
            quantization = None if self.cfg.export_ct2 == "float32" else self.cfg.export_ct2
            path = export_ct2(self.run_dir.root, self.run_dir.ct2, quantization=quantization)
            self.emit("exported", {"path": str(path)})


def train(cfg: TrainConfig, event: Event | None = None) -> TrainResult:
    """Run a training job described by ``cfg``; ``event(name, info)`` receives progress events ("info", "start",
    "step", "eval", "checkpoint", "average", "export_at", "length_penalty", "test_start", "test_progress",
    "exported") for a progress display.

    Works unchanged under ``accelerate launch`` (any number of processes)."""
    return Trainer(cfg, event).run()
