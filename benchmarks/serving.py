"""Serving throughput: the translation server with dynamic batching against the same server translating one
request at a time, at several numbers of concurrent clients, in one run (ratios, never bare times).

`run_serving` starts each server in a thread of this process (`serving.start_in_thread`, loopback), and for
every client count C sends the same requests from C client threads, each request one sentence (a clause of the
shipped corpus' Chinese side, so lengths vary), each client sending its next request when its previous one is
answered. Per (mode, C): sentences per second over the wall time of the whole round, and the p50 / p95 latency of
a request. Every reply is compared with the one-at-a-time server's reply for the same sentence (they must be
equal: batching must not change a translation).
"""

from __future__ import annotations

import lzma
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from vanilla_transformer.corpus import DEFAULT_DATA


@dataclass
class Round:
    """One (mode, client count) measurement."""

    mode: str
    clients: int
    sentences: int
    seconds: float
    p50_ms: float
    p95_ms: float

    @property
    def per_second(self) -> float:
        return self.sentences / self.seconds


def corpus_sentences(count: int, tokenizer: Any, max_tokens: int, skip: int = 0) -> list[str]:
    """``count`` distinct clauses (verses cut at commas and full stops) of the shipped corpus' source side with at
    most ``max_tokens`` tokens, from line ``skip`` on."""
    found: list[str] = []
    with lzma.open(DEFAULT_DATA, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f):
            if number < skip:
                continue
            for part in line.split("\t")[0].replace("。", "。\n").replace("，", "，\n").splitlines():
                part = part.strip()
                if len(part) > 3 and part not in found and len(tokenizer(part)["input_ids"]) <= max_tokens:
                    found.append(part)
                    if len(found) == count:
                        return found
    return found


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linear between ranks."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def one_round(url: str, sentences: list[str], clients: int, options: dict) -> tuple[float, list[float], dict]:
    """Send every sentence once from ``clients`` threads; (wall seconds, latencies in s, sentence -> reply)."""
    import httpx

    def client(share: list[str]) -> list[tuple[str, float, str]]:
        done = []
        with httpx.Client(timeout=600) as session:
            for text in share:
                start = time.perf_counter()
                reply = session.post(url + "/translate", json={"text": text, **options})
                reply.raise_for_status()
                done.append((text, time.perf_counter() - start, reply.json()["translations"][0]))
        return done

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = [
            r for share in pool.map(client, [sentences[c::clients] for c in range(clients)]) for r in share
        ]
    wall = time.perf_counter() - start
    return wall, [latency for _, latency, _ in results], {text: out for text, _, out in results}


def run_serving(
    served: Any,
    sentences: list[str],
    clients: tuple[int, ...] = (1, 8, 32),
    options: dict | None = None,
    *,
    max_wait_ms: float = 10.0,
    max_batch_tokens: int = 8192,
    per_client: int = 4,
    progress=None,
) -> tuple[list[Round], int]:
    """The rounds of both modes (one-at-a-time first) for each client count, ``clients * per_client`` sentences
    each (taken from ``sentences``, cycled), and the number of replies that differed between the modes.
    ``served`` is a `serving.ServedModel`; ``progress(line)`` is called after each round."""
    from vanilla_transformer.serving import create_app, start_in_thread

    options = options or {}
    rounds: list[Round] = []
    replies: dict[str, dict[str, str]] = {"one-at-a-time": {}, "dynamic batching": {}}
    for mode, batching in (("one-at-a-time", False), ("dynamic batching", True)):
        app = create_app(
            served, max_wait_ms=max_wait_ms, max_batch_tokens=max_batch_tokens, batching=batching
        )
        with start_in_thread(app) as server:
            one_round(server.url, sentences[:2], 1, options)  # warm-up
            for count in clients:
                batch = [sentences[i % len(sentences)] for i in range(count * per_client)]
                wall, latencies, outputs = one_round(server.url, batch, count, options)
                replies[mode].update(outputs)
                rounds.append(
                    Round(
                        mode,
                        count,
                        len(batch),
                        wall,
                        1000 * statistics.median(latencies),
                        1000 * percentile(latencies, 0.95),
                    )
                )
                if progress is not None:
                    progress(format_round(rounds[-1]))
    differ = sum(replies["dynamic batching"][t] != out for t, out in replies["one-at-a-time"].items())
    return rounds, differ


def format_round(r: Round) -> str:
    return (
        f"{r.mode:<17} {r.clients:>3} clients: {r.per_second:7.2f} sentences/s, p50 {r.p50_ms:8.0f} ms, "
        f"p95 {r.p95_ms:8.0f} ms ({r.sentences} sentences in {r.seconds:.1f} s)"
    )


def table(rounds: list[Round]) -> list[str]:
    """A Markdown table: per client count, both modes' sentences/s and latencies, and the throughput ratio."""
    by = {(r.mode, r.clients): r for r in rounds}
    lines = [
        "| clients | one-at-a-time sent/s | p50 / p95 ms | dynamic batching sent/s | p50 / p95 ms | speed-up |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for count in sorted({r.clients for r in rounds}):
        one, dyn = by[("one-at-a-time", count)], by[("dynamic batching", count)]
        lines.append(
            f"| {count} | {one.per_second:.2f} | {one.p50_ms:.0f} / {one.p95_ms:.0f} | {dyn.per_second:.2f} | "
            f"{dyn.p50_ms:.0f} / {dyn.p95_ms:.0f} | {dyn.per_second / one.per_second:.2f}x |"
        )
    return lines
