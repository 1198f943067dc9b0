"""Parallel corpora: reading them into `datasets` (`load_parallel_corpus`), the deterministic
train/validation/test split (`split_corpus`, `load_split`), and `DataOptions`, the one configuration of both.

Modules: ``files`` (opening, decompressing and decoding files; the languages a file name states), ``read``
(the sources: files, folders and globs, `datasets` objects, Hub datasets; a source's own splits), ``formats``
(one file: TSV, CSV, JSON, JSON Lines, Parquet), ``rows`` (the column rules, bad lines, `DataReport`),
``split`` (the held-out split), ``options`` (`DataOptions`: options and the choice of splits; `load_split`),
``texts`` (one column to translate, every row kept: `read_texts`).
"""

from .files import language_pair, read_lines
from .formats import FORMATS
from .options import DataOptions, load_split
from .read import (
    DEFAULT_DATA,
    GLOB_CHARS,
    data_changes,
    describe_data,
    is_dataset_object,
    load_parallel_corpus,
    read_parallel_splits,
    source_kind,
)
from .rows import SOURCE, TARGET, DataReport, OnBadLine
from .split import split_corpus
from .texts import read_texts

__all__ = [
    "DEFAULT_DATA",
    "SOURCE",
    "TARGET",
    "DataOptions",
    "DataReport",
    "FORMATS",
    "GLOB_CHARS",
    "OnBadLine",
    "data_changes",
    "describe_data",
    "is_dataset_object",
    "language_pair",
    "load_parallel_corpus",
    "load_split",
    "read_lines",
    "read_parallel_splits",
    "read_texts",
    "source_kind",
    "split_corpus",
]
