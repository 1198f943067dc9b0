"""Batched translation of many lines with a seq2seq model: the logic behind `scripts/translate.py`.

`translate_lines` returns one string per input line, in input order. Empty (or whitespace-only) lines are
not sent to the model and give empty outputs. Non-empty lines are sorted by token length (longest first),
translated in batches of `batch_size`, and put back in input order; sources longer than the model's maximum
are truncated, with one warning that gives the count. With ``num_return_sequences=n > 1`` each output holds
the n hypotheses, best first, separated by a tab. Whitespace runs in outputs become one space, so an output
never contains a newline or a tab of its own.

User errors (bad option values, a missing model folder, a folder without config or without safetensors
weights, a tokenizer that was not saved with the model) raise `ValueError` with the bad value and the fix in
the message. Model weights are only read from safetensors (``use_safetensors=True``): a folder that has only
pickled weights (``pytorch_model.bin``) is refused, never unpickled.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch and transformers are imported where used, so that bad input fails in milliseconds
    import torch
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
_HUB_ID = re.compile(r"^[\w][\w.-]*(/[\w][\w.-]*)?$")
_NO_LIMIT = 10**6  # tokenizers without a real maximum report model_max_length as ~1e30


def check_generate_options(options: dict[str, Any], defaults: GenerationConfig | None = None) -> None:
    """Raise `ValueError` for out-of-range `generate()` options (those that are not None).

    Checks num_beams >= 1, max_new_tokens >= 1, temperature > 0, 0 < top_p <= 1, top_k >= 0, a finite
    length_penalty, and num_return_sequences against the number of beams (taken from `defaults` when
    `options` has none; the check is skipped if neither gives it)."""
    given = {k: v for k, v in options.items() if v is not None}

    def bad(name: str, expected: str, fix: str) -> ValueError:
        return ValueError(f"{name}={given[name]!r} is invalid: expected {expected}; {fix}")

    if given.get("num_beams", 1) < 1:
        raise bad("num_beams", "an integer >= 1", "use 1 for greedy decoding or e.g. 4 for beam search")
    if given.get("max_new_tokens", 1) < 1:
        raise bad("max_new_tokens", "an integer >= 1", "e.g. 256")
    if "temperature" in given and not given["temperature"] > 0:
        raise bad("temperature", "a number > 0", "use 1.0 to sample from the model's distribution")
    if "top_p" in given and not 0 < given["top_p"] <= 1:
        raise bad("top_p", "0 < top_p <= 1", "use e.g. 0.9, or 1.0 to disable nucleus sampling")
    if given.get("top_k", 0) < 0:
        raise bad("top_k", "an integer >= 0", "use 0 to disable top-k filtering")
    if "length_penalty" in given and not math.isfinite(given["length_penalty"]):
        raise bad("length_penalty", "a finite number", "e.g. 0.6 (1.0 = average log-probability per token)")
    n = given.get("num_return_sequences", 1)
    if n < 1:
        raise bad("num_return_sequences", "an integer >= 1", "use 1 for one translation per line")
    beams = given.get("num_beams", getattr(defaults, "num_beams", None))
    do_sample = given.get("do_sample", getattr(defaults, "do_sample", False))
    if beams is not None and n > 1:
        if beams > 1 and n > beams:
            raise bad(
                "num_return_sequences", f"at most num_beams={beams}", f"raise num_beams to at least {n}"
            )
        if beams == 1 and not do_sample:
            raise bad(
                "num_return_sequences",
                "1 with greedy decoding (num_beams=1, no sampling)",
                f"use num_beams >= {n} or sampling (do_sample)",
            )


def check_tokenizer_matches_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Raise `ValueError` unless `tokenizer` fits `model`: no more tokens than the model's (source) vocabulary
    and the same pad and eos ids as the model config (ids the tokenizer lacks or the config lacks are skipped).

    A different tokenizer would otherwise give out-of-vocabulary ids or, worse, silently wrong translations."""
    from modeling.pipeline_vanilla_transformer import check_vocabulary

    check_vocabulary(model.config, tokenizer)


def max_source_length(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> int | None:
    """Longest source (in tokens, special tokens included) that the model and tokenizer accept, or None."""
    limits = []
    config = model.config
    if getattr(config, "position_encoding", None) != "rope" and getattr(
        config, "max_position_embeddings", None
    ):
        limits.append(int(config.max_position_embeddings))
    if tokenizer.model_max_length and tokenizer.model_max_length < _NO_LIMIT:
        limits.append(int(tokenizer.model_max_length))
    return min(limits) if limits else None


def translate_nbest(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    lines: Sequence[str],
    batch_size: int = 32,
    **generate_kwargs: Any,
) -> list[list[str]]:
    """For each line, its `num_return_sequences` hypotheses (best first); empty lines give empty strings.

    `generate_kwargs` go to `model.generate` (None values are dropped, so the model's generation config
    supplies the defaults)."""
    import torch

    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is invalid: expected an integer >= 1; e.g. 32")
    generate_kwargs = {k: v for k, v in generate_kwargs.items() if v is not None}
    check_generate_options(generate_kwargs, model.generation_config)
    check_tokenizer_matches_model(model, tokenizer)
    n = generate_kwargs.get("num_return_sequences", 1)
    results: list[list[str]] = [[""] * n for _ in lines]
    todo = [i for i, line in enumerate(lines) if line.strip()]
    if not todo:
        return results

    limit = max_source_length(model, tokenizer)
    encoded = tokenizer([lines[i] for i in todo], add_special_tokens=True)["input_ids"]
    too_long = [k for k, ids in enumerate(encoded) if limit is not None and len(ids) > limit]
    if too_long:
        shortened = tokenizer(
            [lines[todo[k]] for k in too_long], add_special_tokens=True, truncation=True, max_length=limit
        )["input_ids"]
        for k, ids in zip(too_long, shortened):
            encoded[k] = ids
        logger.warning(
            "%d of %d input lines were longer than %d tokens (the model maximum) and were truncated",
            len(too_long),
            len(todo),
            limit,
        )
    _cap_max_new_tokens(model, generate_kwargs)

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else model.config.pad_token_id
    order = sorted(range(len(todo)), key=lambda k: len(encoded[k]), reverse=True)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        width = max(len(encoded[k]) for k in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, S)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, S), 1 = real token
        for row, k in enumerate(batch):
            input_ids[row, : len(encoded[k])] = torch.tensor(encoded[k])
            attention_mask[row, : len(encoded[k])] = 1
        with torch.inference_mode():
            output_ids = model.generate(
                input_ids=input_ids.to(model.device),
                attention_mask=attention_mask.to(model.device),
                **generate_kwargs,
            )  # (B * n, T)
        texts = tokenizer.batch_decode(
            output_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        for row, k in enumerate(batch):
            results[todo[k]] = [" ".join(t.split()) for t in texts[row * n : (row + 1) * n]]
    return results


def translate_lines(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    lines: Sequence[str],
    batch_size: int = 32,
    **generate_kwargs: Any,
) -> list[str]:
    """One translation per line, in input order (n-best joined by tabs); see the module docstring."""
    return [
        "\t".join(hyps) for hyps in translate_nbest(model, tokenizer, lines, batch_size, **generate_kwargs)
    ]


def _cap_max_new_tokens(model: PreTrainedModel, generate_kwargs: dict[str, Any]) -> None:
    """Lower max_new_tokens to the decoder's position limit (a longer output would fail mid-generation)."""
    config = model.config
    limit = getattr(config, "max_position_embeddings", None)
    if getattr(config, "position_encoding", None) == "rope" or not limit:
        return
    wanted = generate_kwargs.get("max_new_tokens", model.generation_config.max_new_tokens)
    if wanted is not None and wanted > limit:
        logger.warning("max_new_tokens=%d exceeds max_position_embeddings=%d; using %d", wanted, limit, limit)
        generate_kwargs["max_new_tokens"] = limit


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


def load_model_and_tokenizer(
    name_or_path: str,
    device: str | torch.device | None = None,
    trust_remote_code: bool | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a seq2seq model and its tokenizer from a local folder or a Hub repo id, in eval mode on `device`
    (default: cuda if available, else cpu). Weights are read from safetensors only; the tokenizer must match
    the model (`check_tokenizer_matches_model`).

    When this project's `modeling` package is importable it registers the classes and they are used
    directly. Otherwise a config with `auto_map` needs remote code: `trust_remote_code=None` trusts it for
    a local folder and refuses it for a Hub repo (pass True to allow)."""
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
        config = _hub_config(name_or_path)
        local, source = False, name_or_path

    device = resolve_device(device) if not hasattr(device, "type") else device
    _register_local_classes()
    from transformers import CONFIG_MAPPING, AutoModelForSeq2SeqLM, AutoTokenizer

    needs_remote_code = bool(config.get("auto_map")) and config.get("model_type") not in CONFIG_MAPPING
    if not needs_remote_code:
        trust_remote_code = False
    elif trust_remote_code is None:
        if not local:
            raise ValueError(
                f"the Hub repo {name_or_path!r} runs its own model code; inspect it, then pass "
                "trust_remote_code=True (--trust_remote_code), or install this project to use its classes"
            )
        trust_remote_code = True
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(
            source, trust_remote_code=trust_remote_code, use_safetensors=True
        )
    except OSError as err:
        if "safetensors" not in str(err):
            raise
        raise ValueError(
            f"{name_or_path!r} has no safetensors weights (model.safetensors); weights are never read from "
            f"pickle files such as pytorch_model.bin: convert them with safetensors, or {export_hint}"
        ) from err
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    check_tokenizer_matches_model(model, tokenizer)
    return model.to(device).eval(), tokenizer


def _register_local_classes() -> None:
    """Import this project's `modeling` package if it is installed (importing registers the Auto classes)."""
    try:
        import modeling  # noqa: F401
    except ImportError:
        logger.debug("the modeling package is not importable; models with auto_map need remote code")


def _hub_config(repo_id: str) -> dict:
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
