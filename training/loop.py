"""The training loop: token-budget batches -> label-smoothed loss -> Adam + inverse-sqrt schedule, with accelerate
(single process, multi-process DDP, mixed precision), periodic validation, atomic checkpoints and exact resume.

The objective (``--objective``, `training.objectives`) chooses the model family, the examples and their batches and
the positions the loss scores; everything else — batching by token budget, the update, resume, averaging, export —
is the same for all. The random spans or masks of the batch numbered j of update s are drawn from
``batch_generator(seed, s, j)``, so a resumed run draws the same ones.

Loss normalisation (fairseq's): every optimizer update sums the label-smoothed loss over all target tokens of all
its batches — ``grad_accum`` batches on each of ``num_processes`` processes — and divides by the total number of
those target tokens (all-reduced across processes). So 2 processes x 1 batch and 1 process x 2 accumulated batches
compute the same update from the same global batches (up to float summation order); with ``--streaming`` each
process takes its ``grad_accum`` batches from its own shard of the stream (`training.streaming`). An update whose
batches have no target token at all (a masked_lm batch of short texts where no token was drawn for masking) is skipped
as an fp16 update whose gradients overflowed is: no loss, no optimizer step, the schedule does not advance, but
the update count does (so the next update draws new masks, and ``--max_steps`` bounds the batches consumed); the
run counts it in ``skipped_updates`` (result, checkpoint and log) and has no history entry for it.

One run, in order: the plan (`training.planning.plan_run`: options, folder, recipe, data) -> model, optimizer,
scheduler -> resume from the latest checkpoint (`TrainState` + accelerate's model/optimizer/scheduler/RNG state)
-> updates until a budget ends, validating and checkpointing every ``eval_every`` updates -> averaging
(`training.averaging`) -> test score and export (`training.finish`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from contextlib import nullcontext

import torch
from accelerate.utils import gather_object

from vanilla_transformer.export.ct2 import check_expressible
from vanilla_transformer.export.model_card import card_values
from vanilla_transformer.inference import bleu_tokenizer_for
from vanilla_transformer.inference.decoding import resolved_generation_config
from vanilla_transformer.modeling import (
    VanillaTransformerPreTrainedModel,
    position_limit,
    save_with_remote_code,
)

from . import checkpoint as ckpt
from .averaging import Snapshots, Weights, average_if_better, weights_copy
from .batching import batch_generator
from .finish import bleu_line, domain_sets, export_run, held_out_bleu, test_beams, test_run
from .lora import add_lora, merged
from .options import TrainConfig
from .planning import RunPlan, objective_model, plan_run
from .plots import write_training_plots
from .recipe import warmup_note
from .run_dir import options_dict, resumed_data
from .schedule import budget_progress, build_optimizer, build_scheduler, cooldown_factor
from .state import TrainResult, TrainState
from .validation import validation_metrics

Event = Callable[[str, dict], None]

__all__ = ["Event", "TrainResult", "TrainState", "Trainer", "train"]


class Trainer:
    """One training run of ``cfg`` (see the module docstring); ``run()`` returns its `TrainResult`."""

    def __init__(self, cfg: TrainConfig, event: Event | None = None, plan: RunPlan | None = None):
        """``plan``: the run's `RunPlan` (default: `plan_run(cfg)`)."""
        self.emit = event or (lambda name, info: None)
        plan = plan or plan_run(cfg, self.emit)
        self.cfg, self.run_dir, self.accelerator = cfg, plan.run_dir, plan.accelerator
        self.precision, self.recipe, self.data = plan.precision, plan.recipe, plan.data
        for note in plan.notes:
            self.emit("info", {"message": note})
        acc = self.accelerator
        model = objective_model(cfg, self.recipe, len(self.data.tokenizer))
        self.config = model.config
        if cfg.export_ct2:
            check_expressible(self.config)  # before training, not after it
        limit = position_limit(self.config)
        if limit is not None and cfg.max_length > limit:
            raise ValueError(
                f"--max_length={cfg.max_length} exceeds the preset's max_position_embeddings={limit}; lower "
                "--max_length."
            )
        self.num_parameters = sum(p.numel() for p in model.parameters())
        if cfg.lora is not None:
            trainable, total = add_lora(model, cfg.lora, cfg.lora_ffn)
            where = "attention and feed-forward" if cfg.lora_ffn else "attention"
            self.emit(
                "info",
                {
                    "message": f"LoRA rank {cfg.lora} on the {where} projections: {trainable:,} trainable "
                    f"parameters of {total:,} ({trainable / total:.2%}); the export merges them"
                },
            )
        optimizer = build_optimizer(model, self.recipe.peak_learning_rate, weight_decay=cfg.weight_decay)
        scheduler = build_scheduler(
            optimizer, self.config.d_model, self.recipe.warmup_steps, self.recipe.lr_schedule
        )
        self.model, self.optimizer, self.scheduler = acc.prepare(model, optimizer, scheduler)
        self.emit("info", {"message": self.precision.describe()})
        self.snapshots = Snapshots(self.recipe.average_last, self.recipe.average_every)
        self.languages = cfg.languages()
        self.bleu_tokenize = bleu_tokenizer_for(self.languages[1], cfg.sacrebleu_tokenize)

    @property
    def unwrapped(self) -> VanillaTransformerPreTrainedModel:
        return self.accelerator.unwrap_model(self.model)

    # ------------------------------------------------------------------------------------------------ updates
    def train_step(self, lr_factor: float, step: int = 0) -> dict | None:
        """Optimizer update ``step + 1`` over the next ``grad_accum x num_processes`` batches, the scheduled learning
        rate multiplied by ``lr_factor`` (the cool-down); returns its logs (per-token loss, nll, ppl, lr, ...), or
        None when those batches have no target token to score (no update: module docstring)."""
        acc, cfg, data = self.accelerator, self.cfg, self.data
        world, rank = acc.num_processes, acc.process_index
        first = rank * cfg.grad_accum
        if data.stream.sharded:  # a stream of this process's shard only: its batches are all this process's
            batches = data.stream.take(cfg.grad_accum)
        else:
            batches = data.stream.take(cfg.grad_accum * world)[first:][: cfg.grad_accum]
        mine = [
            data.objective.batch(
                b,
                *data.train_examples(epoch),
                self.config,
                acc.device,
                batch_generator(cfg.seed, step, first + j),
            )
            for j, (epoch, b) in enumerate(batches)
        ]
        local = torch.stack([b["ntokens"] for b in mine]).sum()
        total = acc.reduce(local.clone(), reduction="sum") if world > 1 else local
        if int(total) == 0:  # the same on every process: all skip together
            return None
        self.model.train()
        loss_sum = torch.zeros((), device=acc.device)
        nll_sum = torch.zeros((), device=acc.device)
        for j, batch in enumerate(mine):
            sync = j == len(mine) - 1
            with nullcontext() if sync else acc.no_sync(self.model):
                loss, nll = data.objective.loss(self.model, batch, cfg.label_smoothing)
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
        saved = dataclasses.asdict(state)
        if self.data.stream.sharded:  # every process's position in its own shard (training.streaming)
            saved["stream"] = {"processes": gather_object([state.stream])}
        root = self.run_dir.checkpoints
        path = ckpt.save_checkpoint(acc, root, state.step, saved, self.config.to_json_string())
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
        data = self.data
        state = TrainState(
            stream=data.stream.state_dict(), num_processes=acc.num_processes, data=data.fingerprint
        )
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
        changed = resumed_data(state.data, data.fingerprint, path, state.step, self.cfg.allow_changed_data)
        state.data, state.best = data.fingerprint, {} if changed else dict(state.best or {})
        if changed:
            self.emit("info", {"message": changed})
        else:
            data.stream.load_state_dict(state.stream)
        # this process's own position (a sharded stream's checkpoint holds every process's)
        state.stream = data.stream.state_dict()
        self.emit("info", {"message": f"Resumed from {path} at step {state.step}, epoch {data.stream.epoch}"})
        return state

    # ---------------------------------------------------------------------------- fine-tuning's BLEU report
    def reports_domains(self) -> bool:
        """Whether the run reports BLEU before and after on its held-out splits (`finish.domain_sets`): it fine-tunes
        a translation model (``--init_from``) and scores its test split (``--export``); the main process only."""
        cfg = self.cfg
        return (
            cfg.init_from is not None
            and cfg.export
            and self.data.objective.translates
            and self.accelerator.is_main_process
        )

    def domain_bleu(self, model, held_out: dict) -> dict[str, float]:
        """BLEU of ``model`` on the ``held_out`` splits, decoded as the test score is (`finish.held_out_bleu`)."""
        cfg = self.cfg
        return held_out_bleu(
            model,
            self.data.tokenizer,
            held_out,
            tokenize=self.bleu_tokenize,
            num_beams=test_beams(cfg, model),
            length_penalty=self.recipe.length_penalty,
            batch_size=cfg.eval_batch_size,
        )

    # ------------------------------------------------------------------------------------------- exports
    def average(self, step: int, current: Weights) -> dict | None:
        """Leave the average of the newest snapshots in the model when it validates better (`training.averaging`);
        ``current`` is a copy of the weights at ``step``."""
        window = self.snapshots.window(step, current)
        return average_if_better(self.unwrapped, window, current, lambda: self.validate(bleu=False))

    def export_at_mark(self, step: int, minutes: float) -> dict:
        """Export the model as the run would if it stopped now (averaging included) to OUTPUT_DIR/minute-M/, then
        put the training weights back. Its generation config decodes with the run's ``--length_penalty`` (default
        `modeling.DEFAULT_LENGTH_PENALTY`), as the end of the run does."""
        current = weights_copy(self.unwrapped) if self.snapshots.enabled else {}
        info = self.average(step, current) if self.snapshots.enabled else None
        averaged = info is not None and info["kept"]
        folder = self.run_dir.minute_export(minutes)
        if self.accelerator.is_main_process:
            generation = self.unwrapped.generation_config
            if (
                self.data.objective.translates
                and resolved_generation_config(self.unwrapped, {}).num_beams > 1
            ):
                generation.length_penalty = self.recipe.length_penalty
            save_with_remote_code(merged(self.unwrapped), folder, self.data.tokenizer)
        if averaged:
            ckpt.load_weights_into(self.unwrapped, current)
        self.accelerator.wait_for_everyone()
        return {
            "minutes": minutes,
            "step": step,
            "path": str(folder),
            "averaged_steps": info["steps"] if info is not None and averaged else None,
        }

    def epochs_done(self) -> float:
        return self.data.stream.epochs_done()

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
        if self.reports_domains() and state.step == 0:
            state.bleu_before = self.domain_bleu(self.unwrapped, domain_sets(data))
            self.emit("info", {"message": "BLEU before fine-tuning: " + bleu_line(state.bleu_before)})
        marks = [m for m in recipe.export_marks if m * 60 > state.train_seconds]  # passed before a resume
        before, start = state.train_seconds, time.monotonic()
        tokens_now, last_saved = 0, state.step if cfg.resume else None
        epochs_at_update = self.epochs_done()
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
            state.train_seconds = before + time.monotonic() - start
            if logs is None:  # no target token to score: no optimizer step (module docstring)
                state.skipped_updates += 1
                if self.epochs_done() - epochs_at_update >= 1.0:
                    raise ValueError(
                        "a whole epoch of batches had no target token to score (with --objective masked_lm: "
                        f"--mlm_probability {cfg.mlm_probability} chose no token); raise --mlm_probability or "
                        "--max_tokens, or use longer texts."
                    )
            else:
                epochs_at_update = self.epochs_done()
                state.target_tokens += logs["ntokens"]
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
        result.skipped_updates = state.skipped_updates
        if state.skipped_updates:
            self.emit(
                "info",
                {
                    "message": f"skipped {state.skipped_updates} update(s) whose batches had no target token to "
                    "score (counted in the updates, but no optimizer step)"
                },
            )
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
        # the adapters added into the weights (the same model without LoRA)
        result.model = final = merged(self.unwrapped)
        if cfg.export:
            evaluation = test_run(final, cfg, recipe, data, acc, self.bleu_tokenize, self.emit, result.step)
            if evaluation is not None:
                result.length_penalty = evaluation.length_penalty
                result.test_metrics, result.samples = evaluation.test_metrics, evaluation.samples
                if self.reports_domains() and state.bleu_before and evaluation.test_metrics:
                    # the test score is the BLEU on your held-out pairs; the general one is decoded alike
                    general = {k: v for k, v in domain_sets(data).items() if k != "yours"}
                    after = {"yours": evaluation.test_metrics["bleu"], **self.domain_bleu(final, general)}
                    result.domain_bleu = {"before": state.bleu_before, "after": after}
                    self.emit("info", {"message": "BLEU after fine-tuning: " + bleu_line(after)})
                card = card_values(cfg, recipe, self.config, result, data.objective.card())
                for path in export_run(final, data.tokenizer, self.run_dir, card, cfg, result.test_metrics):
                    self.emit("exported", {"path": str(path)})
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


def train(cfg: TrainConfig, event: Event | None = None) -> TrainResult:
    """Run a training job described by ``cfg``; ``event(name, info)`` receives progress events ("info", "start",
    "step", "eval", "checkpoint", "average", "export_at", "test_start", "test_progress",
    "exported") for a progress display.

    Works unchanged under ``accelerate launch`` (any number of processes)."""
    return Trainer(cfg, event).run()
