"""The data-file formats: one file (TSV/TXT, CSV, JSON Lines, JSON, Parquet; chosen by suffix, optionally
compressed) into (sources, targets) lists, by the column rules of `corpus.rows`. TSV header rows are detected
(`looks_like_header`); rows of the wrong width, invalid JSON and non-object items are bad lines.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
from datasets.table import InMemoryTable

from .files import read_lines, strip_compression
from .rows import (
    SOURCE,
    TARGET,
    Columns,
    DataReport,
    bad_line,
    dataset_pairs,
    iter_pairs,
    resolve,
    rows_pairs,
)

FORMATS = {
    ".tsv": "tsv",
    ".txt": "tsv",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
}

_HEADER_WORDS = {"source", "target", "src", "tgt", "source_text", "target_text", "translation"}

CHUNK_PAIRS = 50_000  # pairs per chunk of `pair_chunks`

_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}([_-][A-Za-z]{2,4})?$")


def format_of(path: Path) -> str | None:
    name = strip_compression(path.name)[0]
    return next((kind for suffix, kind in FORMATS.items() if name.endswith(suffix)), None)


def file_pairs(path: Path, columns: Columns, report: DataReport) -> tuple[list[str], list[str]]:
    """The pairs of one data file (its format chosen by suffix; unknown suffixes are read as TSV); the file exists
    and is readable (`corpus.files.check_file`)."""
    sources, targets = [], []
    for src, tgt in pair_chunks(path, columns, report):
        sources.extend(src)
        targets.extend(tgt)
    return sources, targets


def pair_chunks(
    path: Path, columns: Columns, report: DataReport, size: int = CHUNK_PAIRS
) -> Iterator[tuple[list[str], list[str]]]:
    """`file_pairs` in chunks of at most ``size`` pairs. TSV and JSON Lines files are read as the chunks are taken
    (memory does not grow with the file); CSV, JSON and Parquet files are read whole, then chunked."""
    if path.stat().st_size == 0:
        raise ValueError(f"Data file {str(path)!r} is empty (0 bytes); pass a file with source/target pairs.")
    kind = format_of(path) or "tsv"
    if kind in ("tsv", "jsonl"):
        lines = _counted_lines(path, report)
        pairs = _delimited_pairs(path, lines, kind, columns, report) if kind == "tsv" else None
        yield from _chunked(pairs if pairs is not None else _jsonl_pairs(path, lines, columns, report), size)
        return
    if kind == "parquet":  # read whole by pyarrow, its pairs computed in Arrow (`rows.dataset_pairs`)
        table = _parquet_pairs(path, columns, report)
        for start in range(0, max(len(table), 1), size):
            chunk = table[start : start + size]
            yield chunk[SOURCE], chunk[TARGET]
        return
    else:
        lines = []
        for line, crlf in read_lines(path):
            lines.append(line)
            report.crlf_lines += crlf
        value = _json_value("\n".join(lines)) if kind == "json" else None
        if value is not None:  # one JSON value; else one value per line (JSON Lines)
            whole = _json_array_pairs(path, value, columns, report)
        else:
            report.lines_read += len(lines)
            pairs = (
                _jsonl_pairs(path, iter(lines), columns, report)
                if kind == "json"
                else _delimited_pairs(path, iter(lines), kind, columns, report)
            )
            whole = tuple(map(list, zip(*pairs))) or ([], [])
    for start in range(0, max(len(whole[0]), 1), size):
        yield whole[0][start : start + size], whole[1][start : start + size]


def _counted_lines(path: Path, report: DataReport) -> Iterator[str]:
    for line, crlf in read_lines(path):
        report.lines_read += 1
        report.crlf_lines += crlf
        yield line


def _chunked(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[tuple[list[str], list[str]]]:
    """Lists of at most ``size`` pairs; one empty chunk when there are no pairs."""
    sources: list[str] = []
    targets: list[str] = []
    given = False
    for src, tgt in pairs:
        sources.append(src)
        targets.append(tgt)
        if len(sources) == size:
            yield sources, targets
            sources, targets, given = [], [], True
    if sources or not given:
        yield sources, targets


def _is_name(value: str | int | None) -> bool:
    return isinstance(value, str) and not value.lstrip("-").isdigit()


def looks_like_header(fields: list[str], columns: Columns) -> bool:
    wanted = {c for c in (columns.source_column, columns.target_column) if _is_name(c)}
    wanted |= {lang for lang in (columns.source_lang, columns.target_lang) if lang}
    names = [f.strip() for f in fields]
    return len(set(names)) == len(names) and all(
        n in wanted or n.lower() in _HEADER_WORDS or _LANGUAGE_CODE.match(n) for n in names
    )


def _delimited_pairs(
    path: Path, lines: Iterator[str], kind: str, columns: Columns, report: DataReport
) -> Iterator[tuple[str, str]]:
    """TSV and CSV: rows of fields, an optional header, then columns by name (header) or by index."""
    where = str(path)
    if kind == "csv":
        text = list(lines)
        found = [(n, fields) for n, fields in enumerate(csv.reader(io.StringIO("\n".join(text))), start=1)]
        rows = iter([(n, f) for n, f in found if f])  # csv.reader gives [] for an empty line
        report.skipped_empty += sum(1 for line in text if not line.strip())
    else:
        rows = _tsv_rows(lines, report)
    head = next(rows, None)
    if head is None:
        raise ValueError(
            f"Data file {where!r} has only empty lines; pass a file with source<TAB>target pairs."
        )
    rows = itertools.chain([head], rows)
    first = head[1]
    header = columns.has_header
    if header is None:
        header = kind == "csv" or looks_like_header(first, columns)
        if header and kind == "tsv":
            report.header = f"header row detected: {first} (pass --has_header false if it is data)"
    elif header:
        report.header = f"header row: {first}"
    if header:
        names = [f.strip() for f in first]
        next(rows)
        body = ((n, dict(zip(names, f))) if len(f) == len(names) else (n, f) for n, f in rows)
        resolve(names, columns, f"{kind.upper()} file {where!r}")
        yield from iter_pairs(
            _with_width(body, len(names), kind, where, columns, report), columns, report, where
        )
        return
    for value, name in ((columns.source_column, "source_column"), (columns.target_column, "target_column")):
        if _is_name(value):
            raise ValueError(
                f"{name}={value!r} names a column, but {where!r} has no header row (its first line {first} does "
                "not look like one; TSV files have no header unless --has_header true). Pass a 0-based column "
                "index (e.g. 0 or 1), or --has_header true if the first line names the columns."
            )
    if len(first) < 2:
        raise ValueError(
            f"Data file {where!r} has no tab on its first non-empty line, so it is not a parallel TSV file. Each "
            "line must be source<TAB>target; for CSV use a .csv name with a header, for JSON Lines .jsonl."
        )
    src_col = _column_index(columns.source_column, 0, "source_column", len(first), kind, where)
    tgt_col = _column_index(columns.target_column, 1, "target_column", len(first), kind, where)
    indexed = {SOURCE: src_col, TARGET: tgt_col}
    body = ((n, {k: f[i] for k, i in indexed.items()}) if len(f) == len(first) else (n, f) for n, f in rows)
    plain = Columns(SOURCE, TARGET, None, None, False, columns.on_bad_line)
    yield from iter_pairs(_with_width(body, len(first), kind, where, columns, report), plain, report, where)


def _tsv_rows(lines: Iterator[str], report: DataReport) -> Iterator[tuple[int, list[str]]]:
    for n, line in enumerate(lines, start=1):
        if line.strip():
            yield n, line.split("\t")
        else:
            report.skipped_empty += 1


def _with_width(body, width: int, kind: str, where: str, columns: Columns, report: DataReport):
    """Rows whose field count differs from the header's / first line's are bad lines; yields the others."""
    for n, row in body:
        if isinstance(row, dict):
            yield n, row
            continue
        sep = "tab-separated" if kind == "tsv" else "comma-separated"
        why = "no tab" if kind == "tsv" and len(row) == 1 else f"{len(row)} {sep} columns, expected {width}"
        fix = (
            "Fix the line (every line needs source<TAB>target and no tab inside a sentence), or pass "
            "--on_bad_line skip to skip and count such lines."
            if kind == "tsv"
            else "Fix the row (quote fields that contain commas), or pass --on_bad_line skip to skip and count it."
        )
        bad_line(report, columns.on_bad_line, where, n, ("\t" if kind == "tsv" else ",").join(row), why, fix)


def _column_index(value: str | int | None, default: int, name: str, width: int, kind: str, where: str) -> int:
    index = default if value is None else int(value)
    if not 0 <= index < width:
        sep = "tab-separated" if kind == "tsv" else "comma-separated"
        raise ValueError(
            f"{name}={value if value is not None else default} does not exist: {where!r} has {width} "
            f"{sep} columns (indices 0..{width - 1}). Pass --source_column/--target_column in that range."
        )
    return index


def _jsonl_pairs(path: Path, lines: Iterator[str], columns: Columns, report: DataReport):
    def rows() -> Iterator[tuple[int, dict]]:
        first = True
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                report.skipped_empty += 1
                continue
            try:
                row = json.loads(line)
                why, fix = (
                    "not a JSON object",
                    'Each line must be an object such as {"source": ..., "target": ...}.',
                )
            except json.JSONDecodeError as e:
                row, why, fix = None, f"invalid JSON ({e.msg})", "Fix the line or pass --on_bad_line skip."
            if not isinstance(row, dict):
                bad_line(report, columns.on_bad_line, str(path), lineno, line, why, fix)
                continue
            if first:
                resolve(list(row), columns, f"JSON Lines file {str(path)!r}")
                first = False
            yield lineno, row

    return iter_pairs(rows(), columns, report, str(path))


def _json_value(text: str) -> Any:
    """The JSON value ``text`` holds, or None when it is not one JSON value (e.g. JSON Lines)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _json_array_pairs(path: Path, value: Any, columns: Columns, report: DataReport):
    if not isinstance(value, list):
        raise ValueError(
            f"Data file {str(path)!r} holds a JSON {type(value).__name__}, not an array of objects; write "
            '[{"source": ..., "target": ...}, ...], or one object per line in a .jsonl file.'
        )
    rows = []
    for i, row in enumerate(value, start=1):
        if isinstance(row, dict):
            rows.append((i, row))
        else:
            bad_line(
                report,
                columns.on_bad_line,
                str(path),
                i,
                json.dumps(row, ensure_ascii=False)[:80],
                f"array item {i} is not a JSON object",
                'Each item must be {"source": ..., "target": ...}.',
            )
    report.lines_read += len(value)
    if rows:
        resolve(list(rows[0][1]), columns, f"JSON file {str(path)!r}")
    return rows_pairs(rows, columns, report, str(path))


def _parquet_pairs(path: Path, columns: Columns, report: DataReport):
    if strip_compression(path.name)[1] is not None:
        raise ValueError(
            f"Data file {str(path)!r}: compressed Parquet is not supported (Parquet compresses its own columns); "
            "decompress it first."
        )
    import pyarrow.parquet as pq  # a dependency of `datasets`

    try:
        table = datasets.Dataset(InMemoryTable(pq.read_table(path)))
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise ValueError(
            f"Could not read {str(path)!r} as Parquet ({e}); check that it is a Parquet file."
        ) from e
    return dataset_pairs(table, columns, report, f"Parquet file {str(path)!r}")
