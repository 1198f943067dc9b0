"""What the serving tests share: requests to a server, reading server-sent events, an app over a model folder
(their fixtures are in tests/conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def post(url: str, path: str, body=None, timeout: float = 60):
    """POST ``body`` as JSON to ``url + path``; the `httpx.Response`."""
    import httpx

    return httpx.post(url + path, json=body, timeout=timeout)


def read_events(lines: Iterable[str]) -> list[tuple[str, dict]]:
    """(event name, JSON data) of each event in the lines of a text/event-stream body."""
    events, name, data = [], "message", []
    for line in lines:
        if not line:
            if data:
                events.append((name, json.loads("\n".join(data))))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
    return events


def with_card(folder: Path, copy: Path, languages: tuple[str, str] = ("zh", "en")) -> Path:
    """A copy of the model ``folder`` at ``copy`` whose model card names ``languages``, as a trained model's
    card does."""
    import shutil

    from huggingface_hub import ModelCard

    from vanilla_transformer.export.model_card import model_card_data

    shutil.copytree(folder, copy)
    data = model_card_data(model_name="tiny", languages=languages, dataset=None)
    ModelCard(f"---\n{data.to_yaml()}\n---\n# tiny\n").save(copy / "README.md")
    return copy


def served_app(folder: Path | list[Path], engine: str = "torch", **options):
    """`serving.create_app` over ``folder`` (or several) loaded for ``engine`` (float32 for torch, as the tests'
    references), with small limits (8 texts, 4 KiB bodies, max_new_tokens 20) unless ``limits`` is given."""
    from vanilla_transformer.serving import Limits, create_app, load_served

    dtype = "float32" if engine == "torch" else None
    folders = folder if isinstance(folder, list) else [folder]
    served = [load_served(str(f), engine, dtype=dtype) for f in folders]
    limits = options.pop("limits", Limits(max_texts=8, max_request_bytes=4096, max_new_tokens=20))
    return create_app(served if isinstance(folder, list) else served[0], limits, **options)


def use_demo_page(driver, url: str, sentence: str, timeout: float = 120.0) -> dict:
    """Open the demo page at ``url``, type ``sentence``, press Translate and wait (up to ``timeout`` seconds) for
    the translation, the alternatives and the attention image; returns what the page shows: ``translation``,
    ``table`` (the alternatives table's text, whitespace runs made one space) and ``image_width`` (the heat map's
    width in pixels, 0 if it did not load)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_page_load_timeout(timeout)
    driver.get(url)
    wait = WebDriverWait(driver, timeout, poll_frequency=0.2)
    source = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#source textarea"))
    source.send_keys(sentence)
    driver.find_element(By.CSS_SELECTOR, "#translate").click()
    output = driver.find_element(By.CSS_SELECTOR, "#translation textarea")
    wait.until(lambda d: output.get_attribute("value"))
    image = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#attention img"))
    width = wait.until(
        lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image)
    )
    table = driver.find_element(By.CSS_SELECTOR, "#alternatives")
    wait.until(lambda d: output.get_attribute("value").split()[0] in table.text)
    return {
        "translation": output.get_attribute("value"),
        "table": " ".join(table.text.split()),
        "image_width": width,
    }


def free_port() -> int:
    """A TCP port free on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, what: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Wait until ``predicate()`` is true (a transport error counts as false); AssertionError when ``process`` exits
    first or after ``timeout`` seconds."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited ({process.returncode}) before {what}"
        try:
            if predicate():
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout} s")


@contextmanager
def serve_process(folder, *options: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """`vanilla-transformer serve --model FOLDER OPTIONS` on a free port, once /health answers: (process, url); the
    process is killed on the way out if the test left it running."""
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "vanilla_transformer",
        "serve",
        "--model",
        str(folder),
        "--port",
        str(port),
    ]
    process = subprocess.Popen(
        command + list(options),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        wait_for(lambda: httpx.get(url + "/health", timeout=5).status_code == 200, "health", process)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
