"""Loading a saved seq2seq model and its tokenizer safely: the loader behind `vanilla-transformer translate`.

User errors (a missing model folder, a folder without config or without safetensors weights, a tokenizer that
was not saved with the model, an unusable device) raise `ValueError` with the bad value and the fix in the
message. What may run and what may be read follow `inference.loading_policy`: no model code of a folder or repo
runs unasked, and weights are only read from safetensors (a folder that has only pickled weights,
``pytorch_model.bin``, is refused, never unpickled). torch and transformers are imported where
used, so that bad input fails in milliseconds.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .loading_policy import REMOTE_CODE_FLAG, from_pretrained_safetensors, remote_code_rule

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


class ModelStandIn(Protocol):
    """What the translation loop (`inference.translate`) reads of a model that is not a PyTorch model: an exported
    engine's `inference.engines.EngineModel` (declared here, so that the loop needs nothing from the engines)."""

    config: Any
    generation_config: Any
    training: bool
    device: Any

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...

    def generate(self, input_ids: Any, attention_mask: Any, **kwargs: Any) -> Any: ...


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
_HUB_ID = re.compile(r"^[\w][\w.-]*(/[\w][\w.-]*)?$")


def check_tokenizer_matches_model(
    model: PreTrainedModel | ModelStandIn, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Raise `ValueError` unless `tokenizer` fits `model`: no more tokens than the model's (source) vocabulary
    and the same pad and eos ids as the model config (ids the tokenizer lacks or the config lacks are skipped).

    A different tokenizer would otherwise give out-of-vocabulary ids or, worse, silently wrong translations."""
    from vanilla_transformer.modeling.pipeline_vanilla_transformer import check_vocabulary

    check_vocabulary(model.config, tokenizer)


def resolve_device(device: str | None = None) -> torch.device:
    """`device` as a torch.device (default: cuda if available, else cpu); `ValueError` if unusable here."""
    import torch

    try:
        resolved = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except RuntimeError as err:
        raise ValueError(f"device={device!r} is invalid ({err}); use cpu, cuda or cuda:N") from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} is invalid: CUDA is not available here; use cpu")
    return resolved


DTYPES = ("auto", "float32", "bfloat16")
# the precisions a saved config.json's dtype may name (transformers writes "dtype"; older releases "torch_dtype")
SAVED_DTYPES = ("float32", "bfloat16", "float16")


def resolve_dtype(
    dtype: str | torch.dtype | None, config: dict, device: torch.device
) -> tuple[torch.dtype, str]:
    """The dtype to load and decode in, and why (words for the log):

    * None (the default): the saved precision, ``config``'s (config.json's) dtype; float32 where it names none;
    * "float32" or "bfloat16" (or the torch dtypes): as asked;
    * "auto": `inference.precision.auto_inference_dtype` on ``device``, a rule of the hardware (bfloat16 on CUDA
      devices with bf16 and on CPUs with AMX-BF16 or AVX512-BF16, float32 elsewhere).

    `ValueError` for another ``dtype`` and for a saved dtype that is not a floating-point precision."""
    import torch

    if dtype is None:
        saved = config.get("dtype") or config.get("torch_dtype") or "float32"
        if saved not in SAVED_DTYPES:
            raise ValueError(
                f"config.json's dtype {saved!r} is not one of {', '.join(SAVED_DTYPES)}: pass --dtype float32 or "
                "--dtype bfloat16"
            )
        return getattr(torch, saved), f"the saved precision (config.json's dtype {saved})"
    if dtype == "auto":
        from .precision import auto_inference_dtype

        return auto_inference_dtype(device)
    if dtype in (torch.float32, torch.bfloat16):
        return dtype, "as asked"
    if isinstance(dtype, str) and dtype in DTYPES:
        return getattr(torch, dtype), f"as asked (dtype {dtype})"
    raise ValueError(f"dtype={dtype!r} is invalid: expected one of {', '.join(DTYPES)} (--dtype)")


def load_model_and_tokenizer(
    name_or_path: str,
    device: str | torch.device | None = None,
    trust_remote_code: bool | None = None,
    attn_implementation: str | None = None,
    dtype: str | torch.dtype | None = None,
    opt_in: str | None = REMOTE_CODE_FLAG,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a seq2seq model and its tokenizer from a local folder or a Hub repo id, in eval mode on `device`
    (default: cuda if available, else cpu). Weights are read from safetensors only; the tokenizer must match
    the model (`check_tokenizer_matches_model`).

    `dtype` is the dtype of the weights and of the computation (`resolve_dtype`): the saved precision by default
    (None; float32 for this project's models), "float32", "bfloat16", or "auto" (bfloat16 where the hardware
    computes bf16, float32 elsewhere; never a timing). The choice and its reason are logged (INFO).

    What may run follows `inference.loading_policy.remote_code_rule`: this project's models (and transformers'
    own) load with the registered classes and no code of the folder or repo runs; a model that needs its own code
    (``auto_map``) loads only with `trust_remote_code` True, from a local folder and a Hub repo alike (None or
    False: refused with a `ValueError` that names ``opt_in``, the caller's flag; None for a caller without one).
    `attn_implementation` goes to ``from_pretrained`` (e.g. "eager" for a model that returns attention weights
    only then)."""
    path = Path(name_or_path).expanduser()
    export_hint = "export one with modeling.save_with_remote_code(model, folder, tokenizer)"
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise ValueError(
                f"{name_or_path!r} has no config.json, so it is not a saved model: {export_hint}"
            )
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{config_path} is not valid JSON ({err}): {export_hint}") from err
        if not any((path / name).is_file() for name in TOKENIZER_FILES):
            raise ValueError(
                f"{name_or_path!r} has no tokenizer ({' or '.join(TOKENIZER_FILES)}): {export_hint}"
            )
        local, source = True, str(path)
    elif path.exists():
        raise ValueError(f"{name_or_path!r} is a file; pass the model folder (the one holding config.json)")
    elif not _HUB_ID.match(name_or_path):
        raise ValueError(f"model folder {name_or_path!r} does not exist: check the path, or {export_hint}")
    else:
        config = hub_config(name_or_path)
        local, source = False, name_or_path

    import torch

    device = device if isinstance(device, torch.device) else resolve_device(device)
    dtype, dtype_reason = resolve_dtype(dtype, config, device)
    from transformers import AutoModelForSeq2SeqLM

    trust_remote_code = remote_code_rule(config, name_or_path, trust_remote_code, opt_in)
    options = {"attn_implementation": attn_implementation} if attn_implementation else {}
    from vanilla_transformer.tokenizer.loading import load_tokenizer

    tokenizer = load_tokenizer(source, trust_remote_code=trust_remote_code)  # before the weights: fails fast
    weights = path / "model.safetensors"
    if local and (wrong := _wrong_shapes(weights, source, trust_remote_code)):
        raise ValueError(
            f"{weights} does not fit its config.json: {'; '.join(wrong[:3])}"
            f"{f' and {len(wrong) - 3} more' if len(wrong) > 3 else ''}; export the model again, or {export_hint}"
        )
    try:
        model = from_pretrained_safetensors(
            AutoModelForSeq2SeqLM,
            source,
            trust_remote_code,
            f"export the model again, or {export_hint}",
            dtype=dtype,
            **options,
        )
    except RuntimeError as err:  # transformers' size-mismatch error, for weights `_wrong_shapes` cannot read
        if "ignore_mismatched_sizes" not in str(err):
            raise
        raise ValueError(
            f"{name_or_path!r} has weights of the wrong shape for its config.json; export the model again, or "
            f"{export_hint}"
        ) from err
    check_tokenizer_matches_model(model, tokenizer)
    # transformers wraps `PreTrainedModel.to` in `functools.wraps(nn.Module.to)`, which pyright reads as the unbound method
    model = model.to(device).eval()  # pyright: ignore[reportArgumentType]
    logger.info("decoding in %s: %s", str(dtype).removeprefix("torch."), dtype_reason)
    return model, tokenizer


def _wrong_shapes(weights: Path, source: str, trust_remote_code: bool) -> list[str]:
    """The tensors of the safetensors file `weights` whose shape differs from the model that the config of
    `source` builds, as "tensor NAME has shape (A, B), the config gives (C, D)" (shapes read from the file header;
    the model is built on the meta device). Empty when they all fit, and when the file or the config does not read: the loader's own
    errors then say why."""
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    from vanilla_transformer.convert.common import source_weight_shapes

    if not weights.is_file():
        return []
    try:
        shapes = source_weight_shapes(weights.parent)
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
        with torch.device("meta"):
            model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception:  # noqa: BLE001 - any failure here is reported by from_pretrained, which runs next
        return []
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    return [
        f"tensor {name} has shape {shape}, the config gives {expected[name]}"
        for name, shape in shapes.items()
        if name in expected and shape != expected[name]
    ]


def hub_config(repo_id: str) -> dict:
    """config.json of a Hub repo (downloaded or from the cache), or `ValueError` saying why it is unavailable."""
    from huggingface_hub import hf_hub_download

    try:
        return json.loads(Path(hf_hub_download(repo_id, "config.json")).read_text(encoding="utf-8"))
    except Exception as err:  # not found, offline and not cached, or unreachable: all mean "no such model"
        raise ValueError(
            f"model {repo_id!r} is neither a local folder nor a loadable Hub repo "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'no details'}); "
            "check the path or repo id (and the network / HF_HUB_OFFLINE)"
        ) from err
