"""The Marian anchor of the quality benchmark: transformers' `MarianMTModel` trained by `Seq2SeqTrainer` with the
standard Hugging Face recipe (`marian_training_arguments`; `benchmarks.quality` states both recipes), inside the
same wall-clock budget and with the same periodic validation as ours."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from vanilla_transformer.modeling import IGNORE_INDEX, default_generation_config
from vanilla_transformer.training.hardware import PRECISION_NAMES, available_cores
from vanilla_transformer.training.loop import Event
from vanilla_transformer.training.validation import validation_metrics

from .marian import marian_config
from .quality_options import QualityConfig, QualityData


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
