"""A short training run, exported, on a synthetic French-English corpus that is not the shipped Bible corpus
(for the model-card and Hub-push tests): 3 updates of the `tiny` preset, TensorBoard on, so that the output
folder holds the model and the run's state (checkpoints with optimizer and RNG state, runs/, cache/, plots/)."""

from __future__ import annotations

import random
from pathlib import Path

from conftest import small_run

from vanilla_transformer.training import TrainConfig, TrainResult, train

FRENCH = "le chat la maison un chien petit grand rouge bleu mange voit".split()
ENGLISH = "the cat the house a dog small big red blue eats sees".split()  # word by word


def write_synthetic_corpus(path: Path, pairs: int = 200, seed: int = 0) -> Path:
    """``pairs`` lines of word-by-word French<TAB>English, 2 to 6 words each."""
    rng = random.Random(seed)
    lines = []
    for _ in range(pairs):
        words = [rng.randrange(len(FRENCH)) for _ in range(rng.randint(2, 6))]
        lines.append(" ".join(FRENCH[w] for w in words) + "\t" + " ".join(ENGLISH[w] for w in words))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def train_synthetic_run(folder: Path) -> tuple[TrainConfig, TrainResult]:
    """Train and export in ``folder``/out on ``folder``/toy.fr-en.tsv (10 validation and 8 test pairs)."""
    data = write_synthetic_corpus(folder / "toy.fr-en.tsv")
    cfg = small_run(
        folder / "out",
        data=str(data),
        max_lines=None,
        valid_size=10,
        test_size=8,
        max_steps=3,
        vocab_size=300,
        export=True,
        report_to="tensorboard",
    )
    return cfg, train(cfg)
