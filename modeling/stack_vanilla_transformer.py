"""What every stack of layers shares (the encoder and the decoder of the encoder-decoder, the encoder-only
encoder, the decoder-only model): the embeddings (token embedding * scale + positions, optional token types and
embedding LayerNorm, dropout), running the layers, the final LayerNorm of pre-LN; the fallback of `forward`'s
output arguments to the config (`output_options`); and the remote-code names of classes (`module_file`,
`auto_map_of`).

Shape legend: B batch size, L length of this call, C d_model.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from transformers.cache_utils import Cache

from .configuration_vanilla_base import VanillaConfigBase
from .kernels_vanilla_transformer import apply_dropout
from .masks_vanilla_transformer import decoder_self_attention_mask
from .positions_vanilla_transformer import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)


class VanillaTransformerStack:
    """A mixin for a `PreTrainedModel` that holds a stack: `init_stack` creates the embeddings and the final norm
    (call it right after `PreTrainedModel.__init__`, then create `self.layers`), `embed` and `run_layers` are the
    two halves of the forward pass around the masks; `causal_mask` is the self-attention mask of a causal stack.

    Every stack owns its token embedding, so that a stack saved on its own loads on its own; a model whose stacks
    share one vocabulary ties their embedding weights with `_tied_weights_keys` (transformers' tying, which also
    reports a checkpoint without the embedding as missing it)."""

    # the mode of the module this is mixed into, and the layers that the stack's __init__ creates
    training: bool
    layers: nn.ModuleList

    def init_stack(
        self,
        config: VanillaConfigBase,
        vocab_size: int,
        num_heads: int,
        type_vocab_size: int = 0,
        embedding_layer_norm: bool = False,
    ) -> None:
        """A `vocab_size` token embedding (* sqrt(d_model) with `scale_embedding`, the pad row `pad_token_id`), the
        positions of `config.position_encoding` (RoPE sized for `num_heads`), `type_vocab_size` token-type
        embeddings (0: none), a LayerNorm on the summed embeddings (`embedding_layer_norm`), and the final
        LayerNorm of pre-LN."""
        self.embed_tokens = nn.Embedding(vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions: nn.Module | None = None
        self.rotary_emb: RotaryEmbedding | None = None
        if config.position_encoding == "sinusoidal":
            self.embed_positions = SinusoidalPositionalEncoding(config)
        elif config.position_encoding == "learned":
            self.embed_positions = LearnedPositionalEmbedding(config)
        elif config.position_encoding == "rope":
            self.rotary_emb = RotaryEmbedding(config, config.d_model // num_heads)
        self.dropout = config.dropout
        # pre-LN leaves the residual stream un-normalised: one LayerNorm closes the stack
        self.layer_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.normalize_before else None
        )
        self.token_type_embeddings = (
            nn.Embedding(type_vocab_size, config.d_model) if type_vocab_size else None
        )
        self.layernorm_embedding = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if embedding_layer_norm else None
        )

    def embed(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        position_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """Token embedding * scale + positions (+ token type, type 0 when `token_type_ids` is None), embedding
        LayerNorm, then dropout: (B, L) -> (B, L, C); and RoPE's cos/sin, if used."""
        embeds = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        hidden_states = embeds * self.embed_scale  # (B, L, C)
        rotary = None
        if self.embed_positions is not None:
            hidden_states = hidden_states + self.embed_positions(position_ids).to(hidden_states.dtype)
        elif self.rotary_emb is not None:
            rotary = self.rotary_emb(position_ids, hidden_states.dtype)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:  # type 0 everywhere, broadcast over (B, L)
                token_type_ids = torch.zeros(1, 1, dtype=torch.long, device=hidden_states.device)
            hidden_states = hidden_states + self.token_type_embeddings(token_type_ids).to(hidden_states.dtype)
        if self.layernorm_embedding is not None:
            hidden_states = self.layernorm_embedding(hidden_states)
        return apply_dropout(hidden_states, self.dropout, self.training), rotary

    def causal_mask(
        self,
        attention_mask: torch.Tensor | None,
        self_cache: Cache | None,
        past_length: int | torch.Tensor,
        hidden_states: torch.Tensor,
        kernel_is_causal: bool,
    ) -> torch.Tensor | None:
        """The self-attention mask of a causal stack for the (B, T, C) `hidden_states` of this call
        (`decoder_self_attention_mask`): its keys are the K slots of `self_cache` (a static cache has slots not
        yet written, masked as padding), or the P = `past_length` cached and T new positions."""
        new_tokens = hidden_states.shape[1]
        key_length = (
            self_cache.get_mask_sizes(new_tokens, 0)[0]
            if self_cache is not None
            else int(past_length) + new_tokens
        )
        if attention_mask is not None and attention_mask.dim() == 2 and attention_mask.shape[1] < key_length:
            attention_mask = F.pad(attention_mask, (0, key_length - attention_mask.shape[1]))  # (B, K)
        return decoder_self_attention_mask(
            attention_mask,
            hidden_states.dtype,
            hidden_states.device,
            past_length,
            new_tokens,
            key_length,
            kernel_is_causal,
        )  # (B or 1, 1, T, K), or None: causal, applied by the kernel

    def run_layers(
        self,
        hidden_states: torch.Tensor,
        output_hidden_states: bool,
        output_attentions: bool,
        *args,
        **kwargs,
    ) -> tuple[torch.Tensor, tuple | None, tuple]:
        """Every layer (given `*args, **kwargs` after the states), then the final pre-LN norm: (B, L, C) -> (B, L, C).

        Also returns the states entering each layer plus the final ones (None unless `output_hidden_states`) and,
        for each attention of a layer (self-attention; in the decoder also encoder-decoder attention), the weights
        of every layer (None unless `output_attentions`)."""
        all_states = []
        all_weights = []
        for layer in self.layers:
            if output_hidden_states:
                all_states.append(hidden_states)
            hidden_states, *weights = layer(
                hidden_states, *args, output_attentions=output_attentions, **kwargs
            )
            all_weights.append(weights)
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        if output_hidden_states:
            all_states.append(hidden_states)
        attentions = tuple(kind if output_attentions else None for kind in zip(*all_weights))
        return hidden_states, tuple(all_states) if output_hidden_states else None, attentions


def output_options(
    config: VanillaConfigBase,
    output_attentions: bool | None,
    output_hidden_states: bool | None,
    return_dict: bool | None,
) -> tuple[bool, bool, bool]:
    """transformers' convention for the output arguments of every `forward`: one left as None takes the config's
    value (`config.output_attentions`, `config.output_hidden_states`, `config.return_dict`); one given wins.
    Returns (output_attentions, output_hidden_states, return_dict)."""
    return (
        bool(config.output_attentions if output_attentions is None else output_attentions),
        bool(config.output_hidden_states if output_hidden_states is None else output_hidden_states),
        bool(config.return_dict if return_dict is None else return_dict),
    )


def module_file(obj: type) -> str:
    """The file name (without .py) that defines `obj`: the same locally and as remote code
    (`transformers_modules.<hash>.<file>`)."""
    return obj.__module__.rsplit(".", 1)[-1]


def auto_map_of(classes: dict[str, type]) -> dict[str, str]:
    """An `auto_map` of config.json: transformers' auto class names -> `file.Class` of the classes given."""
    return {auto: f"{module_file(obj)}.{obj.__name__}" for auto, obj in classes.items()}
