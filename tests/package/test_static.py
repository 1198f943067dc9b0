"""Static tools follow the package: pyright (basic mode, pyproject.toml's `[tool.pyright]`) finds no error in the
repository, resolves `vanilla_transformer.modeling` to the top-level `modeling/` through the editable install, and
checks every file the package installs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from helpers.layout import ROOT, package_dirs, tomllib

PYRIGHT = shutil.which("pyright")
needs_pyright = pytest.mark.skipif(PYRIGHT is None, reason="pyright is in the dev extras")


def pyright(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pyright with `args`, resolving imports in this interpreter's environment (the editable install)."""
    assert PYRIGHT is not None
    command = [PYRIGHT, *args, "--pythonpath", sys.executable]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=840)


def imports_of(listing: str, name: str) -> list[str]:
    """The files that pyright's `--dependencies` listing says the file `name` imports (`name` as pyright prints
    it: relative to the working directory)."""
    lines = listing.splitlines()
    assert name in lines, listing[-3000:]
    # the file's line, then " Imports  N files", then one file URI a line
    uris = []
    for line in lines[lines.index(name) + 2 :]:
        if not line.startswith("    file://"):
            break
        uris.append(line.strip())
    return [unquote(urlparse(uri).path) for uri in uris]


@needs_pyright
# pyright checks ~330 files on one thread: about a minute alone, several times that on 2 loaded CPU cores
@pytest.mark.timeout(900)
def test_pyright_finds_no_error():
    done = pyright("--outputjson", cwd=ROOT)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"pyright did not run (exit {done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    found = [d for d in report["generalDiagnostics"] if d["severity"] in ("error", "warning")]
    first = [
        f"{Path(d['file']).relative_to(ROOT)}:{d['range']['start']['line'] + 1}: {d['severity']}: "
        f"{d['message'].splitlines()[0]} ({d.get('rule', '')})"
        for d in found[:30]
    ]
    assert len(found) == 0, "pyright's first errors and warnings:\n" + "\n".join(first)


@needs_pyright
def test_pyright_resolves_the_package_to_the_top_level_folders(tmp_path):
    (tmp_path / "probe.py").write_text("import vanilla_transformer.modeling\n", encoding="utf-8")
    # a configuration of its own, so that pyright does not pick up one in a folder above tmp_path
    (tmp_path / "pyrightconfig.json").write_text("{}", encoding="utf-8")
    done = pyright("--verbose", "--dependencies", "probe.py", cwd=tmp_path)
    imports = imports_of(done.stdout, "probe.py")
    modeling = [
        path
        for path in imports
        if Path(path).parts[-3:] == ("vanilla_transformer", "modeling", "__init__.py")
    ]
    assert len(modeling) == 1, imports
    assert os.path.realpath(modeling[0]) == str(ROOT / "modeling" / "__init__.py"), imports


def test_pyright_checks_every_installed_file():
    include = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pyright"][
        "include"
    ]
    checked = [ROOT / entry for entry in include]
    unchecked = [
        path.relative_to(ROOT).as_posix()
        for folder in package_dirs().values()
        for path in sorted(folder.glob("*.py"))
        if not any(path == entry or entry in path.parents for entry in checked)
    ]
    assert not unchecked, f"add these to pyproject.toml's [tool.pyright] include: {unchecked}"


def test_lazy_names_are_listed_for_static_tools():
    import vanilla_transformer.training as training

    # the names a module's __getattr__ loads on first use are also written out in its __all__, which pyright reads
    assert sorted(training.__all__) == sorted(training._LAZY)
