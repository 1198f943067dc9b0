"""The optional parts of the install (pyproject.toml's extras) and the one check that a command's extras are there.

The core install loads a saved model, runs ``generate()`` and ``vanilla-transformer translate``; a command that
needs more names the extra to install in one line (exit status 2) instead of failing on an import.
"""

from __future__ import annotations

import importlib.util
import sys

# extra -> the modules it installs, by import name: one for each of its packages in pyproject.toml
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "train": (
        "accelerate",
        "datasets",
        "pyarrow",
        "evaluate",
        "sacrebleu",
        "matplotlib",
        "jinja2",
        "tqdm",
    ),
    "sentences": ("pysbd",),
    "plot": ("matplotlib",),
    "serve": (
        "fastapi",
        "uvicorn",
        "multipart",
        "prometheus_client",
        "pysbd",
        "py3langid",
        "lxml",
        "markdown_it",
        "pypdf",
        "docx",
    ),
    "documents": ("lxml", "pysbd", "markdown_it", "pypdf", "docx"),
    "demo": ("gradio", "matplotlib"),
    "export": ("ctranslate2", "onnx", "onnxruntime", "onnxscript"),
    "finetune": ("peft", "sacremoses"),
    "ray": ("ray",),
}


def missing_modules(*extras: str) -> list[str]:
    """The modules of ``extras`` (names of `EXTRA_MODULES`) that are not installed, in the order listed."""
    wanted = dict.fromkeys(module for extra in extras for module in EXTRA_MODULES[extra])
    return [module for module in wanted if importlib.util.find_spec(module) is None]


def require_extras(command: str, *extras: str) -> None:
    """Return when every module of ``extras`` is installed; else write one line to stderr that names the extras
    ``command`` (e.g. "vanilla-transformer train") needs and how to install them, and exit with status 2."""
    missing = missing_modules(*extras)
    if not missing:
        return
    names = " and ".join(repr(extra) for extra in extras)
    print(
        f"{command} needs the {names} extra{'s' if len(extras) > 1 else ''} "
        f"({', '.join(missing)} not installed): pip install 'vanilla-transformer[{','.join(extras)}]'",
        file=sys.stderr,
    )
    raise SystemExit(2)
