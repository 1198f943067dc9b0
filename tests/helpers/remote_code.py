"""What remote code ships and what it may import, read from the source with `ast` (nothing is imported).

`save_pretrained` copies each module that config.json's `auto_map` and `custom_pipelines` name and, recursively,
every module that one imports with a relative import, into the saved folder. A process that loads the folder with
`trust_remote_code=True` has those files and what is installed there, which is at least torch and transformers.
So a shipped file may import its siblings (single-dot relative imports of files that ship with it) and, of
everything else, only the standard library, torch and transformers. Every import counts: at module level, inside a
function, under `TYPE_CHECKING`, and `importlib.import_module` / `__import__` of a literal name.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# the top-level names a loaded folder can import besides its own files
ALLOWED = frozenset(sys.stdlib_module_names) | {"torch", "transformers"}


@dataclass(frozen=True, order=True)
class Import:
    line: int  # of the statement
    name: str  # the module as written, dots included: "torch.nn", ".masks_vanilla_transformer", "..convert"


def imports_of(path: Path) -> list[Import]:
    """Every module `path` imports, in line order (`from . import a` imports ".", the folder itself)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [Import(line, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(Import(line, "." * node.level + (node.module or "")))
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(line, node.args[0].value))
    return sorted(found)


def sibling(name: str) -> str | None:
    """The file a single-dot relative import names (".masks_vanilla_transformer" -> "masks_vanilla_transformer.py"),
    None for any other import."""
    relative = name.removeprefix(".")
    if name.startswith(".") and not relative.startswith(".") and relative:
        return relative.split(".")[0] + ".py"
    return None


def shipped_files(folder: Path, entries: Iterable[str]) -> set[Path]:
    """The files of `folder` that a save copies for the entry modules `entries` (module names, as config.json's
    `auto_map` gives them): each, and every sibling it imports, recursively."""
    todo = [folder / f"{entry}.py" for entry in entries]
    shipped: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in shipped or not path.is_file():
            continue
        shipped.add(path)
        todo += [folder / file for imp in imports_of(path) if (file := sibling(imp.name))]
    return shipped


def foreign_imports(files: Iterable[Path]) -> list[str]:
    """ "file:line: imports NAME (why)" for every import of `files` (one folder's) that a loaded folder holding just
    these files cannot satisfy: a relative import that leaves the folder or names a file that is not among
    `files`, or a module outside the standard library, torch and transformers."""
    files = set(files)
    names = {path.name for path in files}
    wrong = []
    for path in sorted(files):
        for imp in imports_of(path):
            where = f"{path.name}:{imp.line}"
            if imp.name == ".":
                # transformers finds the files to copy by `from .module import` (get_relative_imports)
                wrong.append(f"{where}: imports . (a save copies only the modules of `from .module import`)")
            elif imp.name.startswith("."):
                file = sibling(imp.name)
                if file is None:
                    wrong.append(f"{where}: imports {imp.name} (leaves the folder: single-dot imports only)")
                elif file not in names:
                    wrong.append(f"{where}: imports {imp.name} ({file} does not ship with it)")
            elif imp.name.split(".")[0] not in ALLOWED:
                wrong.append(f"{where}: imports {imp.name} (not the standard library, torch or transformers)")
    return wrong
