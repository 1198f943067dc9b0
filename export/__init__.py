"""Export: model cards, pushing an exported model folder to the Hugging Face Hub, and other engines' formats.

Modules:
    model_card   THE model-card code, built with huggingface_hub's ModelCard: `model_card_data` (metadata with
                 the model-index), `card_values` (a training run's facts), `build_model_card` (the card training
                 writes: the ``model_card.md`` template, which words them), `hub_model_card` (the card of a pushed
                 folder without one), `model_card_for_repo`, `engine_folder_card`
    hub          `push_folder` (training state left out unless asked for), `check_exported_folder`,
                 `resolve_token`, `TRAINING_STATE_PATTERNS`
    ct2          `export_ct2`: a CTranslate2 folder (its spec API; fp32, int8, ...), `check_expressible`
    onnx         `export_onnx`: ONNX encoder + decoder graphs for ONNX Runtime
(ct2 and onnx import their engines only when called: `pip install '.[export]'`.) `exporter(engine)` is the
export function the engine registry (`inference.engines.ENGINES`) names for an engine.

The folder itself is written by `modeling.save_with_remote_code`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from vanilla_transformer.inference.engines import engine_spec

from .ct2 import QUANTIZATIONS, check_expressible, export_ct2
from .hub import TRAINING_STATE_PATTERNS, check_exported_folder, push_folder, resolve_token
from .model_card import (
    LICENSE,
    TEMPLATE_FILE,
    CardValues,
    build_model_card,
    card_values,
    hub_model_card,
    language_codes,
    load_template,
    model_card_data,
    model_card_for_repo,
    usage_section,
)
from .onnx import GRAPH_FILES, OPSET, export_onnx

__all__ = [
    "GRAPH_FILES",
    "LICENSE",
    "OPSET",
    "QUANTIZATIONS",
    "TEMPLATE_FILE",
    "TRAINING_STATE_PATTERNS",
    "CardValues",
    "build_model_card",
    "card_values",
    "check_exported_folder",
    "check_expressible",
    "export_ct2",
    "export_onnx",
    "exporter",
    "hub_model_card",
    "language_codes",
    "load_template",
    "model_card_data",
    "model_card_for_repo",
    "push_folder",
    "resolve_token",
    "usage_section",
]


def exporter(engine: str) -> Callable[..., Path]:
    """The export function of exported engine `engine` (`inference.engines.ENGINES[engine].exporter`), called as
    ``exporter(model_folder_or_model, out, tokenizer=None, **options)``; `ValueError` for an unknown engine."""
    module, _, name = engine_spec(engine).exporter.partition(":")
    return getattr(importlib.import_module(module), name)
