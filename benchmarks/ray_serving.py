"""Serving throughput on Ray Serve: the same app (`serving.ray_deployment`) with 1 replica against 2 (or any
replica counts), each replica holding the same CPUs, on one local Ray, in one run (ratios, never bare times).

`run_replicas` starts a local Ray with as many CPUs as the largest count needs, then for each replica count
deploys the app (replacing the previous deployment), warms every replica up and sends the same requests from the
same number of client threads (`benchmarks.serving.one_round`: each client sends its next request when its previous
one is answered, one sentence each); per count, sentences per second over the round's wall time and the p50 / p95
latency of a request. Every request must be answered, and every reply must equal the first count's reply for the
same sentence.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from .serving import Round, one_round, percentile


def run_replicas(
    build: Callable[[], Any],
    sentences: list[str],
    replicas: tuple[int, ...] = (1, 2),
    *,
    clients: int = 16,
    cpus_per_replica: float = 1.0,
    port: int = 8000,
    pair: tuple[str, str] = ("zh", "en"),
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Round], int]:
    """One `Round` per count of ``replicas`` (mode ``"N replica(s)"``), all of ``sentences`` sent from ``clients``
    threads through the server's own API to Ray's proxy on 127.0.0.1:``port``, and the number of replies that
    differed from the first count's. ``build`` is the picklable function each replica calls to load the models and build the app."""
    import ray
    from ray import serve

    from vanilla_transformer.serving.ray_deployment import deployment_app

    from .serving import format_round

    ray.init(
        num_cpus=math.ceil(max(replicas) * cpus_per_replica), include_dashboard=False, log_to_driver=False
    )
    rounds: list[Round] = []
    first: dict[str, str] = {}
    differ = 0
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        url = f"http://127.0.0.1:{port}"
        for count in replicas:
            application = deployment_app(build, num_replicas=count, num_cpus=cpus_per_replica)
            serve.run(application, name="bench", route_prefix="/")
            # each replica's first requests pay for lazy initialisation
            one_round(url, sentences[: 4 * count], 2 * count, "own", pair)
            wall, latencies, outputs = one_round(url, sentences, clients, "own", pair)
            if not first:
                first = outputs
            differ += sum(first[text] != out for text, out in outputs.items())
            mode = f"{count} replica{'s' if count > 1 else ''}"
            median, p95 = 1000 * statistics.median(latencies), 1000 * percentile(latencies, 0.95)
            rounds.append(Round("own", mode, clients, len(latencies), wall, median, p95))
            if progress is not None:
                progress(format_round(rounds[-1]))
            serve.delete("bench")
    finally:
        serve.shutdown()
        ray.shutdown()
    return rounds, differ


def table(rounds: list[Round]) -> list[str]:
    """A Markdown table: per replica count, sentences/s, latencies and the throughput against the first count."""
    lines = [
        "| replicas | clients | sentences/s | p50 / p95 ms | against the first |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rounds:
        lines.append(
            f"| {r.mode} | {r.clients} | {r.per_second:.2f} | {r.p50_ms:.0f} / {r.p95_ms:.0f} | "
            f"{r.per_second / rounds[0].per_second:.2f}x |"
        )
    return lines
