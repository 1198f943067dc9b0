"""What the server and the demo page read from a model's card: /info's ``languages`` and the demo's title and
example sentences, for a model folder with a card written by the project's card code
(`export.model_card.model_card_data` and `usage_section`, as a trained model's card is), for one without a card,
and for a Hub id (a card downloaded from the stand-in Hub of tests/helpers/hub_server.py, in a fresh process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers.hub_server import HubServer, Repo, git_blob_oid

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

LANGUAGES = ("zh", "en")
EXAMPLE = '起初神创造天地。"引号"'


def card_text(model_id: str) -> str:
    """A card as a trained model's: the metadata with its languages, and the usage section with one example."""
    from huggingface_hub import ModelCard

    from vanilla_transformer.export.model_card import model_card_data, usage_section

    data = model_card_data(model_name="tiny", languages=LANGUAGES, dataset=None)
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n# tiny\n\n{usage_section(model_id, EXAMPLE)}\n"))


@pytest.fixture(scope="module")
def carded_folder(served_folder, tmp_path_factory) -> Path:
    """A copy of `served_folder` with a model card."""
    folder = tmp_path_factory.mktemp("carded") / "tiny-zh-en"
    shutil.copytree(served_folder, folder)
    (folder / "README.md").write_text(card_text(str(folder)), encoding="utf-8")
    return folder


def test_info_languages_come_from_the_card(carded_folder, served_folder):
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    assert not (served_folder / "README.md").exists()
    for folder, expected in ((carded_folder, list(LANGUAGES)), (served_folder, [])):
        with start_in_thread(served_app(folder)) as running:
            info = httpx.get(running.url + "/info", timeout=30).json()
        assert info["languages"] == expected and info["model"] == folder.name


def test_load_demo_shows_the_cards_examples_and_the_folders_name(carded_folder, served_folder, monkeypatch):
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")  # gradio sets it when imported
    pytest.importorskip("gradio", reason="the demo extra (in dev): pip install -e '.[dev]'")
    from vanilla_transformer.serving.demo import load_demo

    def shown(demo) -> list:
        return [c["props"]["samples"] for c in demo.config["components"] if c.get("type") == "dataset"]

    demo = load_demo(str(carded_folder))
    assert demo.title == "vanilla-transformer: tiny-zh-en"
    assert shown(demo) == [[[EXAMPLE]]]
    assert shown(load_demo(str(served_folder))) == []  # no card, no examples


READ_CARDS = r"""
import json, sys
from vanilla_transformer.serving import card_examples, card_languages
print(json.dumps({repo: [card_languages(repo), card_examples(repo)] for repo in sys.argv[1:]}))
"""


def test_a_hub_ids_card_is_downloaded(tmp_path):
    with HubServer() as hub:
        for repo_id, files in (
            ("alice/tiny-zh-en", {"README.md": card_text("alice/tiny-zh-en").encode(), "config.json": b"{}"}),
            ("alice/no-card", {"config.json": b"{}"}),
        ):
            sha = git_blob_oid(json.dumps(sorted(files)).encode())
            hub.repos[repo_id] = Repo(repo_id, False, "2024-01-01T00:00:00.000Z", {sha: files}, {"main": sha})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
        env.update(
            HF_ENDPOINT=hub.endpoint,
            HF_HOME=str(tmp_path),
            HF_HUB_DISABLE_XET="1",
            HF_HUB_DISABLE_TELEMETRY="1",
        )
        done = subprocess.run(
            [sys.executable, "-c", READ_CARDS, "alice/tiny-zh-en", "alice/no-card", "alice/missing"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "alice/tiny-zh-en": [list(LANGUAGES), [EXAMPLE]],
        "alice/no-card": [[], []],
        "alice/missing": [[], []],
    }
    assert "no model card for alice/missing" in done.stderr  # logged, not raised
