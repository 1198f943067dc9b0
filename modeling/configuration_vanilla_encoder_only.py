"""Configuration of the encoder-only Transformer: the encoder of "Attention Is All You Need" alone, with a
masked-language-model head or a sequence-classification head (the BERT family, Devlin et al., 2019).

The network is the paper's encoder (section 3.1) and its defaults are the paper's *base* encoder: d_model 512,
8 heads, d_ff 2048, 6 layers, dropout 0.1, ReLU, post-LN, sinusoidal positions, embeddings scaled by
sqrt(d_model), output projection tied to the embedding. Each BERT ingredient the paper does not have is a named
field, off by default; `BERT` below lists the values that make this model compute what BERT computes (the BERT
converter, `convert_bert.py`, sets them).
"""

from __future__ import annotations

import math

from transformers import PretrainedConfig

from .configuration_vanilla_transformer import field_problems, head_problems, is_number, reject_unknown_fields

CLASSIFIER_POOLINGS = ("first", "mean")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")

# The fields that turn the paper's encoder into BERT's (besides the sizes and the vocabulary).
BERT = dict(
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


class VanillaEncoderOnlyConfig(PretrainedConfig):
    r"""Configuration for [`VanillaEncoderOnlyModel`], [`VanillaEncoderOnlyForMaskedLM`] and
    [`VanillaEncoderOnlyForSequenceClassification`].

    The encoder fields have the names and meanings of [`VanillaTransformerConfig`]'s, so that the encoder-decoder's
    blocks (attention, feed-forward, residual block, positions) build this model unchanged. BERT's names are
    aliases: `hidden_size` = `d_model`, `num_hidden_layers` = `encoder_layers`, `num_attention_heads` =
    `encoder_attention_heads`, `intermediate_size` = `encoder_ffn_dim` (accepted as arguments too).

    Args:
        vocab_size: Size of the token vocabulary (input embedding and masked-LM output).
        d_model: Width of every sub-layer output (the paper's d_model).
        encoder_layers: Number of encoder blocks (N in the paper).
        encoder_attention_heads: Attention heads (h in the paper).
        encoder_ffn_dim: Inner width of the position-wise feed-forward network (d_ff).
        activation_function: Non-linearity of the feed-forward network and of the masked-LM transform: "relu"
            (paper), "gelu" (BERT: the exact erf GELU), "gelu_new" (tanh approximation), "silu" or "swish".
        dropout: Dropout on the embeddings and on each sub-layer output before the residual addition (P_drop).
        attention_dropout: Dropout on the attention probabilities (0 in the paper, 0.1 in BERT).
        activation_dropout: Dropout after the feed-forward non-linearity (0 in the paper and in BERT).
        normalize_before: False (paper, BERT) is post-LN `LN(x + Sublayer(x))`; True is pre-LN
            `x + Sublayer(LN(x))` with a final LayerNorm after the last block.
        layer_norm_eps: Epsilon of every LayerNorm (BERT: 1e-12).
        position_encoding: "sinusoidal" (paper), "learned" (BERT; the paper's Table 3 row E) or "rope" (rotary
            positions on queries and keys).
        sinusoidal_layout: "interleaved" (paper) or "concatenated" (all sines, then all cosines).
        max_position_embeddings: Longest input the model accepts with sinusoidal or learned positions.
        rope_theta: Base of the rotary frequencies when `position_encoding="rope"`.
        scale_embedding: Multiply token embeddings by sqrt(d_model) (paper, section 3.4; BERT does not).
        type_vocab_size: Number of token types (segments) with a learned embedding added to the input (BERT: 2,
            sentence A and B; `token_type_ids` select them and default to type 0). 0 (paper): no token types.
        embedding_layer_norm: Apply a LayerNorm to the sum of token, position and type embeddings, before the
            embedding dropout (BERT). False (paper): no such norm.
        mlm_head_transform: The masked-LM head first maps each state through `LN(act(dense(x)))` (BERT's
            prediction-head transform) before the output projection. False (paper's output layer): the output
            projection reads the encoder states directly.
        tie_word_embeddings: The masked-LM output projection reuses the input embedding matrix (paper section
            3.4, BERT).
        output_bias: Add a learned per-token bias to the masked-LM logits (BERT's `cls.predictions.bias`).
        classifier_pooling: The one vector the sequence classifier sees: "first" (BERT) is the first token's
            state ([CLS] in BERT's tokenizer), "mean" is the mean of the real (non-padding) tokens' states
            (for tokenizers without a [CLS] token, like this project's). Either goes through BERT's pooler,
            `tanh(dense(x))`, then dropout and the classifier.
        classifier_dropout: Dropout before the classifier; `None` means `dropout` (as in BERT).
        init_std: Standard deviation of the normal initialisation of the embedding matrices; `None` means
            d_model ** -0.5 (BERT: 0.02).
        linear_init_std: Standard deviation of the normal initialisation of every linear layer's weight; `None`
            means Xavier-uniform (BERT: 0.02).
        pad_token_id: Padding id (`<pad>`, 0 in our tokenizer and in BERT's); its embedding row starts at zero.
        bos_token_id, eos_token_id: Ids the tokenizer adds (`<s>` 2, `</s>` 3 in ours; BERT's [CLS] and [SEP]
            are not declared here). The model does not read them.
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

    def __init__(
        self,
        vocab_size: int = 37000,
        d_model: int = 512,
        encoder_layers: int = 6,
        encoder_attention_heads: int = 8,
        encoder_ffn_dim: int = 2048,
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
        type_vocab_size: int = 0,
        embedding_layer_norm: bool = False,
        mlm_head_transform: bool = False,
        tie_word_embeddings: bool = True,
        output_bias: bool = True,
        classifier_pooling: str = "first",
        classifier_dropout: float | None = None,
        init_std: float | None = None,
        linear_init_std: float | None = None,
        pad_token_id: int = 0,
        bos_token_id: int | None = 2,
        eos_token_id: int | None = 3,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.encoder_layers = encoder_layers
        self.encoder_attention_heads = encoder_attention_heads
        self.encoder_ffn_dim = encoder_ffn_dim
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
        self.type_vocab_size = type_vocab_size
        self.embedding_layer_norm = embedding_layer_norm
        self.mlm_head_transform = mlm_head_transform
        self.tie_word_embeddings = tie_word_embeddings
        self.output_bias = output_bias
        self.classifier_pooling = classifier_pooling
        self.classifier_dropout = classifier_dropout
        self.init_std = init_std
        self.linear_init_std = linear_init_std
        for alias, name in self.attribute_map.items():  # BERT's names given instead of ours
            if alias in kwargs:
                setattr(self, name, kwargs.pop(alias))
        reject_unknown_fields(VanillaEncoderOnlyConfig, kwargs)
        self.validate_architecture(check_ids=False)  # sizes first: transformers' own checks assume ints
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )
        self.validate_architecture()

    def validate_architecture(self, check_ids: bool = True) -> None:
        """Raise `ValueError` naming every offending value if the architecture fields are inconsistent."""
        problems = field_problems(
            self,
            sizes=(
                "vocab_size",
                "d_model",
                "encoder_layers",
                "encoder_attention_heads",
                "encoder_ffn_dim",
                "max_position_embeddings",
            ),
            flags=(
                "normalize_before",
                "scale_embedding",
                "embedding_layer_norm",
                "mlm_head_transform",
                "tie_word_embeddings",
                "output_bias",
            ),
        )
        types = self.type_vocab_size
        if isinstance(types, bool) or not isinstance(types, int) or types < 0:
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
            pad = self.pad_token_id
            if pad is None:
                problems.append(f"pad_token_id must be set (an id in [0, {self.vocab_size}))")
            elif isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < self.vocab_size:
                problems.append(f"pad_token_id={pad!r} is outside the vocabulary [0, {self.vocab_size})")
        if problems:
            raise ValueError("Invalid VanillaEncoderOnlyConfig: " + "; ".join(problems) + ".")

    @property
    def embedding_init_std(self) -> float:
        """Standard deviation used to initialise embedding matrices."""
        return self.init_std if self.init_std is not None else 1.0 / math.sqrt(self.d_model)
