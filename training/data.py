"""Parallel data: reading, a deterministic train/validation/test split, tokenisation with a cache.

Accepted inputs (`load_parallel_corpus`):

* ``.tsv`` / ``.txt`` files: UTF-8, one pair per line, tab-separated, **no header**; columns are chosen by
  0-based index (default ``0`` = source, ``1`` = target). The number of columns is taken from the first
  non-empty line; a line with another number of tab-separated fields (typically a line with no tab, or a
  tab inside a sentence) is a *bad line*.
* ``.csv`` files (with a header) and ``.jsonl`` files (one JSON object per line): columns by name (default
  ``source`` / ``target``), or a ``translation`` column holding ``{lang: text}`` dicts with
  ``source_lang`` / ``target_lang`` (the layout of WMT datasets on the Hub).
* any of those compressed as ``.xz``, ``.gz`` or ``.bz2``;
* a Hub dataset name (anything that is not an existing path), loaded with `datasets.load_dataset`.

CRLF line ends are accepted (and counted). Invalid UTF-8 is an error naming the line. Bad lines are either an
error (``on_bad_line="error"``) or skipped, counted and reported in the returned `DataReport`
(``on_bad_line="skip"``, the default); nothing is dropped silently. Pairs with an empty side are counted as
``skipped_empty``.

The split (`split_corpus`) is a **seeded random choice of contiguous blocks**: the corpus is cut into blocks
of ``block_size`` consecutive lines, a permutation of blocks drawn with ``seed`` assigns whole blocks to the
test split until it holds ``test_size`` lines, then to validation, and the rest is training data. Whole
blocks keep most neighbouring verses (which often repeat each other) on the same side of the split, and
random blocks spread the held-out data over all books. The split depends only on the line order, the sizes
and the seed.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import logging
import lzma
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import datasets
import numpy as np

logger = logging.getLogger(__name__)

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "bible.zh-en.tsv.xz"
SOURCE, TARGET = "source", "target"
_OPENERS = {".xz": lzma.open, ".lzma": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}
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


def _strip_compression(name: str) -> tuple[str, str | None]:
    lower = name.lower()
    for suffix in _OPENERS:
        if lower.endswith(suffix):
            return lower[: -len(suffix)], suffix
    return lower, None


def _read_bytes(path: Path) -> bytes:
    _, compression = _strip_compression(path.name)
    try:
        if compression is None:
            return path.read_bytes()
        with _OPENERS[compression](path, "rb") as f:
            return f.read()
    except (lzma.LZMAError, gzip.BadGzipFile, OSError, EOFError) as e:
        raise ValueError(
            f"Could not decompress data file {str(path)!r} ({e}). If it is not compressed, remove the "
            f"{compression!r} suffix from its name; otherwise re-create the archive."
        ) from e


def _decode_lines(path: Path, raw: bytes, report: DataReport) -> list[str]:
    """Split into lines (LF or CRLF) and decode each as strict UTF-8, naming the first bad line."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    chunks = raw.split(b"\n")
    if chunks and chunks[-1] == b"":
        chunks.pop()
    lines = []
    for lineno, chunk in enumerate(chunks, start=1):
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
            report.crlf_lines += 1
        try:
            lines.append(chunk.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(
                f"Data file {str(path)!r} line {lineno} is not valid UTF-8 ({e.reason} at byte {e.start} of "
                f"the line: {chunk[max(0, e.start - 10) : e.start + 10]!r}). Re-encode the file as UTF-8, "
                "e.g. `iconv -f GB18030 -t UTF-8 in.tsv > out.tsv` (use the file's real encoding)."
            ) from e
    report.lines_read = len(lines)
    return lines


def _check_path(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(
            f"Data file {str(path)!r} does not exist (resolved to {str(path.absolute())!r}). Check --data; "
            f"the shipped corpora are {DEFAULT_DATA.parent}/bible.zh-en.tsv.xz and bible.de-en.tsv.xz."
        )
    if path.is_dir():
        raise ValueError(f"Data path {str(path)!r} is a directory; pass a .tsv/.csv/.jsonl file inside it.")
    if path.stat().st_size == 0:
        raise ValueError(f"Data file {str(path)!r} is empty (0 bytes); pass a file with source/target pairs.")


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
    looks_like_file = path.exists() or _strip_compression(path.name)[0].endswith(_SUFFIXES)
    report = DataReport(path=str(data))
    if not looks_like_file:
        sources, targets = _load_hub(
            str(data), hub_config, hub_split, source_column, target_column, source_lang, target_lang, on_bad_line,
            report,
        )  # fmt: skip
    else:
        _check_path(path)
        lines = _decode_lines(path, _read_bytes(path), report)
        kind, _ = _strip_compression(path.name)
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


def content_hash(*parts: str | bytes) -> str:
    """A short sha256 hex digest of the given strings/bytes (used as a cache key)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def dataset_hash(dataset: datasets.Dataset) -> str:
    """A hash of the ``source``/``target`` texts of a dataset (its content, not its history)."""
    h = hashlib.sha256()
    for batch in dataset.iter(batch_size=4096):
        for src, tgt in zip(batch[SOURCE], batch[TARGET]):
            h.update(src.encode("utf-8") + b"\t" + tgt.encode("utf-8") + b"\n")
    return h.hexdigest()[:16]


def tokenizer_hash(tokenizer) -> str:
    """A hash of the tokenizer's full serialised pipeline (vocabulary, merges, normaliser, post-processor)."""
    return content_hash(tokenizer.backend_tokenizer.to_str())


def tokenize_dataset(
    dataset: datasets.Dataset,
    tokenizer,
    cache_dir: str | os.PathLike | None = None,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """Add ``input_ids`` (source ids + </s>) and ``labels`` (target ids + </s>) columns, no truncation.

    With ``cache_dir``, the result is cached in an Arrow file named by a hash of the tokenizer and the data, so
    a second run with the same tokenizer and data reads it back instead of tokenising again.
    """

    def encode(batch: dict) -> dict:
        enc = tokenizer(batch[SOURCE], text_target=batch[TARGET], truncation=False)
        return {"input_ids": enc["input_ids"], "labels": enc["labels"]}

    kwargs: dict[str, Any] = {}
    if cache_dir is not None:
        key = content_hash(tokenizer_hash(tokenizer), dataset_hash(dataset))
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        kwargs = dict(
            cache_file_name=str(Path(cache_dir) / f"tokenized-{key}.arrow"), load_from_cache_file=True
        )
    return dataset.map(encode, batched=True, batch_size=1000, desc="Tokenizing", num_proc=num_proc, **kwargs)


def filter_by_length(dataset: datasets.Dataset, max_length: int) -> tuple[datasets.Dataset, int]:
    """Drop pairs whose source or target has more than ``max_length`` tokens; return (kept, number dropped)."""
    src_len = np.array([len(x) for x in dataset["input_ids"]])
    tgt_len = np.array([len(x) for x in dataset["labels"]])
    keep = np.flatnonzero((src_len <= max_length) & (tgt_len <= max_length))
    dropped = len(dataset) - len(keep)
    if dropped == 0:
        return dataset, 0
    return dataset.select(keep.tolist()), dropped


def load_split(
    data: str | os.PathLike,
    split: Literal["train", "validation", "test", "all"] = "all",
    *,
    valid_size: int = 500,
    test_size: int = 1000,
    block_size: int = 20,
    seed: int = 1234,
    **load_kwargs,
) -> tuple[datasets.Dataset, DataReport]:
    """One split of a corpus as training made it (same sizes and seed give the same pairs), or "all" pairs.

    ``load_kwargs`` go to `load_parallel_corpus` (columns, languages, max_lines, on_bad_line)."""
    corpus, report = load_parallel_corpus(data, **load_kwargs)
    if split == "all":
        return corpus, report
    if split not in ("train", "validation", "test"):
        raise ValueError(f"split={split!r} must be one of 'train', 'validation', 'test', 'all'.")
    return split_corpus(corpus, valid_size, test_size, block_size, seed)[split], report
