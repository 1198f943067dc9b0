"""What a path argument names and what is wrong with a path for it (`path_problem`): the one check behind every
command's path arguments (`commands.arguments.path_argument`) and the options dataclasses' ``path`` fields
(`corpus.options.option_problem`). Standard library only, so that every command can check its paths before
importing anything heavy."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# what a path argument names: read (a file, a folder, either) or written (a file, a folder)
PATH_KINDS = ("file", "folder", "file or folder", "output file", "output folder")
_SPECIAL_FILES = {
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISSOCK: "a socket",
}


def path_problem(value: str | os.PathLike, kind: str) -> str | None:
    """What is wrong with the path `value` for an argument that takes a `kind` (one of `PATH_KINDS`), in one line
    naming the path (None: nothing): a symbolic-link loop or a broken link, a part of the path that is a file, a
    file where a folder is expected or a folder where a file is, and, to be read, anything but a regular file, a
    folder or a pipe (a device such as /dev/zero or /dev/urandom: an endless stream; a socket). A file to read may
    be a pipe (a FIFO, bash's process substitution ``<(xz -dc corpus.xz)``): it ends when its writer does. An output
    file may be a character device or a FIFO (/dev/null, /dev/stdout). A path that does not exist passes: an input may be a Hub
    id, and the command says what is missing; an output is created."""
    if kind not in PATH_KINDS:
        raise ValueError(f"path kind {kind!r} is not one of {', '.join(PATH_KINDS)}")
    path = Path(value)
    wanted = kind.removeprefix("output ")
    try:
        mode = path.stat().st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return f"{path} is a symbolic-link loop: pass a {wanted}"
        if error.errno == errno.ENOTDIR:
            return f"{path} is under a file, not a folder: pass a {wanted}"
        if path.is_symlink():
            return f"{path} is a broken symbolic link (to {os.readlink(path)}): pass a {wanted}"
        return None
    if stat.S_ISDIR(mode):
        return f"{path} is a folder, not a file: pass a file" if wanted == "file" else None
    if stat.S_ISREG(mode):
        return f"{path} is a file, not a folder: pass a folder" if wanted == "folder" else None
    special = next(name for test, name in _SPECIAL_FILES.items() if test(mode))
    if kind == "output file" and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        return None
    if kind in ("file", "file or folder") and stat.S_ISFIFO(mode):
        return None
    return f"{path} is {special}, not a regular {wanted}: pass a {wanted}"
