"""The server's replies equal `vanilla-transformer translate`'s output for the same inputs and options: the
PyTorch model (greedy, beam search with an n-best list) and its CTranslate2 export (beam search); the exported
engine refuses, by name, the options it cannot run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers.serving import post, served_app

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


def cli(folder, lines: list[str], *options: str) -> list[str]:
    """`vanilla-transformer translate` of ``lines`` (one process), one output line per input line."""
    done = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "translate", "--model", str(folder), *options],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split("\n")[:-1]


def served(url: str, lines: list[str], **options) -> list[str]:
    """The server's replies for ``lines``, one request per line (as `translate` prints them: n-best joined by
    tabs)."""
    outputs = []
    for line in lines:
        reply = post(url, "/translate", {"text": line, **options})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        outputs.append("\t".join(body["nbest"][0]) if "nbest" in body else body["translations"][0])
    return outputs


@pytest.fixture(scope="module")
def lines(served_sources) -> list[str]:
    return [*served_sources[:10], ""]


def test_torch_greedy_and_nbest_equal_the_cli(tiny_server, served_folder, lines):
    greedy = cli(served_folder, lines, "--num_beams", "1", "--dtype", "float32")
    assert served(tiny_server, lines, num_beams=1) == greedy
    nbest = cli(
        served_folder, lines, "--num_beams", "3", "--num_return_sequences", "2", "--length_penalty", "0.6",
        "--max_new_tokens", "5", "--dtype", "float32",
    )  # fmt: skip
    options = {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 0.6, "max_new_tokens": 5}
    assert served(tiny_server, lines, **options) == nbest
    assert all(line.count("\t") == 1 for line in nbest)


def test_ct2_server_equals_the_ct2_cli(served_folder, lines, tmp_path):
    pytest.importorskip("ctranslate2", reason="the export extra (in dev)")
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.serving import start_in_thread

    folder = export_ct2(served_folder, tmp_path / "ct2")
    expected = cli(folder, lines, "--engine", "ct2", "--num_beams", "3")
    with start_in_thread(served_app(folder, "ct2", max_wait_ms=20)) as server:
        assert served(server.url, lines, num_beams=3) == expected
        info = post(server.url, "/translate", {"text": lines[0], "do_sample": True})
        assert info.status_code == 422 and "do_sample" in info.json()["detail"]
        stream = post(server.url, "/translate/stream", {"text": lines[0]})
        assert stream.status_code == 422 and "engine torch" in stream.json()["detail"]
        assert (
            post(server.url, "/translate", {"text": lines[:3], "num_beams": 3}).json()["translations"]
            == (expected[:3])
        )
