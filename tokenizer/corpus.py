"""Reading training text for the tokenizer: parallel files and folders, plain text files, `datasets` datasets.

A plain text file (``.txt``, or any name without a parallel format suffix) gives one text per line; names may
end in ``.xz``/``.lzma``/``.gz``/``.bz2`` (decompressed on the fly). Parallel files (``.tsv``, ``.csv``,
``.jsonl``, ``.json``, ``.parquet``) and folders of them are read by `corpus.load_parallel_corpus`, exactly as
training reads them (header detection, column choice, bad-line checks): each pair gives its source, then its
target, so both sides feed the same joint vocabulary. Selecting ``columns`` of a ``.tsv`` file instead reads
those tab-separated fields of every line as they are.
Files must be UTF-8. Empty lines and empty fields are skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from vanilla_transformer.corpus import FORMATS, SOURCE, TARGET, load_parallel_corpus, source_kind
from vanilla_transformer.corpus.files import check_file, read_lines, strip_compression

_PARALLEL = {suffix for suffix, kind in FORMATS.items() if kind in ("csv", "jsonl", "json", "parquet")}

logger = logging.getLogger(__name__)


def check_readable_file(path: str | os.PathLike) -> Path:
    """Return `path` as a `Path` (a file, or a folder or glob of data files); raise `FileNotFoundError`/`ValueError` with a
    fix if it cannot be read."""
    if source_kind(path) in ("folder", "saved", "glob"):
        return Path(path)  # a folder or glob of data files, read by the corpus reader
    return check_file(
        path,
        missing_fix="Check the path, or pass texts instead of a file name.",
        directory_fix="pass the text/TSV files inside it instead.",
    )


def iter_file_texts(
    path: str | os.PathLike, columns: Sequence[int] | None = None, max_lines: int | None = None
) -> Iterator[str]:
    """Yield the non-empty texts of one file.

    Args:
        path: a UTF-8 text file, one text per line, optionally compressed (.xz, .lzma, .gz, .bz2); or a parallel
            file or folder read by `corpus.load_parallel_corpus` (module docstring).
        columns: for ``.tsv`` files, the 0-based tab-separated columns to use (default: all). Ignored for
            other files.
        max_lines: read at most this many lines (``None``: all).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is a directory, unreadable, not UTF-8, badly compressed, or a TSV line lacks a
            requested column.
    """
    name = strip_compression(Path(path).name)[0]
    p = check_readable_file(path)
    if (
        p.is_dir()
        or not p.exists()
        or name.endswith(tuple(_PARALLEL))
        or (name.endswith(".tsv") and columns is None)
    ):
        dataset, _ = load_parallel_corpus(path, max_lines=max_lines, on_bad_line="error")
        for source, target in zip(dataset[SOURCE], dataset[TARGET]):
            yield source
            yield target
        return
    tsv = name.endswith(".tsv")
    for lineno, (line, _) in enumerate(islice(read_lines(p), max_lines), start=1):
        if not tsv:
            if line.strip():
                yield line
            continue
        fields = line.split("\t")
        if columns is None:
            selected = fields
        else:
            try:
                selected = [fields[c] for c in columns]
            except IndexError:
                raise ValueError(
                    f"{str(p)!r} line {lineno} has {len(fields)} tab-separated column(s) but "
                    f"columns={list(columns)} was requested; pass column indices below {len(fields)}."
                ) from None
        for field in selected:
            if field.strip():
                yield field


def load_parallel_texts(path: str | os.PathLike, max_lines: int | None = None) -> tuple[list[str], list[str]]:
    """The first ``max_lines`` pairs (default: all) of a parallel file as two aligned lists of texts.

    The file is read by `corpus.load_parallel_corpus` (TSV ``source<TAB>target``, CSV or JSON Lines, optionally
    compressed); pairs with an empty side are skipped, and a line with the wrong number of columns is an error.

    Raises:
        FileNotFoundError / ValueError: as `iter_file_texts`, or for a bad line.
    """
    dataset, _ = load_parallel_corpus(check_readable_file(path), max_lines=max_lines, on_bad_line="error")
    return list(dataset[SOURCE]), list(dataset[TARGET])


def _is_dataset(obj: Any) -> bool:
    return type(obj).__module__.startswith("datasets.") and hasattr(obj, "column_names")


def iter_dataset_texts(
    dataset: Any, columns: Sequence[str] | None = None, batch_size: int = 1000
) -> Iterator[str]:
    """Yield the non-empty strings of a `datasets.Dataset`.

    Args:
        dataset: a `datasets.Dataset` (not a `DatasetDict`: pick a split first).
        columns: column names to read (default: every column). A column may hold strings, lists of strings
            or dicts of strings (the ``{"translation": {"de": ..., "en": ...}}`` layout); every string is used.
    """
    if not hasattr(dataset, "iter"):
        splits = list(getattr(dataset, "keys", lambda: [])())
        raise ValueError(
            f"Expected a datasets.Dataset, got {type(dataset).__name__} with splits {splits}; "
            f"pass one split, e.g. dataset[{(splits or ['train'])[0]!r}]."
        )
    names = list(dataset.column_names)
    if columns is None:
        columns = names
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(
            f"Dataset has no column(s) {missing}; its columns are {names}. Pass columns from that list."
        )

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            if value.strip():
                yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from strings(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from strings(v)

    for batch in dataset.iter(batch_size=batch_size):
        for column in columns:
            for value in batch[column]:
                yield from strings(value)


class ColumnTexts(Iterable[str]):
    """The texts of some columns of a `datasets.Dataset` or `datasets.IterableDataset`, one whole column after the
    other, read in Arrow batches of ``batch_size`` rows: a re-iterable corpus for `train_bpe_tokenizer` that holds
    one batch in memory, never the corpus (its texts are those of ``list(dataset[c1]) + list(dataset[c2]) ...``)."""

    def __init__(self, dataset: Any, columns: Sequence[str], batch_size: int = 10_000):
        self.dataset, self.columns, self.batch_size = dataset, tuple(columns), batch_size

    def __iter__(self) -> Iterator[str]:
        for column in self.columns:
            for batch in self.dataset.select_columns([column]).iter(batch_size=self.batch_size):
                yield from batch[column]


def iter_corpus_texts(
    corpus: Any = None,
    files: Sequence[str | os.PathLike] = (),
    columns: Sequence[int | str] | None = None,
    max_lines: int | None = None,
) -> Iterator[str]:
    """Yield all training texts of a corpus given in any of the accepted forms.

    ``corpus`` may be a path (``str`` or ``os.PathLike``) to one file, a list of ``os.PathLike`` paths, a
    `datasets.Dataset`, or any iterable of strings (the texts themselves). ``files`` adds more files by name.
    ``columns`` selects TSV columns (ints) or dataset columns (names). ``max_lines`` caps each file.
    Files are checked for existence before anything is read.
    """
    file_list: list[Path] = [check_readable_file(f) for f in files]
    texts: Iterable[str] | None = None
    if isinstance(corpus, (str, os.PathLike)):
        file_list.insert(0, check_readable_file(corpus))
    elif isinstance(corpus, (list, tuple)) and corpus and all(isinstance(c, os.PathLike) for c in corpus):
        file_list[:0] = [check_readable_file(c) for c in corpus]
    elif corpus is not None and _is_dataset(corpus):
        texts = iter_dataset_texts(corpus, columns=columns)  # type: ignore[arg-type]
    elif corpus is not None:
        texts = corpus
    file_columns = [c for c in columns if isinstance(c, int)] if columns is not None else None
    for path in file_list:
        logger.info("Reading %s", path)
        yield from iter_file_texts(path, columns=file_columns, max_lines=max_lines)
    if texts is not None:
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(
                    f"Corpus item {i} is a {type(text).__name__}, not a str. Pass an iterable of strings, "
                    "file paths as pathlib.Path objects (or via files=...), or a datasets.Dataset."
                )
            if text.strip():
                yield text
