"""The translation server as a Ray Serve application: the app of `serving.app.create_app` (every API, keys, rate
limit, metrics) behind Ray Serve's HTTP proxy, one copy per replica, each replica loading the model folders itself.

`deployment_app` binds `TranslationServer`, a deployment whose replicas each call a ``build`` function (any
picklable callable that loads the models and returns the app; `vanilla_transformer.commands.serve` passes the
`serve` command's own) and serve what it returns through `serve.ingress`. Each reply carries ``X-Replica`` (the
replica's Ray Serve id) and ``X-Replica-Pid`` (its process). Ray's health checks call the route behind the app's
``GET /health`` (`serving.routes.health`): a replica whose batching worker stopped is replaced. On shutdown (or
when the controller scales a replica down) the replica stops getting requests, answers those in flight for up to
``graceful_shutdown_timeout_s`` seconds, then the app's shutdown translates what is queued and stops.

Metrics: Ray Serve exports its own per-replica metrics (requests, errors, latency, queue, by deployment and replica)
at each Ray node's metrics port. The app's own metrics (`serving.metrics`: tokens, batches, requests by API) are
per replica: ``GET /metrics`` answers from whichever replica the proxy picks, so for scraping, ``metrics_port``
makes each replica also serve its metrics at ``metrics_port + its rank on its node`` (docs/deploy.md, "Ray Serve").
A request that a replica was running when its process died gets 500 from the proxy (requests not yet sent to a
replica go to another one); translations are idempotent, so clients retry (docs/deploy.md).

Needs Ray Serve (``pip install 'vanilla-transformer[ray]'``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ray import serve

# the name of the deployment (in `serve status` and in the replica metrics' labels)
DEPLOYMENT = "TranslationServer"


class ReplicaHeaders:
    """ASGI middleware: every HTTP reply gets ``X-Replica`` (``replica``) and ``X-Replica-Pid`` (this process)."""

    def __init__(self, app: Any, replica: str) -> None:
        self.app = app
        self.headers = [(b"x-replica", replica.encode()), (b"x-replica-pid", str(os.getpid()).encode())]

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def labelled(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, labelled)


@serve.deployment(name=DEPLOYMENT)
@serve.ingress()
class TranslationServer:
    """One replica: the app ``build()`` returns (its models loaded in this replica's process), served by Ray Serve;
    with ``metrics_port``, its metrics also at ``metrics_port + local rank`` on ``metrics_host``."""

    def __init__(
        self, build: Callable[[], Any], metrics_port: int | None = None, metrics_host: str = "127.0.0.1"
    ) -> None:
        self.metrics_server = None
        context = serve.get_replica_context()
        self.replica = context.replica_tag
        # (not `app`: Ray's wrapper has a property of that name)
        self.served = build()
        self.served.add_middleware(ReplicaHeaders, replica=self.replica)
        if metrics_port is not None:
            from prometheus_client import start_http_server

            port = metrics_port + context.rank.local_rank
            registry = self.served.state.server.metrics.registry
            self.metrics_server, _ = start_http_server(port, addr=metrics_host, registry=registry)

    def __serve_build_asgi_app__(self) -> Any:
        return self.served

    async def check_health(self) -> None:
        """Ray's health check: the route behind the app's ``GET /health``; raises (the replica is then replaced) unless 200."""
        from .routes import health

        reply = await health(self.served.state.server)
        if reply.status_code != 200:
            raise RuntimeError(f"replica {self.replica} is unhealthy: {bytes(reply.body).decode()}")

    def __del__(self) -> None:
        # (a replica whose constructor failed has none)
        server = getattr(self, "metrics_server", None)
        if server is not None:
            server.shutdown()


def deployment_app(
    build: Callable[[], Any],
    *,
    num_replicas: int = 1,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    max_replicas: int | None = None,
    target_ongoing_requests: float = 8.0,
    max_ongoing_requests: int = 64,
    graceful_shutdown_timeout_s: float = 30.0,
    health_check_period_s: float = 10.0,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> serve.Application:
    """The Ray Serve application of `TranslationServer` over ``build``: ``num_replicas`` replicas, each holding
    ``num_cpus`` CPUs and ``num_gpus`` GPUs (Ray places them, and sets each replica's CUDA_VISIBLE_DEVICES and
    thread count by them); with ``max_replicas``, Ray Serve's autoscaling between ``num_replicas`` and
    ``max_replicas`` aiming at ``target_ongoing_requests`` requests per replica. A replica takes at most
    ``max_ongoing_requests`` requests at once (what its batcher can batch together); ``metrics_port``: see
    `TranslationServer`. `ValueError` for counts out of range."""
    if num_replicas < 1 or (max_replicas is not None and max_replicas < num_replicas):
        raise ValueError(
            f"replicas {num_replicas}..{max_replicas}: expected at least 1 replica, and a maximum (if any) not "
            "below the minimum"
        )
    scaling: dict[str, Any] = {"num_replicas": num_replicas}
    if max_replicas is not None:
        scaling = {
            "num_replicas": "auto",
            "autoscaling_config": {
                "min_replicas": num_replicas,
                "initial_replicas": num_replicas,
                "max_replicas": max_replicas,
                "target_ongoing_requests": target_ongoing_requests,
            },
        }
    deployment = TranslationServer.options(
        ray_actor_options={"num_cpus": num_cpus, "num_gpus": num_gpus},
        max_ongoing_requests=max_ongoing_requests,
        graceful_shutdown_timeout_s=graceful_shutdown_timeout_s,
        health_check_period_s=health_check_period_s,
        # as the single-process server, no line per request in the log
        logging_config={"enable_access_log": False},
        **scaling,
    )
    return deployment.bind(build, metrics_port, metrics_host)
