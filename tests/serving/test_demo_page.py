"""The demo page in a real browser (Debian's headless chromium driven by selenium through chromedriver): type a
sentence, press Translate, and the page shows the model's translation (as `inference.translate` gives it), the
beam's alternatives with their scores (as `scored_nbest` computes them) and the cross-attention heat map. And the
examples the page offers are the model card's.

The browser test saves a screenshot of the page as demo.png in ``$VANILLA_TRANSFORMER_SCREENSHOT_DIR`` when set
(else in its temporary folder), of the page for the model folder ``$VANILLA_TRANSFORMER_SCREENSHOT_MODEL`` when
set (else the tiny model), with that model card's examples: docs/deploy.md ("Demo page") regenerates
docs/img/demo.png this way."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from helpers.browser import CHROMEDRIVER, CHROMIUM, chromium
from helpers.serving import use_demo_page

SCREENSHOT_DIR = "VANILLA_TRANSFORMER_SCREENSHOT_DIR"
SCREENSHOT_MODEL = "VANILLA_TRANSFORMER_SCREENSHOT_MODEL"


def test_card_examples_are_the_usage_sections(tmp_path):
    from vanilla_transformer.export.model_card import usage_section
    from vanilla_transformer.serving.demo import card_examples

    assert card_examples(tmp_path) == []
    sentence = '起初神创造天地。"引号"'
    (tmp_path / "README.md").write_text(
        f"# m\n\n{usage_section(str(tmp_path), sentence)}\n", encoding="utf-8"
    )
    assert card_examples(tmp_path) == [sentence]
    assert "vanilla-transformer serve --model ." in usage_section(str(tmp_path), sentence)


@pytest.mark.skipif(
    not (os.access(CHROMIUM, os.X_OK) and shutil.which(CHROMEDRIVER)),
    reason=f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install chromium chromium-driver (.ci/run does)",
)
def test_the_page_translates_in_chromium(served_folder, served_sources, tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")  # gradio sets it when imported
    pytest.importorskip("gradio", reason="the demo extra (in dev): pip install -e '.[dev]'")
    pytest.importorskip("selenium", reason="in the dev extra: pip install -e '.[dev]'")
    from vanilla_transformer.inference import load_model_and_tokenizer, translate
    from vanilla_transformer.serving.demo import build_demo, card_examples, scored_nbest

    folder = os.environ.get(SCREENSHOT_MODEL) or str(served_folder)
    model, tokenizer = load_model_and_tokenizer(folder, dtype="float32")
    sentence = served_sources[3]
    examples = card_examples(folder) or served_sources[:2]
    demo = build_demo(model, tokenizer, num_beams=3, examples=examples, image_folder=tmp_path / "img")
    screenshot = Path(os.environ.get(SCREENSHOT_DIR) or tmp_path) / "demo.png"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, share=False, quiet=True)
    driver = chromium(tmp_path / "profile")
    try:
        page = use_demo_page(driver, f"http://127.0.0.1:{port}/", sentence)
        driver.save_screenshot(str(screenshot))
    finally:
        driver.quit()
        demo.close()
    assert page["translation"] == translate(model, tokenizer, [sentence], num_beams=3)[0]
    nbest = scored_nbest(model, tokenizer, sentence, num_beams=3)
    assert len(nbest) == 3 and page["translation"] == nbest[0][0]
    for hypothesis, score in nbest:
        assert " ".join(hypothesis.split()) in page["table"] and f"{score:.4f}".rstrip("0") in page["table"]
    assert page["image_width"] > 100
    assert screenshot.stat().st_size > 10_000
    assert list((tmp_path / "img").glob("*.png"))  # the heat map the page showed
