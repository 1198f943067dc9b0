"""The loading policy: what may run and what may be read when a model is loaded, one rule for every entry point
(translate, evaluate, serve, demo, plot-attention, the soak study, export and train ``--init_from`` call it here;
docs/reliability.md, "Loading policy", lists them with the test of each).

- **Code.** A config whose ``model_type`` is registered (this project's, registered by importing
  `vanilla_transformer.modeling`, or one of transformers' own) loads with those classes, and no code from the
  folder or Hub repo runs, whatever its ``auto_map`` says. Any other model's own code runs only when the caller asks
  (``trust_remote_code=True``, the command line's ``--trust_remote_code``), for a local folder and a Hub repo alike.
- **Weights.** safetensors only (``use_safetensors=True``): pickled weights (``pytorch_model.bin``) are refused,
  never unpickled. The one opt-in that reads a pickle is ``convert --trust_pickle`` (`convert.common`,
  which travels as remote code and so cannot import this module, states the same rule for converters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from transformers import PreTrainedModel

Model = TypeVar("Model", bound="PreTrainedModel")

REMOTE_CODE_FLAG = "--trust_remote_code"


def _code_references(auto_map: Any) -> list[str]:
    """The "module.Class" references of a config's ``auto_map`` (its values are strings or lists of them)."""
    values = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
    found = {item for value in values for item in (value if isinstance(value, list) else [value]) if item}
    return sorted(str(item) for item in found)


def remote_code_rule(
    config: Any, name: str, trust_remote_code: bool | None, opt_in: str | None = REMOTE_CODE_FLAG
) -> bool:
    """The ``trust_remote_code`` value to pass to transformers for the model ``name`` (a folder or Hub id) whose
    config.json holds ``config``.

    False when its ``model_type`` is registered (see the module docstring): its classes load it and no code of the
    folder or repo runs. True when the model needs its own code (``auto_map``) and the caller asked for it
    (``trust_remote_code=True``). Otherwise `ValueError` naming the model type and the code that would run, and how
    to allow it (``opt_in``, the entry point's flag; None where the entry point never runs a model's own code).
    None and False mean the same: not asked."""
    from transformers import CONFIG_MAPPING

    import vanilla_transformer.modeling  # noqa: F401 - registers this project's model types

    if not isinstance(config, dict):
        raise ValueError(f"{name!r}: config.json holds a {type(config).__name__}, not a JSON object")
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        return False
    if not config.get("auto_map"):
        # no code to run: transformers reports the unknown model type itself
        return False
    if trust_remote_code and opt_in is not None:
        return True
    code = ", ".join(_code_references(config["auto_map"])) or "its auto_map"
    how = (
        f"read that code, then pass {opt_in} (trust_remote_code=True)"
        if opt_in is not None
        else "this command loads only this project's models and transformers' own; convert or re-export it first"
    )
    raise ValueError(
        f"{name!r} holds a {model_type!r} model, which loads only by running its own code ({code}); code from a "
        f"model folder or Hub repo runs only when asked: {how}"
    )


@overload
def from_pretrained_safetensors(
    model_class: type[Model], source: str, trust_remote_code: bool, fix: str, **options: Any
) -> Model: ...


# an auto class (AutoModelForSeq2SeqLM), which builds the class the config names
@overload
def from_pretrained_safetensors(
    model_class: Any, source: str, trust_remote_code: bool, fix: str, **options: Any
) -> PreTrainedModel: ...


def from_pretrained_safetensors(
    model_class: Any, source: str, trust_remote_code: bool, fix: str, **options: Any
) -> PreTrainedModel:
    """``model_class.from_pretrained(source, trust_remote_code=..., use_safetensors=True, **options)``: the
    weights are read from safetensors only. `ValueError` saying what to do (``fix``) for a source without
    safetensors weights (a pickle such as pytorch_model.bin is refused, never unpickled) and for a truncated or
    corrupt model.safetensors; ``trust_remote_code`` is `remote_code_rule`'s answer."""
    from safetensors import SafetensorError

    try:
        return model_class.from_pretrained(
            source, trust_remote_code=trust_remote_code, use_safetensors=True, **options
        )
    except SafetensorError as err:
        raise ValueError(f"{source!r} has a corrupt model.safetensors ({err}); {fix}") from err
    except OSError as err:
        if "safetensors" not in str(err):
            raise
        raise ValueError(
            f"{source!r} has no safetensors weights (model.safetensors); weights are never read from pickle "
            f"files such as pytorch_model.bin: convert them with safetensors, or {fix}"
        ) from err
