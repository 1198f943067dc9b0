"""Serving a trained model: an HTTP translation server with dynamic batching and streaming (`create_app`,
`run_server`; the ``serve`` extra: FastAPI and uvicorn) and a demo page (`serving.demo`; the ``demo`` extra:
Gradio). docs/deploy.md ("Serving", "Demo page") shows both from the command line.

Importing the package needs FastAPI and prometheus-client (``pip install 'vanilla-transformer[serve]'``); torch,
transformers and gradio are imported where used.
"""

from vanilla_transformer.inference.cards import card_examples, card_languages, load_card

from .app import create_app
from .batcher import Batcher
from .continuous import ContinuousBatcher
from .lanes import ServedModel, effective_limits
from .options import Limits, RequestError, StreamRequest, TranslateRequest
from .server import ThreadedServer, load_served, run_server, start_in_thread

__all__ = [
    "Batcher",
    "ContinuousBatcher",
    "Limits",
    "RequestError",
    "ServedModel",
    "StreamRequest",
    "ThreadedServer",
    "TranslateRequest",
    "card_examples",
    "card_languages",
    "create_app",
    "effective_limits",
    "load_card",
    "load_served",
    "run_server",
    "start_in_thread",
]
