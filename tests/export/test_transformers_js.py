"""The ONNX export runs in transformers.js in a real browser: headless Chromium loads a tiny exported folder from
a loopback server (transformers.js and ONNX Runtime Web from tests/export/js, installed by `npm ci` from its lock
file), tokenizes sentences and decodes a padded batch greedily; the token ids equal `generate()`'s (float32 graphs)
and `OnnxTranslator(dtype="int8")`'s (the int8 graphs, transformers.js' default "q8" in the browser), and the
tokenizer's ids equal the Python tokenizer's.

Skipped only where node/npm or Chromium are not installed (.ci/run installs Debian's nodejs, npm and chromium)
or npm cannot install the locked packages."""

from __future__ import annotations

import http.server
import json
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

import torch  # noqa: E402
from conftest import tiny_model, tiny_tokenizer  # noqa: E402
from helpers.browser import CHROMIUM_FLAGS  # noqa: E402

from vanilla_transformer.export.onnx import export_onnx  # noqa: E402
from vanilla_transformer.inference.engine_onnx import OnnxTranslator  # noqa: E402

JS = Path(__file__).parent / "js"
PACKAGE = "@huggingface/transformers"
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
SENTENCES = ["起初，神创造天地。", "地是空虚混沌，渊面黑暗", "神说：「要有光」，就有了光。", "光"]
MAX_NEW_TOKENS = 12
WAIT_SECONDS = 240  # the page's whole run: two model loads and decodes in single-threaded WebAssembly


def installed_packages() -> Path:
    """tests/export/js/node_modules with the locked transformers.js (`npm ci` when absent or another version)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed (apt-get install nodejs npm)")
    locked = json.loads((JS / "package-lock.json").read_text())["packages"][f"node_modules/{PACKAGE}"][
        "version"
    ]
    manifest = JS / "node_modules" / PACKAGE / "package.json"
    if not manifest.is_file() or json.loads(manifest.read_text())["version"] != locked:
        done = subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            pytest.skip(f"npm ci could not install {PACKAGE} {locked}: {done.stderr.strip()[-400:]}")
    return JS / "node_modules"


def chromium() -> str:
    for name in CHROMIUM:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed (apt-get install chromium)")


class Server(http.server.ThreadingHTTPServer):
    """Serves `routes` (URL prefix -> folder) on 127.0.0.1 and puts every POST /result body on `results`."""

    def __init__(self, routes: dict[str, Path], files: dict[str, bytes]):
        self.routes, self.files, self.results = routes, files, queue.Queue()
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server
    TYPES = {
        ".html": "text/html",
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def log_message(self, *args) -> None:  # no request log on stderr
        pass

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        body = self.server.files.get(path)
        if body is None:
            for prefix, folder in self.server.routes.items():
                file = (folder / path[len(prefix) :]).resolve()
                if path.startswith(prefix) and file.is_file() and folder.resolve() in file.parents:
                    body = file.read_bytes()
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", self.TYPES.get(Path(path).suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.results.put(json.loads(body))
        self.send_response(204)
        self.end_headers()


def run_page(routes: dict[str, Path], files: dict[str, bytes], profile: Path) -> dict:
    """Open /page.html in headless Chromium and return what the page posts (bounded wait)."""
    browser = chromium()
    server = Server(routes, files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/page.html"
    process = subprocess.Popen(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        return server.results.get(timeout=WAIT_SECONDS)
    except queue.Empty:
        process.kill()
        raise AssertionError(
            f"the page posted nothing in {WAIT_SECONDS} s: {process.stderr.read()[-2000:]}"
        ) from None
    finally:
        process.kill()
        process.wait(timeout=30)
        server.shutdown()
        server.server_close()


def generated(rows: list[list[int]], eos: int, pad: int) -> list[list[int]]:
    """Sequences (start token first, padded) as generated ids: no start token, cut after </s>, no padding."""
    hypotheses = []
    for row in rows:
        row = row[1:]
        hypotheses.append(row[: row.index(eos) + 1] if eos in row else [t for t in row if t != pad])
    return hypotheses


def test_transformers_js_in_chromium_decodes_our_tokens(tmp_path):
    modules = installed_packages()
    chromium()
    tokenizer = tiny_tokenizer()
    model = tiny_model(seed=3, vocab_size=len(tokenizer), encoder_layers=2, decoder_layers=2)
    with torch.no_grad():  # a random model repeats one token: centre the output bias so the source decides
        model.final_logits_bias.normal_(0.0, 0.2)
    folder = export_onnx(model, tmp_path / "tiny", tokenizer)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    spec = {
        "sentences": SENTENCES,
        "input_ids": batch["input_ids"].tolist(),
        "attention_mask": batch["attention_mask"].tolist(),
        "max_new_tokens": MAX_NEW_TOKENS,
        "dtypes": ["fp32", "q8"],
    }
    routes = {
        "/models/tiny/": folder,
        "/dist/": modules / PACKAGE / "dist",
        "/ort/": modules / "onnxruntime-web" / "dist",
    }
    files = {"/page.html": (JS / "page.html").read_bytes(), "/case.json": json.dumps(spec).encode()}
    result = run_page(routes, files, tmp_path / "profile")
    assert result["ok"], result.get("error")
    assert result["class"] == "MarianMTModel"
    assert result["encoded"] == tokenizer(SENTENCES)["input_ids"]

    eos, pad = model.config.eos_token_id, model.config.pad_token_id
    with torch.no_grad():
        expected = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
    assert len({tuple(row) for row in expected[:, 1:].tolist()}) > 1  # the sources decide the outputs
    assert generated(result["tokens"]["fp32"], eos, pad) == generated(expected.tolist(), eos, pad)
    sources = [row[mask.bool()].tolist() for row, mask in zip(batch["input_ids"], batch["attention_mask"])]
    int8 = OnnxTranslator(folder, num_threads=1, dtype="int8")
    int8_ids = [hyps[0] for hyps in int8.generate_ids(sources, max_new_tokens=MAX_NEW_TOKENS)]
    assert generated(result["tokens"]["q8"], eos, pad) == int8_ids
