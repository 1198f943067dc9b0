"""transformers' common model tests on the decoder-only family (`VanillaDecoderOnlyModel`,
`VanillaDecoderOnlyForCausalLM`), through a tester written after transformers' own GPT-2 tester
(tests/models/gpt2/test_modeling_gpt2.py, Apache-2.0): a tiny pre-LN model with learned positions and GELU, as
GPT-2, random ids and a random padding mask. The upstream tests that do not apply are skipped, each with its
reason (also in docs/reliability.md)."""

from __future__ import annotations

import unittest

from vanilla_transformer.modeling import (
    VanillaDecoderOnlyConfig,
    VanillaDecoderOnlyForCausalLM,
    VanillaDecoderOnlyModel,
)

from .upstream import (
    ConfigTester,
    ConformanceMixin,
    GenerationTesterMixin,
    ModelTesterMixin,
    ids_tensor,
    random_attention_mask,
)


class VanillaDecoderOnlyModelTester:
    def __init__(
        self,
        parent,
        batch_size=14,
        seq_length=7,
        is_training=True,
        vocab_size=99,
        d_model=32,
        layers=2,
        attention_heads=4,
        ffn_dim=37,
        max_position_embeddings=512,
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
        # GPT-2's tester: one id for beginning, end and padding, the last of the vocabulary
        self.bos_token_id = self.eos_token_id = self.pad_token_id = vocab_size - 1

    def get_config(self) -> VanillaDecoderOnlyConfig:
        return VanillaDecoderOnlyConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            decoder_layers=self.num_hidden_layers,
            decoder_attention_heads=self.num_attention_heads,
            decoder_ffn_dim=self.ffn_dim,
            max_position_embeddings=self.max_position_embeddings,
            activation_function="gelu_new",
            normalize_before=True,
            position_encoding="learned",
            scale_embedding=False,
            init_std=0.02,
            linear_init_std=0.02,
            bos_token_id=self.bos_token_id,
            eos_token_id=self.eos_token_id,
            pad_token_id=self.pad_token_id,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}

    def prepare_config_and_inputs_for_common(self):
        return self.prepare_config_and_inputs()


class VanillaDecoderOnlyModelTest(
    ConformanceMixin, ModelTesterMixin, GenerationTesterMixin, unittest.TestCase
):
    all_model_classes = (VanillaDecoderOnlyModel, VanillaDecoderOnlyForCausalLM)

    def setUp(self):
        self.model_tester = VanillaDecoderOnlyModelTester(self)
        # GPT-2's tester asks for n_embd=37; ours must split into the default 8 heads and be even (sinusoids)
        self.config_tester = ConfigTester(self, config_class=VanillaDecoderOnlyConfig, d_model=40)

    def test_config(self):
        self.config_tester.run_common_tests()
