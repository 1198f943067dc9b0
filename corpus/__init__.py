"""Parallel corpora: reading them into `datasets` (`load_parallel_corpus`), the deterministic
train/validation/test split (`split_corpus`, `load_split`), and `DataOptions`, the one configuration of both.

Modules: ``files`` (opening, decompressing and decoding files; the languages a file name states), ``read``
(formats: TSV, CSV, JSON Lines, Hub datasets), ``split`` (the split), ``options`` (`DataOptions`).
"""

from .files import language_pair, read_lines
from .options import DataOptions
from .read import DEFAULT_DATA, SOURCE, TARGET, DataReport, OnBadLine, load_parallel_corpus
from .split import load_split, split_corpus

__all__ = [
    "DEFAULT_DATA",
    "SOURCE",
    "TARGET",
    "DataOptions",
    "DataReport",
    "OnBadLine",
    "language_pair",
    "load_parallel_corpus",
    "load_split",
    "read_lines",
    "split_corpus",
]
