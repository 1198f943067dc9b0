"""Configuration of the encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Every hyperparameter of the network lives here and in the shared base (configuration_vanilla_base.py) and
nowhere else. The defaults are the paper's *base* model (Table 3): d_model 512, 8 heads, d_ff 2048, 6 + 6
layers, dropout 0.1, ReLU, post-LN residual blocks, sinusoidal positions, embeddings scaled by sqrt(d_model), one
vocabulary shared by source and target and tied to the output projection. Each deviation from the paper is a
named field.
"""

from __future__ import annotations

from .configuration_vanilla_base import (
    VanillaConfigBase,
    head_problems,
    init_arguments,
    is_id,
    token_id_problems,
)


class VanillaTransformerConfig(VanillaConfigBase):
    r"""Configuration for [`VanillaTransformerModel`] and [`VanillaTransformerForConditionalGeneration`].

    The fields every family shares (width, activation, dropouts, positions, embeddings, initialisation, special
    ids) are documented below the family's own; `vocab_size` is the source vocabulary, which is also the target
    vocabulary when `share_encoder_decoder_embeddings` is true (the paper's shared BPE vocabulary), and
    `tie_word_embeddings` ties the output projection to the decoder's input embedding.

    Args:
        decoder_vocab_size: Size of the target vocabulary. `None` means "same as `vocab_size`". Must equal
            `vocab_size` when the embeddings are shared.
        encoder_layers: Number of encoder blocks (N in the paper).
        decoder_layers: Number of decoder blocks. Named so that `get_text_config(decoder=True)` sizes caches
            with the decoder's depth.
        encoder_attention_heads: Attention heads in the encoder (h in the paper).
        decoder_attention_heads: Attention heads in the decoder's self- and cross-attention.
        encoder_ffn_dim: Inner width of the encoder's position-wise feed-forward network (d_ff).
        decoder_ffn_dim: Inner width of the decoder's feed-forward network.
        share_encoder_decoder_embeddings: One embedding matrix for source and target tokens (needs one joint
            vocabulary). False gives separate source and target vocabularies.
        layernorm_embedding: Apply a LayerNorm to the sum of token embedding and positions in both stacks, before
            the dropout (fairseq's and BART's `layernorm_embedding`; not in the paper).
        decoder_start_token_id: The token the decoder input starts with: `labels` are shifted right and
            prefixed with it; `generate()` starts from it (2 = `<s>`; converted Marian checkpoints use pad).
        use_cache: Return the key/value cache from the decoder by default (used by `generate()`).
        alignment_layer: The decoder layer whose encoder-decoder attention gives word alignments and is trained by
            guided alignment (fairseq's and CTranslate2's `alignment_layer`; negative counts from the last). `None`
            means the penultimate layer, the last of a one-layer decoder (fairseq's alignment models).
        alignment_heads: How many of that layer's heads, from the first, are averaged into the alignment
            attention; 0 averages all of them (fairseq's default). Guided alignment trains the average of these
            heads: 1 trains one head, as in Garg et al. (2019).
    """

    model_type = "vanilla_transformer"
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }
    size_fields = (
        "decoder_vocab_size",
        "encoder_layers",
        "decoder_layers",
        "encoder_attention_heads",
        "decoder_attention_heads",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
    )
    flag_fields = ("share_encoder_decoder_embeddings", "layernorm_embedding")

    def __init__(
        self,
        decoder_vocab_size: int | None = None,
        encoder_layers: int = 6,
        decoder_layers: int = 6,
        encoder_attention_heads: int = 8,
        decoder_attention_heads: int = 8,
        encoder_ffn_dim: int = 2048,
        decoder_ffn_dim: int = 2048,
        share_encoder_decoder_embeddings: bool = True,
        layernorm_embedding: bool = False,
        decoder_start_token_id: int = 2,
        use_cache: bool = True,
        alignment_layer: int | None = None,
        alignment_heads: int = 0,
        is_encoder_decoder: bool = True,
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
        output_bias: bool = True,
        init_std: float | None = None,
        linear_init_std: float | None = None,
        pad_token_id: int | None = 0,
        bos_token_id: int | None = 2,
        eos_token_id: int | list[int] | None = 3,
        **kwargs,
    ):
        super().__init__(**init_arguments(locals()))

    def resolve_defaults(self) -> None:
        if self.decoder_vocab_size is None:
            self.decoder_vocab_size = self.vocab_size

    def family_problems(self, check_ids: bool) -> list[str]:
        if not check_ids:
            return []
        problems = head_problems(self, ("encoder", "decoder"))
        if self.share_encoder_decoder_embeddings and self.decoder_vocab_size != self.vocab_size:
            problems.append(
                f"share_encoder_decoder_embeddings=True needs one vocabulary, but vocab_size={self.vocab_size} "
                f"and decoder_vocab_size={self.decoder_vocab_size}; set share_encoder_decoder_embeddings=False "
                f"or make the sizes equal"
            )
        limits = {
            "pad_token_id": min(self.vocab_size, self.decoder_vocab_size),
            "bos_token_id": self.decoder_vocab_size,
            "eos_token_id": self.decoder_vocab_size,
            "decoder_start_token_id": self.decoder_vocab_size,
        }
        return (
            problems
            + alignment_problems(self)
            + token_id_problems(self, limits, required=("pad_token_id", "decoder_start_token_id"))
        )

    @property
    def alignment_layer_index(self) -> int:
        """The index (0 .. decoder_layers - 1) of `alignment_layer`."""
        if self.alignment_layer is None:
            return max(self.decoder_layers - 2, 0)
        return self.alignment_layer % self.decoder_layers


def alignment_problems(config) -> list[str]:
    """What is wrong with `alignment_layer` and `alignment_heads` for the decoder's depth and heads."""
    problems = []
    layers, heads = config.decoder_layers, config.decoder_attention_heads
    layer = config.alignment_layer
    if layer is not None and (not is_id(layer) or not -layers <= layer < layers):
        problems.append(
            f"alignment_layer={layer!r} is not a layer of a {layers}-layer decoder: use -{layers} .. {layers - 1} "
            "or None (the penultimate layer)"
        )
    if not is_id(config.alignment_heads) or not 0 <= config.alignment_heads <= heads:
        problems.append(
            f"alignment_heads={config.alignment_heads!r} is invalid: use 0 (all {heads} heads) .. {heads}"
        )
    return problems
