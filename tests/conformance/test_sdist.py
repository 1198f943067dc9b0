"""How the conformance tests obtain transformers' common test files (`sdist.py`), against a package index served
from this process: the sdist found through the JSON API, its sha256 checked, only the needed files extracted
through tarfile's `data` filter, one download however many workers ask, the files imported beside our stand-ins
without touching `sys.path`, and an unreachable index skipping the tests, or failing them where CI asks (also
seen from a fresh pytest process that runs a conformance test file)."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import transformers

from . import sdist

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE_FILE = Path(__file__).resolve().parent / "test_vanilla_transformer.py"

# upstream's files, as small as the things the loader must provide: the relative imports of our stand-ins, and
# `direct_transformers_import` of their own folder (which executes its __init__.py)
MODELING = b"""from .exporters.test_export import ExportTesterMixin
from .generation.test_utils import GenerationTesterMixin


class ModelTesterMixin(ExportTesterMixin):
    pass
"""
CONFIGURATION = b"""from pathlib import Path

from transformers.utils import direct_transformers_import

from .utils.test_configuration_utils import config_common_kwargs

transformers_module = direct_transformers_import(Path(__file__).parent)
"""


def sdist_bytes(version: str, members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """A gzipped tar of `transformers-<version>/<path>` for each member, and symbolic links `path -> target`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, data in members.items():
            info = tarfile.TarInfo(f"transformers-{version}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for path, target in (links or {}).items():
            info = tarfile.TarInfo(f"transformers-{version}/{path}")
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


UPSTREAM = {
    "tests/test_modeling_common.py": MODELING,
    "tests/test_configuration_common.py": CONFIGURATION,
    "tests/test_tokenization_common.py": b"raise AssertionError('not needed, never extracted')\n",
    "src/transformers/__init__.py": b"",
}


@dataclass
class Index:
    """A PEP 691 index with one project, transformers, whose files are `archives` (file name -> bytes); `hashes`
    overrides the sha256 it lists for a file; `requests` records each path asked for."""

    url: str
    archives: dict[str, bytes] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    delay_s: float = 0.0

    def page(self) -> bytes:
        files = [
            {
                "filename": name,
                # relative to the page, as an index may write it
                "url": f"../../files/{name}",
                "hashes": {"sha256": self.hashes.get(name) or hashlib.sha256(data).hexdigest()},
            }
            for name, data in self.archives.items()
        ]
        return json.dumps({"meta": {"api-version": "1.1"}, "name": "transformers", "files": files}).encode()


@pytest.fixture
def index(monkeypatch, tmp_path) -> Iterator[Index]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("no_proxy", "127.0.0.1")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            served.requests.append(self.path)
            if self.path == "/simple/transformers/":
                body, kind = served.page(), sdist.SIMPLE_JSON
            elif self.path.startswith("/files/") and self.path[len("/files/") :] in served.archives:
                time.sleep(served.delay_s)
                body, kind = served.archives[self.path[len("/files/") :]], "application/gzip"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served = Index(url=f"http://127.0.0.1:{server.server_address[1]}/simple/")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def unimported(monkeypatch) -> Iterator[None]:
    """The packages `sdist.load` registers in `sys.modules` during the test are forgotten after it."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("transformers_common_tests_"):
            del sys.modules[name]


def test_fetch_checks_the_sha256_extracts_only_the_needed_files_and_then_reads_the_cache(index):
    index.archives["transformers-9.1.0.tar.gz"] = archive = sdist_bytes("9.1.0", UPSTREAM)
    folder = sdist.fetch("9.1.0", index_url=index.url)
    assert folder == sdist.cache_root() / "9.1.0"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*sdist.FILES, "__init__.py", sdist.SOURCE])
    assert (folder / "test_modeling_common.py").read_bytes() == MODELING
    source = json.loads((folder / sdist.SOURCE).read_text())
    assert source == {
        "url": index.url.replace("/simple/", "/files/transformers-9.1.0.tar.gz"),
        "sha256": hashlib.sha256(archive).hexdigest(),
    }
    assert index.requests == ["/simple/transformers/", "/files/transformers-9.1.0.tar.gz"]
    # the scratch folder (the sdist itself) is gone; the cache holds the release's folder and its lock
    assert sorted(p.name for p in sdist.cache_root().iterdir()) == ["9.1.0", "9.1.0.lock"]

    assert sdist.fetch("9.1.0", index_url=index.url) == folder
    assert len(index.requests) == 2


def test_the_cache_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert sdist.cache_root() == tmp_path / "vanilla-transformer" / "transformers-tests"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert sdist.cache_root() == Path.home() / ".cache" / "vanilla-transformer" / "transformers-tests"


def test_an_sdist_whose_sha256_is_not_the_one_the_index_lists_is_refused_and_not_cached(index):
    index.archives["transformers-9.2.0.tar.gz"] = sdist_bytes("9.2.0", UPSTREAM)
    index.hashes["transformers-9.2.0.tar.gz"] = "0" * 64
    with pytest.raises(sdist.UpstreamMismatch, match="sha256 .* the index lists 0{64}"):
        sdist.fetch("9.2.0", index_url=index.url)
    assert not sdist.complete(sdist.cache_root() / "9.2.0")
    assert sorted(p.name for p in sdist.cache_root().iterdir()) == ["9.2.0.lock"]


def test_an_sdist_without_the_needed_files_is_refused(index):
    index.archives["transformers-9.3.0.tar.gz"] = sdist_bytes(
        "9.3.0", {"tests/test_modeling_common.py": MODELING}
    )
    with pytest.raises(sdist.UpstreamMismatch, match="no tests/test_configuration_common.py"):
        sdist.fetch("9.3.0", index_url=index.url)


def test_extraction_goes_through_the_data_filter(index):
    # a needed file that is a link out of the extraction folder: the `data` filter refuses it
    members = {"tests/test_modeling_common.py": MODELING}
    links = {"tests/test_configuration_common.py": "/etc/passwd"}
    index.archives["transformers-9.4.0.tar.gz"] = sdist_bytes("9.4.0", members, links)
    with pytest.raises(tarfile.FilterError):
        sdist.fetch("9.4.0", index_url=index.url)
    assert not (sdist.cache_root() / "9.4.0").exists()


def test_workers_that_ask_at_once_download_once(index):
    index.archives["transformers-9.5.0.tar.gz"] = sdist_bytes("9.5.0", UPSTREAM)
    index.delay_s = 0.3
    folders: list[Path] = []
    workers = [
        threading.Thread(target=lambda: folders.append(sdist.fetch("9.5.0", index_url=index.url)))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert folders == [sdist.cache_root() / "9.5.0"] * 4
    assert index.requests.count("/files/transformers-9.5.0.tar.gz") == 1


def test_load_imports_upstream_files_beside_our_stand_ins_without_touching_sys_path(index, unimported):
    index.archives["transformers-9.6.0.tar.gz"] = sdist_bytes("9.6.0", UPSTREAM)
    path_before = list(sys.path)
    package = sdist.load(sdist.fetch("9.6.0", index_url=index.url), "9.6.0")
    modeling = importlib.import_module(f"{package.__name__}.test_modeling_common")
    configuration = importlib.import_module(f"{package.__name__}.test_configuration_common")
    assert sys.path == path_before
    assert package.__name__ == "transformers_common_tests_9_6_0"
    # the upstream file's relative imports found our stand-ins, as modules of the release's package
    assert modeling.ModelTesterMixin.__bases__ == (modeling.ExportTesterMixin,)
    for mixin, stand_in in [
        (modeling.ExportTesterMixin, "exporters/test_export.py"),
        (modeling.GenerationTesterMixin, "generation/test_utils.py"),
    ]:
        assert mixin.__module__.startswith(f"{package.__name__}.")
        assert sys.modules[mixin.__module__].__file__ == str(sdist.STAND_INS / stand_in)
    assert configuration.config_common_kwargs["problem_type"] == "regression"
    assert configuration.transformers_module is sys.modules["transformers"]
    assert sdist.load(sdist.cache_root() / "9.6.0", "9.6.0") is package


def unreachable_index() -> str:
    """An index URL on a local port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple/"


def test_an_unreachable_index_skips_naming_the_release_and_the_error(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(sdist.INDEX_VARIABLE, url := unreachable_index())
    monkeypatch.delenv(sdist.REQUIRE_VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        sdist.fetch_or_skip("9.7.0")
    reason = str(skipped.value)
    assert "transformers 9.7.0's common tests" in reason
    assert f"{url}transformers/" in reason and "Connection refused" in reason
    assert f"set {sdist.REQUIRE_VARIABLE}=1 to fail instead" in reason
    assert skipped.value.allow_module_level


def test_ci_turns_the_skip_into_a_failure(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(sdist.INDEX_VARIABLE, unreachable_index())
    monkeypatch.setenv(sdist.REQUIRE_VARIABLE, "1")
    with pytest.raises(
        pytest.fail.Exception, match=r"transformers 9\.7\.0's common tests .*Connection refused"
    ):
        sdist.fetch_or_skip("9.7.0")


def test_a_release_the_index_does_not_have_skips(index, monkeypatch, unimported):
    monkeypatch.setenv(sdist.INDEX_VARIABLE, index.url)
    monkeypatch.delenv(sdist.REQUIRE_VARIABLE, raising=False)
    with pytest.raises(
        pytest.skip.Exception, match=r"transformers 9\.8\.0\.dev0's .* no transformers-9\.8\.0\.dev0"
    ):
        sdist.fetch_or_skip("9.8.0.dev0")
    # once the index has it, the same call returns the release's package
    index.archives["transformers-9.8.0.dev0.tar.gz"] = sdist_bytes("9.8.0.dev0", UPSTREAM)
    assert sdist.fetch_or_skip("9.8.0.dev0").__name__ == "transformers_common_tests_9_8_0_dev0"


@pytest.mark.parametrize("required", [False, True])
def test_a_conformance_test_file_is_skipped_offline_and_fails_where_ci_requires_it(tmp_path, required):
    # a fresh process with an empty cache and an index nothing answers at: what a user offline, or CI, sees
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path),
        sdist.INDEX_VARIABLE: (url := unreachable_index()),
        sdist.REQUIRE_VARIABLE: "1" if required else "",
    }
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(CONFORMANCE_FILE)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    release = transformers.__version__
    reason = f"transformers {release}'s common tests are not cached and could not be fetched: {url}"
    assert reason in done.stdout, done.stdout[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    if required:
        assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout[-2000:]
        assert summary.startswith("1 error in "), done.stdout[-2000:]
    else:
        # the file is skipped as a whole, so no test of it is collected
        assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, done.stdout[-2000:]
        assert summary.startswith("1 skipped in "), done.stdout[-2000:]
