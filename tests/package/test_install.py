"""A non-editable install (`pip install .` into a fresh virtual environment), used from another directory, has
everything the default run needs: the shipped corpus, the model-card template, every imported package."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TRAIN = textwrap.dedent(
    """
    import json, sys
    import corpus, training
    from vanilla_transformer.training import TrainConfig, train

    result = train(TrainConfig(
        preset="tiny", max_lines=300, valid_size=20, test_size=6, max_steps=3, max_minutes=None, vocab_size=400,
        max_tokens=512, eval_every=100, bleu_samples=0, report_to="none", num_threads=1, tune_cpu_allocator=False,
        test_beams=1, length_penalty=1.0, output_dir="out",
    ))
    print(json.dumps({"corpus": corpus.__file__, "training": training.__file__, "data": str(corpus.DEFAULT_DATA),
                      "bleu": result.test_metrics["bleu"]}))
    """
)


def test_wheel_install_trains_and_exports_from_another_directory(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    done = subprocess.run(
        [python, "-c", TRAIN],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=work,
        env={
            "PATH": str(env_dir / "bin"),
            "HOME": str(tmp_path),
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("corpus", "training", "data"):
        assert report[key].startswith(str(env_dir)), (
            key,
            report[key],
        )  # the installed copy, not the checkout
    card = (work / "out" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "PATH_OR_REPO" not in card and "{{" not in card
    assert f"{report['bleu']}" in card
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (work / "out" / name).is_file(), name
    assert sys.executable != str(python)
