"""The output folder of a training run and its resume policy.

Layout of ``output_dir``::

    config.json, model.safetensors, *.py, tokenizer files, README.md   the final model (save_with_remote_code)
    eval_results.json        test-set scores with sacreBLEU signatures
    checkpoints/             checkpoint-<step>/, latest, best, tokenizer/, train_config.json (the options),
                             recipe.json (the resolved `Recipe`)
    runs/                    TensorBoard logs
    plots/                   training_curves.png
    cache/                   tokenised data (keyed by tokenizer and data hashes)
    minute-<M>/              models exported at --export_at_minutes marks
    ct2/                     the final model for CTranslate2 (--export_ct2)

Policy (`RunDir.prepare`, main process only): a folder with checkpoints is never silently reused — pass
``--resume`` to continue the run (refused when an option of `RESUME_KEYS` differs from the saved one) or
``--overwrite`` to delete its checkpoints; ``--resume`` without a checkpoint is an error.

Every checkpoint records the fingerprint of the data it trained on (``TrainState.data``,
`corpus.DataReport.fingerprint`: content, not names or modification times). A resumed run whose data differs
(`resumed_data`) is refused, since its held-out splits and its batch order would no longer be the checkpoint's,
as soon as the data is read (`RunDir.check_resumed_data`) and before the run writes anything in its folder;
with ``--allow_changed_data`` it keeps the weights, optimizer, schedule and step, trains on the new data's splits
from the first batch of epoch 0, forgets the best validation loss and says so in the log.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from vanilla_transformer.corpus import data_changes, describe_data

from . import checkpoint as ckpt
from .options import RESUME_KEYS, TrainConfig
from .recipe import Recipe

OPTIONS_FILE = "train_config.json"
RECIPE_FILE = "recipe.json"


def options_dict(cfg: TrainConfig) -> dict:
    """The options as saved in ``train_config.json``: every field, an in-memory dataset named by
    `corpus.describe_data` (its type and splits; its content is the checkpoints' ``TrainState.data``)."""
    return {
        f.name: describe_data(cfg.data) if f.name == "data" else getattr(cfg, f.name)
        for f in dataclasses.fields(cfg)
    }


def resumed_data(saved: dict, current: dict, checkpoint: Path, step: int, allow_changed: bool) -> str | None:
    """None when the data read now (``current``) is the data ``checkpoint`` (at ``step``) trained on (``saved``;
    both `corpus.DataReport.fingerprint`; a checkpoint without one is not compared). When it changed: the line for
    the log that says what the resumed run does with ``allow_changed`` (``--allow_changed_data``), else a
    `ValueError` naming what changed and the fixes."""
    changes = data_changes(saved, current) if saved else []
    if not changes:
        return None
    if not allow_changed:
        raise ValueError(
            f"Cannot resume: the data changed since {checkpoint.name} ({'; '.join(changes)}), so the held-out splits "
            "and the batch order would not be the checkpoint's. Resume with the data the run trained on, pass "
            "--allow_changed_data to keep the weights, optimizer and step and train on the new data, or start a new "
            "--output_dir."
        )
    return (
        f"Resuming on changed data (--allow_changed_data): {'; '.join(changes)}. Kept from {checkpoint.name}: the "
        f"weights, the optimizer, the learning-rate schedule and step {step}. The training, validation and test "
        "splits are those of the new data, its batch order starts at the first batch of epoch 0, and the best "
        "validation loss so far is forgotten (it was measured on the old validation split)"
    )


class RunDir:
    """Paths of one run's output folder (module docstring) and the rules for starting or resuming there."""

    def __init__(self, output_dir: str | Path, cache_dir: str | Path | None = None):
        self.root = Path(output_dir)
        self.checkpoints = self.root / "checkpoints"
        self.tokenizer = self.checkpoints / "tokenizer"
        # --distill_from: the teacher's translations of the training sources (training.distillation)
        self.distill = self.checkpoints / "distill"
        self.runs = self.root / "runs"
        self.plots = self.root / "plots"
        self.ct2 = self.root / "ct2"
        self.cache = Path(cache_dir) if cache_dir else self.root / "cache"

    def minute_export(self, minutes: float) -> Path:
        return self.root / f"minute-{minutes:g}"

    def prepare(self, cfg: TrainConfig) -> None:
        """Apply the policy of the module docstring; raises `ValueError` saying which flag to pass."""
        existing = ckpt.list_checkpoints(self.checkpoints)
        if existing and not cfg.resume:
            if not cfg.overwrite:
                raise ValueError(
                    f"{str(self.checkpoints)!r} already has {len(existing)} checkpoint(s) (newest "
                    f"{existing[-1].name}). Pass --resume to continue that run, --overwrite to delete them and start "
                    "over, or a different --output_dir."
                )
            shutil.rmtree(self.checkpoints)
        if cfg.resume and not existing:
            raise ValueError(
                f"--resume: no checkpoint in {str(self.checkpoints)!r}. Run without --resume to start a new run there."
            )
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        saved = self.checkpoints / OPTIONS_FILE
        if cfg.resume and saved.exists():
            old = json.loads(saved.read_text(encoding="utf-8"))
            new = options_dict(cfg)
            # a key the saved options lack (saved before the option existed) had its default then
            defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
            diff = {
                k: (old.get(k, defaults[k]), new[k]) for k in RESUME_KEYS if old.get(k, defaults[k]) != new[k]
            }
            if diff:
                raise ValueError(
                    "Cannot resume with different options (checkpoint value, this run): "
                    + ", ".join(f"--{k} {a!r} vs {b!r}" for k, (a, b) in diff.items())
                    + ". Resume with the original options or start a new --output_dir."
                )

    def check_resumed_data(self, cfg: TrainConfig, fingerprint: dict) -> None:
        """With ``--resume``: `resumed_data`'s `ValueError` when the data read now (``fingerprint``) is not the data
        of the latest checkpoint (read from its trainer state only), so that a refused run stops before it
        translates, tokenises or saves anything; nothing without ``--resume`` or with ``--allow_changed_data``."""
        if not cfg.resume or cfg.allow_changed_data:
            return
        path = ckpt.latest_checkpoint(self.checkpoints)
        if path is None:
            return
        try:
            state = json.loads((path / ckpt.TRAINER_STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # load_checkpoint names an unreadable checkpoint
            return
        if isinstance(state, dict) and isinstance(state.get("data"), dict):
            resumed_data(state["data"], fingerprint, path, int(state.get("step") or 0), allow_changed=False)

    def saved_recipe(self) -> dict | None:
        """The recipe the run in this folder was started with, or None."""
        path = self.checkpoints / RECIPE_FILE
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        options = self.checkpoints / OPTIONS_FILE  # a run folder written before recipe.json existed
        if options.exists():
            saved = json.loads(options.read_text(encoding="utf-8"))
            if "effective_dropout" in saved:
                return {"dropout": saved["effective_dropout"]}
        return None

    def save(self, cfg: TrainConfig, recipe: Recipe) -> None:
        """Write the options and the resolved recipe (atomically) into the checkpoint folder."""
        ckpt.write_json_atomic(self.checkpoints / OPTIONS_FILE, options_dict(cfg))
        ckpt.write_json_atomic(self.checkpoints / RECIPE_FILE, recipe.to_dict())
