"""The server's replies equal `vanilla-transformer translate`'s output for the same inputs and options: the
PyTorch model (greedy, beam search with an n-best list, an HTML document with its markup, whole or sentence by
sentence: both drive the one document plan, `inference.documents`) and its CTranslate2 export (beam search); the
exported engine refuses, by name, the options it cannot run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers.serving import post, served_app

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


def cli_output(folder, given: str, *options: str) -> str:
    """What `vanilla-transformer translate` (one process) writes for the input ``given``."""
    done = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "translate", "--model", str(folder), *options],
        input=given,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def cli(folder, lines: list[str], *options: str) -> list[str]:
    """`vanilla-transformer translate` of ``lines`` (one process), one output line per input line."""
    return cli_output(folder, "".join(f"{line}\n" for line in lines), *options).split("\n")[:-1]


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


def test_html_document_equals_the_cli(tiny_server, served_folder, served_sources):
    # a document with inline markup (placed by the model's own alignments) and a list; sentence by sentence, also
    # a segment of two sentences (too long for the model whole)
    s = served_sources
    document = (
        f"<h1>{s[0]}</h1>\n<p>{s[1][:3]}<b>{s[1][3:6]}</b>{s[1][6:]} <a href='#x'>{s[2]}</a></p>\n"
        f"<ul><li>{s[3]}</li><li><i>{s[4]}</i></li></ul>\n"
    )
    ending = next(i for i, text in enumerate(s) if text.endswith("。") and i + 1 < len(s))
    two = f"<p>{s[ending]}<em>{s[ending + 1]}</em></p>"
    options = ["--format", "html", "--num_beams", "1", "--max_new_tokens", "20", "--dtype", "float32"]
    body = {"format": "html", "num_beams": 1, "max_new_tokens": 20}
    for given, split in ((document, []), (document + two, ["--split_sentences", "zh"])):
        expected = cli_output(served_folder, given, *options, *split)
        reply = post(tiny_server, "/translate", {**body, "text": given, "split_sentences": bool(split)})
        assert reply.status_code == 200, reply.text
        assert reply.json()["translations"] == [expected]
        assert expected.count("<b>") == 1 and expected.count("<a href='#x'>") == 1 and "<li><i>" in expected


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
