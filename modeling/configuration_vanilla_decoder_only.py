"""Configuration of the decoder-only Transformer: the decoder stack of "Attention Is All You Need" without the
encoder-decoder attention (masked self-attention + feed-forward per layer), trained as a causal language model.

The defaults are the paper's *base* decoder (d_model 512, 8 heads, d_ff 2048, 6 layers, dropout 0.1, ReLU,
post-LN, sinusoidal positions, embeddings scaled by sqrt(d_model), output projection tied to the embedding) with
our tokenizer's special ids. GPT-2 is the same network with other choices, each a field here: pre-LN with a final
LayerNorm (`normalize_before=True`), learned positions, `gelu_new`, unscaled embeddings, N(0, 0.02)
initialisation (`convert/gpt2.py`, `config_from_gpt2`, maps a `GPT2Config`).
"""

from __future__ import annotations

from .configuration_vanilla_base import VanillaConfigBase, head_problems, init_arguments, token_id_problems


class VanillaDecoderOnlyConfig(VanillaConfigBase):
    r"""Configuration for [`VanillaDecoderOnlyModel`] and [`VanillaDecoderOnlyForCausalLM`].

    The fields every family shares are documented below the family's own. The depth, width and head fields
    carry the encoder-decoder's decoder names (`decoder_layers`, `decoder_attention_heads`, `decoder_ffn_dim`),
    so a preset's decoder values apply unchanged; `num_hidden_layers`, `num_attention_heads`, `hidden_size` and
    `intermediate_size` are aliases (what transformers' caches and tools read). `max_position_embeddings` bounds
    prompt + generated tokens. `output_bias` is off (neither the paper nor GPT-2 has one). The special ids:
    `pad_token_id`'s embedding row is zero and untrained, and generate() pads finished sequences with it (`None`
    for a vocabulary without one, as GPT-2's, whose generate() then pads with the end-of-text id); `bos_token_id`
    is the first token of a training sequence, and the prompt generate() starts from when given none;
    `eos_token_id` ends a training sequence, and generate() stops at it.

    Args:
        decoder_layers: Number of layers (masked self-attention + feed-forward).
        decoder_attention_heads: Attention heads per layer.
        decoder_ffn_dim: Inner width of the position-wise feed-forward network (d_ff).
        use_cache: Return the key/value cache by default (used by `generate()`).
    """

    model_type = "vanilla_decoder_only"
    attribute_map = {
        "hidden_size": "d_model",
        "num_hidden_layers": "decoder_layers",
        "num_attention_heads": "decoder_attention_heads",
        "intermediate_size": "decoder_ffn_dim",
    }
    family = "a decoder-only model"
    size_fields = ("decoder_layers", "decoder_attention_heads", "decoder_ffn_dim")
    flag_fields = ("use_cache",)

    def __init__(
        self,
        decoder_layers: int = 6,
        decoder_attention_heads: int = 8,
        decoder_ffn_dim: int = 2048,
        use_cache: bool = True,
        vocab_size: int = 37000,
        d_model: int = 512,
        activation_function: str = "relu",
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        normalize_before: bool = False,
        layer_norm_eps: float = 1e-5,
        position_encoding: str = "sinusoidal",
        sinusoidal_layout: str = "interleaved",
        position_offset: int = 0,
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
        **kwargs,
    ):
        # always False for this family
        kwargs["is_encoder_decoder"] = False
        super().__init__(**init_arguments(locals()))

    def family_problems(self, check_ids: bool) -> list[str]:
        if not check_ids:
            return []
        limits = {name: self.vocab_size for name in ("pad_token_id", "bos_token_id", "eos_token_id")}
        return head_problems(self, ("decoder",)) + token_id_problems(self, limits, required=())
