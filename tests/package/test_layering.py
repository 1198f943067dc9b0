"""The import graph of the package, read from the source with `ast` (nothing is imported): no module imports a
package above its own in the layering, no modules import each other in a circle, and `modeling/`, the folder whose
files travel with every saved model as remote code, imports only the standard library, torch and transformers.

The layering, bottom to top (a package may import its own modules and the packages below it, never one above):

    paths < modeling < convert < corpus < tokenizer < inference < export < training < serving < benchmarks < commands

`paths` is one module of the standard library only: the check of every path argument, which each command runs before
it imports anything heavy. `commands` also holds the command line (`vanilla_transformer.cli`, `__main__`) and the root package (`vanilla_transformer`,
which registers the models, and `vanilla_transformer.links`, its check of the checkout's symbolic links). Every import statement counts, also one inside a function or under
`TYPE_CHECKING`: a deferred import is still a dependency. A package that wants something from a later one gets it
passed in as an argument (docs/design.md, "Dependency direction").
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from helpers.layout import package_dirs
from helpers.remote_code import foreign_imports, shipped_files

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "vanilla_transformer"
LAYERS = (
    "paths",
    "modeling",
    "convert",
    "corpus",
    "tokenizer",
    "inference",
    "export",
    "training",
    "serving",
    "benchmarks",
    "commands",
)
# the command line and the root package (with its link check) sit with the commands
TOP = ("cli", "__main__", "links", "")


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module
    where: str  # file:line of the import statement


def modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every .py file of every package (a package's own is __init__.py)."""
    found: dict[str, Path] = {}
    for package, folder in package_dirs().items():
        for path in sorted(folder.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    """The package-internal imports of module `name`: `from X import y` counts as importing X.y when that is a
    module, else X."""
    is_package = path.name == "__init__.py"
    edges = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                targets.append(candidate if candidate in known else base)
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]  # `import a.b.c` of a package-internal name
            if target and (target == PACKAGE or target.startswith(PACKAGE + ".")) and target != name:
                edges.append(Edge(name, target, where))
    return list(dict.fromkeys(edges))


def layer(module: str) -> int:
    """The rank of a module's package in `LAYERS`."""
    first = module.removeprefix(PACKAGE).lstrip(".").split(".")[0]
    return len(LAYERS) - 1 if first in TOP else LAYERS.index(first)


def graph() -> list[Edge]:
    known = modules()
    return [edge for name, path in known.items() for edge in imports(name, path, known)]


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    successors: dict[str, set[str]] = {}
    for edge in edges:
        successors.setdefault(edge.source, set()).add(edge.target)
        successors.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(successors[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(successors):
        if node not in index:
            visit(node)
    return found


def test_every_package_folder_is_read():
    """The graph covers every layer (a renamed folder would otherwise leave its imports unchecked)."""
    seen = {module.removeprefix(PACKAGE + ".").split(".")[0] for module in modules()}
    assert set(LAYERS) <= seen, set(LAYERS) - seen
    assert len(graph()) > 100


def test_no_import_goes_against_the_layering():
    against = [
        f"{edge.where}: {edge.source} imports {edge.target}"
        for edge in graph()
        if layer(edge.target) > layer(edge.source)
    ]
    assert not against, "imports against the layering " + " < ".join(LAYERS) + ":\n" + "\n".join(against)


def test_no_import_circles():
    edges = graph()
    found = cycles(edges)
    lines = []
    for component in found:
        members = set(component)
        lines.append(" <-> ".join(component))
        lines += [
            f"    {edge.where}: {edge.source} imports {edge.target}"
            for edge in edges
            if edge.source in members and edge.target in members
        ]
    assert not found, "modules that import each other in a circle:\n" + "\n".join(lines)


def test_the_checker_sees_circles_and_layering_breaks():
    """The checks themselves: a two-module circle and an upward import are found."""
    edges = [
        Edge("vanilla_transformer.corpus.a", "vanilla_transformer.corpus.b", "a.py:1"),
        Edge("vanilla_transformer.corpus.b", "vanilla_transformer.corpus.a", "b.py:1"),
        Edge("vanilla_transformer.corpus.b", "vanilla_transformer.modeling", "b.py:2"),
    ]
    assert cycles(edges) == [["vanilla_transformer.corpus.a", "vanilla_transformer.corpus.b"]]
    assert layer("vanilla_transformer.inference.engines") > layer("vanilla_transformer.corpus.read")
    assert layer("vanilla_transformer.cli") == layer("vanilla_transformer.commands.export") == len(LAYERS) - 1
    assert layer("vanilla_transformer") == len(LAYERS) - 1


def test_remote_code_imports_only_the_standard_library_torch_and_transformers():
    """Every file of modeling/ (a save copies some of them: the modules config.json names and their sibling
    imports, tests/modeling/test_remote_code.py) imports its siblings with single-dot imports and nothing but the
    standard library, torch and transformers besides."""
    files = sorted(package_dirs()[f"{PACKAGE}.modeling"].glob("*.py"))
    assert len(files) > 10
    wrong = foreign_imports(files)
    assert not wrong, "modeling/ imports what a folder loaded as remote code may not have:\n" + "\n".join(
        wrong
    )


def test_the_remote_code_checker_finds_planted_imports(tmp_path):
    """The check itself: a save's files are found through sibling imports at any depth, and an import of another
    package (at module level, in a function, under TYPE_CHECKING, by `importlib`), one that leaves the folder, one of
    a file that does not ship and one of the folder itself (a save copies no module for it) are each reported
    with its line."""
    (tmp_path / "modeling_x.py").write_text(
        "from __future__ import annotations\n"
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "import torch.nn as nn\n"
        "from transformers.utils import logging\n"
        "from .configuration_x import XConfig\n"
        "if TYPE_CHECKING:\n"
        "    import numpy\n"
        "def load():\n"
        "    import yaml\n"
        "    from ..convert import common\n"
        "    from .convert_x import read\n"
        "    return importlib.import_module('sentencepiece')\n",
        encoding="utf-8",
    )
    (tmp_path / "configuration_x.py").write_text(
        "import json\nfrom .positions_x import table\n", encoding="utf-8"
    )
    (tmp_path / "positions_x.py").write_text("import math\nfrom . import configuration_x\n", encoding="utf-8")
    (tmp_path / "convert_x.py").write_text("import pickle\nimport safetensors\n", encoding="utf-8")
    (tmp_path / "unrelated.py").write_text("import pandas\n", encoding="utf-8")
    shipped = shipped_files(tmp_path, ["modeling_x"])
    assert {path.name for path in shipped} == {
        "modeling_x.py",
        "configuration_x.py",
        "positions_x.py",
        "convert_x.py",
    }
    assert foreign_imports(shipped) == [
        "convert_x.py:2: imports safetensors (not the standard library, torch or transformers)",
        "modeling_x.py:8: imports numpy (not the standard library, torch or transformers)",
        "modeling_x.py:10: imports yaml (not the standard library, torch or transformers)",
        "modeling_x.py:11: imports ..convert (leaves the folder: single-dot imports only)",
        "modeling_x.py:13: imports sentencepiece (not the standard library, torch or transformers)",
        "positions_x.py:2: imports . (a save copies only the modules of `from .module import`)",
    ]
    assert foreign_imports(shipped - {tmp_path / "convert_x.py"}) == [
        "modeling_x.py:8: imports numpy (not the standard library, torch or transformers)",
        "modeling_x.py:10: imports yaml (not the standard library, torch or transformers)",
        "modeling_x.py:11: imports ..convert (leaves the folder: single-dot imports only)",
        "modeling_x.py:12: imports .convert_x (convert_x.py does not ship with it)",
        "modeling_x.py:13: imports sentencepiece (not the standard library, torch or transformers)",
        "positions_x.py:2: imports . (a save copies only the modules of `from .module import`)",
    ]
    assert foreign_imports([tmp_path / "configuration_x.py", tmp_path / "positions_x.py"]) == [
        "positions_x.py:2: imports . (a save copies only the modules of `from .module import`)"
    ]
