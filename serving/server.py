"""Loading a model for serving and running the server with uvicorn.

`load_served` loads a model folder (or Hub id) for an engine through `inference.engines.load_engine` and reads
the languages from its model card (`inference.cards.card_languages`). `run_server` serves an app until Ctrl-C or SIGTERM: uvicorn
then stops accepting connections, waits (up to ``drain_s`` seconds) for the requests in flight to be answered, and
the app's shutdown translates whatever is still queued. `start_in_thread` runs the same server in a thread of
the calling process (tests, benchmarks), returning once it accepts connections.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vanilla_transformer.inference.cards import card_languages

from .lanes import ServedModel, check_pairs, language_pair

logger = logging.getLogger(__name__)


def load_served(
    model: str,
    engine: str = "torch",
    *,
    device: str | None = None,
    dtype: str | None = None,
    trust_remote_code: bool | None = None,
    num_threads: int | None = None,
    pair: tuple[str, str] | None = None,
    shortlist: bool = False,
) -> ServedModel:
    """The model to serve: `load_engine(engine, model, ...)` plus its name and its languages: ``pair`` when
    given, else its card's; with ``shortlist``, the model's vocabulary shortlist (`inference.shortlist.load_shortlist`,
    `ValueError` when it has none). Raises `ValueError` / `ImportError` as `load_engine` does."""
    from vanilla_transformer.inference.engines import load_engine

    start = time.perf_counter()
    loaded, tokenizer = load_engine(
        engine,
        model,
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        num_threads=num_threads,
    )
    seconds = time.perf_counter() - start
    languages = list(pair) if pair is not None else card_languages(model)
    served = ServedModel(loaded, tokenizer, engine, model_name(model), languages, seconds)
    if shortlist:
        from vanilla_transformer.inference.shortlist import load_shortlist

        served.shortlist = load_shortlist(model)
        if engine == "onnx":
            raise ValueError(
                "--engine onnx computes the whole output layer and cannot take --shortlist: use --engine torch "
                "or ct2, or leave out --shortlist"
            )
        served.shortlist.check_model(loaded.config)
    return served


# a language pair of `serve --model SRC-TGT=DIR`: two ISO 639 codes
PAIR = re.compile(r"([a-z]{2,3})-([a-z]{2,3})")


def model_specs(values: Sequence[str]) -> list[tuple[tuple[str, str] | None, str]]:
    """The (pair, model) of each ``serve --model`` value: ``DIR`` (or a Hub id) alone, or ``SRC-TGT=DIR``. With
    several values, a model given without its pair takes it from its card (`card_languages`). `ValueError` for a
    bad pair, a pair given twice, or, with several values, a model whose pair is not known (`check_pairs`)."""
    specs: list[tuple[tuple[str, str] | None, str]] = []
    for value in values:
        head, equals, tail = value.partition("=")
        if not equals or (Path(value).exists() and not PAIR.fullmatch(head)):
            specs.append((None, value))
            continue
        found = PAIR.fullmatch(head.lower())
        if found is None or found[1] == found[2] or not tail:
            raise ValueError(
                f"--model {value}: {head!r} is not a language pair: write --model SRC-TGT=DIR with two different "
                "ISO 639 codes, e.g. --model zh-en=outputs/default"
            )
        specs.append(((found[1], found[2]), tail))
    if len(specs) > 1:
        cards = {model: card_languages(model) for _, model in specs}
        specs = [(pair or language_pair(cards[model]), model) for pair, model in specs]
        # a card of more than two languages: a multilingual model, whose pairs its tokenizer gives once loaded
        check_pairs(
            [(model, pair) for pair, model in specs],
            multilingual=[model for pair, model in specs if pair is None and len(cards[model]) > 2],
        )
    return specs


def parameter_bytes(served: ServedModel, folder: str | Path) -> int:
    """The memory of the model's weights: its parameters and buffers (torch), or the weight files it loaded from
    ``folder`` (an exported engine's: ct2's model.bin, onnx's two graphs of its dtype and their external data)."""
    import torch

    from vanilla_transformer.inference.engines import onnx_graph_files

    model = served.model
    if isinstance(model, torch.nn.Module):
        tensors = [*model.parameters(), *model.buffers()]
        return sum(t.numel() * t.element_size() for t in tensors)
    translator = getattr(model, "translator", None)
    names = ("model.bin",)
    if served.engine == "onnx":
        names = onnx_graph_files(getattr(translator, "dtype", "float32"))
    files = [f for f in Path(folder).iterdir() if f.is_file() and f.name.startswith(names)]
    return sum(f.stat().st_size for f in files)


def warm_up(served: ServedModel) -> float:
    """Translate one short text with the model's defaults (at most 8 new tokens), so that the first request does
    not pay for lazy initialisation; the seconds it took."""
    from vanilla_transformer.inference import translate_nbest

    start = time.perf_counter()
    translate_nbest(served.model, served.tokenizer, ["warm up"], batch_size=1, max_new_tokens=8)
    return time.perf_counter() - start


def load_all(
    specs: Sequence[tuple[tuple[str, str] | None, str]], engine: str = "torch", **options: Any
) -> list[ServedModel]:
    """The models of `model_specs` loaded (`load_served` with ``options``) and warmed up (`warm_up`), logging
    for each its load time, warm-up time and weight memory (`parameter_bytes`), then the total."""
    served, total = [], 0
    for pair, model in specs:
        start = time.perf_counter()
        loaded = load_served(model, engine, pair=pair, **options)
        load_s = time.perf_counter() - start
        warm_s = warm_up(loaded)
        size = parameter_bytes(loaded, model)
        total += size
        logger.info(
            "model %s (%s): loaded in %.2f s, warmed up in %.2f s, weights %.1f MiB",
            loaded.name,
            "-".join(loaded.languages) or "no language pair",
            load_s,
            warm_s,
            size / 2**20,
        )
        served.append(loaded)
    logger.info("%d model(s), weights %.1f MiB in all", len(served), total / 2**20)
    return served


def model_name(model: str | Path) -> str:
    """The name the server reports for ``model``: a local folder's own name (never its path, which /info would
    show to anyone who can reach the server), or the Hub id as given."""
    path = Path(model)
    return path.resolve().name if path.exists() else str(model)


def uvicorn_server(app: Any, host: str, port: int, drain_s: float = 30.0):
    """A `uvicorn.Server` for ``app`` on ``host:port`` that drains for up to ``drain_s`` seconds on shutdown and,
    once drained, returns normally after Ctrl-C / SIGTERM (uvicorn itself raises the signal again after its
    shutdown, which ends the process with the signal's status). An idle keep-alive connection is closed after
    the app's ``state.limits.idle_timeout_s`` (`create_app`'s app; uvicorn's 5 s for another app), and the app's
    ``state.closing`` event (if any) is set as the shutdown begins."""
    import uvicorn

    state = getattr(app, "state", None)
    closing = getattr(state, "closing", None)
    limits = getattr(state, "limits", None)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None):
            # requests whose bodies are still arriving are refused now, not at the end of the drain
            if closing is not None:
                closing.set()
            await super().shutdown(sockets)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        # uvicorn types it int, and uses it as an asyncio timeout, which takes a float
        timeout_graceful_shutdown=drain_s,  # pyright: ignore[reportArgumentType]
        timeout_keep_alive=getattr(limits, "idle_timeout_s", 5),
        access_log=False,
    )
    return Server(config)


def run_server(app: Any, host: str = "127.0.0.1", port: int = 8000, drain_s: float = 30.0) -> None:
    """Serve ``app`` until Ctrl-C or SIGTERM, then drain (module docstring)."""
    uvicorn_server(app, host, port, drain_s).run()


class ThreadedServer:
    """A server running in a thread of this process: ``url``, and `stop()` (drains like SIGTERM)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 60.0):
        self.server = uvicorn_server(app, host, port)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {host}:{port} within {timeout_s} s")
            time.sleep(0.02)
        bound = self.server.servers[0].sockets[0].getsockname()
        self.url = f"http://{host}:{bound[1]}"

    def stop(self, timeout_s: float = 60.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)

    def __enter__(self) -> ThreadedServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0) -> ThreadedServer:
    """Start ``app`` on ``host:port`` (0: a free port) in a thread; returns once it accepts connections."""
    return ThreadedServer(app, host, port)
