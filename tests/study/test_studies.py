"""The studies (`studies/`, run from a checkout as ``python -m studies.NAME``): each one's ``--help`` names that
command and lists underscore options, an unknown flag exits with 2, and they import the package only by its
installed name (never a top-level folder of the checkout, never the tests' helpers)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from helpers.layout import package_dirs

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.stem for p in (ROOT / "studies").glob("*.py") if p.stem != "__init__")
# arguments a study requires (values are never used: parsing stops at the unknown flag)
REQUIRED = {
    "tokenizer": ["corpus.tsv"],
    "alignment": ["measure", "corpus.tsv"],
    "terminology": ["--model", "folder"],
    "markup": ["--models", "folder"],
    "control_cost": ["--model", "folder"],
    "sentences": ["--model", "folder"],
}


def test_the_studies_are_found():
    assert {"quality", "kv_cache", "gpu", "soak"} <= set(STUDIES)


@pytest.mark.parametrize("name", STUDIES)
def test_every_study_has_help_in_one_style_and_rejects_unknown_flags(name, capsys):
    study = importlib.import_module(f"studies.{name}")
    with pytest.raises(SystemExit) as help_exit:
        study.main(["--help"])
    help_text = capsys.readouterr().out
    assert help_exit.value.code == 0 and help_text.startswith(f"usage: python -m studies.{name} "), help_text[
        :200
    ]
    options = re.findall(r"(?<![\w-])--[A-Za-z0-9_-]+", help_text)
    assert options and not [o for o in options if "-" in o[2:]], f"{name}: hyphenated options {options}"
    with pytest.raises(SystemExit) as bad_exit:
        study.main([*REQUIRED.get(name, []), "--no_such_flag_here"])
    assert (
        bad_exit.value.code == 2 and "unrecognized arguments: --no_such_flag_here" in capsys.readouterr().err
    )


def test_studies_import_the_package_by_its_installed_name_only():
    checkout_names = {folder.relative_to(ROOT).parts[0] for folder in package_dirs().values()}
    checkout_names |= {"helpers", "tests", "conftest", "src"}
    found = []
    for path in sorted((ROOT / "studies").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] in checkout_names]
    assert not found, found
