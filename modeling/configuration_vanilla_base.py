"""What the configurations of the three model families share: the fields every family has (width, activation,
dropouts, residual-block order, positions, embeddings, initialisation, special ids), their documentation, their
paper defaults and their validation.

`VanillaConfigBase` rejects unknown keys with the closest field name and reports every invalid value at once, in
one `ValueError`. Attributes set on a config after construction (which `PretrainedConfig` allows) are saved with
their names listed under `extra_attributes`, and loading accepts exactly those: a saved config always reloads,
while a misspelled constructor argument or a key added to config.json by hand is still refused.

A family config (`VanillaTransformerConfig`, `VanillaDecoderOnlyConfig`, `VanillaEncoderOnlyConfig`) lists every
field in its `__init__` signature, shared fields included, as transformers' own configs do (its test mixins and
IDEs read that signature), hands them all to `VanillaConfigBase.__init__` (`init_arguments`), which sets and checks
them, and states its own checks in `family_problems`.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
from collections.abc import Iterable

from transformers import GenerationConfig, PretrainedConfig

ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu", "swish")
POSITION_ENCODINGS = ("sinusoidal", "learned", "rope", "none")
SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated", "tensor2tensor")
DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")


def _generic_config_fields() -> set[str]:
    """Fields every `PretrainedConfig` knows (architectures, auto_map, dtype, ...), which may appear in any
    config.json."""
    base = PretrainedConfig()
    fields = (
        set(base.to_dict()) | set(vars(base)) | {field.name for field in dataclasses.fields(PretrainedConfig)}
    )
    fields |= set(GenerationConfig().to_dict())  # generation parameters: transformers drops them from configs
    return fields | {
        "transformers_version",
        "model_type",
        "custom_pipelines",
        "auto_map",
        "dtype",
        "torch_dtype",
        "name_or_path",
        "attn_implementation",
        "experts_implementation",
        "output_attentions",
        "per_layer_config",
        "num_labels",
        "id2label",
        "label2id",
        "tokenizer_class",
        "task_specific_params",
        "finetuning_task",
        "is_decoder",
        "add_cross_attention",
        "tie_encoder_decoder",
        "prefix",
        "sep_token_id",
    }


def config_arguments(config_class: type) -> list[str]:
    """The named arguments of `config_class.__init__` and of every `__init__` it passes its keywords on to, up to
    `VanillaConfigBase`: the config's fields, in signature order."""
    names = []
    for cls in config_class.__mro__:
        if cls is PretrainedConfig or "__init__" not in vars(cls):
            continue
        if not issubclass(cls, VanillaConfigBase):
            break
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            named = parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
            if named and name != "self" and name not in names:
                names.append(name)
    return names


# The fields every family's `__init__` lists besides its own, documented once: appended to each family
# config's docstring (`VanillaConfigBase.__init_subclass__`)
SHARED_FIELDS_DOC = """
    Fields every family shares:
        vocab_size: Size of the token vocabulary (the input embedding; in the encoder-decoder the source one).
        d_model: Width of every sub-layer output (the paper's d_model).
        activation_function: Non-linearity of the feed-forward network: "relu" (paper), "gelu" (BERT: the exact
            erf GELU), "gelu_new" (GPT-2's tanh approximation), "silu" or "swish" (the same function; OPUS-MT /
            Marian checkpoints use it).
        dropout: Dropout on the sum of embeddings and positions and on each sub-layer output before the residual
            addition (P_drop in the paper; GPT-2's `embd_pdrop` and `resid_pdrop`).
        attention_dropout: Dropout on the attention probabilities (0 in the paper; GPT-2's `attn_pdrop`).
        activation_dropout: Dropout after the feed-forward non-linearity (0 in the paper, GPT-2 and BERT).
        normalize_before: False (paper, BERT) puts LayerNorm after each residual addition (post-LN:
            `LN(x + Sublayer(x))`); True normalises the sub-layer input (pre-LN: `x + Sublayer(LN(x))`, GPT-2) and
            adds a final LayerNorm at the end of each stack, which pre-LN needs.
        layer_norm_eps: Epsilon of every LayerNorm.
        position_encoding: "sinusoidal" (paper, fixed), "learned" (a trained table, as in the paper's Table 3
            row E, GPT-2 and BERT), "rope" (rotary embeddings applied to queries and keys of self-attention; no
            absolute position is added to the embeddings) or "none" (NoPE: no position information at all, a
            deviation for studying it: an encoder is then permutation-equivariant, and a decoder knows order
            only through its causal mask; inputs are still limited to `max_position_embeddings`).
        sinusoidal_layout: "interleaved" is the paper's PE(pos, 2i) = sin, PE(pos, 2i+1) = cos; "concatenated"
            puts all sines before all cosines (Marian / OPUS-MT checkpoints); "tensor2tensor" puts all sines before
            all cosines of the frequencies 10000^(-i/(d_model/2-1)) (fairseq, tensor2tensor, eole's
            SinusoidalConcat).
        position_offset: Index in the position table of the first position (0). Sinusoidal: position p gets
            the vectors of p + position_offset; learned: the table has max_position_embeddings + position_offset
            rows, of which the first position_offset are never read. fairseq's tables start at its padding
            index + 1 (2 with its default dictionary); 0 everywhere else.
        max_position_embeddings: Longest sequence the model accepts with sinusoidal, learned or no positions
            (RoPE has no table and no limit); longer inputs raise a `ValueError` that suggests truncation.
        rope_theta: Base of the rotary frequencies when `position_encoding="rope"`.
        scale_embedding: Multiply token embeddings by sqrt(d_model) (paper, section 3.4; GPT-2 and BERT do not).
        tie_word_embeddings: The output projection (pre-softmax linear) reuses the input embedding matrix (of
            the decoder, in the encoder-decoder; paper section 3.4, GPT-2, BERT).
        output_bias: Add a learned bias to the output logits (Marian's `final_logits_bias`, BERT's
            `cls.predictions.bias`; neither the paper's decoder-only use nor GPT-2 has one).
        init_std: Standard deviation of the normal initialisation of the embedding matrices; `None` means
            d_model ** -0.5 (fairseq's choice, which keeps scaled embeddings at unit variance).
        linear_init_std: Standard deviation of the normal initialisation of every linear layer's weight; `None`
            means Xavier-uniform (fairseq, tensor2tensor). Marian/BART, GPT-2 and BERT in transformers use
            N(0, 0.02) for both (`init_std=0.02, linear_init_std=0.02`), which keeps a post-LN network's
            sub-layer outputs small against the residual path at the start of training.
        pad_token_id: Padding id (`<pad>`, 0 in our tokenizer); its embedding row starts at zero and it is never
            attended to.
        bos_token_id: Beginning-of-sentence id (`<s>`, 2).
        eos_token_id: End-of-sentence id (`</s>`, 3), appended to every sentence.
"""

# Fields of the signature that `PretrainedConfig.__init__` sets (and transformers reads there), passed on to it
PASSED_ON = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "is_encoder_decoder")


def init_arguments(values: dict) -> dict:
    """What a family config's `__init__` hands to `VanillaConfigBase.__init__`: every argument of its signature
    (``values`` is its `locals()`) and its leftover keyword arguments."""
    arguments = dict(values.get("kwargs", {}))
    arguments.update(
        (name, value) for name, value in values.items() if name not in ("self", "kwargs", "__class__")
    )
    return arguments


# config.json key listing the attributes set on a config after construction, which loading accepts
EXTRA_ATTRIBUTES = "extra_attributes"


def unknown_fields(config_class: type, keys) -> list[str]:
    """The ``keys`` that are neither arguments of the config (see `config_arguments`), nor generic
    `PretrainedConfig` fields, nor private (a leading underscore)."""
    ours = config_arguments(config_class)
    generic = _generic_config_fields() | {EXTRA_ATTRIBUTES}
    return [key for key in keys if key not in ours and key not in generic and not key.startswith("_")]


def reject_unknown_fields(config_class: type, extra: Iterable[str], model: str = "") -> None:
    """Keys of ``extra`` (a config's leftover keyword arguments) that are `unknown_fields` raise `ValueError` with
    the closest field: a misspelled `d_modle` must not silently become a no-op. ``model`` names the family in the
    message (e.g. "a decoder-only model")."""
    ours = config_arguments(config_class)
    for key in unknown_fields(config_class, extra):
        close = difflib.get_close_matches(key, ours, n=1, cutoff=0.7)
        hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(ours)}"
        raise ValueError(f"unknown config field {key!r}{f' for {model}' if model else ''}: {hint}")


def is_number(value) -> bool:
    """An int or float that is not a bool (True/False are ints in Python)."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def is_id(value) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def field_problems(config, sizes: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    """What is wrong with the fields every model family shares, one message per offending value: ``sizes``
    must be positive integers, ``flags`` true or false, the dropouts probabilities in [0, 1), ``layer_norm_eps``
    and the initialisation stds (or None) positive, the activation and position choices known, ``rope_theta``
    positive when RoPE is used."""
    problems = []
    for name in sizes:
        value = getattr(config, name)
        if not is_id(value) or value <= 0:
            problems.append(f"{name} must be a positive integer, got {value!r}")
    for name in DROPOUTS:
        value = getattr(config, name)
        if not is_number(value) or not 0.0 <= value < 1.0:
            problems.append(f"{name} must be a probability in [0, 1), got {value!r}")
    for name in flags:
        if not isinstance(getattr(config, name), bool):
            problems.append(f"{name} must be true or false, got {getattr(config, name)!r}")
    if not is_number(config.layer_norm_eps) or not config.layer_norm_eps > 0:
        problems.append(f"layer_norm_eps must be > 0, got {config.layer_norm_eps!r}")
    for name in ("init_std", "linear_init_std"):
        value = getattr(config, name)
        if value is not None and (not is_number(value) or not value > 0):
            problems.append(f"{name} must be > 0 or None, got {value!r}")
    for name, allowed in (
        ("activation_function", ACTIVATIONS),
        ("position_encoding", POSITION_ENCODINGS),
        ("sinusoidal_layout", SINUSOIDAL_LAYOUTS),
    ):
        if getattr(config, name) not in allowed:
            problems.append(f"{name} must be one of {allowed}, got {getattr(config, name)!r}")
    if not is_id(config.position_offset) or config.position_offset < 0:
        problems.append(f"position_offset must be an integer >= 0, got {config.position_offset!r}")
    if config.position_encoding == "rope" and (not is_number(config.rope_theta) or not config.rope_theta > 0):
        problems.append(f"rope_theta must be > 0, got {config.rope_theta!r}")
    return problems


def head_problems(config, sides: tuple[str, ...]) -> list[str]:
    """What is wrong with the attention heads of the ``sides`` ("encoder", "decoder") and the width: d_model
    must split into whole heads, RoPE needs an even head dimension and sinusoidal positions an even d_model.
    Call only when the sizes are well typed (`field_problems` found nothing)."""
    problems = []
    for side in sides:
        heads = getattr(config, f"{side}_attention_heads")
        if config.d_model % heads:
            problems.append(
                f"d_model={config.d_model} is not divisible by {side}_attention_heads={heads}; "
                f"choose a head count that divides d_model"
            )
        elif config.position_encoding == "rope" and (config.d_model // heads) % 2:
            problems.append(
                f"rope needs an even head dimension, but d_model={config.d_model} / "
                f"{side}_attention_heads={heads} = {config.d_model // heads}"
            )
    if config.position_encoding == "sinusoidal" and config.d_model % 2:
        problems.append(f"sinusoidal positions need an even d_model, got d_model={config.d_model}")
    elif (
        config.position_encoding == "sinusoidal"
        and config.sinusoidal_layout == "tensor2tensor"
        and config.d_model < 4
    ):
        problems.append(f"sinusoidal_layout='tensor2tensor' needs d_model >= 4, got d_model={config.d_model}")
    return problems


def token_id_problems(config, limits: dict[str, int], required: tuple[str, ...]) -> list[str]:
    """What is wrong with the special ids named in ``limits`` (name -> vocabulary size it indexes): each id (or
    each id of a list) must be an integer in [0, limit); the ids in ``required`` must be set."""
    problems = []
    for name, limit in limits.items():
        value = getattr(config, name, None)
        for token_id in value if isinstance(value, list) else [value]:
            if token_id is None:
                if name in required:
                    problems.append(f"{name} must be set (an id in [0, {limit}))")
            elif not is_id(token_id) or not 0 <= token_id < limit:
                problems.append(f"{name}={token_id!r} is outside the vocabulary [0, {limit})")
    return problems


class VanillaConfigBase(PretrainedConfig):
    r"""The fields every model family shares, their validation, and the saving and loading rules above. Not
    a model's config itself: each family's config lists these fields in its own `__init__` signature (with its
    family's defaults, the paper's *base* model, Table 3) and documents them with `SHARED_FIELDS_DOC`.
    """

    # output fields that Trainer's evaluation leaves out of the logits: the cache of the causal families, under
    # both of its names (`cache_vanilla_transformer.CACHE_FIELD`); the encoder-only outputs have neither
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    family = ""  # names the family in the message about an unknown field, e.g. "a decoder-only model"
    size_fields: tuple[str, ...] = ()  # the family's positive-integer fields besides vocab_size and d_model
    flag_fields: tuple[str, ...] = ()  # the family's true/false fields besides the shared ones

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # each family documents the shared fields its signature lists
        if cls.__doc__ and SHARED_FIELDS_DOC not in cls.__doc__:
            cls.__doc__ += SHARED_FIELDS_DOC

    def __init__(self, **fields):
        """Set the family's fields from ``fields`` (a family `__init__` passes every argument of its signature, see
        `init_arguments`; the special ids and `is_encoder_decoder` go on to `PretrainedConfig`), then check them.
        Leftover keys must be generic `PretrainedConfig` fields or listed under `extra_attributes`."""
        kwargs = dict(fields)
        for name in config_arguments(type(self)):
            if name not in PASSED_ON:
                setattr(self, name, kwargs.pop(name))
        self.resolve_defaults()
        # attributes that were set after construction when this config was saved (see `to_dict`)
        extra_attributes = set(kwargs.pop(EXTRA_ATTRIBUTES, None) or ())
        reject_unknown_fields(type(self), [key for key in kwargs if key not in extra_attributes], self.family)
        self.validate_architecture(check_ids=False)  # sizes first: transformers' own checks assume ints
        # PretrainedConfig is a dataclass that also takes other keywords (huggingface_hub's strict(accept_kwargs=True)),
        # which pyright's view of its dataclass __init__ does not show
        super().__init__(tie_word_embeddings=self.tie_word_embeddings, **kwargs)  # pyright: ignore[reportCallIssue]
        self.validate_architecture()

    def resolve_defaults(self) -> None:
        """Set the fields whose default depends on another field (all fields are set when this runs)."""

    def family_problems(self, check_ids: bool) -> list[str]:
        """The family's own problems (its fields, its heads, its special ids); ``check_ids`` is False before
        `PretrainedConfig.__init__` has set the ids. Called only when the shared fields are well typed."""
        return []

    def validate_architecture(self, check_ids: bool = True) -> None:
        """Raise `ValueError` naming every offending value if the architecture fields are inconsistent."""
        problems = field_problems(
            self,
            sizes=("vocab_size", "d_model", *self.size_fields, "max_position_embeddings"),
            flags=(
                "normalize_before",
                "scale_embedding",
                *self.flag_fields,
                "tie_word_embeddings",
                "output_bias",
            ),
        )
        problems += self.family_problems(check_ids and not problems)
        if problems:
            raise ValueError(f"Invalid {type(self).__name__}: " + "; ".join(problems) + ".")

    def to_dict(self) -> dict:
        """`PretrainedConfig.to_dict` (what `save_pretrained` writes), plus `extra_attributes`: the names of the
        attributes set after construction, so that loading accepts them (and only them) besides the fields."""
        values = super().to_dict()
        values.pop(EXTRA_ATTRIBUTES, None)
        extra = unknown_fields(type(self), values)
        if extra:
            values[EXTRA_ATTRIBUTES] = sorted(extra)
        return values

    @property
    def embedding_init_std(self) -> float:
        """Standard deviation used to initialise the embedding matrices (token and learned positions)."""
        return self.init_std if self.init_std is not None else 1.0 / math.sqrt(self.d_model)
