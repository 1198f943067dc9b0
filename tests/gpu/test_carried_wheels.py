"""scripts/gpu_wheels.py, which checks that the wheels carried to the GPU machine complete its image: a requirement
that neither a carried wheel nor the image meets, a version that does not fit and two versions of one name are
reported; extras pull in the carried wheel's own extra requirements; markers are read for CPython 3.12 on Linux."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_wheels.py"


@pytest.fixture(scope="module")
def wheels():
    spec = importlib.util.spec_from_file_location("gpu_wheels", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


IMAGE = {"torch": "2.11.0", "transformers": "5.17.0", "pandas": None, "aiohttp": None}


def test_a_complete_set_passes_and_lists_what_only_the_machine_can_confirm(wheels):
    carried = [
        wheels.Wheel("ours", "0.1.0", ["torch>=2.4,<3", "transformers>=5.23", "fsspec[http]"], "ours.whl"),
        wheels.Wheel("transformers", "5.24.0", ["pandas>=2"], "transformers.whl"),
        wheels.Wheel(
            "fsspec", "2026.9.0", ['aiohttp; extra == "http"', 'gcsfs; extra == "gcs"'], "fsspec.whl"
        ),
        wheels.Wheel(
            "old", "1.0", ['tomli; python_version < "3.11"', 'pywin32; sys_platform == "win32"'], "o.whl"
        ),
    ]
    problems, unconfirmed = wheels.check(carried, IMAGE)
    assert problems == []
    assert unconfirmed == ["transformers 5.24.0 needs pandas>=2"]


def test_what_is_missing_or_does_not_fit_is_reported(wheels):
    carried = [
        wheels.Wheel("ours", "0.1.0", ["transformers>=5.23", "datasets>=3", "torch<2.5"], "ours.whl"),
        wheels.Wheel("datasets", "2.0.0", ["dill", 'multiprocess; extra == "none"'], "datasets-a.whl"),
        wheels.Wheel("datasets", "5.2.0", ["dill"], "datasets-b.whl"),
    ]
    problems, _ = wheels.check(carried, IMAGE)
    assert "two versions of datasets: datasets-a.whl and datasets-b.whl" in problems
    assert any("needs transformers>=5.23: the image has transformers 5.17.0" in p for p in problems)
    assert any("needs torch<2.5: the image has torch 2.11.0" in p for p in problems)
    assert any("datasets 5.2.0 needs dill: not in the image" in p for p in problems)
    assert not any("multiprocess" in p for p in problems)


def test_this_projects_wheel_counts_with_its_train_extra_and_no_other(wheels):
    own = ["transformers>=5.23", 'datasets>=3; extra == "train"', 'fastapi; extra == "serve"']
    problems, _ = wheels.check([wheels.Wheel("vanilla-transformer", "0.1.0", own, "ours.whl")], IMAGE)
    assert any("needs transformers>=5.23: the image has transformers 5.17.0" in p for p in problems)
    assert any('needs datasets>=3; extra == "train": not in the image' in p for p in problems)
    assert not any("fastapi" in p for p in problems)


def test_a_wheel_is_read_from_its_metadata(wheels, tmp_path):
    path = tmp_path / "Some_Pkg-1.2-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "Some_Pkg-1.2.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: Some_Pkg\nVersion: 1.2\nRequires-Dist: numpy>=1\nRequires-Dist: dill\n",
        )
    wheel = wheels.read_wheel(path)
    assert (wheel.name, wheel.version, wheel.requires) == ("some-pkg", "1.2", ["numpy>=1", "dill"])
