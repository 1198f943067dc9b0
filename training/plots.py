"""Training curves (PNG, matplotlib's Agg canvas, no pyplot state) of one or several runs.

Training loss (per target token, label-smoothed, averaged over windows of updates) and
validation BLEU, each against updates and against wall-clock minutes of the training loop. `train()` writes
them for its own run into ``OUTPUT_DIR/plots/training_curves.png``; the quality study (`studies/quality.py`) draws both
systems of its comparison on one chart. The cross-attention plot is `inference.attention`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)


@dataclass
class Curves:
    """Points of one run: training loss and validation BLEU against updates and seconds of training."""

    name: str
    train_steps: list[int] = field(default_factory=list)
    train_seconds: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    valid_steps: list[int] = field(default_factory=list)
    valid_seconds: list[float] = field(default_factory=list)
    valid_bleu: list[float] = field(default_factory=list)


def curves_from_history(
    name: str, history: Sequence[Mapping], valid_history: Sequence[Mapping] = (), window: int = 1
) -> Curves:
    """`Curves` from training logs (dicts with ``step``, ``loss``, ``seconds``) and validation logs (``step``,
    optional ``valid_bleu`` and ``seconds``).

    Training losses are averaged over consecutive windows of ``window`` entries (the last window may be
    shorter) and placed at the window's last step. A validation entry without ``seconds`` takes the time of
    the training entry with the same step (validation runs right after that update)."""
    if window < 1:
        raise ValueError(f"window={window} must be >= 1.")
    curves = Curves(name)
    rows = [h for h in history if "loss" in h and "step" in h]
    for start in range(0, len(rows), window):
        chunk = rows[start : start + window]
        curves.train_steps.append(int(chunk[-1]["step"]))
        curves.train_seconds.append(float(chunk[-1].get("seconds", float("nan"))))
        curves.train_loss.append(float(np.mean([h["loss"] for h in chunk])))
    seconds_at = {int(h["step"]): float(h["seconds"]) for h in rows if "seconds" in h}
    for v in valid_history:
        if v.get("valid_bleu") is None:
            continue
        step = int(v["step"])
        curves.valid_steps.append(step)
        curves.valid_seconds.append(float(v.get("seconds", seconds_at.get(step, float("nan")))))
        curves.valid_bleu.append(float(v["valid_bleu"]))
    return curves


def plot_training_curves(runs: Sequence[Curves], path: str | Path, title: str | None = None) -> Path:
    """Draw every run of ``runs`` on one 2x2 chart (loss and validation BLEU, against updates and against
    minutes) and save it as a PNG at ``path`` (parent folders are created). Returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    for run in runs:
        minutes = [s / 60 for s in run.train_seconds]
        axes[0, 0].plot(run.train_steps, run.train_loss, marker=".", label=run.name)
        axes[0, 1].plot(minutes, run.train_loss, marker=".", label=run.name)
        if run.valid_steps:
            axes[1, 0].plot(run.valid_steps, run.valid_bleu, marker="o", label=run.name)
            axes[1, 1].plot([s / 60 for s in run.valid_seconds], run.valid_bleu, marker="o", label=run.name)
    for ax, (x, y) in zip(
        axes.flat,
        [
            ("updates", "training loss (per token)"),
            ("minutes of training", "training loss (per token)"),
            ("updates", "validation BLEU (greedy)"),
            ("minutes of training", "validation BLEU (greedy)"),
        ],
    ):
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend()
        else:
            ax.text(0.5, 0.5, "no validation BLEU", ha="center", va="center", transform=ax.transAxes)
    if title:
        fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def write_training_plots(result, plots_dir: str | Path, window: int = 10) -> Path | None:
    """Plot a `TrainResult`'s curves (this invocation's updates) to ``plots_dir/training_curves.png``.

    Best effort: training has finished when this runs, so a plotting failure is logged as a warning and
    returns None instead of failing the run."""
    try:
        curves = curves_from_history("training", result.history, result.valid_history, window=window)
        return plot_training_curves(
            [curves], Path(plots_dir) / "training_curves.png", title=result.output_dir
        )
    except Exception as err:  # noqa: BLE001 - see docstring
        logger.warning("Could not write the training plots to %s: %s", plots_dir, err)
        return None
