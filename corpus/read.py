"""Reading a parallel corpus into a `datasets.Dataset` with string columns ``source`` and ``target``.

Accepted inputs (`load_parallel_corpus`):

* ``.tsv`` / ``.txt`` files: UTF-8, one pair per line, tab-separated, **no header**; columns are chosen by
  0-based index (default ``0`` = source, ``1`` = target). The number of columns is taken from the first
  non-empty line; a line with another number of tab-separated fields (typically a line with no tab, or a
  tab inside a sentence) is a *bad line*.
* ``.csv`` files (with a header) and ``.jsonl`` files (one JSON object per line): columns by name (default
  ``source`` / ``target``), or a ``translation`` column holding ``{lang: text}`` dicts with
  ``source_lang`` / ``target_lang`` (the layout of WMT datasets on the Hub).
* any of those compressed as ``.xz``, ``.gz`` or ``.bz2`` (`corpus.files` opens and decodes them);
* a Hub dataset name (anything that is not an existing path), loaded with `datasets.load_dataset`.

CRLF line ends are accepted (and counted). Invalid UTF-8 is an error naming the line. Bad lines are either an
error (``on_bad_line="error"``) or skipped, counted and reported in the returned `DataReport`
(``on_bad_line="skip"``, the default); nothing is dropped silently. Pairs with an empty side are counted as
``skipped_empty``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import datasets

from .files import check_file, read_lines, strip_compression

logger = logging.getLogger(__name__)

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "bible.zh-en.tsv.xz"
SOURCE, TARGET = "source", "target"
_MAX_EXAMPLES = 5
_SUFFIXES = (".tsv", ".txt", ".csv", ".jsonl", ".json")

OnBadLine = Literal["error", "skip"]


@dataclass
class DataReport:
    """What reading a corpus did: counts of lines read, pairs kept and lines skipped (with examples)."""

    path: str
    lines_read: int = 0
    pairs: int = 0
    skipped_bad_lines: int = 0
    skipped_empty: int = 0
    crlf_lines: int = 0
    bad_line_examples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{self.path}: {self.pairs} pairs from {self.lines_read} lines"
        if self.crlf_lines:
            text += f"; {self.crlf_lines} CRLF line ends accepted"
        if self.skipped_bad_lines:
            text += (
                f"; SKIPPED {self.skipped_bad_lines} bad line(s) with the wrong number of columns "
                f"(e.g. {'; '.join(self.bad_line_examples)})"
            )
        if self.skipped_empty:
            text += f"; skipped {self.skipped_empty} empty line(s)/pair(s) with an empty side"
        return text


def _read_file(path: Path, report: DataReport) -> list[str]:
    """The decoded lines of a data file; counts lines read and CRLF line ends in ``report``."""
    check_file(
        path,
        missing_fix=f"Check --data; the shipped corpora are {DEFAULT_DATA.parent}/bible.zh-en.tsv.xz and "
        "bible.de-en.tsv.xz.",
        directory_fix="pass a .tsv/.csv/.jsonl file inside it.",
    )
    if path.stat().st_size == 0:
        raise ValueError(f"Data file {str(path)!r} is empty (0 bytes); pass a file with source/target pairs.")
    lines = []
    for line, crlf in read_lines(path):
        lines.append(line)
        report.crlf_lines += crlf
    report.lines_read = len(lines)
    return lines


def _bad_line(
    report: DataReport, on_bad_line: OnBadLine, path: Path, lineno: int, line: str, why: str, fix: str
) -> None:
    example = f"line {lineno}: {why}"
    if on_bad_line == "error":
        raise ValueError(f"Data file {str(path)!r} {example} ({line[:80]!r}). {fix}")
    report.skipped_bad_lines += 1
    if len(report.bad_line_examples) < _MAX_EXAMPLES:
        report.bad_line_examples.append(example)


def _tsv_pairs(
    path: Path, lines: list[str], src_col: int, tgt_col: int, on_bad_line: OnBadLine, report: DataReport
) -> tuple[list[str], list[str]]:
    n_columns = next((len(line.split("\t")) for line in lines if line.strip()), None)
    if n_columns is None:
        raise ValueError(
            f"Data file {str(path)!r} has only empty lines; pass a file with source<TAB>target pairs."
        )
    if n_columns < 2:
        raise ValueError(
            f"Data file {str(path)!r} has no tab on its first non-empty line, so it is not a parallel TSV file. "
            "Each line must be source<TAB>target; for CSV use a .csv name with a header, for JSON Lines .jsonl."
        )
    for name, col in (("source_column", src_col), ("target_column", tgt_col)):
        if not 0 <= col < n_columns:
            raise ValueError(
                f"{name}={col} does not exist: {str(path)!r} has {n_columns} tab-separated columns "
                f"(indices 0..{n_columns - 1}). Pass --source_column/--target_column in that range."
            )
    sources, targets = [], []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            report.skipped_empty += 1
            continue
        fields = line.split("\t")
        if len(fields) != n_columns:
            why = (
                "no tab" if len(fields) == 1 else f"{len(fields)} tab-separated columns, expected {n_columns}"
            )
            _bad_line(
                report, on_bad_line, path, lineno, line, why,
                "Fix the line (every line needs source<TAB>target and no tab inside a sentence), "
                "or pass --on_bad_line skip to skip and count such lines.",
            )  # fmt: skip
            continue
        src, tgt = fields[src_col].strip(), fields[tgt_col].strip()
        if not src or not tgt:
            report.skipped_empty += 1
            continue
        sources.append(src)
        targets.append(tgt)
    return sources, targets


def _pick(row: dict, column: str | None, lang: str | None, side: str) -> Any:
    if lang is not None and "translation" in row and column is None:
        return row["translation"].get(lang) if isinstance(row["translation"], dict) else None
    return row.get(column if column is not None else side)


def _check_columns(available: list[str], source_column, target_column, source_lang, target_lang, where: str):
    if "translation" in available and source_column is None and target_column is None:
        if source_lang is None or target_lang is None:
            raise ValueError(
                f"{where} has a 'translation' column; pass --source_lang and --target_lang (e.g. zh and en) to "
                "choose the languages inside it."
            )
        return
    wanted = [c if c is not None else d for c, d in ((source_column, SOURCE), (target_column, TARGET))]
    missing = [c for c in wanted if c not in available]
    if missing:
        raise ValueError(
            f"{where} has no column(s) {missing}; its columns are {available}. Pass --source_column and "
            "--target_column with names from that list (or --source_lang/--target_lang for a 'translation' "
            "column)."
        )


def _rows_pairs(rows, source_column, target_column, source_lang, target_lang, on_bad_line, report, path):
    sources, targets = [], []
    for lineno, row in rows:
        src = _pick(row, source_column, source_lang, SOURCE)
        tgt = _pick(row, target_column, target_lang, TARGET)
        if not isinstance(src, str) or not isinstance(tgt, str):
            if src is None and tgt is None and not any(row.values()):
                report.skipped_empty += 1
                continue
            _bad_line(
                report, on_bad_line, path, lineno, str(row), "source or target is missing or not a string",
                "Fix the row, or pass --on_bad_line skip to skip and count such rows.",
            )  # fmt: skip
            continue
        if not src.strip() or not tgt.strip():
            report.skipped_empty += 1
            continue
        sources.append(src.strip())
        targets.append(tgt.strip())
    return sources, targets


def load_parallel_corpus(
    data: str | os.PathLike = DEFAULT_DATA,
    *,
    source_column: str | int | None = None,
    target_column: str | int | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    hub_config: str | None = None,
    hub_split: str = "train",
    max_lines: int | None = None,
    on_bad_line: OnBadLine = "skip",
) -> tuple[datasets.Dataset, DataReport]:
    """Read a parallel corpus into a `datasets.Dataset` with string columns ``source`` and ``target``.

    Args:
        data: a file path (see the module docstring for formats) or a Hub dataset name.
        source_column / target_column: TSV column index (int or digit string; default 0 and 1) or CSV/JSONL/Hub
            column name (default "source" and "target").
        source_lang / target_lang: language keys inside a ``translation`` column.
        hub_config / hub_split: configuration and split of a Hub dataset.
        max_lines: keep only the first N pairs (a slice, e.g. for tests).
        on_bad_line: "skip" (count and report in `DataReport`) or "error".

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: empty file, no usable pairs, invalid UTF-8, unknown columns, or a bad line with
            ``on_bad_line="error"``.
    """
    if on_bad_line not in ("error", "skip"):
        raise ValueError(f"on_bad_line={on_bad_line!r} must be 'error' or 'skip'.")
    path = Path(data)
    looks_like_file = path.exists() or strip_compression(path.name)[0].endswith(_SUFFIXES)
    report = DataReport(path=str(data))
    if not looks_like_file:
        sources, targets = _load_hub(
            str(data), hub_config, hub_split, source_column, target_column, source_lang, target_lang, on_bad_line,
            report,
        )  # fmt: skip
    else:
        lines = _read_file(path, report)
        kind, _ = strip_compression(path.name)
        if kind.endswith(".csv"):
            sources, targets = _csv_pairs(
                path, lines, source_column, target_column, source_lang, target_lang, on_bad_line, report
            )
        elif kind.endswith(".jsonl") or kind.endswith(".json"):
            sources, targets = _jsonl_pairs(
                path, lines, source_column, target_column, source_lang, target_lang, on_bad_line, report
            )
        else:
            src_col = _column_index(source_column, 0, "source_column")
            tgt_col = _column_index(target_column, 1, "target_column")
            sources, targets = _tsv_pairs(path, lines, src_col, tgt_col, on_bad_line, report)
    if max_lines is not None:
        sources, targets = sources[:max_lines], targets[:max_lines]
    report.pairs = len(sources)
    if not sources:
        raise ValueError(
            f"No usable source/target pairs in {str(data)!r}: {report.summary()}. Check the file."
        )
    if report.skipped_bad_lines:
        logger.warning("%s", report.summary())
    else:
        logger.info("%s", report.summary())
    return datasets.Dataset.from_dict({SOURCE: sources, TARGET: targets}), report


def _column_index(value: str | int | None, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    raise ValueError(
        f"{name}={value!r}: TSV files have no header, so columns are chosen by 0-based index (e.g. 0 or 1). "
        "Use a .csv file with a header row to select columns by name."
    )


def _csv_pairs(path, lines, source_column, target_column, source_lang, target_lang, on_bad_line, report):
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    available = list(reader.fieldnames or [])
    _check_columns(
        available, source_column, target_column, source_lang, target_lang, f"CSV file {str(path)!r}"
    )
    rows = ((reader.line_num, row) for row in reader)
    return _rows_pairs(
        rows, source_column, target_column, source_lang, target_lang, on_bad_line, report, path
    )


def _jsonl_pairs(path, lines, source_column, target_column, source_lang, target_lang, on_bad_line, report):
    rows = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            report.skipped_empty += 1
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            _bad_line(report, on_bad_line, path, lineno, line, f"invalid JSON ({e.msg})",
                      "Fix the line or pass --on_bad_line skip.")  # fmt: skip
            continue
        if not isinstance(row, dict):
            _bad_line(report, on_bad_line, path, lineno, line, "not a JSON object",
                      "Each line must be an object such as {\"source\": ..., \"target\": ...}.")  # fmt: skip
            continue
        rows.append((lineno, row))
    if rows:
        _check_columns(list(rows[0][1]), source_column, target_column, source_lang, target_lang,
                       f"JSON Lines file {str(path)!r}")  # fmt: skip
    return _rows_pairs(
        rows, source_column, target_column, source_lang, target_lang, on_bad_line, report, path
    )


def _load_hub(
    name, config, split, source_column, target_column, source_lang, target_lang, on_bad_line, report
):
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # network, unknown name, missing config: all end here
        raise ValueError(
            f"Could not load {name!r} (config {config!r}, split {split!r}) as a file or a Hub dataset: {e}. "
            "If it is a file, check the path; if it is a Hub dataset, check the name and that you are online."
        ) from e
    _check_columns(list(ds.column_names), source_column, target_column, source_lang, target_lang,
                   f"Hub dataset {name!r}")  # fmt: skip
    report.lines_read = len(ds)
    rows = enumerate(ds, start=1)
    return _rows_pairs(
        rows, source_column, target_column, source_lang, target_lang, on_bad_line, report, name
    )
