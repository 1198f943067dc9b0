"""What the converters (marian.py, m2m100.py, gpt2.py, bert.py, and the toolkits' importers) share: reading the source
folder's config, loading the source model (`load_source_model`), the config fields every source maps the same way
(`tying_init_and_ids`), the mapping of transformers' BART-layout models (Marian and M2M100: `bart_config_fields`,
`bart_weights`, `bart_size_claims`), loading the renamed weights into our model, and writing the converted folder.

Loading a source follows the project's loading policy (docs/reliability.md, "Loading policy"): the source's own
transformers class loads it (no code of the folder runs); its weights are read from safetensors only, unless the
caller passes ``trust_pickle=True`` (``convert --trust_pickle``), which also reads ``pytorch_model.bin`` (transformers
reads it with ``torch.load(weights_only=True)``; a pickle can still hold code, so only for checkpoints you trust).
Every config a converter reads is untrusted, with or without ``trust_pickle``, and checked before anything is built:
- a config file (JSON or YAML) is read by `read_config_file`: at most `MAX_CONFIG_BYTES`, a regular file (no device
  or FIFO), YAML without aliases (``*name``: a 1 KB file of nested aliases expands to gigabytes when printed);
- the sizes the config claims (vocabulary, width, layers, ...) are checked against the shapes of the weights, read
  from the file headers without reading a tensor (`check_claimed_sizes`);
- every model a converter builds, the source's or ours, is built by `build_checked`, which counts what the config
  allocates (parameters and buffers: position tables of every kind, vocabularies, widths, depths) on the meta device
  first and refuses more than `ALLOCATION_FACTOR` times the values the weights hold (at least `MIN_ALLOCATION`);
- an error message shows a config's value through `bounded_repr`, never at full length.
So a config cannot make the conversion allocate much more than the checkpoint holds.

One rule for the files of a source folder: the configs (`config.json`, `generation_config.json`) and the weight
files (any `WEIGHT_SUFFIXES` name: PyTorch, safetensors and their shard indexes, TensorFlow, Flax, ONNX, ...) are
replaced by the conversion; every other file (the tokenizer's) is copied unchanged.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import reprlib
import shutil
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import torch
from transformers import PretrainedConfig, PreTrainedModel

from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration, save_with_remote_code

Model = TypeVar("Model", bound=PreTrainedModel)

REPLACED_FILES = ("config.json", "generation_config.json")
# a model config of any toolkit is a few KB, a vocabulary file read as a config (eole's vocab.json) a few MB
MAX_CONFIG_BYTES = 64 * 2**20
# a model built from a config may hold this many times the values of the weights it loads (tables that are not
# saved, zero biases), and always this many values (a tiny test model with the default 1024 positions)
ALLOCATION_FACTOR, MIN_ALLOCATION = 2, 2**24
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40
_REPR.maxtuple = _REPR.maxlist = _REPR.maxarray = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 4
MAX_REPR = 200


def bounded_repr(value: Any) -> str:
    """`repr(value)` cut to at most `MAX_REPR` characters (four items per level, three levels, 60 characters per
    string), computed without expanding the whole value: how an error message shows a value read from a config,
    which may be huge or deeply shared."""
    text = _REPR.repr(value)
    return text if len(text) <= MAX_REPR else text[: MAX_REPR - 3] + "..."


def _no_alias_loader() -> type:
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        """`yaml.SafeLoader` that refuses aliases (``*name``) as it composes the document."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(
                    f"line {mark.line + 1}: an alias (*{str(self.peek_event().anchor)[:40]}) refers to an anchored value; "
                    "aliases are not read in a model config: write the value out"
                )
            return super().compose_node(parent, index)

    return NoAliasLoader


def read_config_file(path: Path, what: str) -> Any:
    """The JSON (``.json``) or YAML (any other suffix) document of the config file `path` (`what`: what to pass
    instead, for messages). `FileNotFoundError` when it is missing; `ValueError` naming the file when it is not a
    regular file (a folder, a device, a FIFO), is larger than `MAX_CONFIG_BYTES`, is not UTF-8, JSON or YAML, is
    nested too deeply, or (YAML) holds an alias."""
    import yaml

    if not path.exists():
        raise FileNotFoundError(f"{path.parent} has no {path.name}: pass {what}")
    if not path.is_file():
        raise ValueError(f"{path} is not a regular file: pass {what}")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ValueError(
            f"{path} has {size} bytes, more than a model config's {MAX_CONFIG_BYTES}: pass {what}"
        )
    kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
    try:
        with path.open("rb") as file:
            text = file.read(MAX_CONFIG_BYTES + 1).decode("utf-8")
        if kind == "JSON":
            return json.loads(text)
        return yaml.load(text, Loader=_no_alias_loader())  # noqa: S506 (a SafeLoader without aliases)
    except (ValueError, yaml.YAMLError, RecursionError) as error:
        first = str(error).splitlines()[0] if str(error) else "nested too deeply"
        raise ValueError(f"{path} is not a valid {kind} config ({first[:200]}): pass {what}") from error


WEIGHT_SUFFIXES = (".bin", ".safetensors", ".h5", ".msgpack", ".ckpt", ".index.json", ".onnx", ".tflite")


def is_replaced(name: str) -> bool:
    """Whether the conversion replaces the source file `name` (a config or weights) instead of copying it."""
    return name in REPLACED_FILES or name.endswith(WEIGHT_SUFFIXES)


def tying_init_and_ids(source: PretrainedConfig, init_std: float, pad_token_id: int | None) -> dict:
    """The fields of our config that every source config gives the same way: output tying as the source's,
    `init_std` for both the embeddings and the linear layers (transformers' models use one std for both), and the
    special ids (`pad_token_id` as given: the sources differ in what a missing pad id means)."""
    return {
        "tie_word_embeddings": bool(source.tie_word_embeddings),
        "init_std": float(init_std),
        "linear_init_std": float(init_std),
        "pad_token_id": pad_token_id,
        "bos_token_id": source.bos_token_id,
        "eos_token_id": source.eos_token_id,
    }


def read_source_config(folder: Path, model_type: str, name: str, expected: str) -> dict:
    """The config.json of the source `folder`, checked to hold a `model_type` model (`name`: its name in
    messages, e.g. "Marian"); `expected` says what to pass (e.g. "the folder of a saved MarianMTModel")."""
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"{folder} has no config.json: pass {expected} (save_pretrained or a downloaded checkpoint)"
        )
    config = read_config_file(folder / "config.json", expected)
    if not isinstance(config, dict):
        raise ValueError(f"{folder / 'config.json'} is not a JSON object: pass {expected}")
    found = config.get("model_type")
    if found != model_type:
        raise ValueError(f"{folder} holds a {bounded_repr(found)} model, not a {name} model; pass {expected}")
    return config


class SizeClaim(NamedTuple):
    """A size that a source config claims and where the weights show it: config.json's `field` gives `size`; the
    first of `tensors` (a tensor name, or the end of one after a ".", and an axis) found in the weights has the
    actual size on that axis. An axis of None counts layers instead: the distinct indices N of the tensors named
    "...{name}N." (e.g. name "encoder.layers.")."""

    field: str
    size: Any
    tensors: tuple[tuple[str, int | None], ...]


# the fields that transformers' BART-layout configs (MarianConfig, M2M100Config) have under our config's names and
# meanings, copied as they are
BART_SAME_NAME_FIELDS = ("vocab_size", "d_model", "activation_function") + tuple(
    f"{side}_{field}" for side in ("encoder", "decoder") for field in ("layers", "attention_heads", "ffn_dim")
)
BART_DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")


def bart_config_fields(source: PretrainedConfig, names: tuple[str, ...] = BART_SAME_NAME_FIELDS) -> dict:
    """The fields of our config that a BART-layout ``source`` config (Marian, M2M100) gives as they are: ``names``
    (`BART_SAME_NAME_FIELDS` and any the family adds), the dropouts, the positions and the embedding scale; with
    `tying_init_and_ids` and the family's own fields (layer norm order, sinusoid layout, output bias), a full
    config."""
    return {
        **{name: getattr(source, name) for name in names},
        **{name: float(getattr(source, name)) for name in BART_DROPOUTS},
        "max_position_embeddings": source.max_position_embeddings,
        "scale_embedding": bool(source.scale_embedding),
    }


def bart_parameter_name(name: str) -> str | None:
    """A BART-layout model's parameter name -> ours (None: not a parameter here, e.g. the fixed position
    tables)."""
    if "embed_positions" in name:
        return None
    for sub in ("fc1", "fc2"):
        name = name.replace(f".{sub}.", f".ffn.{sub}.")
    return name


def bart_weights(source: PreTrainedModel, config: Any) -> dict[str, torch.Tensor]:
    """The weights of a BART-layout ``source`` model (``model.encoder``, ``model.decoder``, ``lm_head``) under our
    names, with ``config`` (a `VanillaTransformerConfig`)'s ``share_encoder_decoder_embeddings`` and
    ``tie_word_embeddings`` set in place from the weights themselves: with ``tie_word_embeddings=False``, transformers
    keeps separate encoder and decoder embedding matrices (and an unused ``shared``) even when its config says
    "shared"."""
    inner: Any = source.model  # pyright: ignore[reportAttributeAccessIssue]
    encoder, decoder = inner.encoder.embed_tokens.weight, inner.decoder.embed_tokens.weight
    output: Any = source.lm_head.weight  # pyright: ignore[reportAttributeAccessIssue]
    config.share_encoder_decoder_embeddings = encoder.shape == decoder.shape and torch.equal(encoder, decoder)
    config.tie_word_embeddings = output.shape == decoder.shape and torch.equal(output, decoder)
    return {
        ours: tensor
        for name, tensor in source.state_dict().items()
        if (ours := bart_parameter_name(name)) is not None
        and (config.share_encoder_decoder_embeddings or ours != "model.shared.weight")
    }


def bart_size_claims(size: dict, embeddings: tuple[str, ...]) -> list[SizeClaim]:
    """The sizes a BART-layout config.json claims (``size``: its `BART_SAME_NAME_FIELDS` values, defaults filled in)
    with the tensors that show them: the vocabulary and width on the first of the ``embeddings`` tensors found,
    each stack's layers and feed-forward width."""
    claims = [
        SizeClaim("vocab_size", size["vocab_size"], tuple((name, 0) for name in embeddings)),
        SizeClaim("d_model", size["d_model"], tuple((name, 1) for name in embeddings)),
    ]
    for side in ("encoder", "decoder"):
        layers = size[f"{side}_layers"]
        claims.append(SizeClaim(f"{side}_layers", layers, ((f"{side}.layers.", None),)))
        if isinstance(layers, int) and layers > 0:
            claims.append(
                SizeClaim(f"{side}_ffn_dim", size[f"{side}_ffn_dim"], ((f"{side}.layers.0.fc1.weight", 0),))
            )
    return claims


def bart_position_table(size: dict, positions: Any) -> tuple[str, Any, int]:
    """The sinusoidal position table that a BART-layout config.json builds without storing it: ``positions``
    (its ``max_position_embeddings``) rows of its width (``size["d_model"]``), a `check_claimed_sizes` table."""
    width = size["d_model"] if isinstance(size["d_model"], int) and size["d_model"] > 0 else 1
    return ("max_position_embeddings", positions, width)


WEIGHT_FILE, PICKLE_FILE = "model.safetensors", "pytorch_model.bin"
WEIGHT_INDEX = "model.safetensors.index.json"


def _weight_files(folder: Path, trust_pickle: bool) -> list[Path]:
    """The safetensors files of `folder` (one file, or the shards its index names), else its pickle when
    `trust_pickle`; `FileNotFoundError` saying what to do when there is none."""
    if (folder / WEIGHT_FILE).is_file():
        return [folder / WEIGHT_FILE]
    if (folder / WEIGHT_INDEX).is_file():
        try:
            index = json.loads((folder / WEIGHT_INDEX).read_text(encoding="utf-8"))
            shards = sorted(set(index["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{folder / WEIGHT_INDEX} is not a valid safetensors index ({error})") from error
        return [folder / shard for shard in shards]
    if trust_pickle and (folder / PICKLE_FILE).is_file():
        return [folder / PICKLE_FILE]
    pickle_hint = (
        f"; it has {PICKLE_FILE}, a pickle, which is read only with --trust_pickle (trust_pickle=True): a pickle can "
        "run code, so pass it only for a checkpoint you trust, or save the model again with safetensors"
        if (folder / PICKLE_FILE).is_file()
        else ""
    )
    raise FileNotFoundError(f"{folder} has no safetensors weights ({WEIGHT_FILE}){pickle_hint}")


def source_weight_shapes(folder: Path, trust_pickle: bool = False) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor of the source `folder`'s weights, read from the safetensors headers (no tensor is
    read); with `trust_pickle` and only a pytorch_model.bin, from that pickle (``torch.load(weights_only=True)``,
    memory-mapped). `ValueError` naming the file when it is truncated or corrupt."""
    from safetensors import SafetensorError, safe_open

    shapes: dict[str, tuple[int, ...]] = {}
    for path in _weight_files(folder, trust_pickle):
        try:
            if path.name == PICKLE_FILE:
                state = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
                shapes.update({name: tuple(tensor.shape) for name, tensor in state.items()})
                continue
            with safe_open(str(path), framework="pt") as file:
                shapes.update({name: tuple(file.get_slice(name).get_shape()) for name in file.keys()})  # noqa: SIM118
        except (SafetensorError, OSError, RuntimeError) as error:
            raise ValueError(
                f"{path} is truncated or corrupt ({str(error).splitlines()[0] if str(error) else type(error).__name__}); "
                "download or save the checkpoint again"
            ) from error
    return shapes


def _actual_size(claim: SizeClaim, shapes: dict[str, tuple[int, ...]]) -> tuple[int, str] | None:
    """(the size the weights have for `claim`, the tensor or layers that show it), or None when none is there."""
    for name, axis in claim.tensors:
        if axis is None:
            pattern = re.compile(rf"(?:^|\.){re.escape(name)}(\d+)\.")
            indices = {int(m.group(1)) for tensor in shapes if (m := pattern.search(tensor))}
            return len(indices), f"layers {name}0..{max(indices)}" if indices else f"no layers {name}N"
        for tensor, shape in shapes.items():
            if (tensor == name or tensor.endswith("." + name)) and len(shape) > axis:
                return shape[axis], f"{tensor} {list(shape)}"
    return None


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_claimed_sizes(
    folder: Path,
    claims: list[SizeClaim],
    shapes: dict[str, tuple[int, ...]],
    tables: tuple[tuple[str, Any, int], ...] = (),
    config_name: str | None = None,
) -> None:
    """`ValueError`, one line naming every field of `folder`'s config.json (or of the config `config_name`
    names) whose size differs from the weights' (`shapes`), both sizes and the fix, before a model of those sizes
    is built. `tables` are (field, rows, width) of tables the model builds from the config alone (not stored with
    the weights, e.g. fixed sinusoidal positions): rows x width values may not exceed the values of all the
    weights together."""
    wrong = []
    for claim in claims:
        if not _is_size(claim.size):
            wrong.append(f"{claim.field}={bounded_repr(claim.size)} is not a size (a non-negative integer)")
            continue
        found = _actual_size(claim, shapes)
        if found is None:
            names = " or ".join(name for name, _ in claim.tensors)
            wrong.append(
                f"{claim.field}={bounded_repr(claim.size)} cannot be checked: the weights have no {names}"
            )
        elif found[0] != claim.size:
            wrong.append(
                f"{claim.field}={bounded_repr(claim.size)} but the weights have {found[0]} ({found[1]})"
            )
    stored = sum(math.prod(shape) for shape in shapes.values())
    # a table's width is a claimed size: checked once the claims hold
    for field, rows, width in tables if not wrong else ():
        if not _is_size(rows):
            wrong.append(f"{field}={bounded_repr(rows)} is not a size (a non-negative integer)")
        elif rows * width > stored:
            wrong.append(
                f"{field}={bounded_repr(rows)} asks for a table of {bounded_repr(rows)} x {width} values, more than the {stored} values of all "
                "the weights"
            )
    if wrong:
        raise ValueError(
            f"{config_name or folder / 'config.json'} does not fit the checkpoint's weights: {'; '.join(wrong)}; "
            "set these fields "
            "to the weights' sizes, or pass the folder the weights were saved with"
        )


def common_tables(source: dict) -> tuple[tuple[str, Any, int], ...]:
    """The size checks every source config gets (see `check_claimed_sizes`' `tables`): a ``num_labels`` in
    config.json (transformers builds a label table of that many entries for any model)."""
    return (("num_labels", source["num_labels"], 1),) if "num_labels" in source else ()


def load_source_model(
    model_class: type[Model],
    folder: Path,
    claims: list[SizeClaim],
    trust_pickle: bool = False,
    tables: tuple[tuple[str, Any, int], ...] = (),
) -> Model:
    """The source model of `folder` loaded with its own transformers class `model_class`, in fp32, after its
    config's sizes (`claims`, `tables`) are checked against its weights' shapes (`check_claimed_sizes`). Weights
    from safetensors only unless `trust_pickle` (see the module docstring)."""
    shapes = source_weight_shapes(folder, trust_pickle)
    check_claimed_sizes(folder, claims, shapes, tables)
    config_class = model_class.config_class
    if config_class is None:
        raise ValueError(f"{model_class.__name__} names no config class; pass a transformers model class")
    check_allocation(model_class, config_class.from_pretrained(folder), shapes, f"{folder / 'config.json'}")
    return model_class.from_pretrained(
        folder, dtype=torch.float32, use_safetensors=None if trust_pickle else True
    )


def shapes_of(state: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor of the weights `state` (other entries skipped): `check_allocation`'s input."""
    return {name: tuple(tensor.shape) for name, tensor in state.items() if isinstance(tensor, torch.Tensor)}


def check_allocation(
    model_class: type[PreTrainedModel],
    config: PretrainedConfig,
    shapes: dict[str, tuple[int, ...]],
    source: str,
) -> None:
    """`ValueError` when `model_class(config)` would hold more than ``max(ALLOCATION_FACTOR x the values of the
    weights `shapes`, MIN_ALLOCATION)`` values (parameters and buffers: position tables of every kind included),
    counted on the meta device, which allocates nothing; the message names the largest tensors (`source`: the
    config's name)."""
    with torch.device("meta"):
        model = model_class(config)
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    needed = sum(tensor.numel() for tensor in tensors.values())
    stored = sum(math.prod(shape) for shape in shapes.values())
    if needed > max(ALLOCATION_FACTOR * stored, MIN_ALLOCATION):
        largest = sorted(tensors.items(), key=lambda item: -item[1].numel())[:3]
        shown = ", ".join(f"{name} {list(tensor.shape)}" for name, tensor in largest)
        raise ValueError(
            f"{source} asks for a model of {needed} values, more than {ALLOCATION_FACTOR} x the {stored} values of "
            f"the checkpoint's weights (largest: {shown}); its sizes (positions, vocabulary, widths, layers) do not "
            "fit the weights: set them to the sizes the model was trained with"
        )


def build_checked(
    model_class: type[Model], config: PretrainedConfig, shapes: dict[str, tuple[int, ...]], source: str
) -> Model:
    """`model_class(config)` once `check_allocation` passes: how a converter builds the model it loads weights
    of shapes `shapes` into (`source`: the config's name in messages)."""
    check_allocation(model_class, config, shapes, source)
    return model_class(config)


def load_pickled_checkpoint(path: Path, trust_pickle: bool, missing_code: str) -> Any:
    """The object a toolkit's pickled checkpoint `path` holds, read only with `trust_pickle` (``convert
    --trust_pickle``): with ``torch.load(weights_only=True)`` first, then, for objects beyond tensors and plain
    containers (a config object, optimizer states), with the full unpickler, which can run code. `ValueError`
    without the flag, for a truncated or corrupt file, and for objects of code that is not installed (with
    `missing_code`: what to do)."""
    if not trust_pickle:
        raise ValueError(
            f"{path} is a pickle, which is read only with --trust_pickle (trust_pickle=True): a pickle can run "
            "code, so pass it only for a checkpoint you trust"
        )
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            # the project's one full unpickler, reached only with trust_pickle (tests/reliability/test_safe_loading.py)
            return torch.load(path, map_location="cpu", weights_only=False)
    except (ImportError, AttributeError) as error:
        raise ValueError(
            f"{path} holds objects of code that is not installed ({error}); {missing_code}"
        ) from error
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{path} is truncated or corrupt ({first}); copy the checkpoint again") from error


def load_converted_weights(model: Model, state: dict[str, torch.Tensor], source: str) -> Model:
    """`model` with the weights `state` (our names; tied weights may be left out), in fp32 and eval mode;
    `ValueError` naming the missing and unexpected names when `state` does not fit (`source` names the model)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = set(model.get_expanded_tied_weights_keys(all_submodels=True))
    missing = [name for name in missing if name not in tied]
    if missing or unexpected:
        raise ValueError(f"{source} conversion mismatch: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    # transformers wraps `PreTrainedModel.to` in `functools.wraps(nn.Module.to)`, which pyright reads as the unbound method
    return model.to(torch.float32).eval()  # pyright: ignore[reportArgumentType]


def write_converted_folder(model: PreTrainedModel, src_dir: Path | None, out_dir: Path) -> Path:
    """Write the converted `model` with remote code to `out_dir` and copy the other files of `src_dir` (see the
    module docstring; None: copy nothing). An existing non-empty `out_dir` is refused: a conversion never mixes
    its files with another model's."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ValueError(f"{out_dir} already exists and is not an empty folder; pass a new output folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in src_dir.iterdir() if src_dir is not None else ():
        if path.is_file() and not is_replaced(path.name):
            shutil.copy(path, out_dir / path.name)
    save_with_remote_code(model, out_dir)
    return out_dir


def with_zero_biases(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """``state`` with a zero tensor for each bias of our encoder-decoder (``model.*``) that it lacks: the biases a
    toolkit leaves out (eole's and OpenNMT-py's ``add_qkvbias`` / ``add_ffnbias`` false) are zero. ``config``: a
    `VanillaTransformerConfig`."""
    with torch.device("meta"):
        shapes = VanillaTransformerForConditionalGeneration(config).state_dict()
    for name, parameter in shapes.items():
        if name.endswith(".bias") and name not in state and name.startswith("model."):
            state[name] = torch.zeros(parameter.shape)
    return state
