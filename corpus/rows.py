"""From rows to pairs: the column rules every source shares, and the accounting of what reading skipped.

`Columns` holds the column options of one read; `resolve` chooses the (source, target) columns of a row layout
(`corpus.read`'s docstring states the rules); `rows_pairs` (`iter_pairs`, lazily) turns ``(line number, row dict)`` rows into pairs,
skipping empty pairs and counting (or raising on) bad rows in the `DataReport` through `bad_line`;
`dataset_pairs` does the same for a `datasets.Dataset`, in Arrow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import datasets

SOURCE, TARGET = "source", "target"
PAIR_FEATURES = datasets.Features({SOURCE: datasets.Value("string"), TARGET: datasets.Value("string")})
MAX_EXAMPLES = 5  # bad-line examples a report keeps

OnBadLine = Literal["error", "skip"]


@dataclass
class DataReport:
    """What reading a corpus did: counts of lines read, pairs kept and lines skipped (with examples), the header
    decision, and where each split came from."""

    path: str
    lines_read: int = 0
    pairs: int = 0
    skipped_bad_lines: int = 0
    skipped_empty: int = 0
    crlf_lines: int = 0
    bad_line_examples: list[str] = field(default_factory=list)
    header: str | None = None  # e.g. "header row detected: ['de', 'en']" (TSV/CSV only)
    split_sizes: dict[str, int] = field(default_factory=dict)  # pairs per split the source provides
    # where each split used came from (DataOptions)
    split_origin: dict[str, str] = field(default_factory=dict)
    # what was read, by name (a file's path, a dataset's split): its pairs and a hash of their text for a data
    # file, its rows and `datasets` fingerprint for a dataset (`corpus.read.data_changes` compares two of them)
    fingerprint: dict[str, dict] = field(default_factory=dict)
    # a pipe or other non-regular file copied to a regular one before reading (`corpus.read.spool_if_pipe`)
    spooled: str | None = None

    def add(self, part: DataReport) -> None:
        """Count what reading one more file did (``part``'s lines, skips, CRLF ends, examples, header) into this
        report, as if this report had read it."""
        self.lines_read += part.lines_read
        self.skipped_bad_lines += part.skipped_bad_lines
        self.skipped_empty += part.skipped_empty
        self.crlf_lines += part.crlf_lines
        room = MAX_EXAMPLES - len(self.bad_line_examples)
        self.bad_line_examples.extend(part.bad_line_examples[: max(room, 0)])
        self.header = part.header or self.header
        self.fingerprint.update(part.fingerprint)

    def summary(self) -> str:
        text = f"{self.path}: {self.pairs} pairs from {self.lines_read} lines"
        if self.spooled:
            text += f" ({self.spooled})"
        if len(self.split_sizes) > 1:
            text += " (" + ", ".join(f"{k} {v}" for k, v in self.split_sizes.items()) + ")"
        if self.header:
            text += f"; {self.header}"
        if self.crlf_lines:
            text += f"; {self.crlf_lines} CRLF line ends accepted"
        if self.skipped_bad_lines:
            text += (
                f"; SKIPPED {self.skipped_bad_lines} bad line(s) (e.g. {'; '.join(self.bad_line_examples)})"
            )
        if self.skipped_empty:
            text += f"; skipped {self.skipped_empty} empty line(s)/pair(s) with an empty side"
        return text


@dataclass
class Columns:
    """How rows become pairs: the column options and the languages (given or stated by the file name)."""

    source_column: str | int | None
    target_column: str | int | None
    source_lang: str | None
    target_lang: str | None
    has_header: bool | None
    on_bad_line: OnBadLine


def bad_line(
    report: DataReport, on_bad_line: OnBadLine, where: str, lineno: int, line: str, why: str, fix: str
):
    example = f"line {lineno}: {why}"
    if on_bad_line == "error":
        raise ValueError(f"Data file {where!r} {example} ({line[:80]!r}). {fix}")
    report.skipped_bad_lines += 1
    if len(report.bad_line_examples) < MAX_EXAMPLES:
        report.bad_line_examples.append(example)


def resolve(available: list[str], columns: Columns, where: str) -> tuple[str, str] | None:
    """The (source, target) column names to read, or None for a ``translation`` column (module docstring)."""
    given = (columns.source_column, columns.target_column)
    if any(c is not None for c in given):
        wanted = [str(c) if c is not None else d for c, d in zip(given, (SOURCE, TARGET))]
        missing = [c for c in wanted if c not in available]
        if missing:
            raise ValueError(
                f"{where} has no column(s) {missing}; its columns are {available}. Pass --source_column and "
                "--target_column with names from that list (or --source_lang/--target_lang for a 'translation' "
                "column)."
            )
        return wanted[0], wanted[1]
    if SOURCE in available and TARGET in available:
        return SOURCE, TARGET
    langs = (columns.source_lang, columns.target_lang)
    if all(lang in available for lang in langs):
        return langs  # type: ignore[return-value]
    if "translation" in available:
        if None in langs:
            raise ValueError(
                f"{where} has a 'translation' column; pass --source_lang and --target_lang (e.g. zh and en) to "
                "choose the languages inside it."
            )
        return None
    if len(available) == 2:
        return available[0], available[1]
    raise ValueError(
        f"{where} has no column(s) {[SOURCE, TARGET]}; its columns are {available}. Pass --source_column and "
        "--target_column with names from that list (or --source_lang/--target_lang for a 'translation' column)."
    )


def rows_pairs(rows, columns: Columns, report: DataReport, where: str) -> tuple[list[str], list[str]]:
    """Pairs from ``(line number, row dict)``; the first row's keys choose the columns (`resolve`)."""
    sources, targets = [], []
    for src, tgt in iter_pairs(rows, columns, report, where):
        sources.append(src)
        targets.append(tgt)
    return sources, targets


def iter_pairs(rows, columns: Columns, report: DataReport, where: str) -> Iterator[tuple[str, str]]:
    """`rows_pairs` one pair at a time: rows are read only as far as the pairs are taken."""
    chosen: tuple[str, str] | None | bool = False
    for lineno, row in rows:
        if chosen is False:
            chosen = resolve(list(row), columns, where)
        if chosen is None:
            tr = row.get("translation")
            src, tgt = (
                (tr.get(columns.source_lang), tr.get(columns.target_lang)) if isinstance(tr, dict) else (0, 0)
            )
        else:
            src, tgt = row.get(chosen[0]), row.get(chosen[1])
        if not isinstance(src, str) or not isinstance(tgt, str):
            if src is None and tgt is None and not any(v for v in row.values() if v is not None):
                report.skipped_empty += 1
                continue
            bad_line(
                report,
                columns.on_bad_line,
                where,
                lineno,
                str(row),
                "source or target is missing or not a string",
                "Fix the row, or pass --on_bad_line skip to skip and count such rows.",
            )
            continue
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            report.skipped_empty += 1
            continue
        yield src, tgt


def dataset_pairs(
    ds: datasets.Dataset, columns: Columns, report: DataReport, what: str, folder: Path | None = None
) -> datasets.Dataset:
    """The pairs of a `datasets.Dataset` as a ``source``/``target`` Dataset, by the rules of `iter_pairs` (row
    numbers from 1 in bad-row messages), computed batch by batch in Arrow (`datasets.Dataset.map`, recomputed on
    every read so that ``report`` counts what it skipped): rows never become one Python list. The pairs of a
    dataset on disk (a Hub download, a saved dataset) are written to a memory-mapped Arrow file in ``folder``
    (named by the dataset's fingerprint and the options); those of an in-memory dataset stay in memory. The
    dataset's rows and `datasets` fingerprint go to ``report.fingerprint[what]``."""
    if not isinstance(ds, datasets.Dataset):
        raise ValueError(
            f"{what} is a {type(ds).__name__}, not a datasets.Dataset; pass a Dataset or DatasetDict."
        )
    report.fingerprint[what] = {"rows": len(ds), "fingerprint": ds._fingerprint}
    chosen = resolve(list(ds.column_names), columns, what) if ds.column_names else None
    if chosen is not None:
        ds = ds.select_columns(list(dict.fromkeys(chosen)))
    elif "translation" in ds.column_names:
        ds = ds.select_columns(["translation"])
    report.lines_read += len(ds)
    fixed = (
        columns if chosen is None else Columns(chosen[0], chosen[1], None, None, None, columns.on_bad_line)
    )

    def pairs_of(batch: dict, indices: list[int]) -> dict:
        rows = ((i + 1, dict(zip(batch, values))) for i, values in zip(indices, zip(*batch.values())))
        kept = list(iter_pairs(rows, fixed, report, what))
        return {SOURCE: [s for s, _ in kept], TARGET: [t for _, t in kept]}

    key = json.dumps([ds._fingerprint, what, dataclasses.asdict(fixed)], sort_keys=True, default=str)
    fingerprint = hashlib.sha256(key.encode()).hexdigest()[:16]
    if not len(ds):  # `map` of no rows gives no columns
        return datasets.Dataset.from_dict({SOURCE: [], TARGET: []}, features=PAIR_FEATURES)
    cache_file = None
    if folder is not None and ds.cache_files:
        folder.mkdir(parents=True, exist_ok=True)
        cache_file = str(folder / f"dataset-pairs-{fingerprint}.arrow")
    return ds.map(
        pairs_of,
        batched=True,
        batch_size=10_000,
        with_indices=True,
        remove_columns=ds.column_names,
        features=PAIR_FEATURES,
        load_from_cache_file=False,
        new_fingerprint=fingerprint,
        cache_file_name=cache_file,
    )
