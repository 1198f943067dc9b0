"""The installed distribution: the wheel that `python -m build` makes, installed (not editable) into a fresh virtual
environment, holds one top-level import name, `vanilla_transformer`, and no study code or test bodies, lives beside
PyPI's `tokenizer` package, and its `vanilla-transformer` command trains, exports and translates from a directory
outside the checkout, with the checkout off the import path."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from helpers.shared import SMALL_CORPUS_FLAGS

ROOT = Path(__file__).resolve().parents[2]

# What the installed distribution puts into site-packages, read from its own file list (its RECORD).
TOP_LEVEL = """
import json
from importlib.metadata import distribution

files = distribution("vanilla-transformer").files
print(json.dumps(sorted({f.parts[0] for f in files if not f.parts[0].endswith(".dist-info") and f.parts[0] != ".."})))
"""

SOURCES = ["起初神创造天地。", "", "我爱机器翻译"]

# the checkout's code that the wheel leaves out: the studies behind the docs, the comparisons of the gpu tests
NOT_INSTALLED = ("studies/*.py", "tests/gpu/checks.py")

BOTH_IMPORT = """
import json
import tokenizer
import vanilla_transformer
from vanilla_transformer.tokenizer import PAD_ID

print(json.dumps({"tokenizer": tokenizer.__file__, "package": vanilla_transformer.__file__,
                  "icelandic": [t.txt for t in tokenizer.tokenize("Hallo heimur.") if t.txt], "pad": PAD_ID}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(a new virtual environment, the wheel installed into it). It also sees the packages of the environment the
    suite runs in (torch, transformers, ...: not downloaded again), after its own, but not the checkout."""
    root = tmp_path_factory.mktemp("install")
    # the build runs on a copy: setuptools' build/ folder in the checkout may hold files the tree no longer has
    source = root / "source"
    leftovers = (".git", ".venv", "build", "dist", "outputs", "runs", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*leftovers, ".hypothesis"))
    dist = root / "dist"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--skip-dependency-check",
            "--outdir",
            str(dist),
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("vanilla_transformer-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # the packages of the environment this suite runs in (a venv or not) come after the new environment's own
    inner = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(inner, "outer-environment.pth").write_text("\n".join(sorted(outer)) + "\n")
    # PyPI's `tokenizer` (a name ours once shipped) goes into the new environment itself, next to ours
    for requirement in (["--no-deps", str(wheel)], ["--no-deps", "--ignore-installed", "tokenizer"]):
        done = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", *requirement],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=root,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return env_dir, wheel


def run_in(
    env_dir: Path, args: list[str], cwd: Path, home: Path, stdin: str | None = None
) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{env_dir / 'bin'}{os.pathsep}/usr/bin:/bin",
        "HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_the_wheel_and_the_installed_distribution_hold_one_top_level_name(installed, tmp_path):
    env_dir, wheel = installed
    in_wheel = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {n for n in in_wheel if not n.endswith(".dist-info")} == {"vanilla_transformer"}, in_wheel
    done = run_in(env_dir, [str(env_dir / "bin" / "python"), "-c", TOP_LEVEL], tmp_path, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == ["vanilla_transformer"]


def public_definitions(source: str) -> dict[str, str]:
    """A module's public top-level functions and classes: their code (`ast.dump`) -> their name."""
    return {
        ast.dump(node): node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }


def test_the_wheel_holds_no_study_code_and_no_test_bodies(installed):
    """No function or class of the studies or of the gpu tests' comparisons is in the wheel, and no module of the
    wheel imports pytest, the studies or the tests' helpers."""
    _, wheel = installed
    with zipfile.ZipFile(wheel) as archive:
        modules = {n: archive.read(n).decode("utf-8") for n in archive.namelist() if n.endswith(".py")}
    outside: dict[str, str] = {}
    for pattern in NOT_INSTALLED:
        for path in ROOT.glob(pattern):
            outside.update(public_definitions(path.read_text(encoding="utf-8")))
    assert len(outside) > 50
    shipped = [
        f"{name}: {outside[code]}"
        for name, source in modules.items()
        for code in public_definitions(source).keys() & outside.keys()
    ]
    assert not shipped, shipped
    test_imports = re.compile(r"^\s*(import|from)\s+(pytest|studies|helpers)\b", re.MULTILINE)
    assert not [name for name, source in modules.items() if test_imports.search(source)]


def test_pypis_tokenizer_package_and_ours_both_import(installed, tmp_path):
    env_dir, _ = installed
    done = run_in(env_dir, [str(env_dir / "bin" / "python"), "-c", BOTH_IMPORT], tmp_path, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["icelandic"] == ["Hallo", "heimur", "."] and report["pad"] == 0
    assert report["tokenizer"].startswith(str(env_dir)) and report["package"].startswith(str(env_dir))


def test_the_command_trains_and_translates_outside_the_checkout(installed, tmp_path):
    env_dir, _ = installed
    command = str(env_dir / "bin" / "vanilla-transformer")
    work = tmp_path / "elsewhere"
    work.mkdir()
    listing = run_in(env_dir, [command, "--help"], work, tmp_path)
    assert listing.returncode == 0 and all(
        f"  {c} " in listing.stdout for c in ("train", "translate", "export")
    )
    train = [
        command,
        "train",
        *SMALL_CORPUS_FLAGS,
        *"--preset tiny --max_steps 20 --max_minutes none --vocab_size 400 --max_tokens 512 --eval_every 100".split(),
        *"--bleu_samples 0 --report_to none --num_threads 1 --no_tune_cpu_allocator".split(),
        *"--test_beams 1 --length_penalty 1.0 --output_dir out".split(),
    ]
    trained = run_in(env_dir, train, work, tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert "Stopped after 20 updates" in trained.stdout and "Test BLEU" in trained.stdout
    bleu = re.search(r"^Test BLEU ([\d.]+) ", trained.stdout, re.M).group(1)
    card = (work / "out" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "PATH_OR_REPO" not in card and "{{" not in card and bleu in card
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (work / "out" / name).is_file(), name
    translate = [command, "translate", "--model", "out", "--num_beams", "1", "--max_new_tokens", "8"]
    done = run_in(env_dir, translate, work, tmp_path, stdin="\n".join(SOURCES) + "\n")
    assert done.returncode == 0, done.stderr[-3000:]
    # what the installed command printed is what the checkout's translation path gives for the same folder
    from vanilla_transformer.inference import load_model_and_tokenizer, translate_lines

    model, tokenizer = load_model_and_tokenizer(str(work / "out"), device="cpu")
    expected = translate_lines(model, tokenizer, SOURCES, num_beams=1, max_new_tokens=8)
    assert done.stdout.split("\n") == [*expected, ""] and expected[1] == ""


def test_an_editable_install_is_a_plain_path_entry_for_src():
    """`pip install -e .` of the src layout is one .pth line naming src/ (what pyright, mypy and editors read),
    not an import hook, and no package maps to the repository root (which would import modeling/ twice)."""
    from importlib.metadata import distribution

    import vanilla_transformer

    if Path(vanilla_transformer.__file__).resolve().parent != ROOT / "src" / "vanilla_transformer":
        pytest.skip("vanilla_transformer is not an editable install of this checkout")
    files = [str(f) for f in distribution("vanilla-transformer").files or []]
    assert not [f for f in files if "finder" in f], files
    (pth,) = [f for f in files if f.endswith(".pth")]
    lines = (
        Path(str(distribution("vanilla-transformer").locate_file(pth))).read_text(encoding="utf-8").split()
    )
    assert [Path(line).resolve() for line in lines] == [ROOT / "src"]
