"""Serving throughput: the translation server with continuous batching, with request-level batching and
translating one request at a time (`MODES`), at several numbers of concurrent clients, through one or more of its
APIs, and under an open-loop load, in one run (ratios, never bare times).

`run_serving` starts the three servers in threads of this process (`serving.start_in_thread`, loopback), and for
every API and client count C sends the same requests from C client threads to one server, then to the other,
each request one sentence (a clause of the shipped corpus' Chinese side, so lengths vary), each client sending
its next request when its previous one is answered. The APIs (`API_REQUESTS`): the server's own POST
/translate, and LibreTranslate's (``q``, ``source`` ``auto``, ``target``: what Mastodon sends). Per (API, mode,
C): sentences per second over the wall time of the whole round, and the p50 / p95 latency of a request. Every
request must be answered (200, one translation each: none lost), and every reply is compared with the
one-at-a-time server's reply for the same sentence through the same API (they must be equal: batching must not
change a translation).

`run_open_loop` sends requests that arrive by themselves, whatever the server answers (a Poisson process: the
gaps between arrivals drawn from an exponential distribution of mean 1 / rate), to a request-level and a
continuous server, the same arrivals to both, at several rates; a share of them long sentences, the others
short. Per (rate, mode): sentences per second (requests answered over the time from the first arrival to the last
reply) and the p50 / p95 latency of the short and of the long requests, each from its arrival to its reply.
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


# the servers compared: one request per engine call, request-level batching, continuous batching
MODES: dict[str, dict[str, Any]] = {
    "one-at-a-time": {"batching": False},
    "request-level": {"scheduling": "request"},
    "continuous": {"scheduling": "continuous"},
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


def joined_clauses(clauses: list[str], count: int, tokenizer: Any, max_tokens: int) -> list[str]:
    """``clauses`` joined in turn, up to ``count`` at a time, into texts of at most ``max_tokens`` tokens (a clause
    that would pass the limit starts the next text): long requests, paragraphs rather than clauses."""
    texts: list[str] = []
    current: list[str] = []
    for clause in clauses:
        candidate = " ".join([*current, clause])
        if current and (len(current) == count or len(tokenizer(candidate)["input_ids"]) > max_tokens):
            texts.append(" ".join(current))
            current = [clause]
        else:
            current.append(clause)
    if current:
        texts.append(" ".join(current))
    return texts


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
) -> tuple[list[Round], dict[str, int]]:
    """The rounds of the `MODES` (one-at-a-time first, then the same requests batched) for each API of ``apis``
    (`API_REQUESTS`) and client count, ``clients * per_client`` sentences each (taken from ``sentences``,
    cycled), and per batching mode the number of its replies that differ from one-at-a-time serving's (with
    request-level batching, a batch's length limit follows its longest source, ``max_len_a``, so a short
    sentence batched with a long one may decode longer than alone; continuous batching decodes each as alone). ``served`` is a `serving.ServedModel`
    (one whose card names no language pair is served as the pair of the shipped corpus, whose sentences these
    are); ``options`` (decoding options) become its generation config's defaults, so that every API decodes with
    them; ``progress(line)`` is called after each round."""
    served, pair = _served_with_pair(served, options)
    rounds: list[Round] = []
    replies: dict[tuple[str, str], dict[str, str]] = {}
    with ExitStack() as stack:
        # the servers run side by side, so that the rounds of one client count follow each other on the machine
        urls = _servers(stack, served, MODES, max_wait_ms=max_wait_ms, max_batch_tokens=max_batch_tokens)
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
    differ = {
        mode: sum(
            replies[(api, mode)][text] != out
            for api in apis
            for text, out in replies[(api, "one-at-a-time")].items()
        )
        for mode in list(MODES)[1:]
    }
    return rounds, differ


def _servers(
    stack: ExitStack, served: Any, modes: dict[str, dict[str, Any]], **options: Any
) -> dict[str, str]:
    """The URL of a server of ``served`` per mode of ``modes`` (its `create_app` settings, and ``options``),
    started in threads that ``stack`` stops."""
    from vanilla_transformer.serving import create_app, start_in_thread

    return {
        mode: stack.enter_context(start_in_thread(create_app(served, **options, **settings))).url
        for mode, settings in modes.items()
    }


def _served_with_pair(served: Any, options: dict | None) -> tuple[Any, tuple[str, str]]:
    """``served`` with the decoding ``options`` as its generation config's defaults (so that every API decodes
    with them), named the pair of the shipped corpus when its card names none, and that pair."""
    from vanilla_transformer.serving.lanes import language_pair as card_pair

    pair = card_pair(served.languages)
    if pair is None:
        source, target = language_pair(str(DEFAULT_DATA))
        pair = (source or "zh", target or "en")
        served = replace(served, languages=list(pair))
    for name, value in (options or {}).items():
        setattr(served.model.generation_config, name, value)
    return served, pair


def format_round(r: Round) -> str:
    return (
        f"{r.api:<14} {r.mode:<13} {r.clients:>3} clients: {r.per_second:7.2f} sentences/s, "
        f"p50 {r.p50_ms:8.0f} ms, p95 {r.p95_ms:8.0f} ms ({r.sentences} sentences in {r.seconds:.1f} s)"
    )


def table(rounds: list[Round]) -> list[str]:
    """A Markdown table: per API and client count, each mode's sentences/s and latencies, and the throughput of
    request-level and of continuous batching over one-at-a-time serving."""
    by = {(r.api, r.mode, r.clients): r for r in rounds}
    lines = [
        "| API | clients | "
        + " | ".join(f"{mode} sent/s | p50 / p95 ms" for mode in MODES)
        + " | speed-ups |",
        "|---|---:|" + "---:|---:|" * len(MODES) + "---:|",
    ]
    for api in dict.fromkeys(r.api for r in rounds):
        for count in sorted({r.clients for r in rounds if r.api == api}):
            found = [by[(api, mode, count)] for mode in MODES]
            cells = " | ".join(f"{r.per_second:.2f} | {r.p50_ms:.0f} / {r.p95_ms:.0f}" for r in found)
            ups = " / ".join(f"{r.per_second / found[0].per_second:.2f}x" for r in found[1:])
            lines.append(f"| {api} | {count} | {cells} | {ups} |")
    return lines


@dataclass
class OpenRound:
    """One (rate, mode) measurement of the open-loop load: the offered ``rate`` (requests per second), the
    requests answered, the seconds from the first arrival to the last reply, and the latencies (ms) of the short
    and of the long requests."""

    mode: str
    rate: float
    sentences: int
    seconds: float
    short_ms: list[float]
    long_ms: list[float]

    @property
    def per_second(self) -> float:
        return self.sentences / self.seconds


def arrivals(rate: float, count: int, long_share: float, seed: int = 0) -> list[tuple[float, bool]]:
    """``count`` (arrival second, long?) of a Poisson process of ``rate`` requests per second, each request long
    with probability ``long_share`` (seeded: the same arrivals for every mode)."""
    import random

    draw = random.Random(seed)
    at, found = 0.0, []
    for _ in range(count):
        at += draw.expovariate(rate)
        found.append((at, draw.random() < long_share))
    return found


def open_loop_round(
    url: str, requests: list[tuple[float, str, bool]], api: str = "own", pair: tuple[str, str] = ("zh", "en")
) -> tuple[float, list[tuple[bool, float]], dict[str, str]]:
    """Send each (arrival second, sentence, long?) at its arrival, whatever is still unanswered (open loop),
    through ``api``; (seconds from the first arrival to the last reply, (long?, latency in s from its arrival)
    per request, sentence -> reply). Raises `httpx.HTTPStatusError` for a request that is not answered 200."""
    import asyncio

    import httpx

    path, body, translation = API_REQUESTS[api]

    async def load() -> tuple[float, list[tuple[bool, float, str, str]]]:
        loop = asyncio.get_running_loop()
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            start = loop.time()

            async def one(at: float, text: str, long: bool) -> tuple[bool, float, str, str]:
                await asyncio.sleep(max(0.0, start + at - loop.time()))
                reply = await client.post(url + path, json=body(text, pair))
                reply.raise_for_status()
                return long, loop.time() - (start + at), text, translation(reply.json())

            done = await asyncio.gather(*(one(at, text, long) for at, text, long in requests))
            return loop.time() - start - requests[0][0], done

    wall, done = asyncio.run(load())
    return wall, [(long, latency) for long, latency, _, _ in done], {text: out for _, _, text, out in done}


def run_open_loop(
    served: Any,
    short: list[str],
    long: list[str],
    rates: tuple[float, ...],
    count: int,
    options: dict | None = None,
    *,
    long_share: float = 0.25,
    max_wait_ms: float = 10.0,
    max_batch_tokens: int = 8192,
    progress=None,
) -> tuple[list[OpenRound], int]:
    """The open-loop rounds (module docstring) of the request-level and the continuous server over ``served``, at
    each of ``rates``, ``count`` requests each (``short`` and ``long`` sentences, cycled), and the number of
    replies that differed between the two servers; ``options`` and ``served`` as `run_serving` takes them."""
    served, pair = _served_with_pair(served, options)
    modes = {mode: settings for mode, settings in MODES.items() if mode != "one-at-a-time"}
    rounds: list[OpenRound] = []
    replies: dict[str, dict[str, str]] = {}
    with ExitStack() as stack:
        urls = _servers(stack, served, modes, max_wait_ms=max_wait_ms, max_batch_tokens=max_batch_tokens)
        for url in urls.values():
            one_round(url, short[:2], 1, "own", pair)  # warm-up
        for number, rate in enumerate(rates):
            picked = {False: iter(short * count), True: iter(long * count)}
            requests = [
                (at, next(picked[is_long]), is_long)
                for at, is_long in arrivals(rate, count, long_share, number)
            ]
            for mode, url in urls.items():
                wall, latencies, outputs = open_loop_round(url, requests, "own", pair)
                replies.setdefault(mode, {}).update(outputs)
                rounds.append(
                    OpenRound(
                        mode,
                        rate,
                        len(latencies),
                        wall,
                        [1000 * s for is_long, s in latencies if not is_long],
                        [1000 * s for is_long, s in latencies if is_long],
                    )
                )
                if progress is not None:
                    progress(format_open_round(rounds[-1]))
    differ = sum(replies["continuous"][text] != out for text, out in replies["request-level"].items())
    return rounds, differ


def _quantiles(values: list[float]) -> str:
    return f"{percentile(values, 0.5):.0f} / {percentile(values, 0.95):.0f}" if values else "-"


def format_open_round(r: OpenRound) -> str:
    return (
        f"open loop {r.rate:6.2f} requests/s {r.mode + ':':<14} {r.per_second:6.2f} sentences/s, short p50 / p95 "
        f"{_quantiles(r.short_ms)} ms, long {_quantiles(r.long_ms)} ms ({r.sentences} sentences in {r.seconds:.1f} s)"
    )


def open_loop_table(rounds: list[OpenRound]) -> list[str]:
    """A Markdown table: per rate, each mode's sentences/s and the latencies of short and long requests, and the
    p95 of continuous batching's short requests over request-level batching's."""
    by = {(r.rate, r.mode): r for r in rounds}
    lines = [
        "| offered requests/s | request-level sent/s | short p50 / p95 ms | long p50 / p95 ms "
        "| continuous sent/s | short p50 / p95 ms | long p50 / p95 ms | short p95 continuous / request-level |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rate in dict.fromkeys(r.rate for r in rounds):
        request, continuous = by[(rate, "request-level")], by[(rate, "continuous")]
        ratio = percentile(continuous.short_ms, 0.95) / percentile(request.short_ms, 0.95)
        lines.append(
            f"| {rate:g} | "
            + " | ".join(
                f"{r.per_second:.2f} | {_quantiles(r.short_ms)} | {_quantiles(r.long_ms)}"
                for r in (request, continuous)
            )
            + f" | {ratio:.2f} |"
        )
    return lines
