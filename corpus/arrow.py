"""Data files as Arrow: the pairs of a text file, read once with every strict check, kept in a memory-mapped cache.

`arrow_pairs` reads a data file chunk by chunk (`corpus.formats.pair_chunks`: TSV and JSON Lines never whole)
and writes its ``source``/``target`` pairs to an Arrow file, which `datasets.Dataset.from_file` memory-maps: the
pairs do not become Python objects, and the operating system pages them in and out. Next to the Arrow file a
JSON file keeps what reading counted (`DataReport`: lines, bad lines with examples, empty pairs, CRLF ends, the
header decision) and the file's content fingerprint (`pairs_hash`: the number of pairs and a hash of their text,
what a resumed run compares), so a read from the cache reports exactly what the first read did.

The cache is keyed by the file's fingerprint (`file_fingerprint`: size, modification time and a hash of its
first and last MiB) and the column options; a changed file or other options give another key, so they are read
again. The folder is ``cache_dir``, default `default_cache_dir` (``vanilla_transformer/pairs`` under the
`datasets` cache, ``HF_DATASETS_CACHE``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import datasets
import datasets.config
from datasets.arrow_writer import ArrowWriter

from .formats import pair_chunks
from .rows import PAIR_FEATURES, SOURCE, TARGET, Columns, DataReport

logger = logging.getLogger(__name__)

FORMAT_VERSION = "pairs-2"  # changes when the cache layout or the reading rules change
_EDGE = 1 << 20  # bytes hashed at each end of a file
_COUNTS = ("lines_read", "skipped_bad_lines", "skipped_empty", "crlf_lines", "bad_line_examples", "header")


def default_cache_dir() -> Path:
    """``vanilla_transformer/pairs`` under the `datasets` cache (``HF_DATASETS_CACHE``)."""
    return Path(datasets.config.HF_DATASETS_CACHE) / "vanilla_transformer" / "pairs"


def file_fingerprint(path: str | os.PathLike) -> str:
    """A short hex key of a file's content: its size, modification time (ns) and sha256 of its first and last
    MiB. Editing a file changes its modification time, so a changed file gets another key."""
    p = Path(path)
    stat = p.stat()
    h = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    with open(p, "rb") as f:
        h.update(f.read(_EDGE))
        if stat.st_size > 2 * _EDGE:
            f.seek(-_EDGE, os.SEEK_END)
            h.update(f.read(_EDGE))
    return h.hexdigest()[:16]


def pairs_hash(sources: list[str], targets: list[str], h: Any = None) -> Any:
    """A sha256 object updated with the text of the pairs (``h``: one to continue, default a new one); equal
    pairs in the same order give the same digest, whatever file, format or modification time they came from."""
    h = h or hashlib.sha256()
    for src, tgt in zip(sources, targets):
        h.update(src.encode("utf-8") + b"\0" + tgt.encode("utf-8") + b"\n")
    return h


def cache_key(path: Path, columns: Columns) -> str:
    """The cache key of ``path`` read with ``columns``: its fingerprint, the options and the format version."""
    options = json.dumps(dataclasses.asdict(columns), sort_keys=True, default=str)
    parts = (FORMAT_VERSION, file_fingerprint(path), options)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def arrow_pairs(
    path: Path,
    columns: Columns,
    report: DataReport,
    cache_dir: str | os.PathLike | None = None,
    name: str | None = None,
) -> datasets.Dataset:
    """The pairs of one data file as a memory-mapped `datasets.Dataset` (module docstring); what reading counted
    is added to ``report``, and the file's content fingerprint (``{"pairs": N, "sha256": ...}``) to
    ``report.fingerprint[name]`` (default: the path). Errors are those of `corpus.formats.file_pairs` (nothing is
    cached then)."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = cache_key(path, columns)
    arrow, counts = folder / f"pairs-{key}.arrow", folder / f"pairs-{key}.json"
    if arrow.is_file() and counts.is_file():
        fields = json.loads(counts.read_text(encoding="utf-8"))
        content = fields.pop("content")
        part = DataReport(path=str(path), **fields)
        logger.info("Read %s from the Arrow cache %s", path.name, arrow)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        part = DataReport(path=str(path))
        partial = arrow.with_name(f"{arrow.name}.{os.getpid()}.partial")
        h, count = hashlib.sha256(), 0
        try:
            with ArrowWriter(features=PAIR_FEATURES, path=str(partial)) as writer:
                for sources, targets in pair_chunks(path, columns, part):
                    if sources:
                        writer.write_batch({SOURCE: sources, TARGET: targets})
                        pairs_hash(sources, targets, h)
                        count += len(sources)
                writer.finalize()
            os.replace(partial, arrow)
        finally:
            partial.unlink(missing_ok=True)
        content = {"pairs": count, "sha256": h.hexdigest()[:16]}
        fields = {field: getattr(part, field) for field in _COUNTS} | {"content": content}
        counts.write_text(json.dumps(fields, ensure_ascii=False), encoding="utf-8")
        logger.info("Read %s into the Arrow cache %s", path.name, arrow)
    part.fingerprint = {name or str(path): content}
    report.add(part)
    return datasets.Dataset.from_file(str(arrow))
