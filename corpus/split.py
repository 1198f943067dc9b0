"""The deterministic train/validation/test splits of a parallel corpus.

Two rules, both depending only on the line order, the sizes, the seed (and the group labels):

* **Whole groups** (`split_by_groups`): every line carries a group label (for the shipped Bible corpora the
  book of its ``book.chapter.verse`` reference, `read_groups`). A permutation of the groups drawn with ``seed``
  is walked once for the test split, then for validation: a group is taken when the split stays within 25 %
  above its target size, until the target is reached. No held-out line shares a group (a book: its names,
  phrasing and neighbouring verses) with a training line, so the held-out figures measure new text.
* **Random blocks** (`split_corpus`): the corpus is cut into blocks of ``block_size`` consecutive lines, a
  permutation of blocks drawn with ``seed`` assigns whole blocks to the test split until it holds ``test_size``
  lines, then to validation, and the rest is training data. Blocks keep most neighbouring lines on one side
  and spread the held-out data over the whole corpus: held-out lines come from the same documents as training
  lines (an in-domain figure). Long blocks (hundreds of lines) approximate whole documents for a corpus without
  group labels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import datasets
import numpy as np

from .files import check_file, read_lines, strip_compression

GROUP_FILE_SUFFIXES = (".refs.xz", ".refs.gz", ".refs.bz2", ".refs")
# a group joins a held-out split only if the split stays within this fraction above its target
OVERSHOOT = 0.25


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
        {
            "train": dataset.select(train.tolist()),
            "validation": dataset.select(valid.tolist()),
            "test": dataset.select(test.tolist()),
        }
    )


def group_file_for(data: str | os.PathLike) -> Path | None:
    """The group-label file that sits next to a corpus file: ``bible.zh-en.tsv.xz`` -> ``bible.zh-en.refs.xz``
    (also ``.refs``, ``.refs.gz``, ``.refs.bz2``); None when there is none."""
    path = Path(data)
    stem, _ = strip_compression(path.name)
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    for suffix in GROUP_FILE_SUFFIXES:
        for name in (stem + suffix, path.name[: len(stem)] + suffix):  # lower-cased stem, then as spelled
            candidate = path.with_name(name)
            if candidate.is_file():
                return candidate
    return None


def read_groups(path: str | os.PathLike) -> list[str]:
    """One group label per line of a reference file: the text before the first ``.`` (``gen.1.1`` -> ``gen``;
    a line without a dot is its own label, e.g. a document id). Empty lines are an error (every corpus line
    needs a group)."""
    p = check_file(
        path,
        missing_fix="Pass --split_groups FILE or --split_by blocks.",
        directory_fix="pass the group file itself.",
    )
    groups = []
    for lineno, (line, _) in enumerate(read_lines(p), start=1):
        label = line.strip().split(".", 1)[0]
        if not label:
            raise ValueError(f"{str(p)!r} line {lineno} is empty: every corpus line needs a group label.")
        groups.append(label)
    return groups


def split_by_groups(
    dataset: datasets.Dataset,
    groups: Sequence[str],
    valid_size: int = 500,
    test_size: int = 1000,
    seed: int = 1234,
) -> tuple[datasets.DatasetDict, dict[str, list[str]]]:
    """Deterministic train/validation/test split that holds out whole groups (module docstring), and the groups
    each held-out split got. ``groups[i]`` labels ``dataset[i]``; lines with the same label form one group
    wherever they are. Held-out splits get between their target size and 25 % more (fewer only when the
    corpus runs out of groups that fit); training keeps every other line, in corpus order."""
    n = len(dataset)
    if len(groups) != n:
        raise ValueError(
            f"{len(groups)} group labels for {n} pairs: the group file needs one label per pair."
        )
    for name, value in (("valid_size", valid_size), ("test_size", test_size)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}={value!r} must be an integer >= 0.")
    if valid_size + test_size >= n:
        raise ValueError(
            f"valid_size={valid_size} + test_size={test_size} leaves no training data in a corpus of {n} pairs; "
            "pass smaller --valid_size/--test_size."
        )
    members: dict[str, list[int]] = {}
    for i, label in enumerate(groups):
        members.setdefault(label, []).append(i)
    labels = list(members)  # in order of first appearance
    order = [labels[i] for i in np.random.default_rng(seed).permutation(len(labels))]
    held: dict[str, list[str]] = {}
    taken: set[str] = set()
    for split, size in (("test", test_size), ("validation", valid_size)):
        chosen, count = [], 0
        for label in order:
            if count >= size:
                break
            if label not in taken and count + len(members[label]) <= size * (1 + OVERSHOOT):
                chosen.append(label)
                taken.add(label)
                count += len(members[label])
        if size and not chosen:
            smallest = min(len(members[label]) for label in labels if label not in taken)
            raise ValueError(
                f"no group is small enough for a {split} split of about {size} pairs (the smallest group has "
                f"{smallest} pairs); raise --{'test' if split == 'test' else 'valid'}_size or pass --split_by blocks."
            )
        held[split] = chosen
    if len(taken) == len(labels):
        raise ValueError(
            f"holding out {valid_size} + {test_size} pairs by whole groups leaves no training data "
            f"({len(labels)} groups); pass smaller --valid_size/--test_size."
        )
    index = {split: sorted(i for label in held[split] for i in members[label]) for split in held}
    train = sorted(i for label in labels if label not in taken for i in members[label])
    splits = datasets.DatasetDict(
        {
            "train": dataset.select(train),
            "validation": dataset.select(index["validation"]),
            "test": dataset.select(index["test"]),
        }
    )
    return splits, held
