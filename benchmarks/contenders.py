"""The contenders of the speed benchmark: transformers' `MarianMTModel` with random weights, ours converted from
it (same architecture, same weights), a CTranslate2 conversion of the same Marian weights when `ctranslate2` is
installed, ours exported to the engines of `ENGINE_COLUMNS`, ours with int8 linear layers (`TORCH_INT8`,
PyTorch's dynamic quantization), and bf16 copies of Marian and ours.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel

from vanilla_transformer.convert.marian import convert_marian_model
from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

from .marian import marian_config

# The benchmark presets: `training.presets`' architecture sizes with this vocabulary size (the output layer
# matters for speed; ``tiny`` keeps the tests fast).
VOCAB_SIZES: dict[str, int] = {"tiny": 97, "small": 8000, "base": 32000}


@dataclass
class Contenders:
    """The models of one preset: Marian, ours converted from it, and optionally a CTranslate2 translator.
    ``hp`` holds the sizes the FLOP and byte models read (`sizes`)."""

    preset: str
    marian: MarianMTModel
    ours: VanillaTransformerForConditionalGeneration
    ct2: object | None = None
    ct2_note: str = ""
    hp: dict = field(default_factory=dict)
    engines: dict[str, object] = field(default_factory=dict)  # deployed exports of ours: name -> translator
    int8: torch.nn.Module | None = None  # ours with int8 linear layers (`TORCH_INT8`)
    engine_notes: list[str] = field(default_factory=list)
    # "marian", "ours" with bf16 weights (decoding)
    bf16: dict[str, torch.nn.Module] = field(default_factory=dict)

    @property
    def pad(self) -> int:
        return self.hp["vocab"] - 1


# the sizes the FLOP and byte models read, by the Marian config field each comes from
SIZE_FIELDS = {
    "d_model": "d_model",
    "encoder_layers": "encoder_layers",
    "decoder_layers": "decoder_layers",
    "heads": "encoder_attention_heads",
    "ffn": "encoder_ffn_dim",
    "vocab": "vocab_size",
}


def sizes(config: MarianConfig) -> dict:
    """The sizes the FLOP and byte models read (`SIZE_FIELDS`) of ``config``."""
    return {name: getattr(config, field) for name, field in SIZE_FIELDS.items()}


def fixed_length(num_beams: int, new_tokens: int, use_cache: bool = True) -> dict:
    """generate() settings for exactly `new_tokens` tokens with `num_beams` beams and no sampling; the beam-search
    settings at their neutral values (generate() would fill unset ones from the model's: beam 4, penalty 0.6)."""
    length = dict(min_new_tokens=new_tokens, max_new_tokens=new_tokens)
    neutral = dict(length_penalty=1.0, early_stopping=False)
    return dict(num_beams=num_beams, do_sample=False, use_cache=use_cache, **length, **neutral)


def generation_config(pad: int, num_beams: int, new_tokens: int, use_cache: bool = True) -> GenerationConfig:
    """Identical decoding settings for every contender: exactly `new_tokens` tokens, pad never generated."""
    ids = dict(decoder_start_token_id=pad, pad_token_id=pad, eos_token_id=0, bos_token_id=None)
    return GenerationConfig(**ids, **fixed_length(num_beams, new_tokens, use_cache), suppress_tokens=[pad])


def build_contenders(
    preset: str,
    seed: int = 0,
    with_ct2: bool = True,
    dropout: float = 0.1,
    with_engines: bool = False,
    new_tokens: int = 32,
    with_bf16: bool = True,
) -> Contenders:
    """Marian with random weights (non-trivial LayerNorms and output bias), ours converted from it, and the
    CTranslate2 conversion when the package is installed. Both PyTorch models use sdpa attention and OPUS-MT's
    special ids (pad and decoder start = the last id, eos 0). `with_engines`: also ours exported to CTranslate2
    fp32 and int8 and to ONNX Runtime fp32 and int8 (`export_engines`), decoding exactly `new_tokens` tokens, and
    ours with int8 linear layers (`quantize_int8`). `with_bf16`: also copies of Marian and ours with bf16
    weights, for the bf16 generation columns."""
    if preset not in VOCAB_SIZES:
        raise ValueError(
            f"Unknown benchmark preset {preset!r}; choose one of {list(VOCAB_SIZES)} (--preset)."
        )
    vocab = VOCAB_SIZES[preset]
    config = marian_config(
        preset,
        vocab,
        dropout,
        pad_token_id=vocab - 1,
        bos_token_id=None,
        decoder_start_token_id=vocab - 1,
        eos_token_id=0,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    marian = MarianMTModel(config).eval()
    with torch.no_grad():
        marian.final_logits_bias.normal_(0, 0.1)
        for module in marian.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.05)
                module.bias.normal_(0.0, 0.05)
    ours = convert_marian_model(marian)  # copies dropout: both train with the same p
    ours.set_attn_implementation("sdpa")
    result = Contenders(preset, marian, ours.eval(), hp=sizes(config))
    if with_bf16:
        # transformers wraps PreTrainedModel.to with functools.wraps, so checkers see an unbound method
        result.bf16 = {
            name: copy.deepcopy(model).to(torch.bfloat16).eval()  # pyright: ignore[reportArgumentType]
            for name, model in (("marian", marian), ("ours", result.ours))
        }
    if with_ct2:
        result.ct2, result.ct2_note = convert_to_ctranslate2(marian)
    if with_engines:
        from vanilla_transformer.modeling.kernels_vanilla_transformer import quantize_int8

        result.engines, result.engine_notes = export_engines(result.ours, new_tokens)
        result.int8 = quantize_int8(result.ours).eval()
    return result


# ours exported, as benchmark columns: column -> (engine of the registry `inference.engines.ENGINES`, export
# options, runtime options); columns with the same engine and export options share one export
ENGINE_COLUMNS: dict[str, tuple[str, dict, dict]] = {
    "ct2_fp32": ("ct2", {}, {}),
    "ct2_int8": ("ct2", {"quantization": "int8"}, {}),
    "onnx": ("onnx", {}, {}),
    "onnx_int8": ("onnx", {}, {"dtype": "int8"}),
}
TORCH_INT8 = "torch_int8"  # the column of ours with int8 linear layers (PyTorch, generate())


def export_engines(
    ours: VanillaTransformerForConditionalGeneration, new_tokens: int
) -> tuple[dict[str, object], list[str]]:
    """Ours exported to every column of `ENGINE_COLUMNS` (CTranslate2 fp32 and int8, ONNX Runtime fp32 and int8),
    each loaded as its engine's runtime (`Engine.runtime_class`) with the column's runtime options, with a
    generation config that decodes exactly `new_tokens` tokens; an engine whose package is missing or whose
    export fails is left out with a note saying why."""
    from vanilla_transformer.export import exporter
    from vanilla_transformer.inference.engines import ENGINES

    model = copy.copy(ours)  # the exported generation config must not change the PyTorch contender's
    model.generation_config = generation_config(ours.config.pad_token_id, 4, new_tokens)
    # every hypothesis has exactly new_tokens tokens: early stopping changes nothing, and CT2Translator needs it
    model.generation_config.early_stopping = True
    tokenizer = word_level_tokenizer(ours.config.vocab_size)
    root = Path(tempfile.mkdtemp(prefix="bench_engines_"))
    threads = torch.get_num_threads()
    engines, notes, folders = {}, [], {}
    for name, (engine, options, runtime) in ENGINE_COLUMNS.items():
        spec = ENGINES[engine]
        key = (engine, tuple(sorted(options.items())))
        try:
            if key not in folders:
                folders[key] = exporter(engine)(model, root / name, tokenizer=tokenizer, **options)
            engines[name] = spec.runtime_class()(folders[key], num_threads=threads, **runtime)
        except ImportError as error:
            notes.append(f"{name}: - ({error}; pip install -e '.[{spec.extra}]')")
        except Exception as error:  # report, never abort the PyTorch benchmark
            notes.append(f"{name}: export failed: {type(error).__name__}: {error}")
    return engines, notes


def convert_to_ctranslate2(marian: MarianMTModel) -> tuple[object | None, str]:
    """A CTranslate2 fp32 translator with `marian`'s weights, or (None, why not).

    CTranslate2's converter reads the vocabulary from a tokenizer in the saved folder; a word-level
    `tokenizers` tokenizer whose tokens are `</s>`, `<unk>`, `t2` ... `<pad>` (pad last, as in OPUS-MT) is
    enough and needs no download."""
    try:
        import ctranslate2
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        return None, "ctranslate2 not installed (pip install ctranslate2)"
    tokenizer = word_level_tokenizer(marian.config.vocab_size)
    root = Path(tempfile.mkdtemp(prefix="bench_ct2_"))
    marian.save_pretrained(root / "marian")
    tokenizer.save_pretrained(root / "marian")
    try:
        TransformersConverter(str(root / "marian")).convert(str(root / "ct2"), force=True)
    except Exception as error:  # report, never abort the PyTorch benchmark
        return None, f"CTranslate2 conversion failed: {type(error).__name__}: {error}"
    translator = ctranslate2.Translator(
        str(root / "ct2"),
        device="cpu",
        compute_type="float32",
        intra_threads=torch.get_num_threads(),
        inter_threads=1,
    )
    return translator, f"CTranslate2 {ctranslate2.__version__} fp32, {torch.get_num_threads()} threads"


def word_level_tokenizer(vocab_size: int):
    """A word-level `tokenizers` tokenizer over `ct2_tokens(vocab_size)` (no download needed)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(ct2_tokens(vocab_size))}
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )


def ct2_tokens(vocab_size: int) -> list[str]:
    """Token strings of id 0 .. vocab_size-1 for the CTranslate2 vocabulary (eos 0, unk 1, pad last)."""
    return ["</s>", "<unk>"] + [f"t{i}" for i in range(2, vocab_size - 1)] + ["<pad>"]
