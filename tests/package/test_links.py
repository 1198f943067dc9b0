"""A checkout whose symbolic links became plain files holding their targets (a clone without symbolic links, as
Windows makes one without ``core.symlinks``) fails at import with one line that says how to clone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def checkout_copy(tmp_path: Path) -> Path:
    """src/vanilla_transformer copied to ``tmp_path``, its links pointing at this checkout's folders."""
    package = tmp_path / "src" / "vanilla_transformer"
    source = ROOT / "src" / "vanilla_transformer"
    shutil.copytree(source, package, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for link in package.iterdir():
        if link.is_symlink():
            target = (source / link.name).resolve()
            link.unlink()
            link.symlink_to(target, target_is_directory=True)
    return package


@pytest.mark.parametrize("link", ["modeling", "export/model_card.md"])
def test_a_link_that_is_a_plain_file_fails_the_import_with_how_to_clone(tmp_path, link):
    package = checkout_copy(tmp_path)
    if link == "export/model_card.md":
        (package / "export").unlink()
        shutil.copytree(ROOT / "export", package / "export", symlinks=True)
    stand_in = package / link
    target = os.readlink(ROOT / "src" / "vanilla_transformer" / link)
    stand_in.unlink()
    stand_in.write_text(target, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", "import vanilla_transformer"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "src"), "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"ImportError: {stand_in} is a plain file, not a symbolic link: this checkout was made without symbolic "
        "links; clone it again with them: git clone -c core.symlinks=true URL (on Windows with Developer Mode on)"
    )
    # the import error the plain file caused is not shown beside it
    assert "ModuleNotFoundError" not in done.stderr
