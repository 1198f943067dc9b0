"""Reading a parallel corpus into `datasets.Dataset` splits with string columns ``source`` and ``target``.

Accepted sources (`read_parallel_splits`, `load_parallel_corpus`):

* **Files**, chosen by suffix, optionally compressed as ``.xz``/``.lzma``, ``.gz`` or ``.bz2``:

  - ``.tsv`` / ``.txt``: UTF-8, one pair per line, tab-separated. A first line that is a header row is
    *detected* (every field a known column name such as ``source``/``target``/``src``/``tgt``, a language
    code such as ``de``/``en``, or a name passed as ``source_column``/``target_column``) unless
    ``has_header`` says true or false; the log says which. Without a header, columns are 0-based indices
    (default ``0`` = source, ``1`` = target).
  - ``.csv``: comma-separated with a header row (``has_header=False`` reads it without one, by index).
  - ``.jsonl``: one JSON object per line. ``.json``: a JSON array of objects (or JSON Lines under that name).
  - ``.parquet``: a Parquet table (read through `datasets`).

  With a header or named fields, columns are chosen by name: ``source_column``/``target_column``; else the
  columns named ``source``/``target``; else the columns named by the languages (``source_lang``/
  ``target_lang``, or the languages of the file name such as ``bible.zh-en.tsv``); else a ``translation``
  column holding ``{lang: text}`` dicts (the layout of WMT datasets on the Hub); else, when there are exactly
  two columns, the first is the source and the second the target.
* **A directory or a glob pattern** of such files (one format). Files whose names contain a split word
  (``train``; ``validation``/``valid``/``dev``/``val``; ``test``; e.g. ``train.tsv``, ``data/test-00000.parquet``,
  the layout of Hub dataset repositories) form those splits; otherwise every file is a shard of ``train``.
  A folder written by `datasets`' ``save_to_disk`` is loaded with ``load_from_disk``.
* **A `datasets.Dataset` or `DatasetDict`** (Python API): its rows, by the column rules above.
* **A Hub dataset name** (anything else), loaded with `datasets.load_dataset` with every split it has.

Strict checks: invalid UTF-8 is an error naming the line; CRLF line ends are accepted and counted; a line or
row with the wrong number of columns or a missing/non-string side is a *bad line*: an error
(``on_bad_line="error"``) or skipped, counted and reported in the returned `DataReport` (``"skip"``, the
default). Pairs with an empty side are counted as ``skipped_empty``. Nothing is dropped silently.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import datasets
from datasets.table import InMemoryTable

from .files import check_file, language_pair, read_lines, strip_compression

logger = logging.getLogger(__name__)

# the shipped corpora: data/ of a source checkout, or corpus/data/ where a wheel installs them
_CHECKOUT_DATA = Path(__file__).resolve().parents[1] / "data"
SHIPPED_DATA = (
    _CHECKOUT_DATA if (_CHECKOUT_DATA / "bible.zh-en.tsv.xz").exists() else Path(__file__).parent / "data"
)
DEFAULT_DATA = SHIPPED_DATA / "bible.zh-en.tsv.xz"
SOURCE, TARGET = "source", "target"
SPLITS = ("train", "validation", "test")
GLOB_CHARS = "*?["
_MAX_EXAMPLES = 5
FORMATS = {
    ".tsv": "tsv",
    ".txt": "tsv",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
}
_SPLIT_WORDS = {
    "train": "train",
    "training": "train",
    "validation": "validation",
    "valid": "validation",
    "dev": "validation",
    "val": "validation",
    "test": "test",
}
_HEADER_WORDS = {"source", "target", "src", "tgt", "source_text", "target_text", "translation"}
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}([_-][A-Za-z]{2,4})?$")

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
    split_origin: dict[str, str] = field(
        default_factory=dict
    )  # where each split used came from (DataOptions)

    def summary(self) -> str:
        text = f"{self.path}: {self.pairs} pairs from {self.lines_read} lines"
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
class _Columns:
    """How rows become pairs: the column options and the languages (given or stated by the file name)."""

    source_column: str | int | None
    target_column: str | int | None
    source_lang: str | None
    target_lang: str | None
    has_header: bool | None
    on_bad_line: OnBadLine


def is_dataset_object(data: Any) -> bool:
    """Whether ``data`` is an in-memory `datasets.Dataset` or `datasets.DatasetDict`."""
    return isinstance(data, (datasets.Dataset, datasets.DatasetDict))


def describe_data(data: Any) -> str:
    """A short, stable text naming a data source: the path or Hub name, or for an in-memory dataset its type,
    splits and `datasets` fingerprint (what a saved run configuration records, and what resuming compares)."""
    if isinstance(data, datasets.DatasetDict):
        return "DatasetDict(" + ", ".join(f"{k}:{v._fingerprint}" for k, v in data.items()) + ")"
    if isinstance(data, datasets.Dataset):
        return f"Dataset({data._fingerprint})"
    return str(data)


def source_kind(data: Any) -> str:
    """What the reader takes a data source for: "dataset" (an in-memory `Dataset`/`DatasetDict`), "saved" (a folder
    written by ``save_to_disk``), "folder", "glob" (wildcards, no such path), "file" (an existing path, or a name
    with a data file suffix) or "hub" (anything else: a Hub dataset name)."""
    if is_dataset_object(data):
        return "dataset"
    path = Path(data)
    if path.is_dir():
        return (
            "saved"
            if any((path / marker).exists() for marker in ("dataset_dict.json", "state.json"))
            else "folder"
        )
    if any(c in str(data) for c in GLOB_CHARS) and not path.exists():
        return "glob"
    return "file" if path.exists() or _format_of(path) is not None else "hub"


def _split_of(path: Path, root: Path) -> str | None:
    """The split a data file's relative path names (``data/test-00000.parquet`` -> "test"), or None."""
    rel = path.relative_to(root) if root in path.parents else Path(path.name)
    words = [
        w
        for part in rel.parts
        for w in re.split(r"[^A-Za-z]+", strip_compression(part)[0].split(".")[0])
        if w
    ]
    return next((_SPLIT_WORDS[w.lower()] for w in words if w.lower() in _SPLIT_WORDS), None)


def _format_of(path: Path) -> str | None:
    name = strip_compression(path.name)[0]
    return next((kind for suffix, kind in FORMATS.items() if name.endswith(suffix)), None)


def _files_by_split(data: str, files: list[Path], root: Path) -> dict[str, list[Path]]:
    files = [f for f in files if _format_of(f) is not None]
    if not files:
        raise ValueError(
            f"{data!r} holds no data files; pass a folder or glob with .tsv/.txt/.csv/.jsonl/.json/.parquet "
            "files (optionally .xz/.gz/.bz2)."
        )
    kinds = sorted({_format_of(f) for f in files})
    if len(kinds) > 1:
        raise ValueError(
            f"{data!r} mixes data formats ({', '.join(kinds)}): "
            + ", ".join(f.name for f in files[:6])
            + ". Keep one format per folder, or pass one file."
        )
    named = {f: _split_of(f, root) for f in files}
    if not any(named.values()):
        return {"train": files}
    unnamed = [f.name for f, s in named.items() if s is None]
    if unnamed:
        raise ValueError(
            f"{data!r}: some files name a split (train/validation/test) and some do not ({unnamed[:4]}); name "
            "every file by its split, or none (then all are training shards)."
        )
    return {s: [f for f in files if named[f] == s] for s in SPLITS if any(named[f] == s for f in files)}


def read_parallel_splits(
    data: str | os.PathLike | datasets.Dataset | datasets.DatasetDict = DEFAULT_DATA,
    *,
    source_column: str | int | None = None,
    target_column: str | int | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    has_header: bool | None = None,
    hub_config: str | None = None,
    max_lines: int | None = None,
    on_bad_line: OnBadLine = "skip",
) -> tuple[dict[str, datasets.Dataset], DataReport]:
    """Every split a parallel corpus provides, each a `datasets.Dataset` with columns ``source`` and ``target``
    (module docstring for the sources and column rules); a single file or an unnamed set of shards is one
    ``train`` split. ``max_lines`` keeps the first N pairs of each split.

    Raises:
        FileNotFoundError: a file or glob that does not exist.
        ValueError: empty file, no usable pairs, invalid UTF-8, unknown columns, mixed formats, or a bad line with
            ``on_bad_line="error"``.
    """
    if on_bad_line not in ("error", "skip"):
        raise ValueError(f"on_bad_line={on_bad_line!r} must be 'error' or 'skip'.")
    if has_header not in (None, True, False):
        raise ValueError(f"has_header={has_header!r} must be True, False or None (detect).")
    report = DataReport(path=describe_data(data))
    if is_dataset_object(data):
        columns = _Columns(source_column, target_column, source_lang, target_lang, has_header, on_bad_line)
        parts = data.items() if isinstance(data, datasets.DatasetDict) else [("train", data)]
        pairs = {
            _split_name(k): _dataset_pairs(ds, columns, report, f"dataset split {k!r}") for k, ds in parts
        }
        return _finish(pairs, report, max_lines)
    text, path, kind = str(data), Path(data), source_kind(data)
    if kind == "saved":
        loaded = datasets.load_from_disk(str(path))
        splits, inner = read_parallel_splits(
            loaded,
            source_column=source_column,
            target_column=target_column,
            source_lang=source_lang,
            target_lang=target_lang,
            has_header=has_header,
            max_lines=max_lines,
            on_bad_line=on_bad_line,
        )
        inner.path = text
        return splits, inner
    if kind == "folder":
        by_split = _files_by_split(text, sorted(p for p in path.rglob("*") if p.is_file()), path)
    elif kind == "glob":
        matches = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        if not matches:
            raise FileNotFoundError(
                f"No file matches {text!r}; check the pattern (and quote it in the shell)."
            )
        by_split = _files_by_split(text, matches, Path(os.path.commonpath([str(m.parent) for m in matches])))
    elif kind == "file":
        by_split = {"train": [path]}
    else:
        return _read_hub(
            text,
            hub_config,
            source_column,
            target_column,
            source_lang,
            target_lang,
            on_bad_line,
            report,
            max_lines,
        )
    src_lang, tgt_lang = language_pair(next(iter(by_split.values()))[0].name)
    columns = _Columns(
        source_column,
        target_column,
        source_lang or src_lang,
        target_lang or tgt_lang,
        has_header,
        on_bad_line,
    )
    pairs = {s: _concat([_file_pairs(f, columns, report) for f in files]) for s, files in by_split.items()}
    if len(by_split) > 1 or len(next(iter(by_split.values()))) > 1:
        logger.info("Read %s: %s", text, {s: [f.name for f in fs] for s, fs in by_split.items()})
    return _finish(pairs, report, max_lines)


def load_parallel_corpus(
    data: str | os.PathLike | datasets.Dataset | datasets.DatasetDict = DEFAULT_DATA,
    *,
    split: str = "train",
    **options: Any,
) -> tuple[datasets.Dataset, DataReport]:
    """One split (default ``train``) of a parallel corpus as a `datasets.Dataset` with string columns ``source``
    and ``target``; ``options`` are those of `read_parallel_splits` (columns, languages, has_header,
    hub_config, max_lines, on_bad_line)."""
    splits, report = read_parallel_splits(data, **options)
    if split not in splits:
        raise ValueError(
            f"{report.path!r} has no split {split!r}; its splits are {sorted(splits)}. Pass one of them."
        )
    return splits[split], report


def _split_name(name: str) -> str:
    return _SPLIT_WORDS.get(name.lower(), name)


def _concat(parts: list[tuple[list[str], list[str]]]) -> tuple[list[str], list[str]]:
    return [s for p in parts for s in p[0]], [t for p in parts for t in p[1]]


def _finish(pairs: dict[str, tuple[list[str], list[str]]], report: DataReport, max_lines: int | None):
    splits = {}
    for name, (sources, targets) in pairs.items():
        if max_lines is not None:
            sources, targets = sources[:max_lines], targets[:max_lines]
        splits[name] = datasets.Dataset.from_dict({SOURCE: sources, TARGET: targets})
    report.split_sizes = {k: len(v) for k, v in splits.items()}
    report.pairs = sum(report.split_sizes.values())
    if not report.pairs or ("train" in splits and not len(splits["train"])):
        raise ValueError(
            f"No usable source/target pairs in {report.path!r}: {report.summary()}. Check the data."
        )
    (logger.warning if report.skipped_bad_lines else logger.info)("%s", report.summary())
    return splits, report


# ------------------------------------------------------------------------------------------------ bad lines


def _bad_line(
    report: DataReport, on_bad_line: OnBadLine, where: str, lineno: int, line: str, why: str, fix: str
):
    example = f"line {lineno}: {why}"
    if on_bad_line == "error":
        raise ValueError(f"Data file {where!r} {example} ({line[:80]!r}). {fix}")
    report.skipped_bad_lines += 1
    if len(report.bad_line_examples) < _MAX_EXAMPLES:
        report.bad_line_examples.append(example)


# ------------------------------------------------------------------------------------------------ files


def _file_pairs(path: Path, columns: _Columns, report: DataReport) -> tuple[list[str], list[str]]:
    """The pairs of one data file (its format chosen by suffix; unknown suffixes are read as TSV)."""
    check_file(
        path,
        missing_fix=f"Check --data; the shipped corpora are {DEFAULT_DATA.parent}/bible.zh-en.tsv.xz and "
        "bible.de-en.tsv.xz.",
        directory_fix="pass a .tsv/.csv/.jsonl file inside it.",
    )
    if path.stat().st_size == 0:
        raise ValueError(f"Data file {str(path)!r} is empty (0 bytes); pass a file with source/target pairs.")
    kind = _format_of(path) or "tsv"
    if kind == "parquet":
        return _parquet_pairs(path, columns, report)
    lines = []
    for line, crlf in read_lines(path):
        lines.append(line)
        report.crlf_lines += crlf
    if kind == "json":
        whole = _json_value("\n".join(lines))
        if whole is not None:  # one JSON value; else one value per line (JSON Lines)
            return _json_array_pairs(path, whole, columns, report)
    report.lines_read += len(lines)
    if kind in ("json", "jsonl"):
        return _jsonl_pairs(path, lines, columns, report)
    return _delimited_pairs(path, lines, kind, columns, report)


def _is_name(value: str | int | None) -> bool:
    return isinstance(value, str) and not value.lstrip("-").isdigit()


def _looks_like_header(fields: list[str], columns: _Columns) -> bool:
    wanted = {c for c in (columns.source_column, columns.target_column) if _is_name(c)}
    wanted |= {lang for lang in (columns.source_lang, columns.target_lang) if lang}
    names = [f.strip() for f in fields]
    return len(set(names)) == len(names) and all(
        n in wanted or n.lower() in _HEADER_WORDS or _LANGUAGE_CODE.match(n) for n in names
    )


def _delimited_pairs(path: Path, lines: list[str], kind: str, columns: _Columns, report: DataReport):
    """TSV and CSV: rows of fields, an optional header, then columns by name (header) or by index."""
    where = str(path)
    if kind == "csv":
        rows = [(n, fields) for n, fields in enumerate(csv.reader(io.StringIO("\n".join(lines))), start=1)]
        rows = [(n, f) for n, f in rows if f]  # csv.reader gives [] for an empty line
        report.skipped_empty += sum(1 for line in lines if not line.strip())
    else:
        rows = []
        for n, line in enumerate(lines, start=1):
            if line.strip():
                rows.append((n, line.split("\t")))
            else:
                report.skipped_empty += 1
    if not rows:
        raise ValueError(
            f"Data file {where!r} has only empty lines; pass a file with source<TAB>target pairs."
        )
    first = rows[0][1]
    header = columns.has_header
    if header is None:
        header = kind == "csv" or _looks_like_header(first, columns)
        if header and kind == "tsv":
            report.header = f"header row detected: {first} (pass --has_header false if it is data)"
    elif header:
        report.header = f"header row: {first}"
    if header:
        names = [f.strip() for f in first]
        body = [(n, dict(zip(names, f))) if len(f) == len(names) else (n, f) for n, f in rows[1:]]
        _resolve(names, columns, f"{kind.upper()} file {where!r}")
        return _rows_pairs(
            _with_width(body, len(names), kind, where, columns, report), columns, report, where
        )
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
    body = [(n, {k: f[i] for k, i in indexed.items()}) if len(f) == len(first) else (n, f) for n, f in rows]
    plain = _Columns(SOURCE, TARGET, None, None, False, columns.on_bad_line)
    return _rows_pairs(_with_width(body, len(first), kind, where, columns, report), plain, report, where)


def _with_width(body, width: int, kind: str, where: str, columns: _Columns, report: DataReport):
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
        _bad_line(report, columns.on_bad_line, where, n, ("\t" if kind == "tsv" else ",").join(row), why, fix)


def _column_index(value: str | int | None, default: int, name: str, width: int, kind: str, where: str) -> int:
    index = default if value is None else int(value)
    if not 0 <= index < width:
        sep = "tab-separated" if kind == "tsv" else "comma-separated"
        raise ValueError(
            f"{name}={value if value is not None else default} does not exist: {where!r} has {width} "
            f"{sep} columns (indices 0..{width - 1}). Pass --source_column/--target_column in that range."
        )
    return index


def _jsonl_pairs(path: Path, lines: list[str], columns: _Columns, report: DataReport):
    rows = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            report.skipped_empty += 1
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            _bad_line(
                report,
                columns.on_bad_line,
                str(path),
                lineno,
                line,
                f"invalid JSON ({e.msg})",
                "Fix the line or pass --on_bad_line skip.",
            )
            continue
        if not isinstance(row, dict):
            _bad_line(
                report,
                columns.on_bad_line,
                str(path),
                lineno,
                line,
                "not a JSON object",
                'Each line must be an object such as {"source": ..., "target": ...}.',
            )
            continue
        rows.append((lineno, row))
    if rows:
        _resolve(list(rows[0][1]), columns, f"JSON Lines file {str(path)!r}")
    return _rows_pairs(rows, columns, report, str(path))


def _json_value(text: str) -> Any:
    """The JSON value ``text`` holds, or None when it is not one JSON value (e.g. JSON Lines)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _json_array_pairs(path: Path, value: Any, columns: _Columns, report: DataReport):
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
            _bad_line(
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
        _resolve(list(rows[0][1]), columns, f"JSON file {str(path)!r}")
    return _rows_pairs(rows, columns, report, str(path))


def _parquet_pairs(path: Path, columns: _Columns, report: DataReport):
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
    return _dataset_pairs(table, columns, report, f"Parquet file {str(path)!r}")


# ------------------------------------------------------------------------------------------------ rows


def _resolve(available: list[str], columns: _Columns, where: str) -> tuple[str, str] | None:
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


def _rows_pairs(rows, columns: _Columns, report: DataReport, where: str):
    """Pairs from ``(line number, row dict)``; the first row's keys choose the columns (`_resolve`)."""
    sources, targets = [], []
    chosen: tuple[str, str] | None | bool = False
    for lineno, row in rows:
        if chosen is False:
            chosen = _resolve(list(row), columns, where)
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
            _bad_line(
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
        sources.append(src)
        targets.append(tgt)
    return sources, targets


def _dataset_pairs(ds: datasets.Dataset, columns: _Columns, report: DataReport, what: str):
    if not isinstance(ds, datasets.Dataset):
        raise ValueError(
            f"{what} is a {type(ds).__name__}, not a datasets.Dataset; pass a Dataset or DatasetDict."
        )
    chosen = _resolve(list(ds.column_names), columns, what) if ds.column_names else None
    if chosen is not None:
        ds = ds.select_columns(list(dict.fromkeys(chosen)))
    elif "translation" in ds.column_names:
        ds = ds.select_columns(["translation"])
    report.lines_read += len(ds)
    fixed = (
        columns if chosen is None else _Columns(chosen[0], chosen[1], None, None, None, columns.on_bad_line)
    )
    return _rows_pairs(enumerate(ds, start=1), fixed, report, what)


def _read_hub(
    name, config, source_column, target_column, source_lang, target_lang, on_bad_line, report, max_lines
):
    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as e:  # network, unknown name, missing config: all end here
        raise ValueError(
            f"Could not load {name!r} (config {config!r}) as a file or a Hub dataset: {e}. If it is a file, check "
            "the path; if it is a Hub dataset, check the name and that you are online."
        ) from e
    columns = _Columns(source_column, target_column, source_lang, target_lang, None, on_bad_line)
    pairs = {
        _split_name(k): _dataset_pairs(ds, columns, report, f"Hub dataset {name!r} split {k!r}")
        for k, ds in loaded.items()
    }
    return _finish(pairs, report, max_lines)
