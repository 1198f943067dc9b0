"""LoRA fine-tuning (``--lora R``, Hu et al., 2021): low-rank adapters from `peft` on the attention projections (and,
with ``--lora_ffn``, the feed-forward layers) of a trained model, every other weight frozen. The model keeps its
class (`peft.inject_adapter_in_model` changes it in place), so the loop, checkpoints, averaging and validation see
the same model; what is exported is `merged`: the adapters added into the weights they adapt, the model's own
class and state dict again, which loads without `peft`.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import torch

Model = TypeVar("Model", bound=torch.nn.Module)

# the projections of every attention block (self- and cross-attention) and of the feed-forward layers
ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
FFN_PROJECTIONS = ("fc1", "fc2")
ADAPTER_PREFIX = "lora_"


def rank_problem(config: Any, rank: int, ffn: bool = False) -> str | None:
    """What is wrong with LoRA rank ``rank`` for a model of ``config`` (one of ours; None: nothing): a rank above
    the narrowest width of the layers it adapts (d_model for the attention projections, with ``ffn`` the
    feed-forward widths ``*ffn_dim`` too) adapts nothing a full-rank update would not, and allocates rank x width
    values per adapter for it."""
    widths = {"d_model": config.d_model}
    if ffn:
        widths |= {name: value for name, value in vars(config).items() if name.endswith("ffn_dim")}
    name, narrowest = min(widths.items(), key=lambda item: item[1])
    if rank <= narrowest:
        return None
    return (
        f"--lora {rank} is above the width of the layers it adapts ({name}={narrowest}): pass a rank of at most "
        f"{narrowest} (LoRA ranks are usually 4 to 64)"
    )


def add_lora(model: torch.nn.Module, rank: int, ffn: bool = False) -> tuple[int, int]:
    """Put rank-``rank`` LoRA adapters (alpha = 2 * rank, no adapter dropout, B initialised to zero so the model
    computes what it computed before) on ``model``'s attention projections, and its feed-forward layers when
    ``ffn``, in place; freeze every other parameter. Returns (trainable parameters, all parameters). `ValueError`
    when the rank is above the layers' width (`rank_problem`)."""
    from peft import LoraConfig, inject_adapter_in_model

    # a torch Module to the type checker; one of our models (with its config) here
    if (problem := rank_problem(getattr(model, "config"), rank, ffn)) is not None:  # noqa: B009
        raise ValueError(problem)

    targets = ATTENTION_PROJECTIONS + (FFN_PROJECTIONS if ffn else ())
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=list(targets))
    inject_adapter_in_model(config, model)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(ADAPTER_PREFIX in name)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total


def has_lora(model: torch.nn.Module) -> bool:
    """Whether ``model`` carries LoRA adapters (`add_lora`)."""
    return any(ADAPTER_PREFIX in name for name, _ in model.named_parameters())


def merged(model: Model) -> Model:
    """A copy of ``model`` with every LoRA adapter added into the weight it adapts and the adapted layer put back
    in its place: the model's own class and state-dict keys, computing what the adapted model computes (up to float
    rounding). ``model`` itself is unchanged (training may go on); a model without adapters is returned as it is."""
    if not has_lora(model):
        return model
    from peft.tuners.tuners_utils import BaseTunerLayer

    copied = copy.deepcopy(model)
    layers = [(name, module) for name, module in copied.named_modules() if isinstance(module, BaseTunerLayer)]
    for name, layer in layers:
        layer.merge()
        parent, _, leaf = name.rpartition(".")
        setattr(copied.get_submodule(parent), leaf, layer.get_base_layer())
    for parameter in copied.parameters():
        parameter.requires_grad_(True)
    return copied
