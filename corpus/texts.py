"""One column of texts to translate, every row kept: the input of corpus translation (`inference.corpus`).

`read_texts` reads a TSV/TXT file (optionally compressed), a JSON Lines file, a Parquet file, an Arrow file or a
folder written by `datasets`' ``save_to_disk``, and returns an Arrow table with one row per input row, in input
order: ``id`` (the 0-based row number), ``text`` (the column's text, None when the row has none) and ``error``
(why the row has no text: not valid UTF-8, invalid JSON, not an object, no such field, not a string; None
otherwise). Unlike the parallel-corpus readers (`corpus.read`), nothing is skipped: an empty line is a row with
an empty text, so that the translations line up with the input row for row.

The column: TSV columns are 0-based indices (default 0), or names when the file's first line is a header
(``has_header=True``, or a column name given that the first line holds); the other formats name columns (default
``source``, else ``text``). A column the input lacks raises `ValueError` listing the columns it has.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .arrow import pairs_hash
from .files import check_file, decode_line, read_byte_lines, strip_compression
from .formats import format_of
from .read import source_kind

if TYPE_CHECKING:
    import pyarrow as pa

ID, TEXT, ERROR = "id", "text", "error"
# the columns tried, in order, when none is given (formats with named columns)
DEFAULT_COLUMNS = ("source", "text")


def texts_schema() -> pa.Schema:
    """The schema of `read_texts`' table."""
    import pyarrow as pa

    return pa.schema([(ID, pa.int64()), (TEXT, pa.string()), (ERROR, pa.string())])


def read_texts(
    path: str | os.PathLike, column: str | int | None = None, *, has_header: bool | None = None
) -> pa.Table:
    """The rows of `path`'s column ``column`` as a table (``id``, ``text``, ``error``; module docstring).

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: a format that is not read here, a missing column (listing the columns there are), a file
            that cannot be read.
    """
    p = Path(path)
    kind = source_kind(str(p))
    if kind == "saved":
        return _dataset_texts(p, column)
    fix = "pass a .tsv, .txt, .jsonl, .parquet or .arrow file, or a folder written by datasets' save_to_disk"
    p = check_file(p, missing_fix=fix.capitalize() + ".", directory_fix=fix + ".")
    name = strip_compression(p.name)[0]
    found = "arrow" if name.endswith(".arrow") else format_of(p) or "tsv"
    if found == "tsv":
        return _tsv_texts(p, column, has_header)
    if found == "jsonl":
        return _jsonl_texts(p, column)
    if found == "parquet":
        import pyarrow.parquet as pq

        return _table_texts(pq.read_table(p), column, f"Parquet file {str(p)!r}")
    if found == "arrow":
        import datasets

        return _table_texts(datasets.Dataset.from_file(str(p)).data.table, column, f"Arrow file {str(p)!r}")
    raise ValueError(f"{str(p)!r} is a {found.upper()} file, which corpus translation does not read; {fix}.")


def texts_hash(table: pa.Table) -> str:
    """The sha256 of a `read_texts` table's content (every row's text and error, in order): equal rows give the
    same digest whatever file, format or modification time they came from, and an edited row changes it."""
    h = hashlib.sha256()
    # in batches: a corpus of millions of rows is never one list of Python strings
    for batch in table.select([TEXT, ERROR]).to_batches(max_chunksize=1 << 16):
        rows = batch.to_pydict()
        # a row without text is told apart from an empty one by its error, which is never None then
        pairs_hash([t or "" for t in rows[TEXT]], [e or "" for e in rows[ERROR]], h)
    return h.hexdigest()


def _table(texts: list[str | None], errors: list[str | None]) -> pa.Table:
    import pyarrow as pa

    return pa.table({ID: pa.array(range(len(texts)), pa.int64()), TEXT: texts, ERROR: errors}, texts_schema())


def _missing(where: str, column: str | int, available: list[str]) -> ValueError:
    return ValueError(
        f"{where} has no column {column!r}; its columns are {available}. Pass --column with one of them."
    )


def _named_column(column: str | int | None, available: list[str], where: str) -> str:
    if column is None:
        found = next((c for c in DEFAULT_COLUMNS if c in available), None)
        if found is None:
            raise ValueError(
                f"{where} has none of the columns {list(DEFAULT_COLUMNS)} read by default; its columns are "
                f"{available}. Pass --column with one of them."
            )
        return found
    if str(column) not in available:
        raise _missing(where, column, available)
    return str(column)


def _tsv_texts(path: Path, column: str | int | None, has_header: bool | None) -> pa.Table:
    where = f"TSV file {str(path)!r}"
    by_index = column is None or isinstance(column, int) or column.isdigit()
    lines = enumerate(read_byte_lines(path), start=1)
    texts: list[str | None] = []
    errors: list[str | None] = []
    index = int(column or 0) if by_index else -1
    if has_header or not by_index:
        first = next(lines, None)
        header = [] if first is None else decode_line(path, 1, first[1][0]).split("\t")
        if by_index and not index < len(header):
            raise _missing(where, index, header)
        if not by_index and str(column) not in header:
            raise _missing(where, str(column), header)
        index = index if by_index else header.index(str(column))
    for lineno, (chunk, _) in lines:
        try:
            fields = decode_line(path, lineno, chunk).split("\t")
        except ValueError as err:
            texts.append(None)
            errors.append(f"undecodable: {err}")
            continue
        if index >= len(fields):
            if len(fields) == 1 and not fields[0]:
                texts.append("")
                errors.append(None)
                continue
            texts.append(None)
            errors.append(f"no column {index}: the line has {len(fields)} tab-separated field(s)")
            continue
        texts.append(fields[index])
        errors.append(None)
    return _table(texts, errors)


def _jsonl_texts(path: Path, column: str | int | None) -> pa.Table:
    where = f"JSON Lines file {str(path)!r}"
    texts: list[str | None] = []
    errors: list[str | None] = []
    chosen: str | None = None
    for lineno, (chunk, _) in enumerate(read_byte_lines(path), start=1):
        try:
            line = decode_line(path, lineno, chunk)
        except ValueError as err:
            texts.append(None)
            errors.append(f"undecodable: {err}")
            continue
        try:
            row = json.loads(line) if line.strip() else None
        except json.JSONDecodeError as err:
            texts.append(None)
            errors.append(f"invalid JSON: {err.msg}")
            continue
        if row is None:
            texts.append("")
            errors.append(None)
            continue
        if not isinstance(row, dict):
            texts.append(None)
            errors.append(f"not a JSON object: {type(row).__name__}")
            continue
        if chosen is None:
            chosen = _named_column(column, list(row), where)
        value = row.get(chosen)
        if not isinstance(value, str):
            texts.append(None)
            errors.append(f"no {chosen!r} field" if chosen not in row else f"{chosen!r} is not a string")
            continue
        texts.append(value)
        errors.append(None)
    return _table(texts, errors)


def _table_texts(table: pa.Table, column: str | int | None, where: str) -> pa.Table:
    import pyarrow as pa

    name = _named_column(column, list(table.column_names), where)
    values = table.column(name)
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        raise ValueError(
            f"{where}: column {name!r} holds {values.type}, not text; pass --column with a text column"
        )
    texts = values.cast(pa.string())
    missing = f"no text in column {name!r}"
    errors = pa.array([None if valid else missing for valid in texts.is_valid().to_pylist()], pa.string())
    ids = pa.array(range(len(table)), pa.int64())
    return pa.Table.from_arrays([ids, texts, errors], schema=texts_schema())


def _dataset_texts(path: Path, column: str | int | None) -> pa.Table:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            raise ValueError(
                f"{str(path)!r} is a DatasetDict with splits {list(loaded)}; pass one split's folder, e.g. "
                f"{str(path / str(next(iter(loaded))))!r}"
            )
        loaded = next(iter(loaded.values()))
    return _table_texts(loaded.data.table, column, f"dataset {str(path)!r}")
