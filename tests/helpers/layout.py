"""The installed package's folders, read from pyproject.toml (the one place that states them)."""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, Path]:
    """Package name -> folder for every package the wheel installs, from pyproject.toml's setuptools `packages`
    and `package-dir` (a package without an entry lies in its parent's folder)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped = config["package-dir"]
    folders: dict[str, Path] = {}
    for package in sorted(config["packages"], key=len):
        parent, _, last = package.rpartition(".")
        folders[package] = ROOT / mapped[package] if package in mapped else folders[parent] / last
    return {package: folder for package, folder in folders.items() if folder != ROOT}  # ROOT: data only
