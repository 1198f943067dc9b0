"""Serve a model over HTTP: POST /translate (dynamic batching), POST /translate/stream (server-sent events),
GET /health, GET /info; the OpenAPI schema at /docs and /openapi.json. The same server speaks LibreTranslate's,
DeepL's (/v2) and the Hugging Face Inference translation APIs, so Mastodon, Weblate, Discourse and their clients
can point at it (docs/deploy.md); --api_keys makes translations need a key, --rate_limit caps the requests a key
(or a client address) sends a minute, --cors_origins lets browsers call it. GET /metrics serves Prometheus metrics
(requests by API and status, latency, batch sizes, tokens in and out, queue length, the model).

    vanilla-transformer serve --model outputs/default --port 8000
    vanilla-transformer serve --model outputs/default-ct2 --engine ct2 --host 127.0.0.1 --port 8000
    curl -s localhost:8000/translate -H 'content-type: application/json' -d '{"text": "起初神创造天地。"}'
    vanilla-transformer serve --model zh-en=outputs/zh-en --model de-en=outputs/de-en --port 8000

With several --model, each language pair has its own model and batcher, and each API picks the model by its own
language fields (docs/deploy.md, "Drop-in APIs"); /translate by its "source" and "target" fields, needed only when
several models match. The log states each model's load time, warm-up time and weight memory, and their total.

Concurrent requests with the same decoding options are translated together, at most --max_batch_tokens source
tokens x beams at once; each reply equals the same request sent alone. With --engine torch, by default
(--scheduling continuous), sentences join and leave the running batch at every decoding step: a short request
that arrives while long ones decode starts at the next step and is answered as soon as it ends (sampling, seeds,
glossary terms and --shortlist batch by request). With --scheduling request (and with the exported engines), a
batch waits at most --max_wait_ms after its first request arrived and runs until its longest sentence ends. Requests take `vanilla-transformer translate`'s decoding options (JSON fields num_beams,
length_penalty, max_new_tokens, num_return_sequences; do_sample, temperature, top_k, top_p, seed with --engine
torch), checked by the same rules and with the same messages as translate's options. Every count a request can
raise and every wait a connection can impose has a limit (the --max_* and --*_timeout_s options below, shown in
/info). --glossary FILE gives every request of every API terminology to keep (source term<TAB>target term, as
`vanilla-transformer translate --glossary`); a /translate request may add its own in a "glossary" field ({"source
term": "target term"}). --shortlist decodes every batch over the model's vocabulary shortlist (as `vanilla-transformer
translate --shortlist`; streaming decodes over the whole vocabulary). Ctrl-C or SIGTERM stops accepting requests, answers the ones in flight and exits. Needs the serve extra
(pip install 'vanilla-transformer[serve]'). Exit code 2 for bad options or a model that cannot be loaded.

With --ray_replicas N the same app runs as a Ray Serve deployment of N replicas (each loading the models, pinned
to --ray_cpus_per_replica CPUs and --ray_gpus_per_replica GPUs; --ray_max_replicas for autoscaling; the ray extra),
on a local Ray or the cluster of --ray_address, Ray's proxy serving --host:--port on every node; `ray_app` is the
same deployment as a `serve run` target (docs/deploy.md, "Ray Serve"):

    vanilla-transformer serve --model outputs/default --ray_replicas 2 --port 8000
    vanilla-transformer serve --model /shared/model --ray_address auto --ray_replicas 8 --host 0.0.0.0
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from vanilla_transformer.commands.arguments import add_model_arguments, command_parser, path_argument
from vanilla_transformer.inference.engines import ENGINE_NAMES

# each limit of `serving.Limits` is the flag of its name, but max_new_tokens, a request's own option
LIMIT_FLAGS = {"max_new_tokens": "max_new_tokens_limit"}


def _bounded(kind: type, minimum: float, strict: bool) -> Callable[[str], Any]:
    expected = f"a number {'>' if strict else '>='} {minimum:g}" if kind is float else "an integer >= 1"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"{text!r} is invalid: expected {expected}")
        return value

    return parse


def positive(kind: type) -> Callable[[str], Any]:
    """An argparse type: a finite number (of ``kind``) > 0 (an integer >= 1)."""
    return _bounded(kind, 0, strict=True)


def non_negative(kind: type) -> Callable[[str], Any]:
    """An argparse type: a finite number (of ``kind``) >= 0."""
    return _bounded(kind, 0, strict=False)


def parse_args(argv: list[str] | None = None):
    from vanilla_transformer.serving import Limits
    from vanilla_transformer.serving.batcher import SCHEDULING

    parser = command_parser("serve", __doc__)
    add_model_arguments(
        parser,
        "model folder or Hub repo id (an export folder with --engine ct2 / onnx), or SRC-TGT=DIR to name its "
        "language pair; repeat it to serve several pairs (a model given without its pair takes it from its "
        "card's language metadata)",
        repeatable=True,
    )
    parser.add_argument("--engine", choices=ENGINE_NAMES, default="torch", help="default torch")
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="default 8000")
    parser.add_argument(
        "--max_wait_ms", type=non_negative(float), default=10.0, help="longest wait to fill a batch (10)"
    )
    parser.add_argument(
        "--max_batch_tokens", type=positive(int), default=8192, help="source tokens x beams per call"
    )
    parser.add_argument("--no_batching", action="store_true", help="one engine call per request")
    parser.add_argument(
        "--scheduling",
        choices=SCHEDULING,
        default="continuous",
        help="continuous: requests join and leave the running batch at every decoding step (--engine torch); "
        "request: a batch runs until its longest sentence ends (default continuous)",
    )
    parser.add_argument(
        "--glossary",
        default=None,
        type=path_argument("file", text=True),
        metavar="FILE",
        help="TSV of source term<TAB>target term (empty target: do-not-translate) that every request of every API "
        "translates with (constrained beam search, --engine torch; vanilla-transformer translate --help); a "
        "/translate request's own glossary field adds to it",
    )
    parser.add_argument(
        "--shortlist",
        action="store_true",
        help="decode every batch over the model's vocabulary shortlist (vanilla-transformer translate --help; "
        "--engine torch or ct2; streaming decodes over the whole vocabulary)",
    )
    for limit in fields(Limits):
        kind = float if limit.name.endswith("_s") else int
        parser.add_argument(
            f"--{LIMIT_FLAGS.get(limit.name, limit.name)}",
            type=positive(kind),
            default=limit.default,
            help=f"{limit.metadata['help']} (default {limit.default})",
        )
    parser.add_argument(
        "--num_threads",
        type=int,
        default=None,
        help="CPU threads (default: the engine's; with --ray_replicas, --ray_cpus_per_replica)",
    )
    parser.add_argument(
        "--drain_s", type=non_negative(float), default=30.0, help="on shutdown, wait this long for replies"
    )
    parser.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default=None, help="engine torch")
    parser.add_argument(
        "--api_keys",
        metavar="FILE",
        default=None,
        type=path_argument("file", text=True),
        help="a file of API keys, one a line: every API's translations then need one (keys may also come from "
        "the environment variable VANILLA_TRANSFORMER_API_KEYS, separated by commas)",
    )
    parser.add_argument(
        "--rate_limit",
        metavar="N",
        type=positive(int),
        default=None,
        help="at most N requests a minute per API key (per client address without keys), then 429 with "
        "Retry-After in each API's error shape; /languages, /health, /info and /metrics are not limited "
        "(default: no limit)",
    )
    parser.add_argument(
        "--cors_origins",
        nargs="+",
        default=[],
        metavar="ORIGIN",
        help="browser origins allowed to call the server, e.g. https://example.org (* for any; default none)",
    )
    ray = parser.add_argument_group(
        'Ray Serve (the ray extra; docs/deploy.md, "Ray Serve")',
        "with --ray_replicas, the same app runs as a Ray Serve deployment: each replica loads the models itself, "
        "Ray's HTTP proxy serves --host:--port on every node of the cluster",
    )
    ray.add_argument(
        "--ray_replicas",
        type=positive(int),
        default=None,
        metavar="N",
        help="serve with N Ray Serve replicas",
    )
    ray.add_argument(
        "--ray_address",
        default=None,
        help="the Ray cluster to join (auto: the one `ray start` began on this machine; default: a new local Ray)",
    )
    ray.add_argument(
        "--ray_cpus_per_replica",
        type=positive(float),
        default=1.0,
        help="CPUs each replica holds, and its torch threads (default 1)",
    )
    ray.add_argument(
        "--ray_gpus_per_replica",
        type=non_negative(float),
        default=0.0,
        help="GPUs each replica holds (default 0)",
    )
    ray.add_argument(
        "--ray_max_replicas",
        type=positive(int),
        default=None,
        metavar="M",
        help="autoscale between --ray_replicas and M replicas (Ray Serve's autoscaling; default: a fixed count)",
    )
    ray.add_argument(
        "--ray_target_ongoing_requests",
        type=positive(float),
        default=8.0,
        help="with --ray_max_replicas: the requests per replica autoscaling aims at (default 8)",
    )
    ray.add_argument(
        "--ray_max_ongoing_requests",
        type=positive(int),
        default=64,
        help="requests a replica takes at once, which its batcher batches together (default 64)",
    )
    ray.add_argument(
        "--ray_metrics_port",
        type=positive(int),
        default=None,
        metavar="PORT",
        help="each replica also serves its own GET /metrics at PORT + its rank on its node (default: only at "
        "/metrics through the proxy, from one replica per scrape)",
    )
    args = parser.parse_args(argv)
    if args.ray_replicas is not None and args.num_threads is None:
        # a replica's threads: the CPUs Ray holds for it
        args.num_threads = max(1, round(args.ray_cpus_per_replica))
    return args


def server_app(args: argparse.Namespace, api_keys: frozenset[str], glossary: Any) -> Any:
    """The server's app for the parsed options: the models of --model loaded (`serving.server.load_all`) and
    `serving.create_app` over them with the options' limits, keys, rate limit, CORS origins and ``glossary``.
    Raises `ValueError` / `ImportError` for a model that cannot be loaded. Ray Serve's replicas call it too."""
    from vanilla_transformer.inference.glossary import check_terms
    from vanilla_transformer.modeling import position_limit
    from vanilla_transformer.serving import Limits, create_app
    from vanilla_transformer.serving.ratelimit import RateLimiter
    from vanilla_transformer.serving.server import load_all, model_specs

    if args.num_threads is not None and args.engine == "torch":
        import torch

        torch.set_num_threads(args.num_threads)
    specs = model_specs(args.model)
    served = load_all(
        specs,
        args.engine,
        device=args.device,
        dtype=args.dtype,
        trust_remote_code=True if args.trust_remote_code else None,
        num_threads=args.num_threads if args.engine != "torch" else None,
        shortlist=args.shortlist,
    )
    if glossary is not None:
        for model in served:
            check_terms(model.tokenizer, glossary, position_limit(getattr(model.model, "config", None)))
    limits = Limits(**{f.name: getattr(args, LIMIT_FLAGS.get(f.name, f.name)) for f in fields(Limits)})
    if api_keys:
        logging.getLogger(__name__).info("%d API key(s): every API's translations need one", len(api_keys))
    return create_app(
        served,
        limits,
        max_wait_ms=args.max_wait_ms,
        max_batch_tokens=args.max_batch_tokens,
        batching=not args.no_batching,
        scheduling=args.scheduling,
        api_keys=api_keys,
        cors_origins=tuple(args.cors_origins),
        rate_limiter=None if args.rate_limit is None else RateLimiter(args.rate_limit),
        glossary=glossary,
    )


def app_builder(args: argparse.Namespace) -> Callable[[], Any]:
    """A picklable function that builds the server's app (`server_app`) with the API keys (of --api_keys and the
    environment) and the glossary read here, once, so that Ray Serve's replicas on other machines need neither
    file. `ValueError` for a bad keys file or glossary."""
    from vanilla_transformer.inference.engines import check_engine_options
    from vanilla_transformer.inference.glossary import read_glossary
    from vanilla_transformer.serving.keys import load_api_keys

    api_keys = load_api_keys(args.api_keys)
    glossary = read_glossary(args.glossary) if args.glossary is not None else None
    if glossary is not None and args.engine != "torch":
        check_engine_options(args.engine, {"glossary": args.glossary})
    return functools.partial(server_app, args, api_keys, glossary)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        build = app_builder(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.ray_replicas is not None:
        return serve_on_ray(args, build)
    from vanilla_transformer.serving import run_server

    try:
        app = build()
    except (ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    models = ", ".join(args.model)
    print(f"serving {models} (--engine {args.engine}) on http://{args.host}:{args.port}", file=sys.stderr)
    run_server(app, args.host, args.port, drain_s=args.drain_s)
    return 0


# the name of the Ray Serve application that --ray_replicas deploys
RAY_APP_NAME = "vanilla-transformer"


def ray_application(args: argparse.Namespace, build: Callable[[], Any]) -> Any:
    """The Ray Serve application of the parsed options over ``build`` (`serving.ray_deployment.deployment_app`);
    `ValueError` for replica counts that do not fit together."""
    from vanilla_transformer.serving.ray_deployment import deployment_app

    return deployment_app(
        build,
        num_replicas=args.ray_replicas or 1,
        num_cpus=args.ray_cpus_per_replica,
        num_gpus=args.ray_gpus_per_replica,
        max_replicas=args.ray_max_replicas,
        target_ongoing_requests=args.ray_target_ongoing_requests,
        max_ongoing_requests=args.ray_max_ongoing_requests,
        graceful_shutdown_timeout_s=args.drain_s,
        metrics_port=args.ray_metrics_port,
        metrics_host=args.host,
    )


def ray_app(options: dict[str, Any]) -> Any:
    """The target of Ray Serve's ``serve run`` / ``serve deploy`` (import path
    ``vanilla_transformer.commands.serve:ray_app``): ``options`` are this command's options by name (the
    config's ``args``: ``model: DIR`` or a list of them, ``max_wait_ms: 20``, ``rate_limit: 600``,
    ``ray_replicas: 2``, ...; true for a flag), parsed and checked as the command line's; the config file's
    ``deployments`` section overrides the replica count, ``ray_actor_options`` and ``autoscaling_config``."""
    argv: list[str] = []
    for name, value in options.items():
        values = value if isinstance(value, list) else [value]
        if value is True:
            argv.append(f"--{name}")
        elif value is None or value is False:
            continue
        elif name == "model":
            argv += [item for model in values for item in ("--model", str(model))]
        else:
            argv += [f"--{name}", *map(str, values)]
    args = parse_args(argv)
    return ray_application(args, app_builder(args))


def serve_on_ray(args: argparse.Namespace, build: Callable[[], Any]) -> int:
    """Deploy the app on Ray Serve (`ray_application`) on the cluster of --ray_address (a new local Ray without
    it), its HTTP proxy on --host:--port, and serve until Ctrl-C or SIGTERM; then delete the application (each
    replica answers its requests in flight, for up to --drain_s seconds, and translates what it queued)."""
    import signal
    import threading

    from vanilla_transformer.commands.extras import require_extras

    require_extras("vanilla-transformer serve --ray_replicas", "ray")
    import ray
    from ray import serve

    try:
        application = ray_application(args, build)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ray.init(address=args.ray_address, include_dashboard=False, logging_level=logging.WARNING)
    stop = threading.Event()
    for name in (signal.SIGINT, signal.SIGTERM):
        signal.signal(name, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        serve.run(application, name=RAY_APP_NAME, route_prefix="/")
    except RuntimeError as err:
        print(f"error: the replicas did not start: {err}", file=sys.stderr)
        serve.delete(RAY_APP_NAME)
        ray.shutdown()
        return 2
    models = ", ".join(args.model)
    print(
        f"serving {models} (--engine {args.engine}) with Ray Serve on http://{args.host}:{args.port}",
        file=sys.stderr,
    )
    stop.wait()
    # a SIGTERM sent to the whole process group (systemd, `timeout`) also stops the local Ray's own processes,
    # after which deleting would wait forever: give up after the drain
    deleting = threading.Thread(target=serve.delete, args=(RAY_APP_NAME,), daemon=True)
    deleting.start()
    deleting.join(args.drain_s + 30)
    if args.ray_address is None:
        serve.shutdown()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
