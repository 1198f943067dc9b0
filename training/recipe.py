"""The recipe a run trains with, resolved once from the preset and the options.

`resolve_recipe` fills every option left unset (None) from the preset's recipe (`training.presets`) and takes
``--dropout`` when given. Where the preset has a long-budget dropout rule and no ``--dropout`` is given, the
dropout is decided once the training data is known (`budget_dropout_decision`): how many passes over the training
data the budget allows (`expected_epochs`; a ``--max_minutes`` budget is converted with the measured time of a
training batch) against the rule's threshold. A resumed run keeps the recipe its first invocation decided (read
from the saved recipe): an option left unset on ``--resume`` takes the saved value, not the preset's (which may
differ in another version of the code); the dropout stays whatever the new budget. A run from ``--init_from``
takes the fine-tuning schedule (`presets.FINE_TUNING`) instead of the preset's. The learning-rate schedule
(``--lr_schedule``, ``--learning_rate``, ``--lr_scale``, ``--warmup_steps``) is restored with the optimizer and scheduler state, so a different value is
refused; ``--clip_norm``, ``--cooldown`` and the averaging options given with a new value apply to the rest of
the run, and `resume_changes` says so in the log.

The `Recipe` is frozen: nothing changes it during the run (the dropout is decided before the model is built).
`training.run_dir.RunDir` saves it as ``checkpoints/recipe.json`` next to the options (``train_config.json``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from vanilla_transformer.modeling import DEFAULT_LENGTH_PENALTY

from .objectives import get_objective
from .options import TrainConfig, minute_marks, model_overrides
from .presets import budget_dropout, long_budget_rule, recipe_defaults


@dataclass(frozen=True)
class Recipe:
    """The hyperparameters of one run (every field decided; see the options of the same names)."""

    preset: str
    objective: str  # what the model learns; it decides the model family (`training.objectives`)
    max_tokens: int
    warmup_steps: int
    lr_scale: float
    # 'paper' (scaled by lr_scale), 'constant' or 'inverse_sqrt' (from learning_rate): training.schedule
    lr_schedule: str
    learning_rate: float | None
    clip_norm: float
    cooldown: float
    average_last: int
    average_every: int
    dropout: float | None  # replaces the preset's model dropout; None keeps it
    model_overrides: dict  # the preset's model fields a new model replaces (`options.model_overrides`)
    # --length_penalty, else DEFAULT_LENGTH_PENALTY
    length_penalty: float
    export_marks: tuple[float, ...]  # --export_at_minutes, sorted
    # the run's mixed precision, who chose it and why (training.hardware.PrecisionChoice)
    precision: dict | None = None
    # passes over the data the budget allows (when the long-budget rule decided)
    expected_epochs: float | None = None

    @property
    def peak_learning_rate(self) -> float:
        """The optimizer's base learning rate: the paper schedule's scale, else the peak learning rate."""
        if self.lr_schedule == "paper" or self.learning_rate is None:
            return self.lr_scale
        return self.learning_rate

    def model_config(self, vocab_size: int):
        """The configuration of a new model: the preset's architecture for the objective's model family, with this
        recipe's dropout and model overrides."""
        return get_objective(self.objective).model_config(
            self.preset, vocab_size, dropout=self.dropout, **self.model_overrides
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# the recipe fields a resumed run takes from its saved recipe when the option is left unset (the dropout too)
RESUMED_FIELDS = (
    "max_tokens",
    "warmup_steps",
    "lr_scale",
    "lr_schedule",
    "learning_rate",
    "clip_norm",
    "cooldown",
    "average_last",
    "average_every",
)
# restored from the checkpoint's optimizer and scheduler state: a resumed run cannot change them
SCHEDULE_FIELDS = ("warmup_steps", "lr_scale", "lr_schedule", "learning_rate")


def resolve_recipe(cfg: TrainConfig, saved: dict | None = None) -> Recipe:
    """The recipe of ``cfg``: its options, else (on resume) the ``saved`` recipe the run was started with, else
    the preset's defaults. The dropout is ``--dropout``, else the saved one, else None: the preset's model
    dropout, or still to be decided by `budget_dropout_decision` when `dropout_pending`. Raises `ValueError` when
    a resumed run is given a learning-rate schedule other than the saved one."""
    defaults = recipe_defaults(cfg.preset, fine_tuning=cfg.init_from is not None)
    saved = saved or {}
    fixed = {
        name: (saved[name], getattr(cfg, name))
        for name in SCHEDULE_FIELDS
        if saved.get(name) is not None and getattr(cfg, name) not in (None, saved[name])
    }
    if fixed:
        raise ValueError(
            "Cannot resume with a different learning-rate schedule (checkpoint value, this run): "
            + ", ".join(f"--{k} {a!r} vs {b!r}" for k, (a, b) in fixed.items())
            + ". The schedule is restored from the checkpoint: resume without these options, or start a new "
            "--output_dir with --init_from to train these weights on a new schedule."
        )

    def pick(name: str):  # check_options has refused out-of-range values
        if (value := getattr(cfg, name)) is not None:
            return value
        return saved[name] if saved.get(name) is not None else defaults[name]

    kept_dropout = cfg.dropout is None and "dropout" in saved
    return Recipe(
        preset=cfg.preset,
        objective=cfg.objective,
        max_tokens=pick("max_tokens"),
        warmup_steps=pick("warmup_steps"),
        lr_scale=pick("lr_scale"),
        lr_schedule=pick("lr_schedule"),
        learning_rate=pick("learning_rate"),
        clip_norm=pick("clip_norm"),
        cooldown=pick("cooldown"),
        average_last=pick("average_last"),
        average_every=pick("average_every"),
        dropout=saved["dropout"] if kept_dropout else cfg.dropout,
        model_overrides=model_overrides(cfg),
        length_penalty=cfg.length_penalty if cfg.length_penalty is not None else DEFAULT_LENGTH_PENALTY,
        export_marks=tuple(minute_marks(cfg)),
        expected_epochs=saved.get("expected_epochs") if kept_dropout else None,
    )


def dropout_pending(cfg: TrainConfig, saved: dict | None) -> bool:
    """Whether the run's dropout is left to the preset's long-budget rule: the preset has one, ``--dropout`` is
    not given and no saved recipe (a resumed run's) already decided it."""
    return long_budget_rule(cfg.preset) is not None and cfg.dropout is None and "dropout" not in (saved or {})


def expected_epochs(
    cfg: TrainConfig, batches_per_epoch: int, num_processes: int, seconds_per_batch: float | None = None
) -> float | None:
    """How many passes over the training data the run's budget allows: the smallest of ``--max_epochs``,
    ``--max_steps`` (every update takes ``grad_accum x num_processes`` of an epoch's ``batches_per_epoch``
    batches) and ``--max_minutes`` at ``seconds_per_batch`` (the time of one batch's forward and backward pass;
    the processes train their batches at the same time; validation time is not counted, so this is an upper
    bound). None when no budget can be converted (``--max_minutes`` without ``seconds_per_batch``)."""
    bounds = []
    if cfg.max_epochs:
        bounds.append(float(cfg.max_epochs))
    if cfg.max_steps:
        bounds.append(cfg.max_steps * cfg.grad_accum * num_processes / max(1, batches_per_epoch))
    if cfg.max_minutes and seconds_per_batch:
        bounds.append(cfg.max_minutes * 60 * num_processes / (seconds_per_batch * max(1, batches_per_epoch)))
    return min(bounds) if bounds else None


def budget_dropout_decision(
    cfg: TrainConfig,
    recipe: Recipe,
    batches_per_epoch: int,
    num_processes: int,
    measure_seconds_per_batch: Callable[[], float],
) -> tuple[Recipe, str]:
    """The recipe with the dropout of the preset's long-budget rule decided (`dropout_pending` runs only), and a
    line for the log that says why. ``measure_seconds_per_batch`` is called only when the ``--max_minutes``
    budget can change the decision: not when ``--max_steps`` or ``--max_epochs`` already allow fewer epochs
    than the rule's threshold."""
    rule = long_budget_rule(cfg.preset)
    # decided for the presets that have the rule only (`dropout_pending`)
    assert rule is not None
    threshold, long_dropout = rule
    epochs = expected_epochs(cfg, batches_per_epoch, num_processes)
    seconds = None
    if cfg.max_minutes and (epochs is None or epochs >= threshold):
        seconds = measure_seconds_per_batch()
        epochs = expected_epochs(cfg, batches_per_epoch, num_processes, seconds)
    dropout = budget_dropout(cfg.preset, None, epochs)
    recipe = dataclasses.replace(recipe, dropout=dropout, expected_epochs=epochs)
    budget = f"about {epochs:.3g} epochs" if epochs is not None else "an unknown number of epochs"
    if seconds is not None:
        budget += f" ({batches_per_epoch} batches each; {seconds:.3g} s per batch measured)"
    if dropout is None:
        return recipe, (
            f"no long-budget dropout: the budget allows {budget}, fewer than the {cfg.preset} preset's {threshold:g} "
            f"for its dropout {long_dropout} (pass --dropout to choose)"
        )
    early = [
        m
        for m in recipe.export_marks
        if seconds is not None
        and (
            at_mark := expected_epochs(
                dataclasses.replace(cfg, max_minutes=m, max_steps=None, max_epochs=None),
                batches_per_epoch,
                num_processes,
                seconds,
            )
        )
        is not None
        and at_mark < threshold
    ]
    return recipe, (
        f"dropout {dropout}: the budget allows {budget}, at least the {cfg.preset} preset's {threshold:g} for its "
        "long-budget dropout (pass --dropout to choose)"
        + (
            f"; the minute-{early[0]:g} export is this run's state, not what a {early[0]:g}-minute run "
            "(no long-budget dropout) would give"
            if early
            else ""
        )
    )


def resume_changes(saved: dict | None, recipe: Recipe) -> str | None:
    """A line for the log when a resumed run was given an option that replaces its saved recipe's value."""
    saved = saved or {}
    changed = [
        f"--{name} {getattr(recipe, name)!r} (started with {saved[name]!r})"
        for name in RESUMED_FIELDS
        if name not in SCHEDULE_FIELDS
        and saved.get(name) is not None
        and saved[name] != getattr(recipe, name)
    ]
    if not changed:
        return None
    return "resumed with " + ", ".join(changed) + ": the rest of the run uses the new values"


def warmup_note(recipe: Recipe, steps: int) -> str | None:
    """A line for the log when a run stopped before twice its warm-up: most of its updates ran below the peak
    learning rate, so a shorter ``--warmup_steps`` suits a budget this small for the machine (docs/quality.md,
    "Slower machines")."""
    if steps >= 2 * recipe.warmup_steps:
        return None
    return (
        f"the run stopped after {steps} updates, before twice its {recipe.warmup_steps} warm-up updates: most of "
        "it trained below the peak learning rate. For a budget this small on this machine pass a shorter "
        '--warmup_steps (docs/quality.md, "Slower machines")'
    )
