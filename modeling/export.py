"""Save a model as a self-contained folder: weights (safetensors), config with `auto_map`, generation
config, the modeling source files (remote code), the translation pipeline and, optionally, the tokenizer.

Such a folder loads in a process where this project is not installed:
`AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)` and
`pipeline("translation", model=folder, trust_remote_code=True)`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from . import pipeline_vanilla_transformer
from .configuration_vanilla_transformer import VanillaTransformerConfig
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration, VanillaTransformerModel

PIPELINE_TASK = "translation"


def custom_pipelines_entry() -> dict:
    """The `custom_pipelines` value of config.json that maps the "translation" task to our pipeline."""
    cls = pipeline_vanilla_transformer.TranslationPipeline
    return {
        PIPELINE_TASK: {
            "impl": f"{Path(pipeline_vanilla_transformer.__file__).stem}.{cls.__name__}",
            "pt": ["AutoModelForSeq2SeqLM"],
            "type": "text",
        }
    }


def save_with_remote_code(
    model: PreTrainedModel,
    folder: str | Path,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> Path:
    """Write `model` (and `tokenizer`) to `folder` together with the code needed to load it anywhere."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not isinstance(model.config, VanillaTransformerConfig):
        raise ValueError(f"expected a vanilla_transformer model, got config type {type(model.config).__name__}")
    VanillaTransformerConfig.register_for_auto_class()
    VanillaTransformerModel.register_for_auto_class("AutoModel")
    VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
    type(model).register_for_auto_class(
        "AutoModelForSeq2SeqLM" if isinstance(model, VanillaTransformerForConditionalGeneration) else "AutoModel"
    )
    module = Path(VanillaTransformerModel.__module__.split(".")[-1]).name
    model.config.auto_map = {
        "AutoConfig": f"configuration_vanilla_transformer.{VanillaTransformerConfig.__name__}",
        "AutoModel": f"{module}.{VanillaTransformerModel.__name__}",
        "AutoModelForSeq2SeqLM": f"{module}.{VanillaTransformerForConditionalGeneration.__name__}",
    }
    model.config.custom_pipelines = custom_pipelines_entry()
    model.save_pretrained(folder)
    shutil.copy(pipeline_vanilla_transformer.__file__, folder / Path(pipeline_vanilla_transformer.__file__).name)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder
