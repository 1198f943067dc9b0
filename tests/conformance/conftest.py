"""transformers' own common model tests (`ModelTesterMixin`, `ConfigTester`, fetched from the installed release's
source distribution: `upstream.py`) run against our three families: the markers they use, and our classes in
transformers' task tables."""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest

# our stand-ins for upstream modules hold mixins and arguments, no tests of their own (their file names are upstream's)
collect_ignore = ["stand_ins"]

# markers transformers' own conftest registers, used by its test mixins
UPSTREAM_MARKERS = (
    "slow",
    "accelerate_tests",
    "flash_attn_test",
    "flash_attn_3_test",
    "flash_attn_4_test",
    "torch_compile_test",
)


def pytest_configure(config) -> None:
    for name in UPSTREAM_MARKERS:
        config.addinivalue_line(
            "markers", f"{name}: transformers' own marker, used by its common test mixins"
        )


# Upstream's `ModelTesterMixin` knows a model's task by transformers' own class names (`MODEL_FOR_*_MAPPING_NAMES`):
# which labels `_prepare_for_class` adds, that a base model has no loss to train, which heads the loss-alignment
# tests check. Our classes join those tables for the duration of each conformance test.
TASK_NAMES = {
    "MODEL_MAPPING_NAMES": {
        "vanilla_transformer": "VanillaTransformerModel",
        "vanilla_decoder_only": "VanillaDecoderOnlyModel",
        "vanilla_encoder_only": "VanillaEncoderOnlyModel",
    },
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES": {
        "vanilla_transformer": "VanillaTransformerForConditionalGeneration"
    },
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES": {"vanilla_decoder_only": "VanillaDecoderOnlyForCausalLM"},
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES": {"vanilla_encoder_only": "VanillaEncoderOnlyForMaskedLM"},
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": {
        "vanilla_encoder_only": "VanillaEncoderOnlyForSequenceClassification"
    },
}


@pytest.fixture(autouse=True)
def our_classes_in_transformers_task_tables():
    from transformers.models.auto import modeling_auto

    with contextlib.ExitStack() as stack:
        for table, names in TASK_NAMES.items():
            stack.enter_context(mock.patch.dict(getattr(modeling_auto, table), names))
        yield
