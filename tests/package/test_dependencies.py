"""The core install and the extras: pyproject.toml's core dependencies hold no package that only an extra needs,
each extra lists a package once and `dev` brings every extra; commands/extras.py checks each extra by the modules of
exactly its packages; and with the extras' modules hidden (what a core-only environment lacks), the command line
lists its commands, translates, and a command that needs an extra says in one line which to install."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import export_tiny_model
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vanilla_transformer.cli import NEEDS
from vanilla_transformer.commands.extras import EXTRA_MODULES

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib  # pyright: ignore[reportMissingImports]

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS = PROJECT["optional-dependencies"]
# what training, plotting, sentence splitting and serving bring: never a core dependency
EXTRA_ONLY = {
    "accelerate",
    "datasets",
    "evaluate",
    "sacrebleu",
    "tensorboard",
    "matplotlib",
    "pysbd",
    "fastapi",
}

# runs `python -m vanilla_transformer ARGS` with the top-level modules named in its first argument hidden: every
# finder of sys.meta_path answers None for them, as in an environment where they are not installed
HIDDEN_RUN = """
import runpy, sys

hidden = set(sys.argv.pop(1).split(","))


class Hidden:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attribute):
        return getattr(self.finder, attribute)


sys.meta_path[:] = [Hidden(finder) for finder in sys.meta_path]
sys.argv[0] = "vanilla-transformer"
runpy.run_module("vanilla_transformer", run_name="__main__", alter_sys=True)
"""


def names(requirements: list[str]) -> list[str]:
    return [canonicalize_name(Requirement(r).name) for r in requirements]


def test_the_core_holds_no_package_only_an_extra_needs_and_each_extra_lists_a_package_once():
    core = names(PROJECT["dependencies"])
    assert not EXTRA_ONLY & set(core), core
    assert "regex" in core and len(core) == len(set(core))
    for extra, requirements in EXTRAS.items():
        listed = names(requirements)
        assert len(listed) == len(set(listed)), (extra, listed)
        assert not set(listed) & set(core), (extra, listed)
    (itself,) = [Requirement(r) for r in EXTRAS["dev"] if Requirement(r).name == "vanilla-transformer"]
    assert itself.extras == set(EXTRAS) - {"dev"}


def test_each_extra_is_checked_by_the_modules_of_exactly_its_packages():
    """EXTRA_MODULES[extra], mapped to the distributions that install those modules here (dev has them all), is the
    extra's list in pyproject.toml; every extra a command needs is one of them."""
    missing = [
        m for modules in EXTRA_MODULES.values() for m in modules if importlib.util.find_spec(m) is None
    ]
    if missing:
        pytest.skip(f"not every extra is installed here ({', '.join(missing)}): pip install -e '.[dev]'")
    installed_by = importlib.metadata.packages_distributions()
    for extra, modules in EXTRA_MODULES.items():
        assert {canonicalize_name(installed_by[m][0]) for m in modules} == set(names(EXTRAS[extra])), extra
    assert {extra for extras in NEEDS.values() for extra in extras} <= set(EXTRA_MODULES)


def core_closure() -> set[str]:
    """The distributions a core install brings: pyproject's dependencies and, recursively, what each requires
    without an extra (read from the installed metadata)."""
    todo, seen = names(PROJECT["dependencies"]), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in map(Requirement, requires):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


@pytest.fixture(scope="module")
def not_in_core() -> str:
    """The modules of the extras (and TensorBoard) that a core install does not bring, comma-separated."""
    installed_by = importlib.metadata.packages_distributions()
    core = core_closure()
    modules = {m for extra in EXTRA_MODULES.values() for m in extra} | {"tensorboard"}
    hidden = sorted(m for m in modules if not {canonicalize_name(d) for d in installed_by.get(m, [])} & core)
    assert {"accelerate", "datasets", "pysbd", "fastapi", "matplotlib", "tensorboard"} <= set(hidden), hidden
    return ",".join(hidden)


def run_hidden(
    hidden: str, *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", HIDDEN_RUN, hidden, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def test_without_the_extras_the_command_line_translates_and_names_the_extra_a_command_needs(
    not_in_core, tmp_path
):
    listing = run_hidden(not_in_core, "--help")
    assert listing.returncode == 0 and "  train " in listing.stdout, listing.stderr[-3000:]
    for argv, extra in ((["train"], "train"), (["serve", "--model", "m"], "serve")):
        refused = run_hidden(not_in_core, *argv)
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr[-3000:]
        assert refused.stderr.startswith(f"vanilla-transformer {argv[0]} needs the ")
        assert refused.stderr.rstrip().endswith(f"pip install 'vanilla-transformer[{extra}]'"), refused.stderr

    folder = export_tiny_model(tmp_path / "tiny")
    sources = ["起初神创造天地。", "", "我爱机器翻译"]
    translate = ["translate", "--model", str(folder), "--num_beams", "1", "--max_new_tokens", "6"]
    done = run_hidden(not_in_core, *translate, stdin="\n".join(sources) + "\n")
    assert done.returncode == 0, done.stderr[-3000:]
    from vanilla_transformer.inference import load_model_and_tokenizer, translate_lines

    model, tokenizer = load_model_and_tokenizer(str(folder), device="cpu")
    assert done.stdout.split("\n") == [
        *translate_lines(model, tokenizer, sources, num_beams=1, max_new_tokens=6),
        "",
    ]
    split = run_hidden(not_in_core, *translate, "--split_sentences", "zh", stdin=sources[0] + "\n")
    assert split.returncode == 2 and split.stderr.splitlines() == [
        "vanilla-transformer translate --split_sentences needs the 'sentences' extra (pysbd not installed): "
        "pip install 'vanilla-transformer[sentences]'"
    ]


def test_report_to_defaults_to_tensorboard_where_it_is_installed_else_none():
    pytest.importorskip("tensorboard", reason="in the dev extra: pip install -e '.[dev]'")
    show = "from vanilla_transformer.training.options import TrainConfig; print(TrainConfig().report_to)"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    for hidden, expected in (("tensorboard", "none"), ("", "tensorboard")):
        code = HIDDEN_RUN.split("sys.argv[0] =")[0] + show
        done = subprocess.run(
            [sys.executable, "-c", code, hidden], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0 and done.stdout.split() == [expected], done.stderr[-3000:]
