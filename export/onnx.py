"""Export a trained model to ONNX in the layout of optimum / transformers.js seq2seq exports.

Files written to the output folder (opset `OPSET`, every batch and length axis dynamic):

    onnx/encoder_model.onnx          input_ids (B, S) int64, attention_mask (B, S) int64
                                     -> last_hidden_state (B, S, C)
    onnx/decoder_model_merged.onnx   encoder_attention_mask (B, S) int64, input_ids (B, T) int64,
                                     encoder_hidden_states (B, S, C),
                                     past_key_values.{i}.decoder.{key|value} (B, H, P, D),
                                     past_key_values.{i}.encoder.{key|value} (B, H, S', D),
                                     use_cache_branch (1,) bool
                                     -> logits (B, T, V), present.{i}.decoder.{key|value} (B, H, P + T, D),
                                        present.{i}.encoder.{key|value} (B, H, S, D)
    onnx/*_quantized.onnx            the same graphs with int8 weights (ONNX Runtime dynamic quantization)
    config.json                      a MarianConfig with the model's own config inside (`export.onnx_layout`)

B batch, S source length, T new target tokens, P cached target tokens, C d_model, H decoder heads, D head
dimension, V target vocabulary, i decoder layer. Masks hold 1 for tokens and 0 for padding. The decoder takes
no target mask: target positions are P + [0, T) for every row, as in `generate()`. The first decoding step runs
with use_cache_branch false and empty (P = S' = 0) pasts: it computes the encoder keys/values of every
cross-attention from encoder_hidden_states; later steps run with use_cache_branch true and feed every present
back as a past (the encoder ones come back unchanged), as transformers.js and optimum do.

The graphs are traced from the model itself (`torch.onnx.export`, the dynamo-based exporter) through small
wrapper modules: the network is not re-implemented. The folder also carries generation_config.json, the
tokenizer files and a README (how to run and serve it, with the source model card's languages:
`export.model_card.engine_folder_card`); `inference.engine_onnx.OnnxTranslator` runs it, in float32 or int8.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from vanilla_transformer.export.folders import claim_output_folder, write_output_manifest
from vanilla_transformer.export.model_card import engine_folder_card
from vanilla_transformer.export.onnx_layout import (
    marian_config,
    merge_decoders,
    quantize_int8,
    runtime_generation_config,
)
from vanilla_transformer.inference.engines import ONNX_GRAPH_FILES, onnx_graph_files

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from vanilla_transformer.modeling import VanillaTransformerConfig

OPSET = 18
OUTPUT_KIND = "ONNX export"  # the kind in the folder's manifest (export.folders)
# the graph files: the engine registry's names (`inference.engines`), which the runtime reads
ENCODER_FILE, DECODER_FILE = GRAPH_FILES = ONNX_GRAPH_FILES
QUANTIZED_FILES = onnx_graph_files("int8")
# the names of the dynamic axes, as optimum names them: (input, axis) -> name
ENCODER_AXES = {("input_ids", 0): "batch_size", ("input_ids", 1): "encoder_sequence_length"}
DECODER_AXES = {
    ("encoder_attention_mask", 0): "batch_size",
    ("encoder_attention_mask", 1): "encoder_sequence_length",
    ("input_ids", 1): "decoder_sequence_length",
    ("past_key_values.0.decoder.key", 2): "past_decoder_sequence_length",
}


def past_names(layers: int, prefix: str, kinds: tuple[str, ...] = ("decoder", "encoder")) -> list[str]:
    """`{prefix}.{i}.{kind}.{key|value}` for every layer i and kind, in graph order (layer, kind, key/value)."""
    return [
        f"{prefix}.{i}.{kind}.{part}" for i in range(layers) for kind in kinds for part in ("key", "value")
    ]


def export_onnx(
    model_folder_or_model: str | Path | PreTrainedModel,
    out: str | Path,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> Path:
    """Write the ONNX graphs in float32 and int8 (see the module docstring), config, generation config,
    tokenizer and README of a vanilla_transformer model to `out` and return it.

    `model_folder_or_model` is a saved model folder (loaded with `inference.load_model_and_tokenizer`, whose
    tokenizer is used) or a loaded model, in which case `tokenizer` is saved with it when given. Raises
    `ValueError` for a missing or corrupt folder, a model of another type or not in float32, or an `out` that
    `export.folders` refuses (a file, a non-empty folder other than a complete earlier ONNX export, or the model
    folder or one containing it); `ImportError` without onnx and onnxscript (the export extras)."""
    is_folder = isinstance(model_folder_or_model, (str, Path))
    if is_folder and not Path(model_folder_or_model).is_dir():
        raise ValueError(
            f"model folder {str(model_folder_or_model)!r} does not exist or is not a folder: pass the folder that "
            "training (or modeling.save_with_remote_code) wrote"
        )
    out = claim_output_folder(out, OUTPUT_KIND, [model_folder_or_model] if is_folder else [])
    missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"exporting to ONNX needs {' and '.join(missing)}: pip install '.[export]'")
    import torch

    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

    if is_folder:
        from vanilla_transformer.inference.loading import load_model_and_tokenizer

        model, folder_tokenizer = load_model_and_tokenizer(
            str(model_folder_or_model), device="cpu", opt_in=None
        )
        tokenizer = tokenizer if tokenizer is not None else folder_tokenizer
    else:
        model = model_folder_or_model
    if not isinstance(model, VanillaTransformerForConditionalGeneration):
        raise ValueError(
            f"expected a VanillaTransformerForConditionalGeneration, got {type(model).__name__}; "
            "export other models with optimum (optimum-cli export onnx)"
        )
    if model.dtype != torch.float32:
        raise ValueError(
            f"the model is in {model.dtype}; ONNX graphs are exported in float32: pass model.float()"
        )
    claim_output_folder(out, OUTPUT_KIND, [model_folder_or_model] if is_folder else [], clear=True)
    (out / ENCODER_FILE).parent.mkdir(parents=True, exist_ok=True)

    was_training, device, attention = model.training, model.device, model.config._attn_implementation
    # a built model's config names its attention (transformers types it optional for a bare config)
    assert attention is not None
    # eager attention traces to plain MatMul/Softmax with an explicit mask (sdpa's is_causal needs a static bool)
    model.set_attn_implementation("eager")
    # transformers wraps `PreTrainedModel.to` in `functools.wraps(nn.Module.to)`, which pyright reads as the unbound method
    model.eval().to("cpu")  # pyright: ignore[reportArgumentType]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's advice about dynamic shapes, opset upgrades, ...
            with tempfile.TemporaryDirectory() as scratch:
                _export_graphs(model, out, Path(scratch))
    finally:
        model.set_attn_implementation(attention)
        # transformers wraps `PreTrainedModel.to` in `functools.wraps(nn.Module.to)`, which pyright reads as the unbound method
        model.to(device).train(was_training)  # pyright: ignore[reportArgumentType]
    config = marian_config(model.config)  # no remote code: the weights are in the graphs
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    runtime_generation_config(model.generation_config).save_pretrained(out)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    source = model_folder_or_model if is_folder else model.name_or_path
    (out / "README.md").write_text(engine_folder_card(readme(model.config), "onnx", source), encoding="utf-8")
    return write_output_manifest(out, OUTPUT_KIND)


def _export_graphs(model: PreTrainedModel, out: Path, scratch: Path) -> None:
    """Write the graphs of the module docstring into `out`: the encoder and the two decoders (first step, later
    steps) are traced into `scratch` with small example inputs (sizes >= 2, so that the exporter keeps every
    axis dynamic, and a padded row, so that the masks are part of the graphs), quantized, and the decoders
    merged (`export.onnx_layout`)."""
    import torch
    from torch import nn
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    from vanilla_transformer.modeling.cache_vanilla_transformer import CACHE_FIELD, layer_keys_values

    config = model.config
    layers = config.decoder_layers
    heads = config.decoder_attention_heads
    head_dim = config.d_model // heads

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = model.get_encoder()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def flatten(cache: EncoderDecoderCache, kinds: tuple[str, ...]) -> list[torch.Tensor]:
        tensors = []
        for i in range(layers):
            for kind in kinds:
                stack = cache.self_attention_cache if kind == "decoder" else cache.cross_attention_cache
                tensors += layer_keys_values(stack, i)
        return tensors

    def step(net, mask, input_ids, encoder_hidden_states, cache):
        """One decoding step of `net` (the graph module's own `model`, so that its weights are the graph's) over
        the cache, which it extends."""
        inputs = dict(
            attention_mask=mask, decoder_input_ids=input_ids, encoder_outputs=(encoder_hidden_states,)
        )
        return net(**inputs, cache=cache, use_cache=True)

    class Decoder(nn.Module):
        """First step: no cache in; logits, self-attention and cross-attention keys/values out."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, encoder_attention_mask, input_ids, encoder_hidden_states):
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            output = step(self.model, encoder_attention_mask, input_ids, encoder_hidden_states, cache)
            return (output.logits, *flatten(getattr(output, CACHE_FIELD), ("decoder", "encoder")))

    class DecoderWithPast(nn.Module):
        """Later steps: the cache in, logits and the grown self-attention cache out."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, encoder_attention_mask, input_ids, *past):
            self_cache = DynamicCache([(past[4 * i], past[4 * i + 1]) for i in range(layers)])
            cross_cache = DynamicCache([(past[4 * i + 2], past[4 * i + 3]) for i in range(layers)])
            cache = EncoderDecoderCache(self_cache, cross_cache)
            # every cross-attention reads its cached keys/values: the encoder output is an empty (B, S, 0) stand-in
            placeholder = past[2].new_zeros((past[2].shape[0], past[2].shape[2], 0))
            output = step(self.model, encoder_attention_mask, input_ids, placeholder, cache)
            return (output.logits, *flatten(getattr(output, CACHE_FIELD), ("decoder",)))

    batch, source, target, cached = 2, 5, 3, 4
    dim = torch.export.Dim
    b, s, t, p = (dim.DYNAMIC for _ in range(4))
    input_ids = torch.full((batch, source), config.eos_token_id, dtype=torch.long)
    mask = torch.ones((batch, source), dtype=torch.long)
    mask[1, -2:] = 0
    hidden = torch.randn(batch, source, config.d_model)
    decoder_ids = torch.full((batch, target), config.decoder_start_token_id, dtype=torch.long)
    past = []
    for _ in range(layers):
        past += [torch.randn(batch, heads, cached, head_dim) for _ in range(2)]
        past += [torch.randn(batch, heads, source, head_dim) for _ in range(2)]

    def export(
        module: nn.Module, args: tuple, names: list[str], outputs: list[str], shapes: tuple, file: str
    ):
        torch.onnx.export(
            module,
            args,
            str(scratch / file),
            input_names=names,
            output_names=outputs,
            opset_version=OPSET,
            dynamo=True,
            dynamic_shapes=shapes,
            external_data=False,
            optimize=True,
            verbose=False,
        )
        name_axes(scratch / file, ENCODER_AXES if file == "encoder.onnx" else DECODER_AXES)

    export(
        Encoder(),
        (input_ids, mask),
        ["input_ids", "attention_mask"],
        ["last_hidden_state"],
        ({0: b, 1: s}, {0: b, 1: s}),
        "encoder.onnx",
    )
    export(
        Decoder(),
        (mask, decoder_ids, hidden),
        ["encoder_attention_mask", "input_ids", "encoder_hidden_states"],
        ["logits", *past_names(layers, "present")],
        ({0: b, 1: s}, {0: b, 1: t}, {0: b, 1: s}),
        "first.onnx",
    )
    past_shapes = ({0: b, 2: p}, {0: b, 2: p}, {0: b, 2: s}, {0: b, 2: s}) * layers
    export(
        DecoderWithPast(),
        (mask, decoder_ids[:, :2], *past),
        ["encoder_attention_mask", "input_ids", *past_names(layers, "past_key_values")],
        ["logits", *past_names(layers, "present", ("decoder",))],
        ({0: b, 1: s}, {0: b, 1: t}, past_shapes),
        "later.onnx",
    )
    for names, suffix in ((GRAPH_FILES, ""), (QUANTIZED_FILES, "_int8")):
        if suffix:
            for file in ("encoder", "first", "later"):
                quantize_int8(scratch / f"{file}.onnx", scratch / f"{file}{suffix}.onnx")
        shutil.copyfile(scratch / f"encoder{suffix}.onnx", out / names[0])
        merge_decoders(scratch / f"first{suffix}.onnx", scratch / f"later{suffix}.onnx", out / names[1])


def name_axes(path: Path, axes: dict[tuple[str, int], str]) -> None:
    """Give the exporter's symbolic axes (s0, s1, ...) of the graph at `path` readable names: `axes` maps
    (input name, axis) -> name; axes of outputs and intermediate values become expressions of the names
    (e.g. past_decoder_sequence_length + decoder_sequence_length)."""
    import re

    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    names: dict[str, str] = {}
    for value in graph.input:
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.dim_param and (value.name, axis) in axes:
                names.setdefault(dim.dim_param, axes[value.name, axis])
    symbol = re.compile(r"\b[su]\d+\b")
    for value in [*graph.input, *graph.output, *graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = symbol.sub(
                    lambda match: names.get(match.group(0), match.group(0)), dim.dim_param
                )
    onnx.save(model, str(path))


def readme(config: VanillaTransformerConfig) -> str:
    """The body of an exported folder's README.md (`export.model_card.engine_folder_card` adds the metadata and
    how to serve it): what the files are and how to run them."""
    from vanilla_transformer.modeling import position_limit

    layers, heads = config.decoder_layers, config.decoder_attention_heads
    head_dim = config.d_model // heads
    # the decoder input holds the start token and the generated ones: stay inside the position table
    limit = position_limit(config)
    steps = 256 if limit is None else min(256, limit - 1)
    truncation = "" if limit is None else f", truncation=True, max_length={limit}"
    return f"""# ONNX export of a vanilla_transformer translation model

Exported with `vanilla-transformer export --engine onnx` (opset {OPSET}) in the layout of optimum and
transformers.js (`config.json` is a MarianConfig; the network itself is in the graphs). Files:

- `onnx/encoder_model.onnx`: `input_ids`, `attention_mask` (int64, 1 = token, 0 = padding) -> `last_hidden_state`
- `onnx/decoder_model_merged.onnx`: `encoder_attention_mask`, `input_ids` (the new tokens),
  `encoder_hidden_states`, `past_key_values.{{i}}.decoder.{{key,value}}`, `past_key_values.{{i}}.encoder.{{key,value}}`,
  `use_cache_branch` (bool, false at the first step with empty pasts, true later)
  -> `logits`, `present.{{i}}.decoder.{{key,value}}`, `present.{{i}}.encoder.{{key,value}}`
- `onnx/*_quantized.onnx`: the same graphs with int8 weights (ONNX Runtime dynamic quantization)
- `config.json`, `generation_config.json` (decoding defaults), the tokenizer files

{layers} decoder layers (i = 0 .. {layers - 1}); keys and values are (batch, {heads} heads, length, {head_dim}).
Decoding starts from `decoder_start_token_id` = {config.decoder_start_token_id} and stops at `eos_token_id` =
{config.eos_token_id}.

## Run it

transformers.js (browser or node): `AutoModelForSeq2SeqLM.from_pretrained(folder, {{dtype: "fp32"}})` or
`dtype: "q8"` (the int8 graphs), then `model.generate({{inputs, attention_mask}})`.

With this project installed (greedy and beam search with the generation config's settings, tokens equal to
`generate()`; `dtype="int8"` runs the quantized graphs):

```python
from vanilla_transformer.inference.engine_onnx import OnnxTranslator

translator = OnnxTranslator("this-folder")
print(translator.translate(["A sentence to translate."], num_beams=4))
```

or `vanilla-transformer translate --engine onnx --model this-folder < input.txt`.

With onnxruntime alone (greedy, one sentence):

```python
import numpy as np, onnxruntime as ort
from transformers import AutoTokenizer

folder = "this-folder"
tokenizer = AutoTokenizer.from_pretrained(folder)
encoder = ort.InferenceSession(f"{{folder}}/onnx/encoder_model.onnx")
decoder = ort.InferenceSession(f"{{folder}}/onnx/decoder_model_merged.onnx")
source = tokenizer(["A sentence to translate."], return_tensors="np"{truncation})
ids, mask = source["input_ids"].astype(np.int64), source["attention_mask"].astype(np.int64)
hidden = encoder.run(None, {{"input_ids": ids, "attention_mask": mask}})[0]
past = {{i.name: np.zeros((1, {heads}, 0, {head_dim}), np.float32)
        for i in decoder.get_inputs() if i.name.startswith("past_key_values")}}
token, result = {config.decoder_start_token_id}, []
for step in range({steps}):
    feeds = {{"encoder_attention_mask": mask, "input_ids": np.array([[token]], dtype=np.int64),
             "encoder_hidden_states": hidden, "use_cache_branch": np.array([step > 0]), **past}}
    outputs = decoder.run(None, feeds)
    for output, value in zip(decoder.get_outputs()[1:], outputs[1:]):
        if step == 0 or ".decoder." in output.name:
            past[output.name.replace("present", "past_key_values")] = value
    token = int(outputs[0][0, -1].argmax())
    if token == {config.eos_token_id}:
        break
    result.append(token)
print(tokenizer.decode(result, skip_special_tokens=True))
```

(`OnnxTranslator` also applies the generation config's `suppress_tokens` and length limits, which this
minimal loop leaves out.)
"""
