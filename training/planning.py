"""Planning a run, before the trainer exists: options checked -> output folder prepared (`RunDir`) -> accelerator
and precision -> `Recipe` resolved once -> data (`TrainingData`) -> the long-budget dropout decided (with a
timing probe when a ``--max_minutes`` budget can change it) -> the recipe saved. `plan_run` returns all of it as a
`RunPlan`, which the trainer (`training.loop.Trainer`) only reads.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vanilla_transformer.modeling import VanillaTransformerPreTrainedModel

from .batching import batch_generator
from .data import TrainingData, prepare_training_data
from .hardware import PrecisionChoice, setup_accelerator
from .objectives import get_objective
from .options import TrainConfig, check_options
from .recipe import Recipe, budget_dropout_decision, dropout_pending, resolve_recipe, resume_changes
from .run_dir import RunDir


@dataclass(frozen=True)
class RunPlan:
    """Everything a run decided before training: its folder, accelerator, precision, recipe and data, and the
    lines for the log that say what planning decided."""

    cfg: TrainConfig
    run_dir: RunDir
    accelerator: Any  # accelerate.Accelerator
    precision: PrecisionChoice
    recipe: Recipe
    data: TrainingData
    notes: tuple[str, ...]


def plan_run(cfg: TrainConfig, event: Callable[[str, dict], None] | None = None) -> RunPlan:
    """The plan of a run of ``cfg`` (see the module docstring); raises `ValueError` for invalid options.
    ``event(name, info)`` receives the progress events of preparing the data (`prepare_training_data`)."""
    from accelerate.utils import set_seed

    check_options(cfg)
    run_dir = RunDir(cfg.output_dir, cfg.cache_dir)
    saved = run_dir.saved_recipe() if cfg.resume else None
    acc, precision = setup_accelerator(cfg, run_dir.runs, (saved or {}).get("precision"))
    if acc.is_main_process:
        run_dir.prepare(cfg)
    acc.wait_for_everyone()
    saved = run_dir.saved_recipe() if cfg.resume else None
    recipe = dataclasses.replace(resolve_recipe(cfg, saved), precision=precision.to_dict())
    notes = [resume_changes(saved, recipe)]
    set_seed(cfg.seed)
    data = prepare_training_data(cfg, recipe, run_dir, acc, event)
    notes.insert(0, data.summary)
    if dropout_pending(cfg, saved):
        recipe, note = budget_dropout_decision(
            cfg,
            recipe,
            data.stream.batches_per_epoch(),
            acc.num_processes,
            lambda: seconds_per_batch(cfg, recipe, data, acc),
        )
        notes.append(note)
    if acc.is_main_process:
        run_dir.save(cfg, recipe)
    return RunPlan(cfg, run_dir, acc, precision, recipe, data, tuple(note for note in notes if note))


def objective_model(cfg: TrainConfig, recipe: Recipe, vocab_size: int) -> VanillaTransformerPreTrainedModel:
    """A new model of ``cfg.objective``'s family (the recipe's architecture), or the weights of ``--init_from``
    (its architecture, with the recipe's dropout when ``--dropout`` or the long-budget rule set one).

    ``--init_from`` is loaded by the loading policy (`inference.loading_policy`): this project's classes only (no
    code of the folder runs) and safetensors weights only (a pickle is refused, never unpickled).

    Raises:
        ValueError: the ``--init_from`` model is not of the objective's family, needs its own code, has no
            safetensors weights, or its vocabulary is smaller than the tokenizer's.
    """
    model_class = get_objective(cfg.objective).model_class
    if cfg.init_from is None:
        return model_class(recipe.model_config(vocab_size))
    from transformers import AutoConfig

    from vanilla_transformer.inference.loading_policy import from_pretrained_safetensors, remote_code_rule

    saved = json.loads((Path(cfg.init_from) / "config.json").read_text(encoding="utf-8"))
    remote_code_rule(saved, cfg.init_from, trust_remote_code=False, opt_in=None)
    found = AutoConfig.from_pretrained(cfg.init_from, trust_remote_code=False)
    if not isinstance(found, model_class.config_class):
        raise ValueError(
            f"--init_from {cfg.init_from!r} holds a {type(found).__name__} model; --objective {cfg.objective} trains a "
            f"{model_class.__name__}. Start from a model of that family, or drop --init_from."
        )
    overrides = {"dropout": recipe.dropout} if recipe.dropout is not None else {}
    model = from_pretrained_safetensors(
        model_class, cfg.init_from, False, "pass the OUTPUT_DIR of a finished run", **overrides
    )
    if model.config.vocab_size < vocab_size:
        raise ValueError(
            f"--init_from {cfg.init_from!r} has a vocabulary of {model.config.vocab_size} tokens, the tokenizer "
            f"{vocab_size}; use the folder's own tokenizer (leave --tokenizer unset)."
        )
    return model


def seconds_per_batch(
    cfg: TrainConfig, recipe: Recipe, data: TrainingData, accelerator, batches: int = 4
) -> float:
    """Seconds of one training batch's forward and backward pass here, for the long-budget dropout rule
    (`recipe.budget_dropout_decision`): a throwaway model of the run's architecture, built in a forked RNG so that
    training is unchanged, passes over one untimed batch (allocator warm-up) and ``batches`` timed ones spread over
    the first epoch, in the run's precision. Every process measures at once (they share the machine as in training)
    and all use the main process's figure; 0.0 when the first epoch has no batch."""
    acc, objective = accelerator, data.objective
    picks = data.stream.probe(data.train_examples, batches + 1)
    if not picks:
        return 0.0
    with torch.random.fork_rng(devices=[acc.device.index or 0] if acc.device.type == "cuda" else []):
        model = objective_model(cfg, recipe, len(data.tokenizer)).to(acc.device).train()
        for j, (sources, targets) in enumerate(picks):
            if j == 1:
                start = time.perf_counter()
            batch = objective.batch(
                range(len(sources)),
                sources,
                targets,
                model.config,
                acc.device,
                batch_generator(cfg.seed, 0, j),
            )
            with acc.autocast():
                loss, _ = objective.loss(model, batch, cfg.label_smoothing)
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
