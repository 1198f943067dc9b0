"""The repository holds only code written for it: another project's source comes as a dependency, obtained at
install or test time (transformers' common tests: tests/conformance/sdist.py), never committed. A copied file
carries its project's copyright or license header, so no tracked file may carry one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# a copyright line ("Copyright 2024 The HuggingFace Team", "# Copyright (c) Facebook, Inc.") or a license header
HEADER = re.compile(
    r"^\W*(Copyright\s+(\(c\)|©|\d{4})|Licensed under the |SPDX-License-Identifier:)", re.I | re.M
)


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout"
)
def test_no_tracked_file_carries_another_projects_copyright_or_license_header():
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    tracked = [name for name in listing.stdout.decode().split("\0") if name]
    headed = []
    for name in tracked:
        path = ROOT / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            head = path.read_bytes()[:4000].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if HEADER.search(head):
            headed.append(name)
    assert len(tracked) > 100
    assert not headed, f"files with another project's header (make it a dependency instead): {headed}"
