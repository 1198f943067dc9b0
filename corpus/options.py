"""`DataOptions`: which corpus to read, how, and how to split it (the one data configuration).

Training's `TrainConfig` extends it, so every field is also a command-line flag of the same name: the
``help`` and ``choices`` metadata of each field become the flag's help text and choices, and its range (``ge``,
``gt``, ``le``, ``lt``) is checked by `option_problem`, the one check of a single option's value (flags, config
files and Python alike; `training.cli` parses the flags). A field whose metadata has ``path`` (one of `PATH_KINDS`)
names a path, checked by `path_problem`, the one check of every path argument of every command
(`commands.arguments.path_argument` for the commands' own parsers).
"""

from __future__ import annotations

import math
import operator
import os
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import datasets

from vanilla_transformer.paths import path_problem

from .files import language_pair
from .read import DEFAULT_DATA, SPLITS, describe_data, read_parallel_splits
from .rows import DataReport
from .split import group_file_for, read_groups, split_by_groups, split_corpus

ON_BAD_LINE_CHOICES = ("skip", "error")
SPLIT_BY_CHOICES = ("auto", "groups", "blocks")
# the range of an option, as field metadata: value >= ge, > gt, <= le, < lt
BOUNDS = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt}


def option_range(metadata: Any) -> str:
    """The range in an option field's ``metadata``, in words: ">= 1", "in [0, 1)", "" when it has none."""
    low = next((k for k in ("ge", "gt") if k in metadata), None)
    high = next((k for k in ("le", "lt") if k in metadata), None)
    if low and high:
        opening, closing = "[" if low == "ge" else "(", "]" if high == "le" else ")"
        return f"in {opening}{metadata[low]}, {metadata[high]}{closing}"
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return " ".join(f"{symbols[k]} {metadata[k]}" for k in (low, high) if k)


def option_problem(option: Field, value: Any) -> str | None:
    """What is wrong with ``value`` for the option field ``option``, naming the flag (None: nothing): a value
    outside its metadata's ``choices`` or range (`BOUNDS`), a float that is not finite, or a path its ``path`` kind
    refuses (`path_problem`). None (unset) passes."""
    metadata = option.metadata
    if value is None:
        return None
    if "path" in metadata and isinstance(value, (str, os.PathLike)):
        problem = path_problem(value, metadata["path"])
        return None if problem is None else f"--{option.name} {problem}"
    if "choices" in metadata:
        if value in metadata["choices"]:
            return None
        return f"--{option.name} must be one of {', '.join(map(str, metadata['choices']))}, got {value!r}"
    real = isinstance(value, float)
    bounds = {k: metadata[k] for k in BOUNDS if k in metadata}
    if (not real or math.isfinite(value)) and all(BOUNDS[k](value, b) for k, b in bounds.items()):
        return None
    expected = option_range(metadata) or "a finite number"
    if real and len(bounds) == 1:
        expected = f"a number {expected}"
    return f"--{option.name} must be {expected}, got {value}"


@dataclass
class DataOptions:
    """The corpus (file or Hub dataset), how its lines become pairs, and the train/validation/test split."""

    # `--help` sections (training.cli): each title applies from the option it names to the next named one
    help_groups = {"data": "data options", "valid_size": "split options"}

    data: Any = field(
        default=str(DEFAULT_DATA),
        metadata={
            "path": "file or folder",
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
        default=None,
        metadata={"help": "use only the first N pairs of the corpus (a slice for smoke runs)", "ge": 1},
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
        metadata={
            "help": "validation pairs held out from the training split when the source has none",
            "ge": 0,
        },
    )
    test_size: int = field(
        default=1000,
        metadata={"help": "test pairs held out from the training split when the source has none", "ge": 0},
    )
    split_by: str = field(
        default="auto",
        metadata={
            "help": "how pairs are held out: 'groups' (whole groups, e.g. books, from --split_groups: nothing "
            "held out shares a document with training), 'blocks' (seeded random blocks of --split_block_size "
            "lines: held-out lines come from the training documents), 'auto' (the default: groups when a group file is "
            "found and its groups can hold the requested sizes, else blocks; the log says which and why)",
            "choices": SPLIT_BY_CHOICES,
        },
    )
    split_groups: str | None = field(
        default=None,
        metadata={
            "path": "file",
            "help": "file with one group label per corpus line (e.g. book.chapter.verse: the text before the "
            "first '.' is the group); default: the .refs.xz file next to the data file, e.g. "
            "data/bible.zh-en.refs.xz",
        },
    )
    split_block_size: int = field(
        default=20,
        metadata={
            "help": "with --split_by blocks: held-out pairs are random blocks of this many consecutive lines",
            "ge": 1,
        },
    )
    split_seed: int = field(
        default=1234, metadata={"help": "seed of the train/validation/test split (independent of --seed)"}
    )
    streaming: bool | None = field(
        default=None,
        metadata={
            "help": "train from a shuffled stream of the training split, batches built on the fly, instead of "
            "tokenising it all first (validation and test stay in memory); default: automatically when the data "
            "files are larger than 2 GiB (logged)"
        },
    )
    data_cache_dir: str | None = field(
        default=None,
        metadata={
            "path": "output folder",
            "help": "where data files are kept as Arrow after their first read (default: "
            "vanilla_transformer/pairs under the datasets cache, HF_DATASETS_CACHE)",
        },
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
        whole groups (`split_by_groups`, see ``split_by``) or by `split_corpus` (seeded random blocks); with
        ``split_by`` 'auto', a group file whose groups cannot hold the requested sizes (e.g. ``max_lines`` keeps
        one book) or cannot be lined up with the pairs gives random blocks instead.
        ``report.split_origin`` says where each split came from, and why not by groups."""
        available, report = self._read()
        chosen = {
            "train": self._split_name(self.train_split, available, "train_split"),
            "validation": self._split_name(self.valid_split, available, "valid_split"),
            "test": self._split_name(self.test_split, available, "test_split"),
        }
        train = available[chosen["train"]]  # type: ignore[index]
        valid_size = self.valid_size if chosen["validation"] is None else 0
        test_size = self.test_size if chosen["test"] is None else 0
        group_file = self.group_file() if valid_size or test_size else None
        held, why_not_groups = None, ""
        if group_file is not None:
            try:
                groups = self._groups_for(train, group_file, available, report)
                held, names = split_by_groups(train, groups, valid_size, test_size, self.split_seed)
            except ValueError as error:
                if self.split_by != "auto":
                    raise
                why_not_groups = f"; not by the groups of {group_file.name}: {error}"
            else:
                whole = f"held out from '{chosen['train']}' as whole groups of {group_file.name} (seed "
                whole += f"{self.split_seed}; {{}}: no line shares a group with training)"
                held_out = {split: whole.format(", ".join(names[split])) for split in names}
        if held is None:
            held = split_corpus(train, valid_size, test_size, self.split_block_size, self.split_seed)
            blocks = (
                f"held out from '{chosen['train']}' (seeded random blocks of {self.split_block_size} lines, "
            )
            blocks += f"seed {self.split_seed}: in-domain{why_not_groups})"
            held_out = dict.fromkeys(SPLITS[1:], blocks)
        splits, report.split_origin = datasets.DatasetDict({"train": held["train"]}), {}
        report.split_origin["train"] = f"'{chosen['train']}' split of the data"
        for name in SPLITS[1:]:
            source = chosen[name]
            if source is None:
                splits[name], report.split_origin[name] = held[name], held_out[name]
                report.split_origin["train"] = f"'{chosen['train']}' split of the data, minus held-out pairs"
            else:
                splits[name], report.split_origin[name] = available[source], f"'{source}' split of the data"
        return splits, report

    def _read(self) -> tuple[dict[str, datasets.Dataset], DataReport]:
        """Every split the data has, as read with these options (`read_parallel_splits`), and what reading did."""
        return read_parallel_splits(
            self.data,
            source_column=self.source_column,
            target_column=self.target_column,
            source_lang=self.source_lang,
            target_lang=self.target_lang,
            has_header=self.has_header,
            hub_config=self.hub_config,
            max_lines=self.max_lines,
            on_bad_line=self.on_bad_line,  # type: ignore[arg-type]
            cache_dir=self.data_cache_dir,
        )

    def read_training_rows(self) -> datasets.Dataset:
        """The training split of the data as read, in its order, before any pair is held out of it (what a file
        given line by line beside the data, e.g. ``--alignment_data``, is parallel to)."""
        available, _ = self._read()
        return available[self._split_name(self.train_split, available, "train_split")]  # type: ignore[index]

    def group_file(self) -> Path | None:
        """The group-label file the held-out split uses, or None for random blocks: ``split_groups`` (with
        ``split_by`` 'groups' or 'auto'), else with 'auto' or 'groups' the refs file next to a corpus file."""
        if self.split_by == "blocks":
            return None
        if self.split_groups is not None:
            return Path(self.split_groups)
        found = group_file_for(self.data) if isinstance(self.data, (str, os.PathLike)) else None
        if found is None and self.split_by == "groups":
            raise ValueError(
                f"--split_by groups: no group file next to {describe_data(self.data)} (looked for "
                f"<name>.refs.xz); pass --split_groups FILE (one label per corpus line) or --split_by blocks."
            )
        return found

    def _groups_for(
        self, train: datasets.Dataset, group_file: Path, available: dict, report: DataReport
    ) -> list[str]:
        """The group label of every pair of ``train``, read from ``group_file``, which labels the corpus lines
        in order: that holds only for one corpus read without skipped lines."""
        groups = read_groups(group_file)
        skipped = report.skipped_bad_lines + report.skipped_empty
        if len(available) > 1 or skipped:
            why = (
                f"{skipped} corpus line(s) were skipped"
                if skipped
                else f"the data has splits {sorted(available)}"
            )
            raise ValueError(
                f"--split_groups {str(group_file)!r} labels the lines of one corpus file, but {why}, so labels "
                "and pairs would not line up; fix the data or pass --split_by blocks."
            )
        whole = self.max_lines is None or len(groups) <= self.max_lines
        if len(groups) < len(train) or (whole and len(groups) != len(train)):
            raise ValueError(
                f"{str(group_file)!r} has {len(groups)} labels for {len(train)} pairs: it needs one label per "
                "corpus line, in order."
            )
        return groups[: len(train)]

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
        """The problems of these options, each naming the flag, the bad value and what is expected (empty: none):
        every field's own range and choices (`option_problem`, the fields of a subclass too), then the options
        that contradict each other. Reading the corpus can still fail on what only the data shows (e.g. too few
        pairs for the split)."""
        problems = [p for f in fields(self) if (p := option_problem(f, getattr(self, f.name))) is not None]
        if self.split_groups is not None and self.split_by == "blocks":
            problems.append(
                "--split_groups is given but --split_by is 'blocks'; pass --split_by groups (or auto)"
            )
        for name in ("train_split", "valid_split", "test_split"):
            if not getattr(self, name):
                problems.append(f"--{name} must name a split, got an empty value")
        return problems


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
