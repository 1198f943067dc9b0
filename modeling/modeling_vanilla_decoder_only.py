"""The decoder-only Transformer (a causal language model), built from the blocks of the encoder-decoder.

layer (masked self-attention + feed-forward) -> pretrained base -> VanillaDecoderOnlyModel
-> VanillaDecoderOnlyForCausalLM; answer_only_example (supervised fine-tuning data)

Each layer is the paper's decoder layer without the encoder-decoder attention. Attention
(`VanillaTransformerAttention`, causal, with transformers' `DynamicCache` or `StaticCache`), feed-forward,
`ResidualBlock`, the layer itself (`VanillaTransformerSelfAttentionLayer`), the stack (`VanillaTransformerStack`:
embedding, scale, positions, dropout, final pre-LN norm) and the mask builder (`decoder_self_attention_mask` /
`build_attention_mask`) are the encoder-decoder's, so the
conventions stated there hold here: public masks are (B, L) with 1 = token, one additive mask per call, no NaN
for fully padded rows. With `normalize_before=True`, learned positions, `gelu_new`, unscaled embeddings and a tied
output projection this is GPT-2 (convert/gpt2.py converts `GPT2LMHeadModel` weights; same logits).

Shape legend used in the comments:
    B  batch size        T  tokens of this call       K  key length (cached + new positions, or a static cache's size)
    C  d_model           V  vocabulary size

Positions count real tokens: position_ids default to `attention_mask.cumsum(-1) - 1` (0 on padding, as
generate() computes them for GPT-2), so a left-padded prompt gets the positions it has alone. Labels have the
length of `input_ids` and are shifted inside the model (logits at t are scored against labels at t + 1, as in
GPT2LMHeadModel); IGNORE_INDEX (-100) marks positions that are not scored: padding, and the prompt when only the
answer is trained on (`answer_only_example`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationConfig, GenerationMixin
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .cache_vanilla_transformer import cache_output, given_cache, self_attention_cache
from .checks_vanilla_transformer import (
    check_decoder_inputs,
    check_inputs,
    check_labels,
    input_shape,
    position_limit,
)
from .configuration_vanilla_decoder_only import VanillaDecoderOnlyConfig
from .decoding_vanilla_transformer import check_generation_arguments
from .kernels_vanilla_transformer import IGNORE_INDEX, Linear, linear, token_loss
from .masks_vanilla_transformer import without_padding
from .modeling_vanilla_transformer import (
    VanillaTransformerPreTrainedModel,
    VanillaTransformerSelfAttentionLayer,
    attention_backend,
)
from .positions_vanilla_transformer import build_position_ids
from .stack_vanilla_transformer import VanillaTransformerStack, output_options

# ----------------------------------------------------------------------------------------------------------------
# The layer: the paper's decoder layer without encoder-decoder attention
# ----------------------------------------------------------------------------------------------------------------


class VanillaDecoderOnlyLayer(VanillaTransformerSelfAttentionLayer):
    """Masked self-attention then feed-forward, each wrapped in `ResidualBlock` (post-LN or pre-LN), with the
    decoder's sizes; `forward` takes the stack's causal mask (None = causal, `decoder_self_attention_mask`) and
    the self-attention cache."""

    def __init__(self, config: VanillaDecoderOnlyConfig, layer_idx: int):
        super().__init__(
            config,
            config.decoder_attention_heads,
            config.decoder_ffn_dim,
            layer_idx=layer_idx,
            is_causal=True,
        )


# ----------------------------------------------------------------------------------------------------------------
# Pretrained base: the encoder-decoder's initialisation, this family's config and remote code
# ----------------------------------------------------------------------------------------------------------------


class VanillaDecoderOnlyPreTrainedModel(VanillaTransformerPreTrainedModel):
    """The encoder-decoder's pretrained base (initialisation, remote code on every save) for this family: its
    config class and its layer. Every save writes the auto classes this file's models are registered for (at its
    end) and no custom pipeline (transformers' "text-generation" pipeline serves `AutoModelForCausalLM`)."""

    config_class = VanillaDecoderOnlyConfig
    config: VanillaDecoderOnlyConfig
    _no_split_modules = ["VanillaDecoderOnlyLayer"]


# ----------------------------------------------------------------------------------------------------------------
# The model: embedding, positions, N layers, final pre-LN norm
# ----------------------------------------------------------------------------------------------------------------


class VanillaDecoderOnlyModel(VanillaDecoderOnlyPreTrainedModel, VanillaTransformerStack):
    """Token embedding (* sqrt(d_model) if `scale_embedding`) + positions, N decoder-only layers, and the final
    LayerNorm of pre-LN; returns the (B, T, C) states (no output projection)."""

    def __init__(self, config: VanillaDecoderOnlyConfig):
        super().__init__(config)
        self.init_stack(config, config.vocab_size, config.decoder_attention_heads)
        self.layers = nn.ModuleList(
            [VanillaDecoderOnlyLayer(config, layer_idx=i) for i in range(config.decoder_layers)]
        )
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast | tuple:
        """input_ids: (B, T) new tokens (or inputs_embeds (B, T, C)); attention_mask: (B, K) token mask over cached +
        new positions (1 = token, 0 = padding), or a ready-made 4-D (B, 1, T, K) mask; position_ids: (B or 1, T),
        by default counted over real tokens from the mask; cache: a transformers `Cache` (`DynamicCache`,
        `StaticCache`) that self-attention K/V are appended to (one is created with `use_cache` and no cache).
        `past_key_values` is the 5.23 name of `cache`. Returns (B, T, C) states."""
        cache = given_cache(cache, past_key_values)
        output_attentions, output_hidden_states, return_dict = output_options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        use_cache = bool(self.config.use_cache) if use_cache is None else use_cache
        shape = check_inputs(input_ids, inputs_embeds, self.config.vocab_size, "input_ids")
        cache = self_attention_cache(cache, use_cache, self.config)
        new_tokens = shape[1]
        past_length = cache.get_seq_length() if cache is not None else 0
        # the check has made sure that exactly one of them is given
        device = cast(torch.Tensor, input_ids if input_ids is not None else inputs_embeds).device
        check_decoder_inputs(attention_mask, shape, past_length, self.config, "attention_mask")
        attention_mask = without_padding(attention_mask)
        if position_ids is None:
            position_ids = build_position_ids(attention_mask, past_length, new_tokens, device)  # (B or 1, T)
        elif position_ids.shape[-1] != new_tokens:
            raise ValueError(
                f"position_ids have shape {tuple(position_ids.shape)} but there are {new_tokens} new tokens; pass "
                f"(batch, {new_tokens}) positions, or none to count them from attention_mask"
            )
        hidden_states, rotary = self.embed(input_ids, inputs_embeds, position_ids)  # (B, T, C)
        kernel_is_causal = attention_backend(self.config, output_attentions) == "sdpa"
        mask = self.causal_mask(attention_mask, cache, past_length, hidden_states, kernel_is_causal)

        hidden_states, all_states, (attentions,) = self.run_layers(
            hidden_states, output_hidden_states, output_attentions, mask, cache=cache, rotary=rotary
        )
        output = BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            hidden_states=all_states,
            attentions=attentions,
            **cache_output(cache, use_cache),
        )
        return output if return_dict else output.to_tuple()


# ----------------------------------------------------------------------------------------------------------------
# The model with the LM head: the causal language-model loss, generate()
# ----------------------------------------------------------------------------------------------------------------


def causal_lm_generation_config(config: VanillaDecoderOnlyConfig) -> GenerationConfig:
    """Decoding defaults of a causal LM: greedy, up to 256 new tokens (at most half the position table,
    `position_limit`), never emitting pad or (when it differs from eos) bos. Sampling and beam search are arguments
    of generate()."""
    suppress = sorted(
        ({config.pad_token_id} if config.pad_token_id is not None else set())
        | ({config.bos_token_id} if config.bos_token_id not in (None, config.eos_token_id) else set())
    )
    limit = position_limit(config)
    return GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        max_new_tokens=256 if limit is None else min(256, max(1, limit // 2)),
        suppress_tokens=suppress or None,
    )


class VanillaDecoderOnlyForCausalLM(VanillaDecoderOnlyPreTrainedModel, GenerationMixin):
    """The causal language model: `VanillaDecoderOnlyModel` and the output projection to vocabulary logits (tied to
    the input embedding when `tie_word_embeddings`), usable with `generate()` (greedy, sampling, beam search; with
    `cache_implementation="static"` too) and `transformers.Trainer`.

    With Trainer the loss is normalised over the whole accumulated batch: `accepts_loss_kwargs` makes Trainer pass
    `num_items_in_batch` (for a model named `...ForCausalLM` it counts the labels after the first position, which
    are the scored ones) and leave the loss unscaled by the accumulation steps."""

    accepts_loss_kwargs = True

    def __init__(self, config: VanillaDecoderOnlyConfig):
        super().__init__(config)
        self.model = VanillaDecoderOnlyModel(config)
        self.lm_head = Linear(config.d_model, config.vocab_size, bias=False)
        self.final_logits_bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.output_bias else None
        tied = config.tie_word_embeddings
        # transformers declares `_tied_weights_keys: dict[str, str] = None`: None is its own default
        self._tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"} if tied else None  # pyright: ignore[reportAttributeAccessIssue]
        self.post_init()
        self.generation_config = causal_lm_generation_config(config)

    def generate(self, *args, **kwargs):
        """`GenerationMixin.generate` after `check_generation_arguments` (see the encoder-decoder's generate)."""
        check_generation_arguments(kwargs, kwargs.get("generation_config") or self.generation_config)
        # transformers types generate's self as a protocol that no PreTrainedModel satisfies (`device` is a property)
        return super().generate(*args, **kwargs)  # pyright: ignore[reportAttributeAccessIssue]

    def resize_token_embeddings(self, new_num_tokens: int | None = None, *args, **kwargs) -> nn.Embedding:
        """Resize the vocabulary; the output bias keeps its values and gets zeros for new tokens."""
        embeddings = super().resize_token_embeddings(new_num_tokens, *args, **kwargs)
        bias = self.final_logits_bias
        if bias is not None and bias.shape[0] != self.config.vocab_size:
            # F.pad appends zeros, or crops when the vocabulary shrinks (negative width)
            self.final_logits_bias = nn.Parameter(
                F.pad(bias.data, (0, self.config.vocab_size - bias.shape[0]))
            )
        return embeddings

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        past_key_values: Cache | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        logits_to_keep: int = 0,
        shift_labels: torch.Tensor | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast | tuple:
        """Like `VanillaDecoderOnlyModel.forward`, plus `labels` (B, T), the same shape as `input_ids` (usually
        `input_ids` itself with IGNORE_INDEX on padding, and on the prompt for answer-only fine-tuning): the logits
        at position t are scored against `labels[:, t + 1]`. `loss` is the token cross-entropy summed over the
        scored positions (`labels[:, 1:] != IGNORE_INDEX`) and divided by `num_items_in_batch` (Trainer's count of
        them in all the batches of one update), or by this batch's count when it is None: the mean.
        `shift_labels` (B, T) are targets already shifted, as sequence- and context-parallel training passes them
        (each shard holds the targets of its own positions): the logits at t are scored against
        `shift_labels[:, t]`, and `labels` are then not read. Returns `logits` (B, T, V), or of the last
        `logits_to_keep` positions only (generate() asks for 1)."""
        output_attentions, output_hidden_states, return_dict = output_options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        shape = input_shape(input_ids, inputs_embeds)
        if shift_labels is not None:
            check_labels(
                shift_labels, self.config.vocab_size, shape, "input_ids", " (already shifted)", "shift_labels"
            )
        elif labels is not None:
            check_labels(labels, self.config.vocab_size, shape, "input_ids", " (the model shifts them)")
        if labels is not None or shift_labels is not None:
            use_cache = False
            logits_to_keep = 0
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=given_cache(cache, past_key_values),
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        hidden_states = outputs.last_hidden_state
        if logits_to_keep:
            hidden_states = hidden_states[:, -logits_to_keep:]  # (B, T', C)
        logits = linear(hidden_states, self.lm_head.weight, self.final_logits_bias)  # (B, T, V)
        loss = None
        if shift_labels is not None:
            targets, scored = shift_labels, logits  # (B, T): the targets of every position, as given
        elif labels is not None:
            targets, scored = labels[:, 1:], logits[:, :-1]  # (B, T - 1): the token after each position
        if labels is not None or shift_labels is not None:
            loss = token_loss(scored, targets, num_items_in_batch)
        passed = {name: value for name, value in outputs.items() if name != "last_hidden_state"}
        output = CausalLMOutputWithPast(loss=loss, logits=logits, **passed)
        return output if return_dict else output.to_tuple()


# ----------------------------------------------------------------------------------------------------------------
# Supervised fine-tuning data: the loss on the answer only
# ----------------------------------------------------------------------------------------------------------------


def answer_only_example(prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> dict[str, list[int]]:
    """One supervised fine-tuning example whose loss covers the answer only.

    Returns `input_ids = prompt + answer`, `attention_mask` (all 1) and `labels` of the same length with
    IGNORE_INDEX (-100) on every prompt token, so that `VanillaDecoderOnlyForCausalLM` (which shifts the labels)
    scores exactly the predictions of the answer tokens, the first one predicted from the last prompt token.
    End `answer_ids` with the eos id for the model to learn to stop. Pad batches of these with IGNORE_INDEX in
    `labels` (e.g. `DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100)`); either padding side works, as
    positions are counted from the attention mask.
    """
    prompt_ids, answer_ids = [int(i) for i in prompt_ids], [int(i) for i in answer_ids]
    if not prompt_ids or not answer_ids:
        raise ValueError(
            f"answer_only_example needs a non-empty prompt and answer, got {len(prompt_ids)} prompt and "
            f"{len(answer_ids)} answer tokens (start the prompt with the bos id if it may be empty)"
        )
    return {
        "input_ids": prompt_ids + answer_ids,
        "attention_mask": [1] * (len(prompt_ids) + len(answer_ids)),
        "labels": [IGNORE_INDEX] * len(prompt_ids) + answer_ids,
    }


# ----------------------------------------------------------------------------------------------------------------
# Remote code: every save writes a folder that loads with trust_remote_code=True
# ----------------------------------------------------------------------------------------------------------------

VanillaDecoderOnlyModel.register_for_auto_class("AutoModel")
VanillaDecoderOnlyForCausalLM.register_for_auto_class("AutoModelForCausalLM")
