"""`vanilla-transformer serve` as a subprocess: SIGTERM or SIGINT (Ctrl-C) while requests wait in the batching
queue answers every one of them (right), then the process exits with status 0; a model that cannot be loaded exits with status 2."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from helpers.serving import post, serve_process, wait_for

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_answers_the_queued_requests_then_exits(signum, served_folder, served_sources):
    from vanilla_transformer.inference import load_model_and_tokenizer, translate

    # request-level batching, whose queue holds requests for --max_wait_ms
    args = ("--dtype", "float32", "--scheduling", "request", "--max_wait_ms", "3000")
    with serve_process(served_folder, *args) as (process, url):
        texts = served_sources[:6]
        with ThreadPoolExecutor(len(texts)) as pool:
            replies = [pool.submit(post, url, "/translate", {"text": text, "num_beams": 1}) for text in texts]
            wait_for(
                lambda: httpx.get(url + "/health", timeout=5).json()["queued"] == len(texts), "queue", process
            )
            process.send_signal(signum)
            answers = [reply.result(timeout=120) for reply in replies]
        status = process.wait(timeout=120)
    stderr = process.stderr.read()
    assert status == 0, stderr[-3000:]
    model, tokenizer = load_model_and_tokenizer(str(served_folder), dtype="float32")
    expected = translate(model, tokenizer, texts, batch_size=1, num_beams=1)
    assert [answer.status_code for answer in answers] == [200] * len(texts)
    assert [answer.json()["translations"][0] for answer in answers] == expected
    assert "Traceback" not in stderr, stderr[-3000:]


def test_a_model_that_cannot_be_loaded_exits_with_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "serve", "--model", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_sigterm_with_a_stalled_client_exits_cleanly(served_folder):
    """A client that sent its headers and part of its body, then stalls: SIGTERM refuses it at once (503, its
    connection closed) and the server exits with status 0, logging no traceback."""
    with serve_process(served_folder, "--dtype", "float32", "--drain_s", "1") as (process, url):
        port = httpx.URL(url).port
        assert port is not None
        with socket.create_connection(("127.0.0.1", port), timeout=60) as stalled:
            head = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100"
            stalled.sendall(head + b'\r\n\r\n{"text": ')
            wait_for(lambda: httpx.get(url + "/health", timeout=5).status_code == 200, "health", process)
            process.send_signal(signal.SIGTERM)
            reply = b""
            while chunk := stalled.recv(65536):
                reply += chunk
        status = process.wait(timeout=120)
    stderr = process.stderr.read()
    assert status == 0, stderr[-3000:]
    assert reply == b"" or reply.startswith(b"HTTP/1.1 503"), reply
    assert "Traceback" not in stderr, stderr[-3000:]
