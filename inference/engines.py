"""Translating with an exported model in another engine (CTranslate2, ONNX Runtime) through the same batched loop
as PyTorch (`inference.translate`): empty lines, length sorting, truncation to the model maximum, the length caps
and n-best output behave identically, so outputs can be compared line by line.

`load_engine(engine, folder)` returns ``(model, tokenizer)`` where ``model`` is an `EngineModel`: it has what the
translation loop reads from a PyTorch model (``config``, ``generation_config``, ``device``, ``generate``) and
delegates decoding to the engine's translator (`inference.engine_ct2.CT2Translator`,
`inference.engine_onnx.OnnxTranslator`), whose ``generate_ids`` returns token ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ENGINES = ("torch", "ct2", "onnx")
# the decoding options an engine translator takes; anything else is refused with the engine's name
ENGINE_OPTIONS = ("num_beams", "length_penalty", "max_new_tokens", "num_return_sequences")


class EngineModel:
    """A stand-in for a PyTorch model in `inference.translate`: generation goes to an engine translator, which
    has ``config``, ``generation_config``, ``tokenizer`` and ``generate_ids`` (module docstring)."""

    training = False
    device = "cpu"

    def __init__(self, translator: Any, engine: str):
        self.translator = translator
        self.engine = engine
        self.config = translator.config
        self.generation_config = translator.generation_config

    def eval(self) -> EngineModel:
        return self

    def train(self, mode: bool = True) -> EngineModel:
        return self

    def generate(self, input_ids, attention_mask, **kwargs):
        """Token ids like `generate()`'s: (B * n, T) with the decoder start token first, padded with pad."""
        import torch

        unknown = sorted(k for k, v in kwargs.items() if v is not None and k not in ENGINE_OPTIONS)
        if unknown:
            raise ValueError(
                f"--engine {self.engine} does not support {', '.join(unknown)}; use --engine torch for these options "
                f"(the engines take {', '.join(ENGINE_OPTIONS)})."
            )
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask)]
        options = {k: v for k, v in kwargs.items() if v is not None}
        options.setdefault("num_beams", self.generation_config.num_beams)
        if options["num_beams"] > 1:
            options.setdefault("length_penalty", self.generation_config.length_penalty)
        nbest = self.translator.generate_ids(rows, **options)
        start = self.config.decoder_start_token_id
        flat = [[start, *hyp] for hyps in nbest for hyp in hyps]
        width = max(len(h) for h in flat)
        out = torch.full((len(flat), width), self.config.pad_token_id, dtype=torch.long)
        for row, hyp in enumerate(flat):
            out[row, : len(hyp)] = torch.tensor(hyp, dtype=torch.long)
        return out


def load_engine(
    engine: str,
    folder: str | Path,
    *,
    device: str | None = None,
    trust_remote_code: bool | None = None,
    num_threads: int | None = None,
    dtype: str | None = None,
    batch_size: int = 32,
    num_beams: int | None = None,
):
    """(model, tokenizer) of ``folder`` for ``engine``: "torch" (`inference.load_model_and_tokenizer`, with
    ``device``, ``trust_remote_code``, ``dtype``, ``batch_size`` and ``num_beams``), "ct2" (a
    `vanilla-transformer export --engine ct2` folder) or "onnx" (a `vanilla-transformer export --engine onnx` folder; both on the CPU, in the precision
    they were exported in). Raises
    `ValueError` for an unknown engine, a device or a dtype given to an exported engine or a folder the engine cannot
    load, and `ImportError` (with the pip command) when the engine is not installed."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is not one of {', '.join(ENGINES)}")
    if engine == "torch":
        from .loading import load_model_and_tokenizer

        return load_model_and_tokenizer(
            str(folder),
            device=device,
            trust_remote_code=trust_remote_code,
            dtype=dtype,
            batch_size=batch_size,
            num_beams=num_beams,
        )
    if device is not None:
        raise ValueError(f"--engine {engine} runs on the CPU; leave out --device")
    if dtype is not None:
        raise ValueError(f"--engine {engine} computes in the precision it was exported in; leave out --dtype")
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"--model {str(folder)!r} is not a folder; pass a folder written by `vanilla-transformer export --engine {engine}`"
        )
    if engine == "ct2":
        from .engine_ct2 import CT2Translator as Translator
    else:
        from .engine_onnx import OnnxTranslator as Translator
    translator = Translator(folder, num_threads=num_threads)
    return EngineModel(translator, engine), translator.tokenizer
