"""The installed package's folders, read from the source tree the way setuptools reads it (pyproject.toml's
`packages.find` under src/, whose subpackages are links to the repository's top-level folders)."""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    # installed only where Python is 3.10 (pytest depends on it there), so not in a newer checking environment
    import tomli as tomllib  # pyright: ignore[reportMissingImports]

ROOT = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, Path]:
    """Package name -> the folder that holds its files (links followed: `vanilla_transformer.modeling` ->
    modeling/) for every package the wheel installs."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    (where,) = config["packages"]["find"]["where"]
    src = ROOT / where
    return {package: (src / package.replace(".", "/")).resolve() for package in find_packages(str(src))}
