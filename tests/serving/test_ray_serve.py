"""The translation server on Ray Serve (`serving.ray_deployment`, deployed through ``serve run``'s target
`commands.serve.ray_app`): two replicas on a local Ray answer (two distinct replica ids and processes), the clients
people run (`libretranslatepy`, the `deepl` SDK) get the replies they get from the single-process server, each
replica serves its own metrics, and a replica killed during a load loses no request (the clients retry what the
proxy answers 500 for) while Ray starts a new one. One Ray for the module: it takes seconds to start."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from helpers.serving import free_port, post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")
pytest.importorskip("ray.serve", reason="the ray extra (in dev): pip install -e '.[dev]'")

# Ray's replicas start, die and restart within these many seconds on a loaded machine
PATIENCE_S = 120.0
# the bounded load during which a replica is killed, from 4 clients
REQUESTS = 48


@pytest.fixture(scope="module")
def zh_en_folder(served_folder, tmp_path_factory):
    from helpers.serving import with_card

    return with_card(served_folder, tmp_path_factory.mktemp("ray") / "tiny-zh-en", ("zh", "en"))


@pytest.fixture(scope="module")
def single(zh_en_folder):
    """The single-process server over the same folder, with the same options."""
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app(zh_en_folder, max_wait_ms=20)) as running:
        yield running.url


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def replicated(zh_en_folder, metrics_port):
    """The URL of Ray Serve's proxy in front of two replicas (1 CPU each) over the folder, with the options and
    limits of `single`, on a local Ray of 2 CPUs started for this module."""
    import ray
    from ray import serve

    from vanilla_transformer.commands.serve import ray_app

    environment = dict(os.environ)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    port = free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        options = {
            "model": str(zh_en_folder),
            "dtype": "float32",
            "max_wait_ms": 20,
            "max_texts": 8,
            "max_request_bytes": 4096,
            "max_new_tokens_limit": 20,
            "ray_replicas": 2,
            "ray_metrics_port": metrics_port,
            "drain_s": 5,
        }
        serve.run(ray_app(options), name="translation", route_prefix="/")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
        # ray.init sets variables of its own in this process
        os.environ.clear()
        os.environ.update(environment)


def replica_of(reply: httpx.Response) -> tuple[str, int]:
    return reply.headers["x-replica"], int(reply.headers["x-replica-pid"])


def replicas_seen(url: str, texts: list[str], until: int, attempts: int = 200) -> set[tuple[str, int]]:
    """The (replica id, pid) of the replies to up to ``attempts`` concurrent pairs of /translate requests, stopping
    once ``until`` distinct ones answered."""
    seen: set[tuple[str, int]] = set()
    with httpx.Client(timeout=60) as client, ThreadPoolExecutor(2) as pool:
        for i in range(attempts):
            pair = texts[i % 10 : i % 10 + 2]
            replies = pool.map(lambda text: client.post(url + "/translate", json={"text": text}), pair)
            seen |= {replica_of(reply) for reply in replies if reply.status_code == 200}
            if len(seen) >= until:
                break
    return seen


def test_two_replicas_answer(replicated, single, served_sources):
    seen = replicas_seen(replicated, served_sources, until=2)
    assert len({replica for replica, _ in seen}) == 2, seen
    assert len({pid for _, pid in seen}) == 2 and os.getpid() not in {pid for _, pid in seen}, seen
    texts = served_sources[:4]
    reply = post(replicated, "/translate", {"text": texts, "num_beams": 3})
    assert reply.json() == post(single, "/translate", {"text": texts, "num_beams": 3}).json()
    health = httpx.get(replicated + "/health", timeout=30)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    # Ray's health check of a replica, through a handle: the app's /health, which passes
    from ray import serve

    assert serve.get_app_handle("translation").check_health.remote().result(timeout_s=60) is None


def test_clients_get_the_single_server_replies(replicated, single, served_sources):
    import deepl
    from libretranslatepy import LibreTranslateAPI

    texts = served_sources[:3]
    libre, libre_single = LibreTranslateAPI(replicated), LibreTranslateAPI(single)
    assert [libre.translate(t, "zh", "en") for t in texts] == [
        libre_single.translate(t, "zh", "en") for t in texts
    ]
    assert libre.languages() == libre_single.languages()
    translator = deepl.Translator("any-key", server_url=replicated)
    reference = deepl.Translator("any-key", server_url=single)
    results = translator.translate_text(texts, source_lang="ZH", target_lang="EN-US")
    expected = reference.translate_text(texts, source_lang="ZH", target_lang="EN-US")
    assert isinstance(results, list) and isinstance(expected, list)
    assert [(r.text, r.detected_source_lang) for r in results] == [
        (r.text, r.detected_source_lang) for r in expected
    ]
    assert [lang.code for lang in translator.get_target_languages()] == ["EN-GB", "EN-US"]


def test_each_replica_serves_its_metrics(replicated, metrics_port, served_sources):
    replicas_seen(replicated, served_sources, until=2)
    counted = []
    for port in (metrics_port, metrics_port + 1):
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        counts = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith('vanilla_transformer_requests_total{api="own",status="200"}')
        ]
        counted.append(sum(counts))
    # both replicas translated some of the requests, and count theirs only
    assert all(count >= 1 for count in counted), counted


def test_a_killed_replica_loses_no_request(replicated, served_sources):
    expected = {
        t: post(replicated, "/translate", {"text": t}).json()["translations"][0] for t in served_sources
    }
    before = replicas_seen(replicated, served_sources, until=2)
    victim = min(pid for _, pid in before)
    answers: dict[int, str] = {}
    retried: list[int] = []

    def send(index: int, client: httpx.Client) -> None:
        text = served_sources[index % len(served_sources)]
        # what a client does with a translation (idempotent): retry an answer the proxy gave for a dead replica
        for _ in range(5):
            try:
                reply = client.post(replicated + "/translate", json={"text": text})
            except httpx.TransportError:
                reply = None
            if reply is not None and reply.status_code == 200:
                answers[index] = reply.json()["translations"][0]
                return
            retried.append(index)
            time.sleep(0.2)

    def load(start: int, client: httpx.Client) -> None:
        for index in range(start, REQUESTS, 4):
            send(index, client)

    with httpx.Client(timeout=60) as client:
        threads = [threading.Thread(target=load, args=(start, client)) for start in range(4)]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        while len(answers) < 10 and time.monotonic() < started + PATIENCE_S:
            time.sleep(0.01)
        os.kill(victim, signal.SIGKILL)
        for thread in threads:
            thread.join(PATIENCE_S)
    assert sorted(answers) == list(range(REQUESTS)), (
        f"unanswered: {sorted(set(range(REQUESTS)) - set(answers))}, retried: {retried}"
    )
    assert all(answers[i] == expected[served_sources[i % len(served_sources)]] for i in answers)
    # Ray replaces the dead replica: a new process answers beside the survivor
    deadline = time.monotonic() + PATIENCE_S
    after: set[tuple[str, int]] = set()
    while time.monotonic() < deadline:
        after = replicas_seen(replicated, served_sources, until=2, attempts=20)
        if len({pid for _, pid in after}) == 2 and victim not in {pid for _, pid in after}:
            break
        time.sleep(0.5)
    pids = {pid for _, pid in after}
    assert len(pids) == 2 and victim not in pids and pids - {pid for _, pid in before}, (before, after)
