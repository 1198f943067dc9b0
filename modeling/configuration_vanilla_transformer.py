"""Configuration of the encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Every hyperparameter of the network lives here and nowhere else. The defaults are the paper's *base* model
(Table 3): d_model 512, 8 heads, d_ff 2048, 6 + 6 layers, dropout 0.1, ReLU, post-LN residual blocks,
sinusoidal positions, embeddings scaled by sqrt(d_model), one vocabulary shared by source and target and tied
to the output projection. Each deviation from the paper is a named field.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math

from transformers import GenerationConfig, PretrainedConfig

ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu", "swish")


def _generic_config_fields() -> set[str]:
    """Fields every `PretrainedConfig` knows (architectures, auto_map, dtype, ...), which may appear in any
    config.json."""
    base = PretrainedConfig()
    fields = set(base.to_dict()) | set(vars(base))
    if dataclasses.is_dataclass(PretrainedConfig):
        fields |= {field.name for field in dataclasses.fields(PretrainedConfig)}
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


def reject_unknown_fields(config_class: type, extra: dict, model: str = "") -> None:
    """Keys of ``extra`` (a config's leftover keyword arguments) that are neither arguments of
    ``config_class.__init__`` nor generic `PretrainedConfig` fields raise `ValueError` with the closest field: a
    misspelled `d_modle` must not silently become a no-op. ``model`` names the family in the message (e.g.
    "a decoder-only model")."""
    ours = [
        name for name in inspect.signature(config_class.__init__).parameters if name not in ("self", "kwargs")
    ]
    generic = _generic_config_fields()
    for key in extra:
        if key in ours or key in generic or key.startswith("_"):
            continue
        close = difflib.get_close_matches(key, ours, n=1, cutoff=0.7)
        hint = f"did you mean {close[0]!r}?" if close else f"known fields: {', '.join(ours)}"
        raise ValueError(f"unknown config field {key!r}{f' for {model}' if model else ''}: {hint}")


POSITION_ENCODINGS = ("sinusoidal", "learned", "rope", "none")
SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated")
DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")


def is_number(value) -> bool:
    """An int or float that is not a bool (True/False are ints in Python)."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def field_problems(config, sizes: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    """What is wrong with the fields every model family shares, one message per offending value: ``sizes``
    must be positive integers, ``flags`` true or false, the dropouts probabilities in [0, 1), ``layer_norm_eps``
    and the initialisation stds (or None) positive, the activation and position choices known, ``rope_theta``
    positive when RoPE is used."""
    problems = []
    for name in sizes:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
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
    return problems


class VanillaTransformerConfig(PretrainedConfig):
    r"""Configuration for [`VanillaTransformerModel`] and [`VanillaTransformerForConditionalGeneration`].

    Args:
        vocab_size: Size of the source vocabulary, which is also the target vocabulary when
            `share_encoder_decoder_embeddings` is true (the paper's shared BPE vocabulary).
        decoder_vocab_size: Size of the target vocabulary. `None` means "same as `vocab_size`". Must equal
            `vocab_size` when the embeddings are shared.
        d_model: Width of every sub-layer output (the paper's d_model).
        encoder_layers: Number of encoder blocks (N in the paper).
        decoder_layers: Number of decoder blocks. Named so that `get_text_config(decoder=True)` sizes caches
            with the decoder's depth.
        encoder_attention_heads: Attention heads in the encoder (h in the paper).
        decoder_attention_heads: Attention heads in the decoder's self- and cross-attention.
        encoder_ffn_dim: Inner width of the encoder's position-wise feed-forward network (d_ff).
        decoder_ffn_dim: Inner width of the decoder's feed-forward network.
        activation_function: Non-linearity of the feed-forward network: "relu" (paper), "gelu", "gelu_new"
            (GPT-2's tanh approximation), "silu" or "swish" (the same function; OPUS-MT/Marian checkpoints use it).
        dropout: Dropout on the sum of embeddings and positions and on each sub-layer output before the
            residual addition (P_drop in the paper).
        attention_dropout: Dropout on the attention probabilities (0 in the paper).
        activation_dropout: Dropout after the feed-forward non-linearity (0 in the paper).
        normalize_before: False (paper) puts LayerNorm after each residual addition (post-LN:
            `LN(x + Sublayer(x))`); True normalises the sub-layer input (pre-LN: `x + Sublayer(LN(x))`) and
            adds a final LayerNorm at the end of each stack, which pre-LN needs.
        layer_norm_eps: Epsilon of every LayerNorm.
        position_encoding: "sinusoidal" (paper, fixed), "learned" (a trained table, as in the paper's
            Table 3 row E), "rope" (rotary embeddings applied to queries and keys of self-attention; no
            absolute position is added to the embeddings) or "none" (NoPE: no position information at all, a
            deviation for studying it: the encoder is then permutation-equivariant, and the decoder knows
            order only through its causal mask; inputs are still limited to `max_position_embeddings`).
        sinusoidal_layout: "interleaved" is the paper's PE(pos, 2i) = sin, PE(pos, 2i+1) = cos;
            "concatenated" puts all sines before all cosines (Marian / OPUS-MT checkpoints).
        max_position_embeddings: Longest sequence (source or target) the model accepts with sinusoidal,
            learned or no positions; longer inputs raise a `ValueError` that suggests truncation.
        rope_theta: Base of the rotary frequencies when `position_encoding="rope"`.
        scale_embedding: Multiply token embeddings by sqrt(d_model) (paper, section 3.4).
        share_encoder_decoder_embeddings: One embedding matrix for source and target tokens (needs one joint
            vocabulary). False gives separate source and target vocabularies.
        tie_word_embeddings: The output projection (pre-softmax linear) reuses the decoder's input embedding
            matrix (paper, section 3.4).
        output_bias: Add a learned bias to the output logits (Marian's `final_logits_bias`).
        init_std: Standard deviation of the normal initialisation of the embedding matrices; `None` means
            d_model ** -0.5 (fairseq's choice, which keeps scaled embeddings at unit variance).
        linear_init_std: Standard deviation of the normal initialisation of every linear layer's weight; `None`
            means Xavier-uniform (fairseq, tensor2tensor). Marian/BART in transformers use N(0, 0.02) for both
            (`init_std=0.02, linear_init_std=0.02`), which keeps a post-LN network's sub-layer outputs small
            against the residual path at the start of training.
        pad_token_id: Padding id (`<pad>`, 0 in our tokenizer); its embedding row is zero and it is never
            attended to.
        bos_token_id: Beginning-of-sentence id (`<s>`, 2).
        eos_token_id: End-of-sentence id (`</s>`, 3), appended to every source and target sentence.
        decoder_start_token_id: The token the decoder input starts with: `labels` are shifted right and
            prefixed with it; `generate()` starts from it (2 = `<s>`; converted Marian checkpoints use pad).
        use_cache: Return the key/value cache from the decoder by default (used by `generate()`).
    """

    model_type = "vanilla_transformer"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    def __init__(
        self,
        vocab_size: int = 37000,
        decoder_vocab_size: int | None = None,
        d_model: int = 512,
        encoder_layers: int = 6,
        decoder_layers: int = 6,
        encoder_attention_heads: int = 8,
        decoder_attention_heads: int = 8,
        encoder_ffn_dim: int = 2048,
        decoder_ffn_dim: int = 2048,
        activation_function: str = "relu",
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        normalize_before: bool = False,
        layer_norm_eps: float = 1e-5,
        position_encoding: str = "sinusoidal",
        sinusoidal_layout: str = "interleaved",
        max_position_embeddings: int = 1024,
        rope_theta: float = 10000.0,
        scale_embedding: bool = True,
        share_encoder_decoder_embeddings: bool = True,
        tie_word_embeddings: bool = True,
        output_bias: bool = True,
        init_std: float | None = None,
        linear_init_std: float | None = None,
        pad_token_id: int = 0,
        bos_token_id: int = 2,
        eos_token_id: int = 3,
        decoder_start_token_id: int = 2,
        use_cache: bool = True,
        is_encoder_decoder: bool = True,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.decoder_vocab_size = vocab_size if decoder_vocab_size is None else decoder_vocab_size
        self.d_model = d_model
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.encoder_attention_heads = encoder_attention_heads
        self.decoder_attention_heads = decoder_attention_heads
        self.encoder_ffn_dim = encoder_ffn_dim
        self.decoder_ffn_dim = decoder_ffn_dim
        self.activation_function = activation_function
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.normalize_before = normalize_before
        self.layer_norm_eps = layer_norm_eps
        self.position_encoding = position_encoding
        self.sinusoidal_layout = sinusoidal_layout
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.scale_embedding = scale_embedding
        self.share_encoder_decoder_embeddings = share_encoder_decoder_embeddings
        self.output_bias = output_bias
        self.init_std = init_std
        self.linear_init_std = linear_init_std
        self.use_cache = use_cache
        self.tie_word_embeddings = tie_word_embeddings
        reject_unknown_fields(VanillaTransformerConfig, kwargs)
        self.validate_architecture(check_ids=False)  # sizes first: transformers' own checks assume ints
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            decoder_start_token_id=decoder_start_token_id,
            is_encoder_decoder=is_encoder_decoder,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )
        self.validate_architecture()

    def validate_architecture(self, check_ids: bool = True) -> None:
        """Raise `ValueError` naming the offending values if the architecture fields are inconsistent."""
        problems = field_problems(
            self,
            sizes=(
                "vocab_size",
                "decoder_vocab_size",
                "d_model",
                "encoder_layers",
                "decoder_layers",
                "encoder_attention_heads",
                "decoder_attention_heads",
                "encoder_ffn_dim",
                "decoder_ffn_dim",
                "max_position_embeddings",
            ),
            flags=(
                "normalize_before",
                "scale_embedding",
                "share_encoder_decoder_embeddings",
                "tie_word_embeddings",
                "output_bias",
            ),
        )
        if not problems and check_ids:  # the checks below assume well-typed sizes and the ids set
            problems += head_problems(self, ("encoder", "decoder"))
            if self.share_encoder_decoder_embeddings and self.decoder_vocab_size != self.vocab_size:
                problems.append(
                    f"share_encoder_decoder_embeddings=True needs one vocabulary, but vocab_size={self.vocab_size} "
                    f"and decoder_vocab_size={self.decoder_vocab_size}; set share_encoder_decoder_embeddings=False "
                    f"or make the sizes equal"
                )
            for name, limit in (
                ("pad_token_id", min(self.vocab_size, self.decoder_vocab_size)),
                ("bos_token_id", self.decoder_vocab_size),
                ("eos_token_id", self.decoder_vocab_size),
                ("decoder_start_token_id", self.decoder_vocab_size),
            ):
                value = getattr(self, name, None)
                ids = value if isinstance(value, list) else [value]
                for token_id in ids:
                    if token_id is None:
                        if name in ("pad_token_id", "decoder_start_token_id"):
                            problems.append(f"{name} must be set (an id in [0, {limit}))")
                        continue
                    if (
                        isinstance(token_id, bool)
                        or not isinstance(token_id, int)
                        or not 0 <= token_id < limit
                    ):
                        problems.append(f"{name}={token_id!r} is outside the vocabulary [0, {limit})")
        if problems:
            raise ValueError("Invalid VanillaTransformerConfig: " + "; ".join(problems) + ".")

    @property
    def embedding_init_std(self) -> float:
        """Standard deviation used to initialise embedding matrices."""
        return self.init_std if self.init_std is not None else 1.0 / math.sqrt(self.d_model)
