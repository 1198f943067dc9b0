"""The optimum / transformers.js side of an ONNX export: one merged decoder, int8 variants, a Marian config.

`merge_decoders` joins the first-step decoder (no cache in) and the later-step decoder (cache in) into one graph
with an `If` on the boolean input `use_cache_branch` (shape [1]): the layout of optimum's
`decoder_model_merged.onnx`, which transformers.js and optimum's `ORTModelForSeq2SeqLM` run. Both branches read
the same inputs (`encoder_attention_mask`, `input_ids`, `encoder_hidden_states`, `past_key_values.*`; each branch
uses the ones it needs) and write the same outputs (`logits`, `present.*`); the cached branch passes the encoder
keys/values through unchanged. Weights that the two graphs share are stored once, in the outer graph.

`quantize_int8` is ONNX Runtime's dynamic quantization (int8 weights of every MatMul/Gemm, activations quantized
per call), written as `*_quantized.onnx` beside the float32 graph (transformers.js' `dtype: "q8"` file names).

`marian_config` is the config.json of the folder: a `MarianConfig` (model_type "marian"), the type that
transformers.js and optimum map to an encoder-decoder with this cache layout. Those runtimes read from it only
the interface of the graphs (layer and head counts, width, vocabularies, special ids); the network itself is in
the graphs. The architecture fields MarianConfig has no name for (position encoding and layout, pre-LN, ...)
are kept under the key `MODEL_CONFIG_KEY`, the full `VanillaTransformerConfig` that `OnnxTranslator` reads.

Every configuration qualifies; one field differs from the model's on purpose. optimum's `ORTModelForSeq2SeqLM`
builds the first step's empty caches, self- and cross-attention alike, as (batch, encoder_attention_heads, 0,
d_model / encoder_attention_heads) from a Marian config, while every cache of the graphs has the decoder's heads
(cross-attention is part of the decoder). So the Marian `encoder_attention_heads` is the decoder's head count,
the head count of every cache; the encoder's own is in `MODEL_CONFIG_KEY`, and no runtime needs it (the encoder
graph has no cache). transformers.js 4 sizes the empty caches from the graph's inputs and reads neither.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vanilla_transformer.inference.engines import ONNX_CACHE_BRANCH as CACHE_BRANCH
from vanilla_transformer.inference.engines import ONNX_MODEL_CONFIG_KEY as MODEL_CONFIG_KEY

if TYPE_CHECKING:
    import onnx
    from transformers import GenerationConfig

    from vanilla_transformer.modeling import VanillaTransformerConfig


def marian_config(config: VanillaTransformerConfig) -> dict[str, Any]:
    """config.json of an export of a model with `config`: a MarianConfig with the model's sizes and ids (its
    `encoder_attention_heads` being the caches' head count, the decoder's) and the model's own config under
    `MODEL_CONFIG_KEY` (see the module docstring)."""
    from transformers import MarianConfig

    own = config.to_dict()
    for key in ("auto_map", "custom_pipelines", "architectures"):
        own.pop(key, None)
    sizes = ("vocab_size", "decoder_vocab_size", "d_model", "max_position_embeddings", "activation_function")
    sides = [f"{s}_{f}" for s in ("encoder", "decoder") for f in ("layers", "ffn_dim")]
    ids = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
    marian = MarianConfig(
        **{name: getattr(config, name) for name in (*sizes, *sides, *ids)},
        **{name: getattr(config, name) for name in ("dropout", "attention_dropout", "activation_dropout")},
        encoder_attention_heads=config.decoder_attention_heads,  # the caches' heads, as optimum reads it
        decoder_attention_heads=config.decoder_attention_heads,
        scale_embedding=bool(config.scale_embedding),
        share_encoder_decoder_embeddings=bool(config.share_encoder_decoder_embeddings),
        tie_word_embeddings=bool(config.tie_word_embeddings),
        forced_eos_token_id=None,
        use_cache=True,
        architectures=["MarianMTModel"],
    ).to_dict()
    marian.pop("transformers_version", None)
    return {**marian, MODEL_CONFIG_KEY: own}


def runtime_generation_config(generation_config: GenerationConfig) -> GenerationConfig:
    """A copy of `generation_config` for the export's folder whose `suppress_tokens` are also `bad_words_ids`
    (one single-token sequence each): transformers.js applies `bad_words_ids` and ignores `suppress_tokens`, and
    both set the same scores to -inf in `generate()` and `OnnxTranslator`, so every runtime decodes alike."""
    runtime = copy.deepcopy(generation_config)
    banned = [list(words) for words in runtime.bad_words_ids or []]
    banned += [[token] for token in runtime.suppress_tokens or [] if [token] not in banned]
    runtime.bad_words_ids = banned or None
    return runtime


def _content_key(tensor: onnx.TensorProto) -> tuple:
    from onnx import numpy_helper

    array = numpy_helper.to_array(tensor)
    return (tensor.data_type, tuple(tensor.dims), hashlib.sha256(array.tobytes()).hexdigest())


def _as_branch(
    model: onnx.ModelProto, prefix: str, outer: dict[tuple, onnx.TensorProto], outer_inputs: set[str]
):
    """`model`'s graph as an If branch: its initializers moved to `outer` (one per content), every value it
    defines renamed with `prefix` (names must be unique across the branches), its inputs read from the outer
    graph by name. Returns (graph, renamed output names)."""
    graph = model.graph
    renames: dict[str, str] = {}
    for tensor in graph.initializer:
        key = _content_key(tensor)
        if key not in outer:
            shared = type(tensor)()
            shared.CopyFrom(tensor)
            shared.name = f"shared_{len(outer)}"
            outer[key] = shared
        renames[tensor.name] = outer[key].name
    for node in graph.node:
        for name in node.output:
            if name and name not in renames:
                renames[name] = prefix + name
        node.name = prefix + node.name if node.name else node.name
    for name in (value.name for value in graph.input):
        if name not in outer_inputs:
            raise ValueError(f"branch input {name!r} is not an input of the merged decoder")

    def rename(name: str) -> str:
        return renames.get(name, name)

    for node in graph.node:
        node.input[:] = [rename(name) for name in node.input]
        node.output[:] = [rename(name) for name in node.output]
    for value in [*graph.output, *graph.value_info]:
        value.name = rename(value.name)
    del graph.initializer[:]
    del graph.input[:]
    return graph, [value.name for value in graph.output]


def merge_decoders(first: Path, later: Path, out: Path) -> None:
    """Write the merged decoder of the module docstring to `out` from the first-step graph `first` (inputs
    encoder_attention_mask, input_ids, encoder_hidden_states; outputs logits and every present) and the
    later-step graph `later` (inputs encoder_attention_mask, input_ids and every past; outputs logits and the
    decoder presents)."""
    import onnx
    from onnx import TensorProto, helper

    first_model, later_model = onnx.load(str(first)), onnx.load(str(later))

    def copy(value: onnx.ValueInfoProto, names: dict[int, str]) -> onnx.ValueInfoProto:
        """`value` with the symbolic axes in `names` (axis -> name) renamed."""
        copied = type(value)()
        copied.CopyFrom(value)
        for axis, name in names.items():
            copied.type.tensor_type.shape.dim[axis].dim_param = name
        return copied

    inputs = [copy(value, {}) for value in first_model.graph.input]
    for value in later_model.graph.input:  # the encoder pasts are empty at the first step
        if value.name.startswith("past_key_values."):
            inputs.append(
                copy(value, {2: "encoder_sequence_length_out"} if ".encoder." in value.name else {})
            )
    inputs.append(helper.make_tensor_value_info(CACHE_BRANCH, TensorProto.BOOL, [1]))
    input_names = {value.name for value in inputs}
    outputs = [
        copy(value, {2: "present_decoder_sequence_length"} if ".decoder." in value.name else {})
        for value in first_model.graph.output
    ]
    outer: dict[tuple, onnx.TensorProto] = {}
    later_outputs = [value.name for value in later_model.graph.output]
    cached, cached_outputs = _as_branch(later_model, "cached/", outer, input_names)
    produced = dict(zip(later_outputs, cached_outputs))
    del cached.output[:]
    for value in outputs:
        name = value.name
        if name not in produced:  # an encoder present: the cache passes through
            source = name.replace("present.", "past_key_values.", 1)
            produced[name] = f"cached/{name}"
            cached.node.append(helper.make_node("Identity", [source], [produced[name]]))
        branch_value = type(value)()
        branch_value.CopyFrom(value)
        branch_value.name = produced[name]
        cached.output.append(branch_value)
    fresh, _ = _as_branch(first_model, "first/", outer, input_names)
    cached.name, fresh.name = "decoder_with_past", "decoder_first_step"
    if_node = helper.make_node(
        "If", [CACHE_BRANCH], [value.name for value in outputs], then_branch=cached, else_branch=fresh
    )
    graph = helper.make_graph([if_node], "decoder_model_merged", inputs, outputs, list(outer.values()))
    opsets = {entry.domain: entry.version for entry in [*first_model.opset_import, *later_model.opset_import]}
    merged = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets.items()],
        producer_name="vanilla-transformer",
        ir_version=first_model.ir_version,
    )
    merged.functions.extend([*first_model.functions, *later_model.functions])
    onnx.checker.check_model(merged)
    onnx.save(merged, str(out))


def quantize_int8(source: Path, out: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization of the MatMul/Gemm weights of `source`, written to `out`.

    The weights keep 7 bits (`reduce_range`): x86 CPUs without VNNI multiply uint8 activations by int8 weights
    with a 16-bit sum of pairs that saturates on full-range weights (logits off by more than their spread on
    AVX2-only CPUs), and ONNX Runtime Web and VNNI CPUs give the same results on 7-bit weights."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # its advice (on the root logger) to pre-process image models first
    try:
        quantize_dynamic(
            str(source),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul", "Gemm"],
        )
    finally:
        logging.disable(previous)
