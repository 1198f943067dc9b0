"""A stand-in Hugging Face Hub: a small stdlib HTTP server that answers the requests `huggingface_hub` 2.4
makes for `create_repo`, `upload_folder` (regular base64 uploads only: no LFS, no Xet) and for downloading
(`hf_hub_download`, `model_info`, `list_repo_tree`), which is what `push_to_hub` and
`from_pretrained(repo_id)` need.

Point a *fresh process* at it with ``HF_ENDPOINT=http://127.0.0.1:PORT`` (read when `huggingface_hub` is
imported), ``HF_HUB_DISABLE_XET=1`` and a temporary ``HF_HOME``.

Endpoints (``{repo}`` is ``namespace/name``; ``{rev}`` a branch name or a commit sha):

* ``POST /api/repos/create``: JSON ``{name, organization, private|visibility, type}``; 200 ``{url}`` or
  409 ``{error, url}`` when the repo exists.
* ``POST /api/validate-yaml``: 200 ``{errors: [], warnings: []}``.
* ``POST /api/models/{repo}/preupload/{rev}``: every file ``uploadMode: "regular"``, with the git oid of the
  stored file (so that unchanged files are skipped on a second push).
* ``POST /api/models/{repo}/commit/{rev}``: NDJSON ``header`` / ``file`` (base64) / ``deletedFile`` /
  ``deletedFolder`` lines; 200 ``{commitUrl, commitOid, success}``. ``lfsFile`` lines are refused (400).
* ``GET /api/models/{repo}`` and ``GET /api/models/{repo}/revision/{rev}``: metadata with ``id``, ``sha``,
  ``private``, ``siblings``.
* ``GET /api/models/{repo}/tree/{rev}[/{path}]``: the files (and folders) under ``path``.
* ``HEAD`` / ``GET /{repo}/resolve/{rev}/{path}``: the file, with ``ETag``, ``X-Repo-Commit`` and
  ``Content-Length``; missing files are 404 with ``X-Error-Code: EntryNotFound`` (and ``X-Repo-Commit``),
  missing repos 404 ``RepoNotFound``, missing revisions 404 ``RevisionNotFound``.
* ``GET /api/whoami-v2``: the user of a valid token; ``GET /api/agent-harnesses``: an empty registry
  (huggingface_hub fetches it once a day for its user agent).

Writes need ``Authorization: Bearer <token>`` with a token given to `HubServer`; private repos also need it
to be read. Every request is recorded in `HubServer.requests` as ``(method, path, authorized)``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

_REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
_API_REPO = re.compile(rf"^/api/models/{_REPO}(?:/revision/(?P<rev>[^/]+))?$")
_TREE = re.compile(rf"^/api/models/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")
_PREUPLOAD = re.compile(rf"^/api/models/{_REPO}/preupload/(?P<rev>[^/]+)$")
_COMMIT = re.compile(rf"^/api/models/{_REPO}/commit/(?P<rev>[^/]+)$")
_RESOLVE = re.compile(rf"^/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


def git_blob_oid(data: bytes) -> str:
    """The git object id of a blob: what the Hub reports as the oid/ETag of a regular (non-LFS) file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_id: str
    private: bool
    created_at: str
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> snapshot (path -> bytes)
    branches: dict[str, str] = field(default_factory=dict)  # branch -> sha
    messages: list[str] = field(default_factory=list)  # commit summaries, oldest first

    def snapshot(self, rev: str) -> tuple[str, dict[str, bytes]] | None:
        sha = self.branches.get(rev, rev)
        return (sha, self.commits[sha]) if sha in self.commits else None


class HubServer:
    """The stand-in Hub, serving on 127.0.0.1 on a free port in a daemon thread.

    >>> with HubServer(tokens={"hf_secret": "alice"}) as hub:
    ...     env = {"HF_ENDPOINT": hub.endpoint}
    """

    def __init__(self, tokens: dict[str, str] | None = None):
        self.tokens = dict(tokens or {})  # token -> user name
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, bool]] = []
        self.lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def files(self, repo_id: str, rev: str = "main") -> dict[str, bytes]:
        """The files of `repo_id` at `rev` (a copy)."""
        found = self.repos[repo_id].snapshot(rev)
        if found is None:
            raise KeyError(f"{repo_id} has no revision {rev!r}")
        return dict(found[1])


def _make_handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "StandInHub/1.0"

        def log_message(self, format, *args):  # noqa: A002 - silence the default stderr log
            pass

        # ---------------------------------------------------------------- plumbing
        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _user(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            return hub.tokens.get(auth[len("Bearer ") :]) if auth.startswith("Bearer ") else None

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            headers = {"Content-Type": "application/json", **(headers or {})}
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, payload, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(payload).encode(), headers)

        def _error(
            self, status: int, message: str, code: str | None = None, extra: dict | None = None
        ) -> None:
            headers = {"X-Error-Message": message}
            if code:
                headers["X-Error-Code"] = code
            headers.update(extra or {})
            self._json(status, {"error": message}, headers)

        def _repo(self, repo_id: str, write: bool = False) -> Repo | None:
            """The repo, or None after answering 401/404 (unknown repo, private without a token, no write token)."""
            user = self._user()
            if write and user is None:
                self._error(401, "Invalid credentials in Authorization header")
                return None
            repo = hub.repos.get(repo_id)
            if repo is None or (repo.private and user is None):
                self._error(404 if user else 401, "Repository not found", "RepoNotFound")
                return None
            return repo

        def _snapshot(
            self, repo_id: str, rev: str, write: bool = False, message: str = "Revision not found"
        ) -> tuple[Repo, str, dict[str, bytes]] | None:
            """(repo, commit sha, files) of `rev`, or None after answering 401/404."""
            repo = self._repo(repo_id, write=write)
            if repo is None:
                return None
            found = repo.snapshot(rev)
            if found is None:
                self._error(404, f"{message}: {rev}", "RevisionNotFound")
                return None
            return repo, found[0], found[1]

        def _dispatch(self) -> None:
            url = urlsplit(self.path)
            path, query = unquote(url.path), parse_qs(url.query)
            with hub.lock:
                hub.requests.append((self.command, self.path, self._user() is not None))
            routes = {
                "GET": [
                    (re.compile(r"^/api/whoami-v2$"), self._whoami),
                    (re.compile(r"^/api/agent-harnesses$"), self._agent_harnesses),
                    (_TREE, self._tree),
                    (_API_REPO, self._info),
                    (_RESOLVE, self._resolve),
                ],
                "HEAD": [(_RESOLVE, self._resolve)],
                "POST": [
                    (re.compile(r"^/api/repos/create$"), self._create),
                    (re.compile(r"^/api/validate-yaml$"), self._validate_yaml),
                    (_PREUPLOAD, self._preupload),
                    (_COMMIT, self._commit),
                ],
            }
            for pattern, handler in routes.get(self.command, []):
                match = pattern.match(path)
                if match:
                    with hub.lock:
                        handler(query=query, **match.groupdict())
                    return
            self._body()
            self._error(404, f"the stand-in Hub does not implement {self.command} {url.path}")

        do_GET = do_HEAD = do_POST = _dispatch

        # ---------------------------------------------------------------- endpoints
        def _whoami(self, query) -> None:
            user = self._user()
            if user is None:
                self._error(401, "Invalid credentials in Authorization header")
            else:
                self._json(200, {"type": "user", "name": user, "orgs": [], "auth": {"type": "access_token"}})

        def _agent_harnesses(self, query) -> None:  # huggingface_hub's best-effort telemetry registry
            self._json(200, {"standardEnvVars": [], "harnesses": {}})

        def _create(self, query) -> None:
            payload = json.loads(self._body() or b"{}")
            user = self._user()
            if user is None:
                self._error(401, "Invalid credentials in Authorization header")
                return
            if payload.get("type") not in (None, "model"):
                self._error(400, "the stand-in Hub only hosts model repos")
                return
            repo_id = f"{payload.get('organization') or user}/{payload['name']}"
            url = f"http://{self.headers['Host']}/{repo_id}"
            if repo_id in hub.repos:
                self._json(409, {"error": "You already created this model repo", "url": url})
                return
            private = bool(payload.get("private")) or payload.get("visibility") == "private"
            now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
            repo = Repo(repo_id, private, now)
            empty = hashlib.sha1(f"init {repo_id}".encode()).hexdigest()
            repo.commits[empty], repo.branches["main"] = {}, empty
            hub.repos[repo_id] = repo
            self._json(200, {"url": url, "name": repo_id, "id": repo_id})

        def _validate_yaml(self, query) -> None:
            self._body()
            self._json(200, {"errors": [], "warnings": []})

        def _preupload(self, repo, rev, query) -> None:
            payload = json.loads(self._body())
            repo_obj = self._repo(repo, write=True)
            if repo_obj is None:
                return
            found = repo_obj.snapshot(rev)
            current = found[1] if found else {}
            files = [
                {
                    "path": f["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": git_blob_oid(current[f["path"]]) if f["path"] in current else None,
                }
                for f in payload["files"]
            ]
            self._json(200, {"files": files, "commitOid": found[0] if found else None})

        def _commit(self, repo, rev, query) -> None:
            lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            found = self._snapshot(repo, rev, write=True)
            if found is None:
                return
            repo_obj, parent, files = found[0], found[1], dict(found[2])
            summary = ""
            for line in lines:
                key, value = line["key"], line["value"]
                if key == "header":
                    summary = value.get("summary", "")
                elif key == "file":
                    if value.get("encoding") != "base64":
                        self._error(400, f"unsupported encoding {value.get('encoding')!r}")
                        return
                    files[value["path"]] = base64.b64decode(value["content"])
                elif key == "deletedFile":
                    if files.pop(value["path"], None) is None:
                        self._error(404, "A file with this name doesn't exist", "EntryNotFound")
                        return
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    files = {p: b for p, b in files.items() if not p.startswith(prefix)}
                else:
                    self._error(400, f"the stand-in Hub accepts only regular uploads, got {key!r}")
                    return
            digest = hashlib.sha1(parent.encode() + summary.encode())
            for p in sorted(files):
                digest.update(p.encode() + b"\0" + git_blob_oid(files[p]).encode())
            sha = digest.hexdigest()
            repo_obj.commits[sha] = files
            repo_obj.messages.append(summary)
            if rev in repo_obj.branches or rev == "main":
                repo_obj.branches[rev] = sha
            url = f"http://{self.headers['Host']}/{repo}/commit/{sha}"
            self._json(200, {"success": True, "commitOid": sha, "commitUrl": url, "pullRequestUrl": None})

        def _info(self, repo, rev, query) -> None:
            found = self._snapshot(repo, rev or "main")
            if found is None:
                return
            repo_obj, sha, files = found
            siblings = [
                {"rfilename": p, "size": len(b), "blobId": git_blob_oid(b)} for p, b in sorted(files.items())
            ]
            self._json(
                200,
                {
                    "_id": repo,
                    "id": repo,
                    "modelId": repo,
                    "author": repo.split("/")[0],
                    "sha": sha,
                    "private": repo_obj.private,
                    "gated": False,
                    "disabled": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": [],
                    "library_name": "transformers",
                    "createdAt": repo_obj.created_at,
                    "lastModified": repo_obj.created_at,
                    "siblings": siblings,
                },
            )

        def _tree(self, repo, rev, path, query) -> None:
            found = self._snapshot(repo, rev)
            if found is None:
                return
            prefix = (path or "").strip("/")
            prefix = prefix + "/" if prefix else ""
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            entries: dict[str, dict] = {}
            for p, data in sorted(found[2].items()):
                if not p.startswith(prefix):
                    continue
                rest = p[len(prefix) :]
                if "/" in rest and not recursive:
                    folder = prefix + rest.split("/")[0]
                    entries[folder] = {"type": "directory", "path": folder, "oid": "0" * 40, "size": 0}
                else:
                    entries[p] = {"type": "file", "path": p, "oid": git_blob_oid(data), "size": len(data)}
            if prefix and not entries:
                self._error(404, f"Entry not found: {path}", "EntryNotFound")
                return
            self._json(200, list(entries.values()))

        def _resolve(self, repo, rev, path, query) -> None:
            found = self._snapshot(repo, rev, message="Invalid rev id")
            if found is None:
                return
            _, sha, files = found
            if path not in files:
                self._error(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": sha})
                return
            data = files[path]
            headers = {
                "Content-Type": "application/octet-stream",
                "ETag": f'"{git_blob_oid(data)}"',
                "X-Repo-Commit": sha,
                "Accept-Ranges": "bytes",
            }
            byte_range = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if byte_range and self.command == "GET":
                start = int(byte_range[1])
                end = int(byte_range[2]) if byte_range[2] else len(data) - 1
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                self._send(206, data[start : end + 1], headers)
                return
            self._send(200, data, headers)

    return Handler


if __name__ == "__main__":  # manual use: python tests/helpers/hub_server.py TOKEN=USER ...
    import sys

    tokens = dict(arg.split("=", 1) for arg in sys.argv[1:])
    server = HubServer(tokens).start()
    print(f"HF_ENDPOINT={server.endpoint}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
