"""The deterministic train/validation/test split of a parallel corpus.

The split (`split_corpus`) is a **seeded random choice of contiguous blocks**: the corpus is cut into blocks
of ``block_size`` consecutive lines, a permutation of blocks drawn with ``seed`` assigns whole blocks to the
test split until it holds ``test_size`` lines, then to validation, and the rest is training data. Whole
blocks keep most neighbouring verses (which often repeat each other) on the same side of the split, and
random blocks spread the held-out data over all books. The split depends only on the line order, the sizes
and the seed.
"""

from __future__ import annotations

import os
from typing import Literal

import datasets
import numpy as np

from .read import DataReport


def split_corpus(
    dataset: datasets.Dataset,
    valid_size: int = 500,
    test_size: int = 1000,
    block_size: int = 20,
    seed: int = 1234,
) -> datasets.DatasetDict:
    """Deterministic train/validation/test split by seeded random contiguous blocks (module docstring).

    The validation and test splits get ``valid_size`` / ``test_size`` lines exactly (the last block taken
    is cut); training gets the rest, in corpus order.
    """
    n = len(dataset)
    for name, value in (("valid_size", valid_size), ("test_size", test_size)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}={value!r} must be an integer >= 0.")
    if block_size < 1:
        raise ValueError(f"block_size={block_size} must be >= 1.")
    if valid_size + test_size >= n:
        raise ValueError(
            f"valid_size={valid_size} + test_size={test_size} leaves no training data in a corpus of {n} pairs; "
            f"pass smaller --valid_size/--test_size (e.g. {max(1, n // 20)} each)."
        )
    blocks = [np.arange(s, min(s + block_size, n)) for s in range(0, n, block_size)]
    order = np.random.default_rng(seed).permutation(len(blocks))
    held = np.concatenate([blocks[i] for i in order]) if blocks else np.array([], dtype=int)
    test = np.sort(held[:test_size])
    valid = np.sort(held[test_size : test_size + valid_size])
    taken = np.zeros(n, dtype=bool)
    taken[test] = True
    taken[valid] = True
    train = np.flatnonzero(~taken)
    return datasets.DatasetDict(
        train=dataset.select(train.tolist()),
        validation=dataset.select(valid.tolist()),
        test=dataset.select(test.tolist()),
    )


def load_split(
    data: str | os.PathLike,
    split: Literal["train", "validation", "test", "all"] = "all",
    *,
    valid_size: int = 500,
    test_size: int = 1000,
    block_size: int = 20,
    seed: int = 1234,
    **options,
) -> tuple[datasets.Dataset, DataReport]:
    """One split of the data as training made it (`DataOptions.load_splits`: same options give the same pairs),
    or "all" pairs of its training split. ``options`` are other `DataOptions` fields (columns, languages,
    has_header, max_lines, on_bad_line, valid_split, test_split...)."""
    from .options import DataOptions

    if split not in ("train", "validation", "test", "all"):
        raise ValueError(f"split={split!r} must be one of 'train', 'validation', 'test', 'all'.")
    if split == "all":
        options = {**options, "valid_split": "none", "test_split": "none"}
        valid_size = test_size = 0
    splits, report = DataOptions(
        data=data,
        valid_size=valid_size,
        test_size=test_size,
        split_block_size=block_size,
        split_seed=seed,
        **options,
    ).load_splits()
    return splits["train" if split == "all" else split], report
