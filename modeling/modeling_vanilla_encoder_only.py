"""The encoder-only Transformer (the BERT family), built from the encoder-decoder's blocks, in paper order.

pretrained base -> embeddings (tokens, positions, token types) and encoder layers (VanillaTransformerEncoder and
its VanillaTransformerEncoderLayer: attention, feed-forward, residual blocks) -> VanillaEncoderOnlyModel ->
...ForMaskedLM (masked-LM head) and ...ForSequenceClassification (pooler + classifier)

Attention is bidirectional: every token sees every real token of its sequence; padding is masked as keys through
`build_attention_mask` (one additive mask per forward pass, see modeling_vanilla_transformer.py for its
convention). With `VanillaEncoderOnlyConfig`'s BERT values (`configuration_vanilla_encoder_only.BERT`) the model
computes what transformers' `BertForMaskedLM` / `BertForSequenceClassification` compute (`convert/bert.py`).

Shape legend used in the comments:
    B  batch size       L  sequence length      C  d_model      V  vocabulary size      N  num_labels

Conventions:
    * `attention_mask` is (B, L), 1/True for real tokens and 0/False for padding, as produced by the tokenizer.
    * `token_type_ids` (B, L) select the token-type (segment) embeddings; None means type 0 everywhere (BERT).
    * Positions count real tokens (left padding does not shift them; with right padding they are 0..L-1, BERT's);
      `position_ids` (B or 1, L) overrides them.
    * Masked-LM `labels` (B, L): the original token at the positions to predict, IGNORE_INDEX (-100) elsewhere.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers.activations import ACT2FN
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput, SequenceClassifierOutput
from transformers.utils.generic import ModelOutput

from .checks_vanilla_transformer import check_labels
from .configuration_vanilla_encoder_only import PROBLEM_TYPES, VanillaEncoderOnlyConfig
from .kernels_vanilla_transformer import Linear, apply_dropout, token_loss
from .modeling_vanilla_transformer import VanillaTransformerEncoder, VanillaTransformerPreTrainedModel
from .stack_vanilla_transformer import output_options

# ----------------------------------------------------------------------------------------------------------------
# Pretrained base: the encoder-decoder's initialisation, this family's config and auto classes
# ----------------------------------------------------------------------------------------------------------------


class VanillaEncoderOnlyPreTrainedModel(VanillaTransformerPreTrainedModel):
    """Initialisation and remote code as in the encoder-decoder (see `VanillaTransformerPreTrainedModel`); every
    save writes the auto classes this file's models are registered for (at its end) and no pipeline
    (transformers' own "fill-mask" and "text-classification" pipelines serve these models)."""

    config_class = VanillaEncoderOnlyConfig
    config: VanillaEncoderOnlyConfig
    _no_split_modules = ["VanillaTransformerEncoderLayer"]


# ----------------------------------------------------------------------------------------------------------------
# The model: embeddings and the stack of encoder layers
# ----------------------------------------------------------------------------------------------------------------


class VanillaEncoderOnlyModel(VanillaEncoderOnlyPreTrainedModel, VanillaTransformerEncoder):
    """The bidirectional encoder, returning the last hidden states (no head): the paper's encoder
    (`VanillaTransformerEncoder`: token embedding, positions, N encoder layers, final norm with pre-LN, its
    forward) with this family's config and BERT's embedding options: token-type embeddings (`type_vocab_size`)
    and a LayerNorm on the summed embeddings (`embedding_layer_norm`)."""

    def __init__(self, config: VanillaEncoderOnlyConfig):
        super().__init__(
            config, type_vocab_size=config.type_vocab_size, embedding_layer_norm=config.embedding_layer_norm
        )


# ----------------------------------------------------------------------------------------------------------------
# The heads' forward: the model, then the head
# ----------------------------------------------------------------------------------------------------------------


class VanillaEncoderOnlyWithHead(VanillaEncoderOnlyPreTrainedModel):
    """`VanillaEncoderOnlyModel` (`self.model`) under a task head: the one forward of every head runs the model and
    hands its output to the head's `head_output`."""

    def head_output(
        self,
        outputs: BaseModelOutput,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        num_items_in_batch: int | torch.Tensor | None,
    ) -> ModelOutput:
        """The head's output (`logits`, and `loss` with labels) from the model's `outputs`."""
        raise NotImplementedError

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> ModelOutput | tuple:
        """Like `VanillaEncoderOnlyModel.forward`, plus `labels`, the head's targets (see the head's class
        docstring), and `num_items_in_batch` (Trainer's count of scored positions in all the batches of one
        update, read by the heads whose loss is normalised over them). Returns the head's `logits` and, with
        labels, its `loss`; `hidden_states` and `attentions` are the model's."""
        _, _, return_dict = output_options(self.config, output_attentions, output_hidden_states, return_dict)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        output = self.head_output(outputs, attention_mask, labels, num_items_in_batch)
        return output if return_dict else output.to_tuple()


# ----------------------------------------------------------------------------------------------------------------
# Masked-language-model head
# ----------------------------------------------------------------------------------------------------------------


class VanillaEncoderOnlyLMTransform(nn.Module):
    """BERT's prediction-head transform, LN(act(dense(x))): (B, L, C) -> (B, L, C)."""

    def __init__(self, config: VanillaEncoderOnlyConfig):
        super().__init__()
        self.dense = Linear(config.d_model, config.d_model)
        self.activation_fn = ACT2FN[config.activation_function]
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(self.activation_fn(self.dense(hidden_states)))


class VanillaEncoderOnlyForMaskedLM(VanillaEncoderOnlyWithHead):
    """The encoder with a masked-LM head: (optional) transform, then the output projection to vocabulary logits
    (tied to the input embedding when `tie_word_embeddings`) with an optional bias.

    Training batches come from transformers' `DataCollatorForLanguageModeling` (15 % of the tokens chosen, 80 %
    of those replaced by the tokenizer's mask token, 10 % by a random token, 10 % kept; `labels` -100 elsewhere).
    As in the encoder-decoder, `accepts_loss_kwargs` makes `Trainer` pass `num_items_in_batch`, and the loss is
    normalised over the whole accumulated batch.

    `labels` (B, L): the token to predict, IGNORE_INDEX (-100) where nothing is scored. `loss` is the
    cross-entropy summed over the scored positions and divided by `num_items_in_batch` (Trainer's count of scored
    positions in all the batches of one update), or by this batch's count when it is None: the mean, as
    `BertForMaskedLM`. `logits`: (B, L, V)."""

    accepts_loss_kwargs = True

    def __init__(self, config: VanillaEncoderOnlyConfig):
        super().__init__(config)
        self.model = VanillaEncoderOnlyModel(config)
        self.lm_transform = VanillaEncoderOnlyLMTransform(config) if config.mlm_head_transform else None
        self.lm_head = Linear(config.d_model, config.vocab_size, bias=config.output_bias)
        tied = {"lm_head.weight": "model.embed_tokens.weight"} if config.tie_word_embeddings else None
        # transformers declares `_tied_weights_keys: dict[str, str] = None`: None is its own default
        self._tied_weights_keys = tied  # pyright: ignore[reportAttributeAccessIssue]
        self.post_init()

    def head_output(self, outputs, attention_mask, labels, num_items_in_batch) -> MaskedLMOutput:
        # (B, L, C); transformers types every field of a model output as optional
        hidden_states = cast(torch.Tensor, outputs.last_hidden_state)
        if labels is not None:
            fix = " (-100 where nothing is predicted)"
            check_labels(labels, self.config.vocab_size, tuple(hidden_states.shape[:2]), "input_ids", fix)
        if self.lm_transform is not None:
            hidden_states = self.lm_transform(hidden_states)
        logits = self.lm_head(hidden_states)  # (B, L, V)
        loss = token_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


# ----------------------------------------------------------------------------------------------------------------
# Sequence-classification head
# ----------------------------------------------------------------------------------------------------------------


class VanillaEncoderOnlyPooler(nn.Module):
    """BERT's pooler: one vector per sequence (`classifier_pooling`: the first token's state, or the mean over the
    real tokens), then tanh(dense(.)): (B, L, C) -> (B, C)."""

    def __init__(self, config: VanillaEncoderOnlyConfig):
        super().__init__()
        self.pooling = config.classifier_pooling
        self.dense = Linear(config.d_model, config.d_model)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        if self.pooling == "first":
            pooled = hidden_states[:, 0]  # (B, C)
        elif attention_mask is None:
            pooled = hidden_states.mean(dim=1)  # (B, C)
        else:
            weights = attention_mask.to(hidden_states.dtype)[..., None]  # (B, L, 1)
            pooled = (hidden_states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)  # (B, C)
        return torch.tanh(self.dense(pooled))


def problem_type_of(config: VanillaEncoderOnlyConfig, labels: torch.Tensor) -> str:
    """`config.problem_type`, or when unset BERT's rule: one label is regression, integer labels with several
    labels single-label classification, float labels multi-label classification."""
    if config.problem_type is not None:
        if config.problem_type not in PROBLEM_TYPES:
            raise ValueError(f"problem_type must be one of {PROBLEM_TYPES}, got {config.problem_type!r}")
        return config.problem_type
    if config.num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int):
        return "single_label_classification"
    return "multi_label_classification"


class VanillaEncoderOnlyForSequenceClassification(VanillaEncoderOnlyWithHead):
    """The encoder with BERT's classification head: pooler, dropout (`classifier_dropout`), a linear layer to
    `num_labels` logits. `labels` are (B,) class ids (single-label), (B, N) 0/1 floats (multi-label) or (B,) /
    (B, N) floats (regression); the loss is BERT's (cross-entropy, binary cross-entropy with logits, mean squared
    error), averaged over the batch. `Trainer` divides it by the accumulation steps itself
    (`accepts_loss_kwargs` is False). `logits`: (B, N)."""

    accepts_loss_kwargs = False

    def __init__(self, config: VanillaEncoderOnlyConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = VanillaEncoderOnlyModel(config)
        self.pooler = VanillaEncoderOnlyPooler(config)
        self.classifier_dropout = (
            config.dropout if config.classifier_dropout is None else config.classifier_dropout
        )
        # transformers types num_labels as optional (no id2label); a constructed config always has its label table
        self.classifier = Linear(config.d_model, cast(int, config.num_labels))
        self.post_init()

    def head_output(self, outputs, attention_mask, labels, num_items_in_batch) -> SequenceClassifierOutput:
        pooled = self.pooler(outputs.last_hidden_state, attention_mask)  # (B, C)
        logits = self.classifier(apply_dropout(pooled, self.classifier_dropout, self.training))  # (B, N)
        loss = None
        if labels is not None:
            problem_type = problem_type_of(self.config, labels)
            if problem_type == "regression":
                if self.num_labels == 1:
                    loss = F.mse_loss(logits.squeeze(), labels.squeeze().to(logits.dtype))
                else:
                    loss = F.mse_loss(logits, labels.to(logits.dtype))
            elif problem_type == "single_label_classification":
                loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
            else:
                loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


# ----------------------------------------------------------------------------------------------------------------
# Remote code: every save writes a folder that loads with trust_remote_code=True
# ----------------------------------------------------------------------------------------------------------------

VanillaEncoderOnlyModel.register_for_auto_class("AutoModel")
VanillaEncoderOnlyForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")
VanillaEncoderOnlyForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
