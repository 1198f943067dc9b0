"""Opening data files: the one place that decompresses, decodes UTF-8 and says what is wrong with a file.

A file whose name ends in ``.xz``/``.lzma``, ``.gz`` or ``.bz2`` is decompressed on the fly. Lines end at LF;
a CR before the LF (a Windows line end) is removed and reported. A UTF-8 byte-order mark at the start is
dropped. Every line must be valid UTF-8 without NUL bytes (text with NULs is usually UTF-16 or binary); the
error names the line.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

COMPRESSIONS: dict[str, Callable[..., IO[Any]]] = {
    ".xz": lzma.open,
    ".lzma": lzma.open,
    ".gz": gzip.open,
    ".bz2": bz2.open,
}
_READ_ERRORS = (lzma.LZMAError, OSError, EOFError)  # gzip.BadGzipFile is an OSError
_BOM = b"\xef\xbb\xbf"
_LANGUAGE_PAIR = re.compile(r"[._-]([a-z]{2,3})-([a-z]{2,3})\.")


def strip_compression(name: str) -> tuple[str, str | None]:
    """(the lower-cased file name without its compression suffix, that suffix or None)."""
    lower = name.lower()
    for suffix in COMPRESSIONS:
        if lower.endswith(suffix):
            return lower[: -len(suffix)], suffix
    return lower, None


def language_pair(name: str) -> tuple[str | None, str | None]:
    """The (source, target) languages a file name states, e.g. ``bible.zh-en.tsv.xz`` -> ("zh", "en");
    (None, None) when it states none. Only the final path component is read."""
    match = _LANGUAGE_PAIR.search(Path(name).name)
    return (match.group(1), match.group(2)) if match else (None, None)


def check_file(path: str | os.PathLike, *, missing_fix: str, directory_fix: str) -> Path:
    """Return ``path`` as a `Path`; raise `FileNotFoundError`/`ValueError` ending with the fix if it cannot be
    read (missing, a directory, or not readable)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"Data file {str(p)!r} does not exist (resolved to {str(p.absolute())!r}). {missing_fix}"
        )
    if p.is_dir():
        raise ValueError(f"Data path {str(p)!r} is a directory; {directory_fix}")
    if not os.access(p, os.R_OK):
        raise ValueError(f"Data file {str(p)!r} is not readable (permission denied); fix its permissions.")
    return p


def read_lines(path: str | os.PathLike) -> Iterator[tuple[str, bool]]:
    """Yield every line of a UTF-8 text file (decompressed by its suffix) without its line end, with whether
    that end was CRLF. Reading is lazy: stopping early reads no further.

    Raises:
        ValueError: a line is not valid UTF-8 or holds a NUL byte (the message names the line and how to
            re-encode), or the file cannot be decompressed or read.
    """
    p = Path(path)
    for lineno, (chunk, crlf) in enumerate(read_byte_lines(p), start=1):
        yield decode_line(p, lineno, chunk), crlf


def read_byte_lines(path: str | os.PathLike) -> Iterator[tuple[bytes, bool]]:
    """`read_lines` before decoding: every line's bytes (decompressed, without its line end and the first line's
    byte-order mark), with whether that end was CRLF; `decode_line` decodes one. For readers that keep going
    past a line that does not decode.

    Raises:
        ValueError: the file cannot be decompressed or read.
    """
    p = Path(path)
    _, compression = strip_compression(p.name)
    opener = COMPRESSIONS[compression] if compression else open
    try:
        with opener(p, "rb") as f:
            for lineno, chunk in enumerate(f, start=1):
                if lineno == 1 and chunk.startswith(_BOM):
                    chunk = chunk[len(_BOM) :]
                if chunk.endswith(b"\n"):
                    chunk = chunk[:-1]
                crlf = chunk.endswith(b"\r")
                if crlf:
                    chunk = chunk[:-1]
                yield chunk, crlf
    except _READ_ERRORS as e:
        if compression is None:
            raise ValueError(
                f"Could not read data file {str(p)!r} ({e}); check that it is a readable file."
            ) from e
        raise ValueError(
            f"Could not decompress data file {str(p)!r} ({e}). If it is not compressed, remove the "
            f"{compression!r} suffix from its name; otherwise re-create the archive."
        ) from e


def decode_line(path: Path, lineno: int, chunk: bytes) -> str:
    """Line ``lineno`` of ``path`` as text; `ValueError` naming the line and how to re-encode the file when it holds
    NUL bytes or is not valid UTF-8."""
    if b"\x00" in chunk:
        raise ValueError(
            f"Data file {str(path)!r} line {lineno} holds NUL bytes ({chunk[:20]!r}...): it is not UTF-8 text; "
            "a file saved as UTF-16 (Windows' 'Unicode') looks like this. Re-encode it as UTF-8, e.g. "
            "`iconv -f UTF-16LE -t UTF-8 in.tsv > out.tsv` (use the file's real encoding)."
        )
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"Data file {str(path)!r} line {lineno} is not valid UTF-8 ({e.reason} at byte {e.start} of "
            f"the line: {chunk[max(0, e.start - 10) : e.start + 10]!r}). Re-encode the file as UTF-8, "
            "e.g. `iconv -f GB18030 -t UTF-8 in.tsv > out.tsv` (use the file's real encoding)."
        ) from e
