"""The source tree keeps the promises of its layout: formatted and linted by ruff, no file edits the import path,
imports come first, files stay small enough to read, and docstrings say what code does, not what it scored."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.layout import package_dirs

ROOT = Path(__file__).resolve().parents[2]
# the top-level folders that install as vanilla_transformer (pyproject.toml's package-dir)
PACKAGE = tuple(sorted({folder.relative_to(ROOT).parts[0] for folder in package_dirs().values()}))
MAX_LINES = 450
# files that hold one concept at more length: the paper's network (one model, one file) and the declared training
# options (one field each)
MAX_LINES_MODEL = {"modeling/modeling_vanilla_transformer.py": 950, "training/options.py": 500}
# a figure quoted as a result: "BLEU 24.5", "24.55 BLEU", "chrF 45.7", "perplexity 13.6", "ppl 90.9"
SCORE = re.compile(r"\b(BLEU|chrF|perplexity|ppl)\b\s*(of\s*)?[=:]?\s*\d+\.\d|\d+\.\d+\s*(BLEU|chrF)\b")


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is in the dev extras")
@pytest.mark.parametrize("command", [["ruff", "format", "--check", "."], ["ruff", "check", "."]])
def test_ruff_passes(command):
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_no_file_edits_the_import_path_and_imports_come_first():
    files = sources(*PACKAGE, "scripts", "studies")
    assert len(files) > 50
    edits = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"sys\.path\s*(\[|\.insert|\.append|=|\+=)", line)
    ]
    assert not edits, edits
    late = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "noqa: E402" in line
    ]
    assert not late, late


def test_no_file_is_too_long_to_read():
    long = {}
    for path in sources(*PACKAGE):
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES_MODEL.get(name, MAX_LINES):
            long[name] = lines
    assert not long, long


def test_no_docstring_quotes_a_score():
    quoted = []
    for path in sources(*PACKAGE, "scripts", "studies", "tests"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                quoted += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in SCORE.finditer(doc)]
    assert not quoted, quoted
