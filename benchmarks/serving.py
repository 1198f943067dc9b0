"""Serving throughput: the translation server with dynamic batching against the same server translating one
request at a time, at several numbers of concurrent clients, through one or more of its APIs, in one run (ratios,
never bare times).

`run_serving` starts both servers in threads of this process (`serving.start_in_thread`, loopback), and for
every API and client count C sends the same requests from C client threads to one server, then to the other,
each request one sentence (a clause of the shipped corpus' Chinese side, so lengths vary), each client sending
its next request when its previous one is answered. The APIs (`API_REQUESTS`): the server's own POST
/translate, and LibreTranslate's (``q``, ``source`` ``auto``, ``target``: what Mastodon sends). Per (API, mode,
C): sentences per second over the wall time of the whole round, and the p50 / p95 latency of a request. Every
request must be answered (200, one translation each: none lost), and every reply is compared with the
one-at-a-time server's reply for the same sentence through the same API (they must be equal: batching must not
change a translation).
"""

from __future__ import annotations

import lzma
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from vanilla_transformer.corpus import DEFAULT_DATA
from vanilla_transformer.corpus.files import language_pair

# how each API asks for one sentence in the languages pair, and where its reply holds the translation: (path,
# body, reply -> text)
API_REQUESTS = {
    "own": ("/translate", lambda text, pair: {"text": text}, lambda r: r["translations"][0]),
    "libretranslate": (
        "/translate",
        lambda text, pair: {"q": text, "source": "auto", "target": pair[1]},
        lambda r: r["translatedText"],
    ),
}


@dataclass
class Round:
    """One (API, mode, client count) measurement."""

    api: str
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


def one_round(
    url: str,
    sentences: list[str],
    clients: int,
    api: str = "own",
    pair: tuple[str, str] = ("zh", "en"),
) -> tuple[float, list[float], dict]:
    """Send every sentence once from ``clients`` threads through ``api`` (`API_REQUESTS`, the languages ``pair``,
    the model's decoding); (wall seconds, latencies in s, sentence -> reply). Raises `httpx.HTTPStatusError` for
    a request that is not answered 200."""
    import httpx

    path, body, translation = API_REQUESTS[api]

    def client(share: list[str]) -> list[tuple[str, float, str]]:
        done = []
        with httpx.Client(timeout=600) as session:
            for text in share:
                start = time.perf_counter()
                reply = session.post(url + path, json=body(text, pair))
                reply.raise_for_status()
                done.append((text, time.perf_counter() - start, translation(reply.json())))
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
    apis: tuple[str, ...] = ("own",),
    progress=None,
) -> tuple[list[Round], int]:
    """The rounds of both modes (one-at-a-time first, then the same requests batched) for each API of ``apis``
    (`API_REQUESTS`) and client count, ``clients * per_client`` sentences each (taken from ``sentences``,
    cycled), and the number of replies that differed between the modes. ``served`` is a `serving.ServedModel`
    (one whose card names no language pair is served as the pair of the shipped corpus, whose sentences these
    are); ``options`` (decoding options) become its generation config's defaults, so that every API decodes with
    them; ``progress(line)`` is called after each round."""
    from vanilla_transformer.serving import create_app, start_in_thread
    from vanilla_transformer.serving.lanes import language_pair as card_pair

    pair = card_pair(served.languages)
    if pair is None:
        source, target = language_pair(str(DEFAULT_DATA))
        pair = (source or "zh", target or "en")
        served = replace(served, languages=list(pair))
    for name, value in (options or {}).items():
        setattr(served.model.generation_config, name, value)
    rounds: list[Round] = []
    replies: dict[tuple[str, str], dict[str, str]] = {}
    modes = {"one-at-a-time": False, "dynamic batching": True}
    with ExitStack() as stack:
        # both servers run side by side, so that the two rounds of a pair follow each other on the machine
        urls = {
            mode: stack.enter_context(
                start_in_thread(
                    create_app(
                        served, max_wait_ms=max_wait_ms, max_batch_tokens=max_batch_tokens, batching=batching
                    )
                )
            ).url
            for mode, batching in modes.items()
        }
        for api in apis:
            for url in urls.values():
                one_round(url, sentences[:2], 1, api, pair)  # warm-up
            for count in clients:
                batch = [sentences[i % len(sentences)] for i in range(count * per_client)]
                for mode, url in urls.items():
                    wall, latencies, outputs = one_round(url, batch, count, api, pair)
                    replies.setdefault((api, mode), {}).update(outputs)
                    rounds.append(
                        Round(
                            api,
                            mode,
                            count,
                            len(latencies),
                            wall,
                            1000 * statistics.median(latencies),
                            1000 * percentile(latencies, 0.95),
                        )
                    )
                    if progress is not None:
                        progress(format_round(rounds[-1]))
    differ = sum(
        replies[(api, "dynamic batching")][text] != out
        for api in apis
        for text, out in replies[(api, "one-at-a-time")].items()
    )
    return rounds, differ


def format_round(r: Round) -> str:
    return (
        f"{r.api:<14} {r.mode:<17} {r.clients:>3} clients: {r.per_second:7.2f} sentences/s, "
        f"p50 {r.p50_ms:8.0f} ms, p95 {r.p95_ms:8.0f} ms ({r.sentences} sentences in {r.seconds:.1f} s)"
    )


def table(rounds: list[Round]) -> list[str]:
    """A Markdown table: per API and client count, both modes' sentences/s and latencies, and the throughput
    ratio."""
    by = {(r.api, r.mode, r.clients): r for r in rounds}
    lines = [
        "| API | clients | one-at-a-time sent/s | p50 / p95 ms | dynamic batching sent/s | p50 / p95 ms "
        "| speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for api in dict.fromkeys(r.api for r in rounds):
        for count in sorted({r.clients for r in rounds if r.api == api}):
            one, dyn = by[(api, "one-at-a-time", count)], by[(api, "dynamic batching", count)]
            lines.append(
                f"| {api} | {count} | {one.per_second:.2f} | {one.p50_ms:.0f} / {one.p95_ms:.0f} | "
                f"{dyn.per_second:.2f} | {dyn.p50_ms:.0f} / {dyn.p95_ms:.0f} | "
                f"{dyn.per_second / one.per_second:.2f}x |"
            )
    return lines
