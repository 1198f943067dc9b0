"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017), in paper order.

positions -> masks -> attention -> feed-forward -> encoder layer -> decoder layer -> encoder -> decoder
-> pretrained base -> VanillaTransformerModel -> VanillaTransformerForConditionalGeneration

Positions (sinusoidal, learned, rotary) are in positions_vanilla_transformer.py; the mask builders in
masks_vanilla_transformer.py; what every stack shares (embeddings, running the layers, final pre-LN norm) in
stack_vanilla_transformer.py; the caches in cache_vanilla_transformer.py; dropout, linear layers and the loss are
drop-in CPU kernels (kernels_vanilla_transformer.py); checks of user input and of generate() arguments are in
checks_vanilla_transformer.py; the "translation" pipeline is in pipeline_vanilla_transformer.py. These files
import each other with single-dot relative imports only, so that `save_pretrained` copies all of them next to the
weights (remote code, see `VanillaTransformerPreTrainedModel.save_pretrained`); the decoder-only and encoder-only
families build on the same blocks.

Shape legend used in the comments:
    B  batch size                     S  source length (encoder positions)
    T  target length of this call     K  key length (S, or cached + new target positions)
    C  d_model                        H  attention heads       D  head dimension (C / H)
    V  vocabulary size                F  feed-forward inner width

Conventions (fixed here, relied on everywhere):
    * Token masks at the public boundary (`attention_mask`, `decoder_attention_mask`) are 2-D (B, length) with
      1/True for real tokens and 0/False for padding, as produced by the tokenizer.
    * Inside the network one additive mask per stack, built once by `build_attention_mask`, of shape
      (B, 1, T or 1, K): 0.0 where a query may attend, the dtype's most negative finite value where it may not;
      a fully padded row is left unmasked (no NaN); None where nothing is masked, and in decoder
      self-attention None means causal (masks_vanilla_transformer.py states the whole contract).
    * Labels are shifted right and prefixed with `decoder_start_token_id` to form the decoder input (teacher
      forcing); label positions equal to IGNORE_INDEX (-100) are ignored by the loss and replaced by pad in
      the input.
    * Sinusoidal/learned positions of source tokens count real tokens only (left padding does not shift
      them); target positions are absolute (cached length + offset).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationConfig, GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .cache_vanilla_transformer import cache_output, encoder_decoder_cache, given_cache, layer_keys_values
from .checks_vanilla_transformer import (
    MaskMemo,
    check_decoder_inputs,
    check_inputs,
    check_labels,
    check_position_ids,
    check_stack_inputs,
    check_token_mask,
    check_token_type_ids,
    input_shape,
    position_limit,
)
from .configuration_vanilla_base import VanillaConfigBase
from .configuration_vanilla_transformer import VanillaTransformerConfig
from .decoding_vanilla_transformer import DEFAULT_LENGTH_PENALTY, check_generation_arguments
from .kernels_vanilla_transformer import (
    IGNORE_INDEX,
    Linear,
    add_dropout,
    apply_dropout,
    linear,
    release_cpu_inference_weights,
    token_loss,
)
from .masks_vanilla_transformer import build_attention_mask, without_padding
from .pipeline_vanilla_transformer import TASK, TranslationPipeline
from .positions_vanilla_transformer import (
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    build_position_ids,
)
from .stack_vanilla_transformer import VanillaTransformerStack, auto_map_of, output_options

# Positions (paper section 3.5, and rotary positions): see positions_vanilla_transformer.py


# Masks (the one additive-mask convention, stated in the module docstring): see masks_vanilla_transformer.py


# ----------------------------------------------------------------------------------------------------------------
# Multi-head attention (paper section 3.2)
# ----------------------------------------------------------------------------------------------------------------


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T * scaling + mask) V, our own math. Returns ((B, T, H, D) output, (B, H, T, K) weights)."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, H, T, K)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)  # (B, H, T, K)
    weights = apply_dropout(weights, dropout, module.training)
    output = torch.matmul(weights, value).transpose(1, 2)  # (B, T, H, D)
    return output, weights


def attention_backend(config: VanillaConfigBase, output_attentions: bool) -> str:
    """The attention implementation of one call: `config._attn_implementation` (None, a config no model has set:
    "eager"), or "eager" when the weights are asked for (only the eager path computes them)."""
    return "eager" if output_attentions else config._attn_implementation or "eager"


class VanillaTransformerAttention(nn.Module):
    """Multi-head attention: self-attention (encoder, causal in the decoder) or encoder-decoder attention.

    The backend (our eager math, or `torch.nn.functional.scaled_dot_product_attention` through transformers'
    attention interface) is `config._attn_implementation`. Attention weights are only computed by the eager
    path; asking for them (`output_attentions=True`) runs the eager path for that call (`attention_backend`).
    """

    def __init__(
        self,
        config: VanillaConfigBase,
        num_heads: int,
        layer_idx: int,
        is_causal: bool = False,
        is_cross_attention: bool = False,
    ):
        super().__init__()
        self.config = config
        self.embed_dim = config.d_model
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = config.attention_dropout
        self.layer_idx = layer_idx
        # read by the sdpa backend when no mask is given: only decoder self-attention is causal
        self.is_causal = is_causal
        self.is_cross_attention = is_cross_attention
        self.q_proj = Linear(self.embed_dim, self.embed_dim)
        self.k_proj = Linear(self.embed_dim, self.embed_dim)
        self.v_proj = Linear(self.embed_dim, self.embed_dim)
        self.out_proj = Linear(self.embed_dim, self.embed_dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        # (B, L, C) -> (B, H, L, D)
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, T, C) queries; key_value_states: (B, S, C) encoder output for cross-attention;
        attention_mask: the stack's additive mask, where None on causal self-attention means causal (the
        contract of `decoder_self_attention_mask`). Returns the (B, T, C) output and, on the eager path,
        (B, H, T, K) attention weights."""
        query = self._heads(self.q_proj(hidden_states))  # (B, H, T, D)
        if rotary is not None:
            query = apply_rotary(query, *rotary)
        fp32_keys = self.fp32_keys(query, output_attentions)

        if self.is_cross_attention:
            # cross-attention is the encoder-decoder's: its cache is an EncoderDecoderCache
            cache = cast("EncoderDecoderCache | None", cache)
            if cache is not None and cache.is_updated.get(self.layer_idx, False):
                # encoder K/V were computed once at the first decoding step and are reused
                key, value = layer_keys_values(cache.cross_attention_cache, self.layer_idx)  # (B, H, S, D)
            else:
                key = self._heads(self.k_proj(key_value_states))  # (B, H, S, D)
                value = self._heads(self.v_proj(key_value_states))  # (B, H, S, D)
                if cache is not None:
                    if fp32_keys:
                        key, value = key.float(), value.float()
                    key, value = cache.cross_attention_cache.update(key, value, self.layer_idx)
                    cache.is_updated[self.layer_idx] = True
        else:
            key = self._heads(self.k_proj(hidden_states))  # (B, H, T, D)
            value = self._heads(self.v_proj(hidden_states))  # (B, H, T, D)
            if rotary is not None:
                key = apply_rotary(key, *rotary)
            if cache is not None:
                # self-attention K/V grow by T positions per call: (B, H, K, D) with K = cached + T; the decoder of
                # the encoder-decoder passes an EncoderDecoderCache, a decoder-only stack its one Cache
                self_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
                if fp32_keys:
                    key, value = key.float(), value.float()
                key, value = self_cache.update(key, value, self.layer_idx)
        output, weights = self.attend(query, key, value, attention_mask, output_attentions)
        return self.out_proj(output), weights

    def fp32_keys(self, query: torch.Tensor, output_attentions: bool = False) -> bool:
        """Whether the cached keys and values of this call are kept in fp32: CPU bf16 with the sdpa backend, whose
        bf16 kernel is several times slower than its fp32 one for the backward pass and for a single query (a
        decoding step), so those run in fp32 (each new key and value cast once, not the whole cache per step)."""
        return (
            query.dtype == torch.bfloat16
            and query.device.type == "cpu"
            and attention_backend(self.config, output_attentions) == "sdpa"
            and (torch.is_grad_enabled() or query.shape[2] == 1)
        )

    def attend(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool = False,
        implementation: str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention of the (B, H, T, D) queries over the (B, H, K, D) keys and values under the stack's additive
        mask (None on causal self-attention means causal: `decoder_self_attention_mask`): the (B, T, C) heads
        joined, before the output projection `out_proj`, and, on the eager path, the (B, H, T, K) weights. The one
        attention computation of the forward pass and of `inference.decoding`'s loop, which passes the
        `implementation` (`attention_backend`) it resolved once."""
        if implementation is None:
            implementation = attention_backend(self.config, output_attentions)
        dropout = self.dropout if self.training else 0.0
        if implementation == "sdpa":
            # torch's kernel called directly (what transformers' sdpa wrapper ends up doing for this model, minus
            # its per-call checks); no mask on causal self-attention means causal: decoder_self_attention_mask
            is_causal = self.is_causal and attention_mask is None and query.shape[2] > 1
            # fp32 keys: outside autocast, which would cast the inputs back to bf16
            fp32_sdpa = (
                query.dtype == torch.bfloat16
                and query.device.type == "cpu"
                and (torch.is_grad_enabled() or query.shape[2] == 1)
            )
            q, k, v, mask = query, key, value, attention_mask
            if fp32_sdpa:
                q, k, v = q.float(), k.float(), v.float()
                mask = mask.float() if mask is not None else None
            with torch.autocast("cpu", enabled=False) if fp32_sdpa else nullcontext():
                output = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal, scale=self.scaling
                )
            output = output.to(query.dtype).transpose(1, 2)  # (B, T, H, D)
            weights = None
        else:
            attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
                implementation, eager_attention_forward
            )
            output, weights = attention_interface(
                self,
                query,
                key,
                value,
                attention_mask,
                dropout=dropout,
                scaling=self.scaling,
                is_causal=False if attention_mask is not None else None,
            )
        return output.reshape(*output.shape[:2], self.embed_dim), weights  # (B, T, H, D) -> (B, T, C)


# ----------------------------------------------------------------------------------------------------------------
# Position-wise feed-forward network (paper section 3.3)
# ----------------------------------------------------------------------------------------------------------------


class VanillaTransformerFeedForward(nn.Module):
    """FFN(x) = fc2(dropout(act(fc1(x)))): (B, L, C) -> (B, L, F) -> (B, L, C)."""

    def __init__(self, config: VanillaConfigBase, ffn_dim: int):
        super().__init__()
        self.fc1 = Linear(config.d_model, ffn_dim)
        self.fc2 = Linear(ffn_dim, config.d_model)
        self.activation_fn = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.activation_fn(self.fc1(hidden_states))  # (B, L, F)
        hidden_states = apply_dropout(hidden_states, self.activation_dropout, self.training)
        return self.fc2(hidden_states)  # (B, L, C)


class ResidualBlock(nn.Module):
    """The paper's sub-layer connection around one sub-layer: post-LN `LN(x + dropout(f(x)))` (paper) or
    pre-LN `x + dropout(f(LN(x)))`."""

    def __init__(self, config: VanillaConfigBase):
        super().__init__()
        self.normalize_before = config.normalize_before
        self.dropout = config.dropout

    def pre(self, x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        return norm(x) if self.normalize_before else x

    def post(self, residual: torch.Tensor, x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        x = add_dropout(residual, x, self.dropout, self.training)
        return x if self.normalize_before else norm(x)


# ----------------------------------------------------------------------------------------------------------------
# Encoder and decoder layers (paper section 3.1, Figure 1)
# ----------------------------------------------------------------------------------------------------------------


class SelfAttentionAndFeedForward:
    """The two sub-layers that every layer has (Figure 1): (masked) self-attention and the feed-forward network,
    each inside its residual connection (`ResidualBlock`): `self_attn`, `self_attn_layer_norm`, `ffn`,
    `final_layer_norm` and `residual`. Mixed into a `GradientCheckpointingLayer`, whose `__init__` creates the
    first with `init_self_attention` and, after any sub-layer of its own, the second with `init_feed_forward`."""

    def init_self_attention(
        self, config: VanillaConfigBase, num_heads: int, layer_idx: int, is_causal: bool
    ) -> None:
        self.self_attn = VanillaTransformerAttention(config, num_heads, layer_idx, is_causal)
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def init_feed_forward(self, config: VanillaConfigBase, ffn_dim: int) -> None:
        self.ffn = VanillaTransformerFeedForward(config, ffn_dim)
        self.final_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.residual = ResidualBlock(config)

    def self_attention_sublayer(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Cache | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, L, C) -> (B, L, C) states and, on the eager path, the (B, H, L, K) attention weights."""
        x = self.residual.pre(hidden_states, self.self_attn_layer_norm)
        x, weights = self.self_attn(
            x, attention_mask, cache=cache, rotary=rotary, output_attentions=output_attentions
        )
        return self.residual.post(hidden_states, x, self.self_attn_layer_norm), weights

    def feed_forward_sublayer(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, C) -> (B, L, C)."""
        x = self.ffn(self.residual.pre(hidden_states, self.final_layer_norm))
        return self.residual.post(hidden_states, x, self.final_layer_norm)


class VanillaTransformerSelfAttentionLayer(SelfAttentionAndFeedForward, GradientCheckpointingLayer):
    """Self-attention then feed-forward, each wrapped in a residual connection with layer normalisation: the
    encoder layer, and (causal, with a cache) the decoder-only layer, which is the decoder layer without
    encoder-decoder attention."""

    def __init__(
        self,
        config: VanillaConfigBase,
        num_heads: int,
        ffn_dim: int,
        layer_idx: int,
        is_causal: bool = False,
    ):
        super().__init__()
        self.init_self_attention(config, num_heads, layer_idx, is_causal)
        self.init_feed_forward(config, ffn_dim)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Cache | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # hidden_states: (B, L, C); attention_mask: (B, 1, 1, L), causal (B or 1, 1, T, K), or None
        hidden_states, weights = self.self_attention_sublayer(
            hidden_states, attention_mask, cache, rotary, output_attentions
        )
        return self.feed_forward_sublayer(hidden_states), weights


class VanillaTransformerEncoderLayer(VanillaTransformerSelfAttentionLayer):
    """The encoder layer: bidirectional self-attention then feed-forward, with the encoder's sizes."""

    def __init__(self, config: VanillaConfigBase, layer_idx: int):
        super().__init__(config, config.encoder_attention_heads, config.encoder_ffn_dim, layer_idx)


class VanillaTransformerDecoderLayer(SelfAttentionAndFeedForward, GradientCheckpointingLayer):
    """Masked self-attention, encoder-decoder attention, feed-forward; each with residual + layer norm."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int):
        super().__init__()
        heads = config.decoder_attention_heads
        self.init_self_attention(config, heads, layer_idx, is_causal=True)
        self.encoder_attn = VanillaTransformerAttention(
            config, heads, layer_idx=layer_idx, is_cross_attention=True
        )
        self.encoder_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.init_feed_forward(config, config.decoder_ffn_dim)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None,
        cache: EncoderDecoderCache | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        # hidden_states: (B, T, C); attention_mask: (B or 1, 1, T, K); encoder_hidden_states: (B, S, C)
        hidden_states, self_weights = self.self_attention_sublayer(
            hidden_states, attention_mask, cache, rotary, output_attentions
        )

        x = self.residual.pre(hidden_states, self.encoder_attn_layer_norm)
        x, cross_weights = self.encoder_attn(
            x,
            encoder_attention_mask,
            key_value_states=encoder_hidden_states,
            cache=cache,
            output_attentions=output_attentions,
        )
        hidden_states = self.residual.post(hidden_states, x, self.encoder_attn_layer_norm)
        return self.feed_forward_sublayer(hidden_states), self_weights, cross_weights


# ----------------------------------------------------------------------------------------------------------------
# Pretrained base: weight initialisation, capability flags
# ----------------------------------------------------------------------------------------------------------------


class VanillaTransformerPreTrainedModel(PreTrainedModel):
    config_class = VanillaTransformerConfig
    config: VanillaTransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _can_compile_fullgraph = True
    _no_split_modules = ["VanillaTransformerEncoderLayer", "VanillaTransformerDecoderLayer"]

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """`PreTrainedModel.save_pretrained` (also what `push_to_hub` and `Trainer` call), writing a folder that
        loads where this project is not installed: config.json maps `AutoConfig`, `AutoModel`,
        `AutoModelForSeq2SeqLM` and the "translation" pipeline to this file and its siblings, which
        transformers copies next to the weights (the classes are registered for their auto classes below)."""
        self.config.auto_map = self.remote_code_auto_map()
        pipelines = self.remote_code_pipelines()
        if pipelines:
            self.config.custom_pipelines = pipelines
        super().save_pretrained(save_directory, *args, **kwargs)

    @classmethod
    def remote_code_auto_map(cls) -> dict[str, str]:
        """The `auto_map` written to config.json on save: `AutoConfig` -> the config class of this model's family,
        and each auto class that a class of the family (same config class) is registered for with
        `register_for_auto_class` -> that class (`file.Class`)."""
        # transformers types a model's config_class as optional; every family of ours sets it
        assert cls.config_class is not None
        family: list[type[VanillaTransformerPreTrainedModel]] = [VanillaTransformerPreTrainedModel]
        classes: dict[str, type] = {"AutoConfig": cls.config_class}
        while family:
            model_class = family.pop(0)
            family += model_class.__subclasses__()
            auto_class = model_class.__dict__.get("_auto_class")  # registered itself, not inherited
            if model_class.config_class is cls.config_class and auto_class is not None:
                classes[auto_class] = model_class
        return auto_map_of(classes)

    @classmethod
    def remote_code_pipelines(cls) -> dict[str, dict]:
        """The `custom_pipelines` written to config.json on save: the "translation" task -> `TranslationPipeline`
        for the family with a sequence-to-sequence LM, so that `pipeline("translation", model=folder,
        trust_remote_code=True)` finds it; none for the other families (transformers' own pipelines serve them)."""
        if "AutoModelForSeq2SeqLM" not in cls.remote_code_auto_map():
            return {}
        pipeline = auto_map_of({TASK: TranslationPipeline})[TASK]
        return {TASK: {"impl": pipeline, "pt": ["AutoModelForSeq2SeqLM"], "type": "text"}}

    def train(self, mode: bool = True):
        """`PreTrainedModel.train`; entering training mode also frees the packed copies of this model's weights
        that CPU decoding keeps (see `linear`): the updates to come would make them stale."""
        if mode:
            release_cpu_inference_weights(self.parameters())
        return super().train(mode)

    def _init_weights(self, module: nn.Module) -> None:
        """Xavier-uniform (or N(0, `linear_init_std`)) linear layers with zero bias, N(0, `embedding_init_std`)
        embeddings with a zero pad row, unit LayerNorms, and the fixed position tables rebuilt (they are buffers
        and are never loaded)."""
        if isinstance(module, nn.Linear):
            if self.config.linear_init_std is None:
                init.xavier_uniform_(module.weight)
            else:
                init.normal_(module.weight, mean=0.0, std=self.config.linear_init_std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):  # token embeddings and learned positions
            init.normal_(module.weight, mean=0.0, std=self.config.embedding_init_std)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, SinusoidalPositionalEncoding):
            init.copy_(module.table, module.build_table())
        elif isinstance(module, RotaryEmbedding):
            init.copy_(module.inv_freq, module.build_inv_freq())
        elif (
            isinstance(module, PreTrainedModel)
            and (bias := getattr(module, "final_logits_bias", None)) is not None
        ):
            init.zeros_(bias)  # the output bias of an LM head


class VanillaTransformerEncoder(VanillaTransformerPreTrainedModel, VanillaTransformerStack):
    """N identical layers of self-attention + feed-forward over the source sentence, with its own token embedding
    (the model ties it to the decoder's when they share a vocabulary). `type_vocab_size` token-type embeddings and
    a LayerNorm on the summed embeddings (`embedding_layer_norm`) are the encoder-only family's options (BERT)."""

    def __init__(
        self, config: VanillaConfigBase, type_vocab_size: int = 0, embedding_layer_norm: bool = False
    ):
        super().__init__(config)
        self.init_stack(
            config,
            config.vocab_size,
            config.encoder_attention_heads,
            type_vocab_size=type_vocab_size,
            embedding_layer_norm=embedding_layer_norm,
        )
        self.layers = nn.ModuleList(
            [VanillaTransformerEncoderLayer(config, layer_idx=i) for i in range(config.encoder_layers)]
        )
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        """input_ids: (B, S); attention_mask: (B, S) 1 = token, 0 = padding; token_type_ids: (B, S) segment ids
        (None: type 0; only type 0 without token-type embeddings); position_ids: (B or 1, S), by default counted
        over the real tokens. Returns (B, S, C) states."""
        output_attentions, output_hidden_states, return_dict = output_options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        shape = check_stack_inputs(
            input_ids, inputs_embeds, attention_mask, self.config.vocab_size, self.config
        )
        types = self.token_type_embeddings
        check_token_type_ids(token_type_ids, shape, types.num_embeddings if types is not None else 0)
        check_position_ids(position_ids, shape, self.config)
        # the check has made sure that exactly one of them is given
        device = cast(torch.Tensor, input_ids if input_ids is not None else inputs_embeds).device
        attention_mask = without_padding(attention_mask)
        if position_ids is None:
            position_ids = build_position_ids(attention_mask, 0, shape[1], device)  # (B or 1, S)
        # (B, S, C)
        hidden_states, rotary = self.embed(input_ids, inputs_embeds, position_ids, token_type_ids)
        mask = build_attention_mask(attention_mask, hidden_states.dtype)  # (B, 1, 1, S) or None

        hidden_states, all_states, (attentions,) = self.run_layers(
            hidden_states, output_hidden_states, output_attentions, mask, rotary=rotary
        )
        output = BaseModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_states, attentions=attentions
        )
        return output if return_dict else output.to_tuple()


class VanillaTransformerDecoder(VanillaTransformerPreTrainedModel, VanillaTransformerStack):
    """N identical layers of masked self-attention, encoder-decoder attention and feed-forward, with its own token
    embedding (tied to the encoder's by the model when they share a vocabulary)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.init_stack(
            config,
            config.decoder_vocab_size,
            config.decoder_attention_heads,
            embedding_layer_norm=config.layernorm_embedding,
        )
        self.layers = nn.ModuleList(
            [VanillaTransformerDecoderLayer(config, layer_idx=i) for i in range(config.decoder_layers)]
        )
        self._cross_mask_memo = MaskMemo()
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions | tuple:
        """input_ids: (B, T) new target tokens; attention_mask: (B, K) target token mask over cached + new
        positions, or a 4-D (B, 1, T, K) mask; encoder_hidden_states: (B, S, C); encoder_attention_mask: (B, S).
        With `use_cache` (None: `config.use_cache`), self-attention K/V are appended to `cache` and encoder K/V are
        computed once."""
        output_attentions, output_hidden_states, return_dict = output_options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        use_cache = bool(self.config.use_cache) if use_cache is None else use_cache
        cache = given_cache(cache, kwargs.get("past_key_values"))
        shape = check_inputs(input_ids, inputs_embeds, self.config.decoder_vocab_size, "decoder_input_ids")
        cache = encoder_decoder_cache(cache, use_cache, self.config)
        new_tokens = shape[1]
        past_length = cache.get_seq_length() if cache is not None else 0
        if encoder_hidden_states is None:
            raise ValueError("the decoder needs encoder_hidden_states (run the encoder first)")
        check_decoder_inputs(attention_mask, shape, past_length, self.config)
        device = encoder_hidden_states.device
        attention_mask = without_padding(attention_mask)
        position_ids = build_position_ids(attention_mask, past_length, new_tokens, device)  # (B or 1, T)
        hidden_states, rotary = self.embed(input_ids, inputs_embeds, position_ids)  # (B, T, C)
        self_cache = cache.self_attention_cache if cache is not None else None
        kernel_is_causal = attention_backend(self.config, output_attentions) == "sdpa"
        self_mask = self.causal_mask(attention_mask, self_cache, past_length, hidden_states, kernel_is_causal)
        memo_key = (hidden_states.dtype, hidden_states.device)
        found, cross_mask = self._cross_mask_memo.get(encoder_attention_mask, memo_key)
        if not found:
            cross_mask = build_attention_mask(without_padding(encoder_attention_mask), hidden_states.dtype)
            self._cross_mask_memo.put(encoder_attention_mask, memo_key, cross_mask)  # (B, 1, 1, S) or None

        hidden_states, all_states, (self_attentions, cross_attentions) = self.run_layers(
            hidden_states,
            output_hidden_states,
            output_attentions,
            self_mask,
            encoder_hidden_states,
            cross_mask,
            cache=cache,
            rotary=rotary,
        )
        output = BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states,
            hidden_states=all_states,
            attentions=self_attentions,
            cross_attentions=cross_attentions,
            **cache_output(cache, use_cache),
        )
        return output if return_dict else output.to_tuple()


# ----------------------------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------------------------


# the decoder's output fields that the seq2seq output renames (last states, cross-attentions, cache keep theirs)
SEQ2SEQ_DECODER_FIELDS = {"hidden_states": "decoder_hidden_states", "attentions": "decoder_attentions"}


class VanillaTransformerModel(VanillaTransformerPreTrainedModel):
    """Encoder + decoder, returning the decoder's last hidden states (no output projection)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        if config.share_encoder_decoder_embeddings:
            # one joint vocabulary: the stacks' embeddings are tied to this one (one parameter, saved once)
            self.shared = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
            self._tied_weights_keys = {
                "encoder.embed_tokens.weight": "shared.weight",
                "decoder.embed_tokens.weight": "shared.weight",
            }
        else:
            self.shared = None
            # transformers declares `_tied_weights_keys: dict[str, str] = None`: None is its own default
            self._tied_weights_keys = None  # pyright: ignore[reportAttributeAccessIssue]
        self.encoder = VanillaTransformerEncoder(config, embedding_layer_norm=config.layernorm_embedding)
        self.decoder = VanillaTransformerDecoder(config)
        self._checked_mask = MaskMemo()  # the source mask generate() passes again at every step
        self.post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict[str, str]:
        """`PreTrainedModel`'s {target: source} ties, which it declares only with `tie_word_embeddings` (a flag
        about the output projection): the stacks of one joint vocabulary share `shared` whatever that flag says."""
        tied = super().get_expanded_tied_weights_keys(all_submodels=all_submodels)
        if not all_submodels and self._tied_weights_keys:
            tied = {**self._tied_weights_keys, **tied}
        return tied

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        if self.config.share_encoder_decoder_embeddings:
            self.shared = value
            self.decoder.embed_tokens = value
        self.encoder.embed_tokens = value

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput | tuple:
        """Source (B, S) ids + mask and target (B, T) ids -> (B, T, C) decoder states (see the module
        docstring for the mask and cache conventions). `past_key_values` is the 5.23 name of `cache`."""
        cache = given_cache(cache, past_key_values)
        output_attentions, output_hidden_states, return_dict = output_options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        use_cache = bool(self.config.use_cache) if use_cache is None else use_cache
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError("pass decoder_input_ids (or labels to the model with the LM head)")
        # what both stacks return: states and attention weights as asked, as a ModelOutput
        returned = dict(
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True
        )

        if encoder_outputs is None:
            encoder_outputs = cast(
                BaseModelOutput,
                self.encoder(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    inputs_embeds=inputs_embeds,
                    **returned,
                ),
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs[:3])  # (last states, all states, attentions)
        # (B, S, C); transformers types every field of a model output as optional
        encoder_states = cast(torch.Tensor, encoder_outputs.last_hidden_state)
        if attention_mask is not None:
            shape = tuple(encoder_states.shape[:2])
            if not self._checked_mask.get(attention_mask, shape)[0]:
                check_token_mask(attention_mask, shape, "attention_mask")
                self._checked_mask.put(attention_mask, shape, True)

        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_states,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **returned,
        )
        # the decoder's fields under the seq2seq output's names, the encoder's with "encoder_"
        output = Seq2SeqModelOutput(
            **{SEQ2SEQ_DECODER_FIELDS.get(name) or name: value for name, value in decoder_outputs.items()},
            **{f"encoder_{name}": value for name, value in encoder_outputs.items()},
        )
        return output if return_dict else output.to_tuple()


# ----------------------------------------------------------------------------------------------------------------
# The model with the LM head: teacher forcing, the paper's decoding defaults, generate()
# ----------------------------------------------------------------------------------------------------------------


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing: (B, T) labels -> (B, T) decoder input `[start, y_1, ..., y_{T-1}]`, IGNORE_INDEX -> pad."""
    shifted = labels.new_empty(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == IGNORE_INDEX, pad_token_id)


def default_generation_config(config: PretrainedConfig) -> GenerationConfig:
    """The paper's beam 4 with `DEFAULT_LENGTH_PENALTY` and ids from the config (ours, or any encoder-decoder
    config with the same token ids, e.g. Marian's); never emits pad or bos; at most 256 new tokens, fewer when the
    position table is shorter (`position_limit`).

    `length_penalty` follows transformers: a finished hypothesis scores sum(log p) / length ** length_penalty
    (not GNMT's ((5 + length) / 6) ** alpha, with which the paper's 0.6 was chosen)."""
    suppress = sorted(
        {config.pad_token_id}
        | ({config.bos_token_id} if config.bos_token_id not in (None, config.eos_token_id) else set())
    )
    limit = position_limit(config)
    return GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        num_beams=4,
        length_penalty=DEFAULT_LENGTH_PENALTY,
        early_stopping=True,
        # the decoder input holds the start token plus the generated ones: stay inside the position table
        max_new_tokens=256 if limit is None else min(256, limit - 1),
        suppress_tokens=suppress,
    )


class VanillaTransformerForConditionalGeneration(VanillaTransformerPreTrainedModel, GenerationMixin):
    """The full translation model: encoder, decoder and the output projection to target-vocabulary logits
    (tied to the decoder's input embedding when `tie_word_embeddings`), usable with `generate()`.

    With `transformers.Trainer` / `Seq2SeqTrainer` the loss is normalised over the whole accumulated batch:
    `accepts_loss_kwargs` makes Trainer pass `num_items_in_batch` to `forward` (see there) and leave the loss
    unscaled by the accumulation steps, so accumulating k batches gives the gradient of one concatenated batch.

    The accessors `get_encoder`, `get_decoder`, `get_input_embeddings` and `get_output_embeddings` (and setters)
    are PreTrainedModel's: they find `model.encoder`, `model.decoder`, the model's embeddings and `lm_head`."""

    accepts_loss_kwargs = True

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.model = VanillaTransformerModel(config)
        self.lm_head = Linear(config.d_model, config.decoder_vocab_size, bias=False)
        # the output bias is a trained parameter (Marian keeps the same vector as a frozen buffer)
        self.final_logits_bias = (
            nn.Parameter(torch.zeros(config.decoder_vocab_size)) if config.output_bias else None
        )
        if config.tie_word_embeddings:
            source = (
                "model.shared.weight"
                if config.share_encoder_decoder_embeddings
                else ("model.decoder.embed_tokens.weight")
            )
            self._tied_weights_keys = {"lm_head.weight": source}
        else:
            # transformers declares `_tied_weights_keys: dict[str, str] = None`: None is its own default
            self._tied_weights_keys = None  # pyright: ignore[reportAttributeAccessIssue]
        self.post_init()
        self.generation_config = default_generation_config(config)

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate` after `check_generation_arguments` (values that transformers would reject
        late or accept silently: top_p outside (0, 1], temperature <= 0, negative top_k, ...)."""
        check_generation_arguments(kwargs, kwargs.get("generation_config") or self.generation_config)
        # transformers types generate's self as a protocol that no PreTrainedModel satisfies (`device` is a property)
        return super().generate(*args, **kwargs)  # pyright: ignore[reportAttributeAccessIssue]

    def _reorder_cache(self, cache: EncoderDecoderCache, beam_idx: torch.Tensor) -> EncoderDecoderCache:
        """Beam search keeps the hypotheses `beam_idx` (B * beams,): reorder the self-attention cache only.
        The cross-attention cache holds K/V of the encoder output, which generate() repeats for every beam of a
        sentence, and beams never move across sentences, so its reordered rows would be identical copies."""
        # transformers types beam_idx as the legacy LongTensor class, which no tensor is an instance of
        cache.self_attention_cache.reorder_cache(beam_idx)  # pyright: ignore[reportArgumentType]
        return cache

    def resize_token_embeddings(self, new_num_tokens: int | None = None, *args, **kwargs) -> nn.Embedding:
        """Resize the source vocabulary. Shared embeddings: the one vocabulary, with the output projection and the
        output bias, which keeps its values and gets zeros for new tokens. Separate vocabularies: the source
        embeddings only; the target vocabulary, its output projection and bias stay (as in Marian)."""
        lm_head = self.lm_head
        embeddings = super().resize_token_embeddings(new_num_tokens, *args, **kwargs)
        if not self.config.share_encoder_decoder_embeddings:
            # transformers resizes the output projection with the input embeddings; here it maps to the target
            # vocabulary
            self.lm_head = lm_head
        else:
            self.config.decoder_vocab_size = self.config.vocab_size
            bias = self.final_logits_bias
            if bias is not None and bias.shape[0] != self.config.vocab_size:
                # F.pad appends zeros, or crops when the vocabulary shrinks (negative width)
                self.final_logits_bias = nn.Parameter(
                    F.pad(bias.data, (0, self.config.vocab_size - bias.shape[0]))
                )
        return embeddings

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput | tuple:
        """Like `VanillaTransformerModel.forward`, plus `labels` (B, T): target ids ending with </s>,
        IGNORE_INDEX for positions to ignore. With labels and no decoder input, the decoder input is the labels
        shifted right (teacher forcing). `loss` is the token cross-entropy summed over the non-ignored positions
        and divided by `num_items_in_batch` (Trainer's count of labelled positions in all the batches of one
        update), or by this batch's count when it is None: the mean. Returns `logits` (B, T, V)."""
        output_attentions, output_hidden_states, return_dict = output_options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        if labels is not None:
            shape = input_shape(decoder_input_ids, decoder_inputs_embeds)  # None: the labels become the input
            check_labels(labels, self.config.decoder_vocab_size, shape, "decoder_input_ids")
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=given_cache(cache, past_key_values),
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        # the output bias rides in the projection's GEMM (addmm): no second (B, T, V) tensor
        logits = linear(outputs.last_hidden_state, self.lm_head.weight, self.final_logits_bias)  # (B, T, V)
        loss = token_loss(logits, labels, num_items_in_batch) if labels is not None else None
        # every field of the model's output but the decoder states that became logits: cache, states, attentions
        passed = {name: value for name, value in outputs.items() if name != "last_hidden_state"}
        output = Seq2SeqLMOutput(loss=loss, logits=logits, **passed)
        return output if return_dict else output.to_tuple()


# ----------------------------------------------------------------------------------------------------------------
# Remote code: every save writes a folder that loads with trust_remote_code=True
# ----------------------------------------------------------------------------------------------------------------

VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
