"""Configuration of the decoder-only Transformer: the decoder stack of "Attention Is All You Need" without the
encoder-decoder attention (masked self-attention + feed-forward per layer), trained as a causal language model.

The defaults are the paper's *base* decoder (d_model 512, 8 heads, d_ff 2048, 6 layers, dropout 0.1, ReLU,
post-LN, sinusoidal positions, embeddings scaled by sqrt(d_model), output projection tied to the embedding) with
our tokenizer's special ids. GPT-2 is the same network with other choices, each a field here: pre-LN with a final
LayerNorm (`normalize_before=True`), learned positions, `gelu_new`, unscaled embeddings, N(0, 0.02)
initialisation (`modeling/convert_gpt2.py`, `config_from_gpt2`, maps a `GPT2Config`).
"""

from __future__ import annotations

import math

from transformers import PretrainedConfig

from .configuration_vanilla_transformer import field_problems, head_problems, reject_unknown_fields


class VanillaDecoderOnlyConfig(PretrainedConfig):
    r"""Configuration for [`VanillaDecoderOnlyModel`] and [`VanillaDecoderOnlyForCausalLM`].

    The depth, width and head fields carry the encoder-decoder's decoder names (`decoder_layers`,
    `decoder_attention_heads`, `decoder_ffn_dim`), so a preset's decoder values apply unchanged;
    `num_hidden_layers`, `num_attention_heads`, `hidden_size` and `intermediate_size` are aliases (what
    transformers' caches and tools read).

    Args:
        vocab_size: Size of the vocabulary (input embedding and output projection).
        d_model: Width of every sub-layer output.
        decoder_layers: Number of layers (masked self-attention + feed-forward).
        decoder_attention_heads: Attention heads per layer.
        decoder_ffn_dim: Inner width of the position-wise feed-forward network (d_ff).
        activation_function: Non-linearity of the feed-forward network: "relu" (paper), "gelu", "gelu_new"
            (GPT-2's tanh approximation), "silu" or "swish".
        dropout: Dropout on the sum of embeddings and positions and on each sub-layer output before the residual
            addition (GPT-2's `embd_pdrop` and `resid_pdrop`).
        attention_dropout: Dropout on the attention probabilities (GPT-2's `attn_pdrop`).
        activation_dropout: Dropout after the feed-forward non-linearity (none in the paper or GPT-2).
        normalize_before: False (paper) is post-LN, `LN(x + Sublayer(x))`; True is pre-LN, `x + Sublayer(LN(x))`,
            with a final LayerNorm after the last layer (GPT-2).
        layer_norm_eps: Epsilon of every LayerNorm (GPT-2's `layer_norm_epsilon`, 1e-5).
        position_encoding: "sinusoidal" (paper), "learned" (GPT-2), "rope" (rotary, on queries and keys) or
            "none" (order known through the causal mask only).
        sinusoidal_layout: "interleaved" (paper) or "concatenated" (all sines, then all cosines).
        max_position_embeddings: Longest sequence (prompt + generated tokens) the model accepts, except with
            "rope", which has no table; longer inputs raise a `ValueError` that suggests truncation.
        rope_theta: Base of the rotary frequencies when `position_encoding="rope"`.
        scale_embedding: Multiply token embeddings by sqrt(d_model) (paper, section 3.4; GPT-2 does not).
        tie_word_embeddings: The output projection reuses the input embedding matrix (paper and GPT-2).
        output_bias: Add a learned bias to the output logits (neither the paper nor GPT-2 has one).
        init_std: Standard deviation of the normal initialisation of the embedding matrices; `None` means
            d_model ** -0.5 (GPT-2: 0.02).
        linear_init_std: Standard deviation of the normal initialisation of every linear layer's weight; `None`
            means Xavier-uniform (GPT-2: 0.02).
        pad_token_id: Padding id (`<pad>`, 0 in our tokenizer): its embedding row is zero and untrained, and
            generate() pads finished sequences with it. `None` for a vocabulary without one (GPT-2, whose
            generate() then pads with the end-of-text id).
        bos_token_id: Beginning-of-sequence id (`<s>`, 2): the first token of a training sequence, and the prompt
            generate() starts from when given none.
        eos_token_id: End-of-sequence id (`</s>`, 3): ends a training sequence; generate() stops at it.
        use_cache: Return the key/value cache by default (used by `generate()`).
    """

    model_type = "vanilla_decoder_only"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "decoder_layers",
        "num_attention_heads": "decoder_attention_heads",
        "intermediate_size": "decoder_ffn_dim",
    }

    def __init__(
        self,
        vocab_size: int = 37000,
        d_model: int = 512,
        decoder_layers: int = 6,
        decoder_attention_heads: int = 8,
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
        tie_word_embeddings: bool = True,
        output_bias: bool = False,
        init_std: float | None = None,
        linear_init_std: float | None = None,
        pad_token_id: int | None = 0,
        bos_token_id: int | None = 2,
        eos_token_id: int | list[int] | None = 3,
        use_cache: bool = True,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.decoder_layers = decoder_layers
        self.decoder_attention_heads = decoder_attention_heads
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
        self.tie_word_embeddings = tie_word_embeddings
        self.output_bias = output_bias
        self.init_std = init_std
        self.linear_init_std = linear_init_std
        self.use_cache = use_cache
        reject_unknown_fields(VanillaDecoderOnlyConfig, kwargs, "a decoder-only model")
        self.validate_architecture(check_ids=False)  # sizes first: transformers' own checks assume ints
        kwargs.pop("is_encoder_decoder", None)
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            is_encoder_decoder=False,
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
                "d_model",
                "decoder_layers",
                "decoder_attention_heads",
                "decoder_ffn_dim",
                "max_position_embeddings",
            ),
            flags=("normalize_before", "scale_embedding", "tie_word_embeddings", "output_bias", "use_cache"),
        )
        if not problems and check_ids:  # the checks below assume well-typed sizes and the ids set
            problems += head_problems(self, ("decoder",))
            for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
                value = getattr(self, name, None)
                for token_id in value if isinstance(value, list) else [value]:
                    if token_id is None:
                        continue
                    valid = isinstance(token_id, int) and not isinstance(token_id, bool)
                    if not valid or not 0 <= token_id < self.vocab_size:
                        problems.append(
                            f"{name}={token_id!r} is outside the vocabulary [0, {self.vocab_size})"
                        )
        if problems:
            raise ValueError("Invalid VanillaDecoderOnlyConfig: " + "; ".join(problems) + ".")

    @property
    def embedding_init_std(self) -> float:
        """Standard deviation used to initialise the embedding matrices (token and learned positions)."""
        return self.init_std if self.init_std is not None else 1.0 / math.sqrt(self.d_model)
