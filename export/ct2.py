"""Export to CTranslate2: our encoder-decoder as a `ctranslate2.specs.TransformerSpec`, written by CTranslate2's
own `Converter` (validation, quantization, `model.bin` and vocabularies), plus what a deployed folder needs.

The exported folder holds:
    config.json, model.bin, *_vocabulary.json   CTranslate2's model (loads with `ctranslate2.Translator`)
    tokenizer files                             the model's tokenizer (`AutoTokenizer.from_pretrained(folder)`)
    generation_config.json                      the decoding defaults of the model (beam size, length penalty ...)
    model_config.json                           the source model's `VanillaTransformerConfig` (length limits)
    shortlist.safetensors, vmap.txt             with a shortlist: it, and its vocabulary map (``use_vmap``)
    README.md                                   how to run and serve it; the source card's languages

Every architecture option of `VanillaTransformerConfig` that CTranslate2 can express is mapped: post-/pre-LN
(`pre_norm`, with the final LayerNorm of each pre-LN stack), ReLU/GELU/SiLU, sinusoidal positions in any
layout and offset and learned positions (the position table is written out, so the layout is exact), the
embedding scale, the LayerNorm on the embeddings (`layernorm_embedding`),
shared or separate vocabularies, tied or untied output projection, the output bias and the LayerNorm epsilon, and
the attention that gives word alignments (`alignment_layer`, `alignment_heads`: what CTranslate2 returns with
``return_attention=True``).
Rotary positions are refused with a `ValueError` naming the option (CTranslate2 applies rotary embeddings to
left-aligned positions of its own and its seq2seq decoder has no tested rotary path).

Vocabulary: CTranslate2 feeds and returns token strings, so the tokenizer's tokens are written as the vocabulary,
in id order; a model vocabulary larger than the tokenizer gets placeholder tokens for the extra ids (they keep
the ids aligned).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from vanilla_transformer.export.folders import claim_output_folder, write_output_manifest
from vanilla_transformer.export.model_card import engine_folder_card
from vanilla_transformer.inference.engines import CT2_MODEL_CONFIG_FILE, ENGINES
from vanilla_transformer.inference.shortlist import (
    VMAP_FILE,
    Shortlist,
    shortlist_path,
    vmap_lines,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

QUANTIZATIONS = ENGINES["ct2"].quantizations  # the weight types besides float32 (the engine registry's)
PLACEHOLDER = "<ct2_unused_{}>"  # vocabulary entries for model ids the tokenizer does not have
OUTPUT_KIND = "CTranslate2 export"  # the kind in the folder's manifest (export.folders)
_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_new": "GELUTanh", "silu": "SWISH", "swish": "SWISH"}

README = """\
# {name}: CTranslate2 export

A `VanillaTransformerForConditionalGeneration` converted to CTranslate2 {version} ({weights} weights), with
its tokenizer and generation config.

```python
import ctranslate2
from transformers import AutoTokenizer

translator = ctranslate2.Translator("{folder}", device="cpu")
tokenizer = AutoTokenizer.from_pretrained("{folder}")
source = [tokenizer.convert_ids_to_tokens(tokenizer("Hello world").input_ids)]
result = translator.translate_batch(source, beam_size={beams}, length_penalty={length_penalty},
                                    max_input_length=0, max_decoding_length={max_new_tokens},
                                    suppress_sequences={suppress})
print(tokenizer.decode(tokenizer.convert_tokens_to_ids(result[0].hypotheses[0])))
```

With this project installed, `CT2Translator` reads the decoding defaults from generation_config.json and
applies the model's length limits, like the PyTorch translation path:

```python
from vanilla_transformer.inference.engine_ct2 import CT2Translator

print(CT2Translator("{folder}").translate(["Hello world"]))
```

or `vanilla-transformer translate --engine ct2 --model {folder}`.
"""


def export_ct2(
    model_folder_or_model: str | Path | PreTrainedModel,
    out: str | Path,
    quantization: str | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    shortlist: Shortlist | None = None,
) -> Path:
    """Convert a saved model folder (or a loaded model and its `tokenizer`) to a CTranslate2 folder `out`.

    `quantization`: None (float32 weights) or one of `QUANTIZATIONS`. Raises `ValueError` for a missing or
    corrupt model folder, a config option CTranslate2 cannot express, a tokenizer that does not fit the model,
    or an `out` that `export.folders` refuses (a non-empty folder other than a complete earlier CTranslate2
    export, or the model folder or one containing it). Returns `out`.

    With a `shortlist` (default: the model folder's, `inference.shortlist`), the folder also holds it and its
    vocabulary map `vmap.txt` (CTranslate2's ``use_vmap``; `inference.shortlist.vmap_lines`)."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization={quantization!r} is invalid: use one of {', '.join(QUANTIZATIONS)} or None"
        )
    inputs = [model_folder_or_model] if isinstance(model_folder_or_model, (str, Path)) else []
    out = claim_output_folder(out, OUTPUT_KIND, inputs)
    if isinstance(model_folder_or_model, (str, Path)):
        from vanilla_transformer.inference.loading import load_model_and_tokenizer

        _check_saved_config(Path(model_folder_or_model))
        model, folder_tokenizer = load_model_and_tokenizer(
            str(model_folder_or_model), device="cpu", opt_in=None
        )
        tokenizer = tokenizer or folder_tokenizer
    else:
        model = model_folder_or_model
        if tokenizer is None:
            raise ValueError("pass the model's tokenizer (tokenizer=...) when exporting a loaded model")
    check_expressible(model.config)
    from vanilla_transformer.inference.loading import check_tokenizer_matches_model

    check_tokenizer_matches_model(model, tokenizer)
    import ctranslate2

    if shortlist is None and inputs:
        found = shortlist_path(Path(inputs[0]))
        shortlist = Shortlist.from_file(found) if found is not None else None
    if shortlist is not None:
        shortlist.check_model(model.config)
    claim_output_folder(out, OUTPUT_KIND, inputs, clear=True)
    with tempfile.TemporaryDirectory() as scratch:
        vmap = None
        if shortlist is not None:
            vmap = Path(scratch) / VMAP_FILE
            lines = vmap_lines(
                shortlist,
                vocabulary(tokenizer, model.config.vocab_size),
                vocabulary(tokenizer, model.config.decoder_vocab_size, "target"),
            )
            vmap.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        # the folder is now empty or absent: the converter's force=True removes nothing of the user's
        _build_converter()(model, tokenizer).convert(
            str(out), vmap=None if vmap is None else str(vmap), quantization=quantization, force=True
        )
    if shortlist is not None:
        shortlist.save(out)
    tokenizer.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    (out / CT2_MODEL_CONFIG_FILE).write_text(model.config.to_json_string(use_diff=False), encoding="utf-8")
    generation = model.generation_config
    suppress = [[tokenizer.convert_ids_to_tokens(i)] for i in generation.suppress_tokens or []]
    body = README.format(
        name=out.name,
        folder=out,
        version=ctranslate2.__version__,
        weights=quantization or "float32",
        beams=generation.num_beams,
        length_penalty=generation.length_penalty,
        max_new_tokens=generation.max_new_tokens,
        suppress=suppress,
    )
    source = inputs[0] if inputs else model.name_or_path
    (out / "README.md").write_text(engine_folder_card(body, "ct2", source), encoding="utf-8")
    return write_output_manifest(out, OUTPUT_KIND)


def _check_saved_config(folder: Path) -> None:
    """`check_expressible` on a saved folder's config.json before any weight is read (a folder without a
    readable config.json is left to the loader, whose errors say what is missing)."""
    try:
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(saved, dict):
        check_expressible(
            SimpleNamespace(**{"position_encoding": "sinusoidal", "activation_function": "relu", **saved})
        )


def check_expressible(config) -> None:
    """Raise `ValueError` naming the first option of `config` that CTranslate2 cannot express."""
    if getattr(config, "model_type", None) != "vanilla_transformer":
        raise ValueError(
            f"model_type={getattr(config, 'model_type', None)!r} is not supported: export_ct2 converts "
            "VanillaTransformerForConditionalGeneration models (use ct2-transformers-converter for Marian/BART)"
        )
    if config.position_encoding in ("rope", "none"):
        raise ValueError(
            f"position_encoding={config.position_encoding!r} cannot be exported to CTranslate2: its "
            "encoder-decoder models take sinusoidal or learned absolute positions; train with "
            "position_encoding='sinusoidal' or 'learned'"
        )
    if config.activation_function not in _ACTIVATIONS:
        raise ValueError(
            f"activation_function={config.activation_function!r} cannot be exported to CTranslate2: "
            f"use one of {', '.join(_ACTIVATIONS)}"
        )


def vocabulary(tokenizer: PreTrainedTokenizerBase, size: int, side: str = "source") -> list[str]:
    """Token strings of ids 0 .. size-1 of the `side` ("source" or "target") vocabulary: the tokenizer's, then
    placeholders for ids it does not have. A MarianTokenizer with separate vocabularies (`separate_vocabs`) has
    one per side; every other tokenizer one for both."""
    if getattr(tokenizer, "separate_vocabs", False):
        # MarianTokenizer: `encoder` is the source vocabulary (token -> id), `decoder` the target's (id -> token)
        encoder, decoder = cast(dict[str, int], tokenizer.encoder), cast(dict[int, str], tokenizer.decoder)
        table = {i: token for token, i in encoder.items()} if side == "source" else decoder
        # a gap in the ids is a None, which the check below refuses
        tokens = cast(list[str], [table.get(i) for i in range(min(size, len(table)))])
    else:
        # a list of ids gives a list of tokens (transformers types the result for one id or many)
        tokens = cast(list[str], tokenizer.convert_ids_to_tokens(list(range(min(size, len(tokenizer))))))
    tokens += [PLACEHOLDER.format(i) for i in range(len(tokens), size)]
    duplicates = sorted({t for t in tokens if tokens.count(t) > 1}) if len(set(tokens)) != len(tokens) else []
    if duplicates or None in tokens:
        raise ValueError(
            f"the tokenizer maps several ids to the token strings {duplicates[:5]} (or has gaps in its ids); "
            "CTranslate2 identifies tokens by their strings: export with a tokenizer whose ids 0..N-1 have "
            "distinct tokens"
        )
    return tokens


def _build_converter():
    """The converter class (and its loader), built on CTranslate2's base classes (imported only when exporting)."""
    from ctranslate2.converters import utils
    from ctranslate2.converters.converter import Converter
    from ctranslate2.converters.transformers import ModelLoader
    from ctranslate2.specs import common_spec, transformer_spec

    class VanillaTransformerLoader(ModelLoader):
        """Our model -> `TransformerSpec`, with CTranslate2's helpers for linear, LayerNorm and embedding."""

        def get_model_spec(self, model):
            config = model.config
            activation = getattr(common_spec.Activation, _ACTIVATIONS[config.activation_function])
            encoder = transformer_spec.TransformerEncoderSpec(
                config.encoder_layers,
                config.encoder_attention_heads,
                pre_norm=config.normalize_before,
                activation=activation,
                layernorm_embedding=config.layernorm_embedding,
            )
            decoder = transformer_spec.TransformerDecoderSpec(
                config.decoder_layers,
                config.decoder_attention_heads,
                pre_norm=config.normalize_before,
                activation=activation,
                layernorm_embedding=config.layernorm_embedding,
                alignment_layer=config.alignment_layer_index,
                alignment_heads=config.alignment_heads or config.decoder_attention_heads,
            )
            spec = transformer_spec.TransformerSpec(encoder, decoder)
            self.set_stack(encoder, model.model.encoder, encoder.embeddings[0])
            self.set_stack(decoder, model.model.decoder, decoder.embeddings)
            for layer_spec, layer in zip(encoder.layer, model.model.encoder.layers):
                self.set_attention(
                    layer_spec.self_attention, layer.self_attn, layer.self_attn_layer_norm, True
                )
                self.set_ffn(layer_spec.ffn, layer)
            for layer_spec, layer in zip(decoder.layer, model.model.decoder.layers):
                self.set_attention(
                    layer_spec.self_attention, layer.self_attn, layer.self_attn_layer_norm, True
                )
                self.set_attention(
                    layer_spec.attention, layer.encoder_attn, layer.encoder_attn_layer_norm, False
                )
                self.set_ffn(layer_spec.ffn, layer)
            self.set_linear(decoder.projection, model.lm_head)
            if model.final_logits_bias is not None:
                decoder.projection.bias = model.final_logits_bias
            return spec

        def set_stack(self, spec, stack, embeddings_spec) -> None:
            """Token embedding, its scale, the position table (sinusoidal or learned) and the final pre-LN norm."""
            spec.scale_embeddings = float(stack.embed_scale) if stack.embed_scale != 1.0 else False
            self.set_embeddings(embeddings_spec, stack.embed_tokens)
            spec.position_encodings.encodings = stack.embed_positions.encodings()
            if stack.layernorm_embedding is not None:
                self.set_layer_norm(spec.layernorm_embedding, stack.layernorm_embedding)
            if stack.layer_norm is not None:
                self.set_layer_norm(spec.layer_norm, stack.layer_norm)

        def set_attention(self, spec, attention, norm, self_attention: bool) -> None:
            """Q, K, V fused into one projection for self-attention, K and V fused for encoder-decoder attention."""
            split = [common_spec.LinearSpec() for _ in range(3)]
            for linear_spec, module in zip(split, (attention.q_proj, attention.k_proj, attention.v_proj)):
                self.set_linear(linear_spec, module)
            if self_attention:
                utils.fuse_linear(spec.linear[0], split)
            else:
                utils.fuse_linear(spec.linear[0], split[:1])
                utils.fuse_linear(spec.linear[1], split[1:])
            self.set_linear(spec.linear[-1], attention.out_proj)
            self.set_layer_norm(spec.layer_norm, norm)

        def set_ffn(self, spec, layer) -> None:
            self.set_linear(spec.linear_0, layer.ffn.fc1)
            self.set_linear(spec.linear_1, layer.ffn.fc2)
            self.set_layer_norm(spec.layer_norm, layer.final_layer_norm)

        def set_vocabulary(self, spec, tokens) -> None:
            source, target = tokens
            spec.register_source_vocabulary(source)
            spec.register_target_vocabulary(target)

        def get_vocabulary(self, model, tokenizer):
            return vocabulary(tokenizer, model.config.vocab_size), vocabulary(
                tokenizer, model.config.decoder_vocab_size, "target"
            )

        def set_config(self, config, model, tokenizer) -> None:
            def token(token_id: int | None) -> str | None:
                return None if token_id is None else tokenizer.convert_ids_to_tokens(token_id)

            if model.config.bos_token_id is not None:  # else CTranslate2's default (unused by translation)
                config.bos_token = token(model.config.bos_token_id)
            config.eos_token = token(model.config.eos_token_id)
            config.unk_token = tokenizer.unk_token or PLACEHOLDER.format("unk")
            config.decoder_start_token = token(model.config.decoder_start_token_id)
            config.layer_norm_epsilon = model.config.layer_norm_eps

    class ModelConverter(Converter):
        """CTranslate2's `Converter` (validate, quantize, save) for a loaded model and its tokenizer."""

        def __init__(self, model, tokenizer):
            self._model, self._tokenizer = model, tokenizer

        def _load(self):
            import copy

            import torch

            # the spec holds the weights themselves and quantization rewrites them in place: give it a copy
            with torch.no_grad():
                return VanillaTransformerLoader()(copy.deepcopy(self._model), self._tokenizer)

    return ModelConverter
