"""What the converters (convert_marian.py, convert_gpt2.py, convert_bert.py) share: reading the source folder's
config, the config fields every source maps the same way (`tying_init_and_ids`), loading the renamed weights into our model, and writing the converted folder.

One rule for the files of a source folder: the configs (`config.json`, `generation_config.json`) and the weight
files (any `WEIGHT_SUFFIXES` name: PyTorch, safetensors and their shard indexes, TensorFlow, Flax, ONNX, ...) are
replaced by the conversion; every other file (the tokenizer's) is copied unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from transformers import PretrainedConfig, PreTrainedModel

from .export import save_with_remote_code

REPLACED_FILES = ("config.json", "generation_config.json")
WEIGHT_SUFFIXES = (".bin", ".safetensors", ".h5", ".msgpack", ".ckpt", ".index.json", ".onnx", ".tflite")


def is_replaced(name: str) -> bool:
    """Whether the conversion replaces the source file `name` (a config or weights) instead of copying it."""
    return name in REPLACED_FILES or name.endswith(WEIGHT_SUFFIXES)


def tying_init_and_ids(source: PretrainedConfig, init_std: float, pad_token_id: int | None) -> dict:
    """The fields of our config that every source config gives the same way: output tying as the source's,
    `init_std` for both the embeddings and the linear layers (transformers' models use one std for both), and the
    special ids (`pad_token_id` as given: the sources differ in what a missing pad id means)."""
    return {
        "tie_word_embeddings": bool(source.tie_word_embeddings),
        "init_std": float(init_std),
        "linear_init_std": float(init_std),
        "pad_token_id": pad_token_id,
        "bos_token_id": source.bos_token_id,
        "eos_token_id": source.eos_token_id,
    }


def read_source_config(folder: Path, model_type: str, name: str, expected: str) -> dict:
    """The config.json of the source `folder`, checked to hold a `model_type` model (`name`: its name in
    messages, e.g. "Marian"); `expected` says what to pass (e.g. "the folder of a saved MarianMTModel")."""
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"{folder} has no config.json: pass {expected} (save_pretrained or a downloaded checkpoint)"
        )
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        found = config.get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as error:
        raise ValueError(f"{folder / 'config.json'} is not a valid JSON config: {error}") from error
    if found != model_type:
        raise ValueError(f"{folder} holds a {found!r} model, not a {name} model; pass {expected}")
    return config


def load_converted_weights(
    model: PreTrainedModel, state: dict[str, torch.Tensor], source: str
) -> PreTrainedModel:
    """`model` with the weights `state` (our names; tied weights may be left out), in fp32 and eval mode;
    `ValueError` naming the missing and unexpected names when `state` does not fit (`source` names the model)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = set(model.get_expanded_tied_weights_keys(all_submodels=True))
    missing = [name for name in missing if name not in tied]
    if missing or unexpected:
        raise ValueError(f"{source} conversion mismatch: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model.to(torch.float32).eval()


def write_converted_folder(model: PreTrainedModel, src_dir: Path, out_dir: Path) -> Path:
    """Write the converted `model` with remote code to `out_dir` and copy the other files of `src_dir` (see the
    module docstring). An existing non-empty `out_dir` is refused: a conversion never mixes its files with
    another model's."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ValueError(f"{out_dir} already exists and is not an empty folder; pass a new output folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in src_dir.iterdir():
        if path.is_file() and not is_replaced(path.name):
            shutil.copy(path, out_dir / path.name)
    save_with_remote_code(model, out_dir)
    return out_dir
