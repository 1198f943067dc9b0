"""Save a model and its tokenizer as one self-contained folder: weights (safetensors), config with `auto_map` and
`custom_pipelines`, generation config, the modeling source files and the translation pipeline (remote code), and
the tokenizer files.

The model's own `save_pretrained` (and so `push_to_hub` and `Trainer`) writes the remote code already; this adds
the tokenizer and the type check. Such a folder loads in a process where this project is not installed:
`AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)` and
`pipeline("translation", model=folder, trust_remote_code=True)`.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from .modeling_vanilla_transformer import VanillaTransformerPreTrainedModel


def save_with_remote_code(
    model: PreTrainedModel, folder: str | os.PathLike, tokenizer: PreTrainedTokenizerBase | None = None
) -> Path:
    """Write `model` (and `tokenizer`) to `folder` together with the code needed to load it anywhere."""
    if not isinstance(model, VanillaTransformerPreTrainedModel):
        raise ValueError(
            f"expected a vanilla_transformer model, got {type(model).__name__}; save other models with their own "
            "save_pretrained"
        )
    folder = Path(folder)
    model.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder
