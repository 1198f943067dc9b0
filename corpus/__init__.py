"""Parallel corpora: reading them into `datasets` (`load_parallel_corpus`), the deterministic
train/validation/test split (`split_corpus`, `load_split`), and `DataOptions`, the one configuration of both.

Modules: ``files`` (opening, decompressing and decoding files; the languages a file name states), ``read``
(formats: TSV, CSV, JSON, JSON Lines, Parquet, folders and globs, `datasets` objects, Hub datasets; a source's
own splits), ``split`` (the held-out split), ``options`` (`DataOptions`: options and the choice of splits).
"""

from .files import language_pair, read_lines
from .options import DataOptions
from .read import (
    DEFAULT_DATA,
    FORMATS,
    GLOB_CHARS,
    SOURCE,
    TARGET,
    DataReport,
    OnBadLine,
    describe_data,
    is_dataset_object,
    load_parallel_corpus,
    read_parallel_splits,
    source_kind,
)
from .split import load_split, split_corpus

__all__ = [
    "DEFAULT_DATA",
    "SOURCE",
    "TARGET",
    "DataOptions",
    "DataReport",
    "FORMATS",
    "GLOB_CHARS",
    "OnBadLine",
    "describe_data",
    "is_dataset_object",
    "language_pair",
    "load_parallel_corpus",
    "load_split",
    "read_lines",
    "read_parallel_splits",
    "source_kind",
    "split_corpus",
]
