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
* **A pipe, a FIFO or ``/dev/stdin``** (``--data <(xzcat corpus.tsv.xz)``), which can be read only once: its bytes
  are copied once into the pairs cache folder (`spool_if_pipe`: a regular file named by their hash and the pipe's
  name, whose suffixes still choose the format), and everything else reads that copy; the report says so.

What was read is fingerprinted in ``DataReport.fingerprint`` (a data file: its number of pairs and a hash of their
text; a dataset: its rows and `datasets` fingerprint), so that a resumed run can tell whether its data is the data
it started with (`data_changes`).

Modules: `corpus.formats` (one file of each format), `corpus.rows` (the column rules, bad lines, `DataReport`),
`corpus.arrow` (a file's pairs as a memory-mapped Arrow cache); this one resolves a source (file, folder, glob, saved dataset, `datasets` object, Hub name) into its splits.

Strict checks: invalid UTF-8 is an error naming the line; CRLF line ends are accepted and counted; a line or
row with the wrong number of columns or a missing/non-string side is a *bad line*: an error
(``on_bad_line="error"``) or skipped, counted and reported in the returned `DataReport` (``"skip"``, the
default). Pairs with an empty side are counted as ``skipped_empty``. Nothing is dropped silently.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datasets

from .arrow import arrow_pairs, default_cache_dir
from .files import check_file, language_pair, strip_compression
from .formats import format_of
from .rows import SOURCE, TARGET, Columns, DataReport, OnBadLine, dataset_pairs

if TYPE_CHECKING:
    from typing_extensions import TypeIs

logger = logging.getLogger(__name__)

# the shipped corpora: corpus/data/ (in a checkout, a link to the top-level data/, resolved so that paths compare)
SHIPPED_DATA = (Path(__file__).parent / "data").resolve()

DEFAULT_DATA = SHIPPED_DATA / "bible.zh-en.tsv.xz"

SPLITS = ("train", "validation", "test")

GLOB_CHARS = "*?["

_SPLIT_WORDS = {
    "train": "train",
    "training": "train",
    "validation": "validation",
    "valid": "validation",
    "dev": "validation",
    "val": "validation",
    "test": "test",
}


def is_dataset_object(data: Any) -> TypeIs[datasets.Dataset | datasets.DatasetDict]:
    """Whether ``data`` is an in-memory `datasets.Dataset` or `datasets.DatasetDict`."""
    return isinstance(data, (datasets.Dataset, datasets.DatasetDict))


def describe_data(data: Any) -> str:
    """A short, stable text naming a data source: the path or Hub name, or for an in-memory dataset its type and
    splits (what a saved run configuration records; the content is ``DataReport.fingerprint``'s)."""
    if isinstance(data, datasets.DatasetDict):
        return "DatasetDict(" + ", ".join(map(str, data)) + ")"
    if isinstance(data, datasets.Dataset):
        return "Dataset"
    return str(data)


def data_changes(old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """How the data read now differs from the data read before (``new`` and ``old``: `DataReport.fingerprint`),
    one phrase per file or split that changed, appeared or is gone; empty when the data is the same."""

    def counted(entry: dict) -> str:
        return ", ".join(f"{v} {k}" if isinstance(v, int) else f"{k} {v}" for k, v in entry.items())

    changes = []
    for name in sorted(old.keys() | new.keys()):
        before, now = old.get(name), new.get(name)
        if before == now:
            continue
        if before is not None and now is not None:
            changes.append(f"{name} changed ({counted(before)}, now {counted(now)})")
        elif now is not None:
            changes.append(f"{name} is new ({counted(now)})")
        elif before is not None:
            changes.append(f"{name} is gone ({counted(before)})")
    return changes


def spool_if_pipe(path: Path, folder: Path) -> tuple[Path, str | None]:
    """``path`` itself when it is a regular file (or no file at all); a pipe, a FIFO or another file that can be
    read only once is copied into ``folder`` first, as ``spooled-<sha256 of its bytes>-<its name>`` (an existing
    copy of the same bytes is kept, so the pairs cache still knows it), and that copy is returned with a note
    for the log. Raises `ValueError` when the pipe gives no bytes."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return path, None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return path, None
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".spooling-{os.getpid()}-{path.name}"
    h, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as pipe, open(partial, "wb") as copy:
            for chunk in iter(lambda: pipe.read(1 << 20), b""):
                h.update(chunk)
                copy.write(chunk)
                size += len(chunk)
        if not size:
            raise ValueError(
                f"{str(path)!r} is a pipe that gave no data (0 bytes); check the command that writes it."
            )
        spooled = folder / f"spooled-{h.hexdigest()[:16]}-{path.name}"
        if not spooled.is_file():
            os.replace(partial, spooled)
    finally:
        partial.unlink(missing_ok=True)
    note = f"{str(path)!r} is a pipe: its {size:,} bytes were read once, into {spooled}, and read from there"
    logger.info("%s", note)
    return spooled, note


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
    return "file" if path.exists() or format_of(path) is not None else "hub"


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


def _files_by_split(data: str, files: list[Path], root: Path) -> dict[str, list[Path]]:
    files = [f for f in files if format_of(f) is not None]
    if not files:
        raise ValueError(
            f"{data!r} holds no data files; pass a folder or glob with .tsv/.txt/.csv/.jsonl/.json/.parquet "
            "files (optionally .xz/.gz/.bz2)."
        )
    kinds = sorted({kind for f in files if (kind := format_of(f)) is not None})
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
    cache_dir: str | os.PathLike | None = None,
) -> tuple[dict[str, datasets.Dataset], DataReport]:
    """Every split a parallel corpus provides, each a `datasets.Dataset` with columns ``source`` and ``target``
    (module docstring for the sources and column rules); a single file or an unnamed set of shards is one
    ``train`` split. ``max_lines`` keeps the first N pairs of each split. The splits of data files are
    memory-mapped Arrow files in ``cache_dir`` (`corpus.arrow`: read once, then from the cache).

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
    # the pairs cache: Arrow files of data files' pairs and of datasets on disk
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if is_dataset_object(data):
        columns = Columns(source_column, target_column, source_lang, target_lang, has_header, on_bad_line)
        parts = data.items() if isinstance(data, datasets.DatasetDict) else [("train", data)]
        pairs = {
            _split_name(str(k)): dataset_pairs(ds, columns, report, f"dataset split {k!r}", folder)
            for k, ds in parts
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
            cache_dir=folder,
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
        copy, report.spooled = spool_if_pipe(path, folder)
        by_split = {"train": [copy]}
    else:
        hub_columns = Columns(source_column, target_column, source_lang, target_lang, None, on_bad_line)
        return _read_hub(text, hub_config, hub_columns, report, max_lines, folder)
    src_lang, tgt_lang = language_pair(next(iter(by_split.values()))[0].name)
    columns = Columns(
        source_column,
        target_column,
        source_lang or src_lang,
        target_lang or tgt_lang,
        has_header,
        on_bad_line,
    )
    # a pipe's pairs are fingerprinted under the pipe's name, not its copy's
    names = {by_split["train"][0]: text} if report.spooled else {}
    pairs = {
        s: _concat_arrow([arrow_pairs(_checked(f), columns, report, folder, names.get(f)) for f in files])
        for s, files in by_split.items()
    }
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


def _concat_arrow(parts: list[datasets.Dataset]) -> datasets.Dataset:
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def _finish(
    pairs: Mapping[str, tuple[list[str], list[str]] | datasets.Dataset],
    report: DataReport,
    max_lines: int | None,
):
    splits = {}
    for name, found in pairs.items():
        if isinstance(found, datasets.Dataset):
            keep = len(found) if max_lines is None else min(max_lines, len(found))
            splits[name] = found if keep == len(found) else found.select(range(keep))
            continue
        sources, targets = found
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


def _read_hub(name, config, columns: Columns, report: DataReport, max_lines: int | None, folder: Path):
    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as e:  # network, unknown name, missing config: all end here
        raise ValueError(
            f"Could not load {name!r} (config {config!r}) as a file or a Hub dataset: {e}. If it is a file, check "
            "the path; if it is a Hub dataset, check the name and that you are online."
        ) from e
    pairs = {
        _split_name(str(k)): dataset_pairs(ds, columns, report, f"Hub dataset {name!r} split {k!r}", folder)
        for k, ds in loaded.items()
    }
    return _finish(pairs, report, max_lines)


def _checked(path: Path) -> Path:
    """`path`, which `corpus.files.check_file` found readable (the fix of a missing file names the shipped corpora)."""
    return check_file(
        path,
        missing_fix=f"Check --data; the shipped corpora are {DEFAULT_DATA.parent}/bible.zh-en.tsv.xz and "
        "bible.de-en.tsv.xz.",
        directory_fix="pass a .tsv/.csv/.jsonl file inside it.",
    )
