"""Configuration of the encoder-only Transformer: the encoder of "Attention Is All You Need" alone, with a
masked-language-model head or a sequence-classification head (the BERT family, Devlin et al., 2019).

The network is the paper's encoder (section 3.1) and its defaults are the paper's *base* encoder: d_model 512,
8 heads, d_ff 2048, 6 layers, dropout 0.1, ReLU, post-LN, sinusoidal positions, embeddings scaled by
sqrt(d_model), output projection tied to the embedding. Each BERT ingredient the paper does not have is a named
field, off by default; `BERT` below lists the values that make this model compute what BERT computes (the BERT
converter, `convert/bert.py`, sets them).
"""

from __future__ import annotations

from typing import Any

from .configuration_vanilla_base import (
    VanillaConfigBase,
    head_problems,
    init_arguments,
    is_id,
    is_number,
    token_id_problems,
)

CLASSIFIER_POOLINGS = ("first", "mean")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")

# The fields that turn the paper's encoder into BERT's (besides the sizes and the vocabulary).
BERT: dict[str, Any] = dict(
    activation_function="gelu",
    normalize_before=False,
    position_encoding="learned",
    scale_embedding=False,
    type_vocab_size=2,
    embedding_layer_norm=True,
    mlm_head_transform=True,
    output_bias=True,
    classifier_pooling="first",
    layer_norm_eps=1e-12,
)


class VanillaEncoderOnlyConfig(VanillaConfigBase):
    r"""Configuration for [`VanillaEncoderOnlyModel`], [`VanillaEncoderOnlyForMaskedLM`] and
    [`VanillaEncoderOnlyForSequenceClassification`].

    The encoder fields have the names and meanings of [`VanillaTransformerConfig`]'s, so that the encoder-decoder's
    blocks (attention, feed-forward, residual block, positions) build this model unchanged. BERT's names are
    aliases: `hidden_size` = `d_model`, `num_hidden_layers` = `encoder_layers`, `num_attention_heads` =
    `encoder_attention_heads`, `intermediate_size` = `encoder_ffn_dim` (accepted as arguments too).

    The fields every family shares are documented below the family's own; with BERT's values they are
    `activation_function="gelu"` (also the masked-LM transform's non-linearity), learned positions, unscaled
    embeddings, `layer_norm_eps=1e-12`, N(0, 0.02) initialisation, and `output_bias` is BERT's
    `cls.predictions.bias`. BERT's [CLS] and [SEP] are not declared as bos/eos; the model does not read them.

    Args:
        encoder_layers: Number of encoder blocks (N in the paper).
        encoder_attention_heads: Attention heads (h in the paper).
        encoder_ffn_dim: Inner width of the position-wise feed-forward network (d_ff).
        type_vocab_size: Number of token types (segments) with a learned embedding added to the input (BERT: 2,
            sentence A and B; `token_type_ids` select them and default to type 0). 0 (paper): no token types.
        embedding_layer_norm: Apply a LayerNorm to the sum of token, position and type embeddings, before the
            embedding dropout (BERT). False (paper): no such norm.
        mlm_head_transform: The masked-LM head first maps each state through `LN(act(dense(x)))` (BERT's
            prediction-head transform) before the output projection. False (paper's output layer): the output
            projection reads the encoder states directly.
        classifier_pooling: The one vector the sequence classifier sees: "first" (BERT) is the first token's
            state ([CLS] in BERT's tokenizer), "mean" is the mean of the real (non-padding) tokens' states
            (for tokenizers without a [CLS] token, like this project's). Either goes through BERT's pooler,
            `tanh(dense(x))`, then dropout and the classifier.
        classifier_dropout: Dropout before the classifier; `None` means `dropout` (as in BERT).
        num_labels, id2label, label2id, problem_type: The classification head's `PretrainedConfig` fields:
            `problem_type` "regression", "single_label_classification" or "multi_label_classification"; when
            unset it follows the labels as in BERT (one label: regression; integer labels: single-label; else
            multi-label).

    The masking token of masked-LM training is the tokenizer's business (`DataCollatorForLanguageModeling`
    replaces tokens with `tokenizer.mask_token_id`); the model reads no mask id.
    """

    model_type = "vanilla_encoder_only"
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
        "intermediate_size": "encoder_ffn_dim",
    }

    size_fields = ("encoder_layers", "encoder_attention_heads", "encoder_ffn_dim")
    flag_fields = ("embedding_layer_norm", "mlm_head_transform")

    def __init__(
        self,
        encoder_layers: int = 6,
        encoder_attention_heads: int = 8,
        encoder_ffn_dim: int = 2048,
        type_vocab_size: int = 0,
        embedding_layer_norm: bool = False,
        mlm_head_transform: bool = False,
        classifier_pooling: str = "first",
        classifier_dropout: float | None = None,
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
        arguments = init_arguments(locals())
        # BERT's names given instead of ours
        for alias, name in self.attribute_map.items():
            if alias in arguments:
                arguments[name] = arguments.pop(alias)
        super().__init__(**arguments)

    def family_problems(self, check_ids: bool) -> list[str]:
        problems = []
        types = self.type_vocab_size
        if not is_id(types) or types < 0:
            problems.append(f"type_vocab_size must be an integer >= 0 (0: no token types), got {types!r}")
        dropout = self.classifier_dropout
        if dropout is not None and (not is_number(dropout) or not 0.0 <= dropout < 1.0):
            problems.append(f"classifier_dropout must be a probability in [0, 1), got {dropout!r}")
        pooling = self.classifier_pooling
        if pooling not in CLASSIFIER_POOLINGS:
            problems.append(f"classifier_pooling must be one of {CLASSIFIER_POOLINGS}, got {pooling!r}")
        problem_type = getattr(self, "problem_type", None)  # set by PretrainedConfig.__init__
        if problem_type is not None and problem_type not in PROBLEM_TYPES:
            problems.append(
                f"problem_type must be None (follow the labels) or one of {PROBLEM_TYPES}, got {problem_type!r}"
            )
        if not problems and check_ids:  # the checks below assume well-typed sizes and the ids set
            problems += head_problems(self, ("encoder",))
            problems += token_id_problems(self, {"pad_token_id": self.vocab_size}, required=("pad_token_id",))
        return problems
