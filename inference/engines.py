"""The engine registry: for every engine a model runs in, its exporter, its runtime and what decoding it supports;
and the adapter that drives an engine's runtime through THE batched translation loop (`inference.translate`).

`ENGINES` is the one table of exported engines ("ct2": CTranslate2, "onnx": ONNX Runtime); `ENGINE_NAMES` adds
"torch", the model itself. An `Engine` names its exporter and its runtime class by import path (both need the
export extras, and the exporter lives in `export/`, a layer above this package): `Engine.runtime_class()` imports
the runtime, `vanilla_transformer.export.exporter(name)` the exporter. Every runtime takes the decoding options
`DecodingOptions` per call and refuses, by name, the generation-config settings in its `Engine.refused`.

`load_engine(engine, folder)` returns ``(model, tokenizer)`` where ``model`` is an `EngineModel`: it has what the
translation loop reads from a PyTorch model (``config``, ``generation_config``, ``device``, ``generate``) and
delegates decoding to the engine's runtime (an `EngineTranslator`), whose ``generate_ids`` returns token ids. So
empty lines, length sorting, truncation to the model maximum, the length caps and n-best output behave as with
PyTorch, and outputs can be compared line by line.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from .translate import MAX_LEN_A, MAX_LEN_B, MAX_TOKENS

if TYPE_CHECKING:
    from transformers import GenerationConfig, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class DecodingOptions:
    """The decoding options an engine runtime takes per call (``generate_ids(input_ids, **options)``), with the
    runtimes' defaults: greedy, the folder's generation config's length penalty and length limit (None), one
    hypothesis per source, no forced first token. Every other setting comes from the folder's generation config."""

    num_beams: int = 1
    length_penalty: float | None = None
    max_new_tokens: int | None = None
    num_return_sequences: int = 1
    # a multilingual model's target-language token (`inference.languages.target_options`): the first generated
    # token (CTranslate2: the target prefix)
    forced_bos_token_id: int | None = None


# their names that a user sets (the target-language token comes from `inference.languages`): anything else is
# refused with the engine's name
DECODING_OPTIONS = tuple(f.name for f in fields(DecodingOptions) if f.name != "forced_bos_token_id")


@dataclass(frozen=True)
class Engine:
    """One exported engine (its name is its key in `ENGINES`).

    `runtime`: "module:Class" of the `EngineTranslator` that runs an exported folder; `exporter`:
    "module:function" that writes one (``exporter(model_or_folder, out, tokenizer=..., **export_options)``);
    `refused`: generation-config fields the runtime cannot reproduce, each with the value that means "off"
    (any other value raises `ValueError` naming the field); `quantizations`: the weight types the exporter
    accepts besides float32; `package`: the pip package of the runtime, installed by the `extra` of
    vanilla-transformer (``pip install 'vanilla-transformer[export]'``)."""

    title: str
    runtime: str
    exporter: str
    package: str
    refused: Mapping[str, Any]
    quantizations: tuple[str, ...] = ()
    options: tuple[str, ...] = DECODING_OPTIONS
    extra: str = "export"

    def runtime_class(self) -> type[EngineTranslator]:
        """The runtime class (its module imports the engine's package only when a folder is loaded)."""
        module, _, name = self.runtime.partition(":")
        return getattr(importlib.import_module(module), name)


# the generation-config settings an exported engine cannot reproduce: name -> (the value that means "off", the
# engines that refuse any other value). CTranslate2's repetition penalty scores differently from transformers';
# ONNX Runtime decodes with the processors of `inference.engine_onnx.process_scores` only.
REFUSED_SETTINGS: Mapping[str, tuple[Any, str]] = MappingProxyType(
    {
        "do_sample": (False, "ct2 onnx"),
        "repetition_penalty": (1.0, "ct2 onnx"),
        "encoder_repetition_penalty": (1.0, "ct2 onnx"),
        "no_repeat_ngram_size": (0, "onnx"),
        "encoder_no_repeat_ngram_size": (0, "ct2 onnx"),
        "sequence_bias": (None, "ct2 onnx"),
        "exponential_decay_length_penalty": (None, "ct2 onnx"),
        "renormalize_logits": (False, "ct2 onnx"),
        "force_words_ids": (None, "ct2 onnx"),
        "constraints": (None, "ct2 onnx"),
        "num_beam_groups": (1, "ct2 onnx"),
        "diversity_penalty": (0.0, "ct2 onnx"),
        "forced_bos_token_id": (None, "ct2"),
        "forced_eos_token_id": (None, "ct2"),
        "begin_suppress_tokens": (None, "ct2"),
        "epsilon_cutoff": (0.0, "ct2"),
        "eta_cutoff": (0.0, "ct2"),
        "guidance_scale": (None, "onnx"),
    }
)


def _refused(engine: str) -> Mapping[str, Any]:
    """`Engine.refused` of ``engine``: its rows of `REFUSED_SETTINGS`."""
    return MappingProxyType(
        {name: off for name, (off, engines) in REFUSED_SETTINGS.items() if engine in engines.split()}
    )


ENGINES: Mapping[str, Engine] = MappingProxyType(
    {
        "ct2": Engine(
            title="CTranslate2",
            runtime="vanilla_transformer.inference.engine_ct2:CT2Translator",
            exporter="vanilla_transformer.export.ct2:export_ct2",
            package="ctranslate2",
            quantizations=("int8", "int8_float32", "int16", "float16", "bfloat16"),
            refused=_refused("ct2"),
        ),
        "onnx": Engine(
            title="ONNX Runtime",
            runtime="vanilla_transformer.inference.engine_onnx:OnnxTranslator",
            exporter="vanilla_transformer.export.onnx:export_onnx",
            package="onnxruntime",
            refused=_refused("onnx"),
        ),
    }
)
ENGINE_NAMES = ("torch", *ENGINES)

# the exported folders' file names, read by the runtimes and written by the exporters
CT2_MODEL_CONFIG_FILE = "model_config.json"  # the source model's VanillaTransformerConfig (length limits)
# ONNX: optimum's / transformers.js' layout, the graphs in onnx/, int8 variants beside them with this suffix
ONNX_ENCODER_FILE = "onnx/encoder_model.onnx"
ONNX_DECODER_FILE = "onnx/decoder_model_merged.onnx"
ONNX_GRAPH_FILES = (ONNX_ENCODER_FILE, ONNX_DECODER_FILE)
ONNX_QUANTIZED_SUFFIX = "_quantized"
ONNX_CACHE_BRANCH = "use_cache_branch"  # the merged decoder's bool input: true when the pasts are the cache
# config.json (a MarianConfig) holds the model's own config here
ONNX_MODEL_CONFIG_KEY = "vanilla_transformer_config"
ONNX_DTYPES = ("float32", "int8")  # the graphs an ONNX folder holds: float32 and the int8 variants
# the top-level graphs of the three-file layout, which the runtime recognises and refuses
ONNX_OLD_LAYOUT_FILES = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")


def onnx_graph_files(dtype: str = "float32") -> tuple[str, str]:
    """(encoder, merged decoder) file names of an ONNX folder for `dtype` ("float32" or "int8")."""
    if dtype not in ONNX_DTYPES:
        raise ValueError(
            f"--dtype {dtype} is not an ONNX export's precision: use one of {', '.join(ONNX_DTYPES)}"
        )
    suffix = ONNX_QUANTIZED_SUFFIX if dtype == "int8" else ""
    encoder, decoder = ONNX_GRAPH_FILES
    return encoder.replace(".onnx", f"{suffix}.onnx"), decoder.replace(".onnx", f"{suffix}.onnx")


def engine_spec(name: str) -> Engine:
    """The registry entry of exported engine `name`; `ValueError` naming the engines otherwise."""
    if name not in ENGINES:
        raise ValueError(f"engine={name!r} is not an exported engine: use one of {', '.join(ENGINES)}")
    return ENGINES[name]


def check_engine_options(engine: str, options: Mapping[str, Any]) -> None:
    """Raise `ValueError` naming every option of `options` with a value (not None) that `engine`'s runtime does not
    take per call (`Engine.options`), with the fix."""
    taken = engine_spec(engine).options
    unknown = [f"--{name}" for name, value in options.items() if value is not None and name not in taken]
    if unknown:
        raise ValueError(
            f"--engine {engine} does not take {', '.join(unknown)}; use --engine torch for these options "
            f"(the engines take {', '.join('--' + name for name in taken)})"
        )


def check_refused(engine: str, config: Any, where: str) -> None:
    """Raise `ValueError` for the first setting of the generation config `config` that `engine` refuses
    (`Engine.refused`); `where` says where the setting comes from (a file, "the generation options")."""
    spec = engine_spec(engine)
    for name, off in spec.refused.items():
        value = getattr(config, name, off)
        if value is not None and value != off:
            raise ValueError(
                f"{name}={value!r} in {where} cannot be reproduced by {spec.title}: remove it (set {off!r}) or "
                "translate with --engine torch"
            )


class EngineTranslator:
    """What every engine runtime shares: ``config`` (the model's `VanillaTransformerConfig`), ``generation_config``
    (the folder's decoding defaults), ``tokenizer``, ``generate_ids`` (defined by each runtime) and `translate`.
    `engine` is the runtime's key in `ENGINES`."""

    engine: str = ""
    config: PretrainedConfig
    generation_config: GenerationConfig
    tokenizer: PreTrainedTokenizerBase

    def __init__(self, folder: str | Path, *, num_threads: int | None = None, **options: Any):
        """Load the exported `folder`, computing on `num_threads` CPU threads (None: the runtime's default)."""
        raise NotImplementedError

    def generate_ids(self, input_ids: list[list[int]], **options: Any) -> list[list[list[int]]]:
        raise NotImplementedError

    def generate_with_scores(
        self, input_ids: list[list[int]], **options: Any
    ) -> tuple[list[list[list[int]]], list[list[float]]]:
        """`generate_ids` and each hypothesis' score: with beams, ``sum(log p) / length ** length_penalty``
        (transformers' ``sequences_scores``); greedy, ``sum(log p)``."""
        raise NotImplementedError

    def translate(
        self,
        texts: list[str],
        *,
        num_beams: int | None = None,
        length_penalty: float | None = None,
        max_new_tokens: int | None = None,
        batch_size: int = 32,
        max_len_a: float | None = MAX_LEN_A,
        max_len_b: int = MAX_LEN_B,
        max_tokens: int | None = MAX_TOKENS,
    ) -> list[str]:
        """One translation per text, in input order: `inference.translate.translate` with this engine in place of
        `generate()` (options left out come from the folder's generation config; same truncation, batches and
        caps, the default output limit included)."""
        from .translate import translate

        return translate(
            EngineModel(self, self.engine),
            self.tokenizer,
            texts,
            batch_size=batch_size,
            max_len_a=max_len_a,
            max_len_b=max_len_b,
            max_tokens=max_tokens,
            num_beams=num_beams,
            length_penalty=length_penalty,
            max_new_tokens=max_new_tokens,
        )


class EngineModel:
    """A stand-in for a PyTorch model in `inference.translate`: generation goes to an engine runtime, which has
    ``config``, ``generation_config``, ``tokenizer`` and ``generate_ids`` (module docstring)."""

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

    def generate(
        self, input_ids, attention_mask, *, return_dict_in_generate=False, output_scores=False, **kwargs
    ):
        """Token ids like `generate()`'s: (B * n, T) with the decoder start token first, padded with pad; with
        ``return_dict_in_generate`` and ``output_scores``, transformers' output with ``sequences`` and
        ``sequences_scores`` (`EngineTranslator.generate_with_scores`). ``use_vmap=True`` (`translate_hypotheses`
        with a shortlist) decodes over the vocabulary map of the exported folder."""
        import torch

        # a glossary reaches generate() as constrained_beam_search's phrases (and the word pieces that may not
        # follow one): refused by the user's name for it
        glossary = kwargs.pop("constraints", None)
        # a shortlist reaches an engine as its folder's vocabulary map (CTranslate2's use_vmap)
        vmap = {"use_vmap": True} if kwargs.pop("use_vmap", False) else {}
        check_engine_options(
            self.engine,
            {
                **{
                    k: v
                    for k, v in kwargs.items()
                    if k not in ("custom_generate", "word_pieces", "forced_bos_token_id")
                },
                "glossary": glossary,
            },
        )
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask)]
        options = {k: v for k, v in kwargs.items() if v is not None}
        options.setdefault("num_beams", self.generation_config.num_beams)
        scores = None
        if return_dict_in_generate and output_scores:
            nbest, scores = self.translator.generate_with_scores(rows, **options, **vmap)
        else:
            nbest = self.translator.generate_ids(rows, **options, **vmap)
        start = self.config.decoder_start_token_id
        flat = [[start, *hyp] for hyps in nbest for hyp in hyps]
        width = max(len(h) for h in flat)
        out = torch.full((len(flat), width), self.config.pad_token_id, dtype=torch.long)
        for row, hyp in enumerate(flat):
            out[row, : len(hyp)] = torch.tensor(hyp, dtype=torch.long)
        if scores is None:
            return out
        from transformers.generation.utils import GenerateBeamEncoderDecoderOutput

        flat_scores = torch.tensor([score for hyp_scores in scores for score in hyp_scores])
        # out is a long tensor (transformers annotates torch.LongTensor)
        return GenerateBeamEncoderDecoderOutput(sequences=cast(Any, out), sequences_scores=flat_scores)


def load_engine(
    engine: str,
    folder: str | Path,
    *,
    device: str | None = None,
    trust_remote_code: bool | None = None,
    num_threads: int | None = None,
    dtype: str | None = None,
) -> tuple[PreTrainedModel | EngineModel, PreTrainedTokenizerBase]:
    """(model, tokenizer) of ``folder`` for ``engine``: "torch" (`inference.load_model_and_tokenizer`, with
    ``device``, ``trust_remote_code`` and ``dtype``: None, the saved precision; dtype "int8" is the float32
    model on the CPU with int8 linear layers, `modeling.kernels_vanilla_transformer.quantize_int8`) or an
    exported engine of `ENGINES` (a `vanilla-transformer export --engine ENGINE` folder, on the CPU; ct2 in the
    precision it was exported in, onnx in float32 or, with dtype "int8", its int8 graphs). Raises `ValueError`
    for an unknown engine, a device given to an exported engine, a dtype the engine does not run or a folder the
    engine cannot load, and `ImportError` (with the pip command) when the engine is not installed."""
    if engine not in ENGINE_NAMES:
        raise ValueError(f"engine={engine!r} is not one of {', '.join(ENGINE_NAMES)}")
    if engine == "torch":
        from .loading import load_model_and_tokenizer

        int8 = dtype == "int8"
        if int8 and device not in (None, "cpu"):
            raise ValueError(
                f"--dtype int8 runs on the CPU (PyTorch's dynamic quantization); drop --device {device}"
            )
        model, tokenizer = load_model_and_tokenizer(
            str(folder),
            device="cpu" if int8 else device,
            trust_remote_code=trust_remote_code,
            dtype="float32" if int8 else dtype,
        )
        if int8:
            from vanilla_transformer.modeling.kernels_vanilla_transformer import quantize_int8

            model = quantize_int8(model)
        return model, tokenizer
    if device is not None:
        raise ValueError(f"--engine {engine} runs on the CPU; leave out --device")
    options = {}
    dtype = None if dtype == "auto" else dtype  # auto: the precision of the export
    if engine == "onnx" and dtype is not None:
        if dtype not in ONNX_DTYPES:
            raise ValueError(
                f"--engine onnx runs float32 or int8 graphs: use --dtype {' or --dtype '.join(ONNX_DTYPES)}"
            )
        options["dtype"] = dtype
    elif dtype is not None:
        raise ValueError(
            f"--engine {engine} computes in the precision it was exported in; leave out --dtype "
            "(export --quantization chooses it)"
        )
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(
            f"--model {str(folder)!r} is not a folder; pass a folder written by "
            f"`vanilla-transformer export --engine {engine}`"
        )
    translator = ENGINES[engine].runtime_class()(folder, num_threads=num_threads, **options)
    return EngineModel(translator, engine), translator.tokenizer
