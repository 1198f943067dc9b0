"""transformers' common test files (`tests/test_modeling_common.py`, `tests/test_configuration_common.py`) of one
release, taken from that release's source distribution on the package index at test time, never committed here.

`fetch` finds the sdist and its sha256 through the index's JSON API (PEP 691), downloads it, checks the sha256,
extracts the two files with tarfile's `data` filter, and caches them per release under the user's cache directory
(`$XDG_CACHE_HOME`, else `~/.cache`: `vanilla-transformer/transformers-tests/<release>/`) behind a file lock, since
pytest-xdist workers ask at the same time. A cached release is used without the network. `load` imports them as
the modules of a package made for that release, whose path also holds our stand-ins (`stand_ins/`) for the
modules upstream's files import that the sdist lacks; `sys.path` is left as it is. `fetch_or_skip` is what a test
module calls: an index that cannot be reached skips the module, naming the release and the error, or fails it
where `VANILLA_TRANSFORMER_REQUIRE_CONFORMANCE=1` (.ci/run); a download that is not the one the index lists is an
error, never a skip."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest
from filelock import FileLock

INDEX_URL = "https://pypi.org/simple/"
# another PEP 691 index (a mirror) in place of PyPI's
INDEX_VARIABLE = "VANILLA_TRANSFORMER_PACKAGE_INDEX"
# "1": a release whose files cannot be fetched fails the conformance tests instead of skipping them
REQUIRE_VARIABLE = "VANILLA_TRANSFORMER_REQUIRE_CONFORMANCE"
# the files of the sdist's tests/ that the conformance tests import
FILES = ("test_modeling_common.py", "test_configuration_common.py")
# our own modules of the paths upstream's files import and the sdist does not ship
STAND_INS = Path(__file__).resolve().parent / "stand_ins"
# where the files of a release came from (the sdist's URL and sha256), written last: its presence marks a complete
# cache entry
SOURCE = "SOURCE.json"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
TIMEOUT_S = 60


class UpstreamUnavailable(OSError):
    """The index could not be reached, or it has no source distribution of the release."""


class UpstreamMismatch(ValueError):
    """The downloaded sdist is not the one the index lists (sha256), or lacks a file the tests need."""


def cache_root() -> Path:
    """`vanilla-transformer/transformers-tests` under `$XDG_CACHE_HOME`, else under `~/.cache`."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vanilla-transformer" / "transformers-tests"


def find_sdist(version: str, index_url: str = INDEX_URL) -> tuple[str, str]:
    """The URL and sha256 of transformers `version`'s source distribution, from the index's JSON API."""
    page = urllib.parse.urljoin(index_url.rstrip("/") + "/", "transformers/")
    request = urllib.request.Request(page, headers={"Accept": SIMPLE_JSON})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            kind = response.headers.get_content_type()
            body = response.read()
    except (urllib.error.URLError, OSError) as error:
        raise UpstreamUnavailable(f"{page}: {error}") from error
    if kind != SIMPLE_JSON:
        raise UpstreamUnavailable(
            f"{page} answered {kind}, not the JSON API ({SIMPLE_JSON}): name a PEP 691 index"
        )
    filename = f"transformers-{version}.tar.gz"
    for entry in json.loads(body)["files"]:
        if entry["filename"] == filename and "sha256" in entry["hashes"]:
            return urllib.parse.urljoin(page, entry["url"]), entry["hashes"]["sha256"]
    raise UpstreamUnavailable(f"{page} lists no {filename} with a sha256")


def download(url: str, sha256: str, path: Path) -> None:
    """Write `url` to `path`; raise `UpstreamMismatch` unless its sha256 is `sha256`."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, path.open("wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as error:
        raise UpstreamUnavailable(f"{url}: {error}") from error
    if digest.hexdigest() != sha256:
        raise UpstreamMismatch(
            f"{url} has sha256 {digest.hexdigest()}, the index lists {sha256}: the download was altered or cut; "
            "run the tests again, and if it persists, check the index or proxy in between"
        )


def extract(archive: Path, destination: Path) -> None:
    """Extract `FILES` from the sdist's `<name>-<version>/tests/` into `destination`, through the `data` filter."""
    with tarfile.open(archive, "r:gz") as tar:
        wanted = {}
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) == 3 and parts[1] == "tests" and parts[2] in FILES:
                wanted[parts[2]] = member
        missing = sorted(set(FILES) - set(wanted))
        if missing:
            raise UpstreamMismatch(f"{archive.name} has no tests/{', tests/'.join(missing)}")
        unpacked = destination / "unpacked"
        tar.extractall(unpacked, members=list(wanted.values()), filter="data")
    for name, member in wanted.items():
        os.replace(unpacked / member.name, destination / name)
    shutil.rmtree(unpacked)


def complete(folder: Path) -> bool:
    """Whether `folder` holds a release's files: `SOURCE` is written last."""
    return all((folder / name).is_file() for name in (*FILES, "__init__.py", SOURCE))


def fetch(version: str, *, index_url: str = INDEX_URL, root: Path | None = None) -> Path:
    """The folder that holds `FILES` of transformers `version`, from the cache or else from the index."""
    root = cache_root() if root is None else root
    folder = root / version
    if complete(folder):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{version}.lock")):
        # another worker may have filled it while this one waited
        if complete(folder):
            return folder
        url, sha256 = find_sdist(version, index_url)
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{version}-") as scratch:
            archive, entry = Path(scratch) / "sdist.tar.gz", Path(scratch) / "entry"
            download(url, sha256, archive)
            entry.mkdir()
            extract(archive, entry)
            # upstream's test_configuration_common runs `direct_transformers_import` on its own folder, which
            # executes that folder's __init__.py; the sdist has none (the repository's is empty)
            (entry / "__init__.py").write_text("", encoding="utf-8")
            (entry / SOURCE).write_text(json.dumps({"url": url, "sha256": sha256}) + "\n", encoding="utf-8")
            # an entry is complete or absent: a half-written folder from an interrupted run never shows
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(entry, folder)
    return folder


def load(folder: Path, version: str) -> ModuleType:
    """A package, named after the release, whose modules are the files in `folder` and our stand-ins: upstream's
    `from .generation.test_utils import ...` finds `stand_ins/generation/test_utils.py`. Import its modules with
    `importlib.import_module(f"{package.__name__}.test_modeling_common")`."""
    name = "transformers_common_tests_" + re.sub(r"\W", "_", version)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder), str(STAND_INS)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(
            f"{folder / '__init__.py'} cannot be imported: remove {folder} and run the tests again"
        )
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


def fetch_or_skip(version: str) -> ModuleType:
    """`load(fetch(version))` with the index of `$VANILLA_TRANSFORMER_PACKAGE_INDEX` (else PyPI). When the index
    cannot be reached or lacks the release, the calling test module is skipped with the reason, or fails when
    `$VANILLA_TRANSFORMER_REQUIRE_CONFORMANCE` is 1."""
    index_url = os.environ.get(INDEX_VARIABLE) or INDEX_URL
    try:
        folder = fetch(version, index_url=index_url)
    except UpstreamUnavailable as error:
        reason = f"transformers {version}'s common tests are not cached and could not be fetched: {error}"
        if os.environ.get(REQUIRE_VARIABLE) == "1":
            pytest.fail(f"{reason} ({REQUIRE_VARIABLE}=1 makes this a failure)", pytrace=False)
        pytest.skip(f"{reason} (set {REQUIRE_VARIABLE}=1 to fail instead)", allow_module_level=True)
    return load(folder, version)
