"""`DataOptions`: which corpus to read, how, and how to split it (the one data configuration).

Training's `TrainConfig` extends it, so every field is also a command-line flag of the same name: the
``help`` and ``choices`` metadata of each field become the flag's help text and choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import datasets

from .files import language_pair
from .read import DEFAULT_DATA, DataReport, load_parallel_corpus
from .split import split_corpus

ON_BAD_LINE_CHOICES = ("skip", "error")


@dataclass
class DataOptions:
    """The corpus (file or Hub dataset), how its lines become pairs, and the train/validation/test split."""

    data: str = field(
        default=str(DEFAULT_DATA),
        metadata={"help": "parallel file (.tsv/.csv/.jsonl, optionally .xz/.gz/.bz2) or Hub dataset name"},
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
    hub_config: str | None = field(default=None, metadata={"help": "configuration of a Hub dataset"})
    hub_split: str = field(default="train", metadata={"help": "split of a Hub dataset to read"})
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
    valid_size: int = field(default=500, metadata={"help": "validation pairs held out from the corpus"})
    test_size: int = field(default=1000, metadata={"help": "test pairs held out from the corpus"})
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
        src, tgt = language_pair(str(self.data))
        return self.source_lang or src, self.target_lang or tgt

    def load_splits(self) -> tuple[datasets.DatasetDict, DataReport]:
        """Read the corpus with every option here, then split it (`split_corpus`): (train/validation/test
        splits, what reading did)."""
        corpus, report = load_parallel_corpus(
            self.data,
            source_column=self.source_column,
            target_column=self.target_column,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            hub_config=self.hub_config,
            hub_split=self.hub_split,
            max_lines=self.max_lines,
            on_bad_line=self.on_bad_line,  # type: ignore[arg-type]
        )
        splits = split_corpus(corpus, self.valid_size, self.test_size, self.split_block_size, self.split_seed)
        return splits, report

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
        if self.max_lines is not None and self.max_lines < 1:
            problems.append(f"--max_lines must be >= 1 (or unset for the whole corpus), got {self.max_lines}")
        return problems
