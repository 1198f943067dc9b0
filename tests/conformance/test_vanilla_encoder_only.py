"""transformers' common model tests on the encoder-only family (`VanillaEncoderOnlyModel`,
`VanillaEncoderOnlyForMaskedLM`, `VanillaEncoderOnlyForSequenceClassification`), through a tester written after
transformers' own BERT tester (tests/models/bert/test_modeling_bert.py, Apache-2.0): a tiny model with BERT's
fields (`BERT` in configuration_vanilla_encoder_only.py), random ids, token types and padding mask. The upstream
tests that do not apply are skipped, each with its reason (also in docs/reliability.md)."""

from __future__ import annotations

import unittest

from vanilla_transformer.modeling import (
    VanillaEncoderOnlyConfig,
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
    VanillaEncoderOnlyModel,
)
from vanilla_transformer.modeling.configuration_vanilla_encoder_only import BERT

from .upstream import ConfigTester, ConformanceMixin, ModelTesterMixin, ids_tensor, random_attention_mask


class VanillaEncoderOnlyModelTester:
    def __init__(
        self,
        parent,
        batch_size=13,
        seq_length=7,
        is_training=True,
        vocab_size=99,
        d_model=32,
        layers=2,
        attention_heads=4,
        ffn_dim=37,
        max_position_embeddings=512,
        type_vocab_size=16,
        num_labels=3,
        pad_token_id=0,
    ):
        self.parent = parent
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.vocab_size = vocab_size
        self.hidden_size = d_model
        self.num_hidden_layers = layers
        self.num_attention_heads = attention_heads
        self.ffn_dim = ffn_dim
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.num_labels = num_labels
        self.pad_token_id = pad_token_id

    def get_config(self) -> VanillaEncoderOnlyConfig:
        fields = {**BERT, "type_vocab_size": self.type_vocab_size}
        return VanillaEncoderOnlyConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            encoder_attention_heads=self.num_attention_heads,
            encoder_ffn_dim=self.ffn_dim,
            max_position_embeddings=self.max_position_embeddings,
            init_std=0.02,
            linear_init_std=0.02,
            pad_token_id=self.pad_token_id,
            num_labels=self.num_labels,
            **fields,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        inputs_dict = {
            "input_ids": input_ids,
            "attention_mask": random_attention_mask([self.batch_size, self.seq_length]),
            **(
                {"token_type_ids": ids_tensor([self.batch_size, self.seq_length], self.type_vocab_size)}
                if self.type_vocab_size
                else {}
            ),
        }
        return self.get_config(), inputs_dict

    def prepare_config_and_inputs_for_common(self):
        return self.prepare_config_and_inputs()


class VanillaEncoderOnlyModelTest(ConformanceMixin, ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        VanillaEncoderOnlyModel,
        VanillaEncoderOnlyForMaskedLM,
        VanillaEncoderOnlyForSequenceClassification,
    )

    def setUp(self):
        self.model_tester = VanillaEncoderOnlyModelTester(self)
        # BERT's tester asks for hidden_size=37; ours must split into the default 8 heads and be even (sinusoids)
        self.config_tester = ConfigTester(self, config_class=VanillaEncoderOnlyConfig, d_model=40)

    def test_config(self):
        self.config_tester.run_common_tests()
