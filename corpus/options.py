"""`DataOptions`: which corpus to read, how, and how to split it (the one data configuration).

Training's `TrainConfig` extends it, so every field is also a command-line flag of the same name: the
``help`` and ``choices`` metadata of each field become the flag's help text and choices.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import datasets

from .files import language_pair
from .read import DEFAULT_DATA, SPLITS, DataReport, read_parallel_splits
from .split import split_corpus

ON_BAD_LINE_CHOICES = ("skip", "error")


@dataclass
class DataOptions:
    """The corpus (file or Hub dataset), how its lines become pairs, and the train/validation/test split."""

    help_groups = {"data": "data options", "valid_size": "split options"}  # `--help` sections (training.cli)

    data: Any = field(
        default=str(DEFAULT_DATA),
        metadata={
            "help": "parallel data: a file (.tsv/.txt/.csv/.jsonl/.json/.parquet, optionally .xz/.gz/.bz2), a folder "
            "or glob of such files, a save_to_disk folder or a Hub dataset name (Python: also a Dataset/DatasetDict)",
            "type": str,
        },
    )
    source_column: str | None = field(
        default=None,
        metadata={"help": "TSV column index (default 0) or CSV/JSONL/Hub column name (default 'source')"},
    )
    target_column: str | None = field(
        default=None,
        metadata={"help": "TSV column index (default 1) or CSV/JSONL/Hub column name (default 'target')"},
    )
    source_lang: str | None = field(
        default=None,
        metadata={
            "help": "source language (key in a 'translation' column; default: from the file name, e.g. zh)"
        },
    )
    target_lang: str | None = field(
        default=None, metadata={"help": "target language (default: from the file name, e.g. en)"}
    )
    has_header: bool | None = field(
        default=None,
        metadata={
            "help": "whether TSV/CSV files start with a header row (default: detected for TSV, logged; yes for CSV)"
        },
    )
    hub_config: str | None = field(default=None, metadata={"help": "configuration of a Hub dataset"})
    train_split: str = field(default="train", metadata={"help": "the split of the data source to train on"})
    valid_split: str = field(
        default="auto",
        metadata={
            "help": "the source's validation split: 'auto' (its validation/valid/dev split if it has one), a split "
            "name, or 'none' (hold out --valid_size pairs of the training split instead)"
        },
    )
    test_split: str = field(
        default="auto",
        metadata={
            "help": "the source's test split: 'auto' (its test split if it has one), a split name, or 'none' (hold "
            "out --test_size pairs of the training split instead)"
        },
    )
    max_lines: int | None = field(
        default=None, metadata={"help": "use only the first N pairs of the corpus (a slice for smoke runs)"}
    )
    on_bad_line: str = field(
        default="skip",
        metadata={
            "help": "a line with the wrong number of columns: 'skip' (counted, reported) or 'error'",
            "choices": ON_BAD_LINE_CHOICES,
        },
    )
    valid_size: int = field(
        default=500,
        metadata={"help": "validation pairs held out from the training split when the source has none"},
    )
    test_size: int = field(
        default=1000,
        metadata={"help": "test pairs held out from the training split when the source has none"},
    )
    split_block_size: int = field(
        default=20,
        metadata={"help": "held-out pairs are chosen as random blocks of this many consecutive lines"},
    )
    split_seed: int = field(
        default=1234, metadata={"help": "seed of the train/validation/test split (independent of --seed)"}
    )

    def languages(self) -> tuple[str | None, str | None]:
        """(source, target) language: ``source_lang``/``target_lang`` when given, else what the file name
        states (`language_pair`), else None."""
        src, tgt = (
            language_pair(str(self.data)) if isinstance(self.data, (str, os.PathLike)) else (None, None)
        )
        return self.source_lang or src, self.target_lang or tgt

    def load_splits(self) -> tuple[datasets.DatasetDict, DataReport]:
        """Read the data with every option here (`read_parallel_splits`) and return its train/validation/test
        splits and what reading did. The source's own validation and test splits are used as they are (see
        ``valid_split``/``test_split``); a split the source lacks is held out from the training split by
        `split_corpus` (seeded random blocks). ``report.split_origin`` says where each split came from."""
        available, report = read_parallel_splits(
            self.data,
            source_column=self.source_column,
            target_column=self.target_column,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            has_header=self.has_header,
            hub_config=self.hub_config,
            max_lines=self.max_lines,
            on_bad_line=self.on_bad_line,  # type: ignore[arg-type]
        )
        chosen = {
            "train": self._split_name(self.train_split, available, "train_split"),
            "validation": self._split_name(self.valid_split, available, "valid_split"),
            "test": self._split_name(self.test_split, available, "test_split"),
        }
        train = available[chosen["train"]]  # type: ignore[index]
        held = split_corpus(
            train,
            self.valid_size if chosen["validation"] is None else 0,
            self.test_size if chosen["test"] is None else 0,
            self.split_block_size,
            self.split_seed,
        )
        held_out = f"held out from '{chosen['train']}' (seeded random blocks of {self.split_block_size} lines, seed "
        held_out += f"{self.split_seed})"
        splits, report.split_origin = datasets.DatasetDict(train=held["train"]), {}
        report.split_origin["train"] = f"'{chosen['train']}' split of the data"
        for name in SPLITS[1:]:
            if chosen[name] is None:
                splits[name], report.split_origin[name] = held[name], held_out
                report.split_origin["train"] = f"'{chosen['train']}' split of the data, minus held-out pairs"
            else:
                splits[name], report.split_origin[name] = (
                    available[chosen[name]],
                    f"'{chosen[name]}' split of the data",
                )
        return splits, report

    def _split_name(self, value: str, available: dict, option: str) -> str | None:
        """The source split that ``--option value`` names, or None to hold one out of the training split."""
        auto = {"valid_split": "validation", "test_split": "test"}.get(option)
        if value == "none" and auto:
            return None
        if value == "auto" and auto:
            return auto if auto in available else None
        if value in available:
            return value
        raise ValueError(
            f"--{option} {value!r}: the data has no such split; its splits are {sorted(available)}"
            + (". Pass one of them, 'auto' or 'none'." if auto else ". Pass one of them.")
        )

    def check(self) -> list[str]:
        """The problems of these options, each naming the flag, the bad value and what is expected (empty: none).
        Reading the corpus can still fail on what only the data shows (e.g. too few pairs for the split)."""
        problems = []
        if self.on_bad_line not in ON_BAD_LINE_CHOICES:
            problems.append(f"--on_bad_line must be 'skip' or 'error', got {self.on_bad_line!r}")
        for name in ("valid_size", "test_size"):
            if getattr(self, name) < 0:
                problems.append(f"--{name} must be >= 0, got {getattr(self, name)}")
        if self.split_block_size < 1:
            problems.append(f"--split_block_size must be >= 1, got {self.split_block_size}")
        for name in ("train_split", "valid_split", "test_split"):
            if not getattr(self, name):
                problems.append(f"--{name} must name a split, got an empty value")
        if self.max_lines is not None and self.max_lines < 1:
            problems.append(f"--max_lines must be >= 1 (or unset for the whole corpus), got {self.max_lines}")
        return problems
