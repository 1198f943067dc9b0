"""vanilla-transformer: the encoder-decoder Transformer of "Attention Is All You Need", Hugging Face-native, and
the decoder-only and encoder-only models built from the same blocks.

Importing this package registers the configs and models with the auto classes: `AutoConfig`, `AutoModel`,
`AutoModelForSeq2SeqLM` (encoder-decoder), `AutoModelForCausalLM` (decoder-only), `AutoModelForMaskedLM` and
`AutoModelForSequenceClassification` (encoder-only), and the "translation" pipeline (transformers 5.23+ has
none built in). Every `save_pretrained` / `push_to_hub` of the models writes the code with the weights (remote
code).
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
)
from transformers.pipelines import PIPELINE_REGISTRY

from .checks_vanilla_transformer import max_source_length, position_limit
from .configuration_vanilla_decoder_only import VanillaDecoderOnlyConfig
from .configuration_vanilla_encoder_only import VanillaEncoderOnlyConfig
from .configuration_vanilla_transformer import VanillaTransformerConfig
from .decoding_vanilla_transformer import (
    DECODING_OPTIONS,
    DEFAULT_LENGTH_PENALTY,
    DecodingOption,
    check_generation_arguments,
)
from .export import save_with_remote_code
from .kernels_vanilla_transformer import (
    IGNORE_INDEX,
    cpu_inference_gemm,
    cpu_vendor,
    release_cpu_inference_weights,
    set_cpu_inference_gemm,
    smoothed_cross_entropy,
)
from .modeling_vanilla_decoder_only import (
    VanillaDecoderOnlyForCausalLM,
    VanillaDecoderOnlyModel,
    answer_only_example,
    causal_lm_generation_config,
)
from .modeling_vanilla_encoder_only import (
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
    VanillaEncoderOnlyModel,
)
from .modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
    build_attention_mask,
    default_generation_config,
    shift_tokens_right,
)
from .pipeline_vanilla_transformer import TASK, TranslationPipeline, unlist_removed_task

# encoder-decoder
AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(
    VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True
)
# encoder-only: masked LM, sequence classification
AutoConfig.register(VanillaEncoderOnlyConfig.model_type, VanillaEncoderOnlyConfig, exist_ok=True)
AutoModel.register(VanillaEncoderOnlyConfig, VanillaEncoderOnlyModel, exist_ok=True)
AutoModelForMaskedLM.register(VanillaEncoderOnlyConfig, VanillaEncoderOnlyForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(
    VanillaEncoderOnlyConfig, VanillaEncoderOnlyForSequenceClassification, exist_ok=True
)
# decoder-only: causal LM
AutoConfig.register(VanillaDecoderOnlyConfig.model_type, VanillaDecoderOnlyConfig, exist_ok=True)
AutoModel.register(VanillaDecoderOnlyConfig, VanillaDecoderOnlyModel, exist_ok=True)
AutoModelForCausalLM.register(VanillaDecoderOnlyConfig, VanillaDecoderOnlyForCausalLM, exist_ok=True)
# the "translation" pipeline
unlist_removed_task()
if TASK not in PIPELINE_REGISTRY.supported_tasks:
    PIPELINE_REGISTRY.register_pipeline(
        TASK, pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )

__all__ = [
    "DECODING_OPTIONS",
    "DEFAULT_LENGTH_PENALTY",
    "IGNORE_INDEX",
    "DecodingOption",
    "TranslationPipeline",
    "VanillaDecoderOnlyConfig",
    "VanillaDecoderOnlyForCausalLM",
    "VanillaDecoderOnlyModel",
    "VanillaEncoderOnlyConfig",
    "VanillaEncoderOnlyForMaskedLM",
    "VanillaEncoderOnlyForSequenceClassification",
    "VanillaEncoderOnlyModel",
    "VanillaTransformerConfig",
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
    "answer_only_example",
    "build_attention_mask",
    "causal_lm_generation_config",
    "check_generation_arguments",
    "cpu_inference_gemm",
    "cpu_vendor",
    "default_generation_config",
    "max_source_length",
    "position_limit",
    "release_cpu_inference_weights",
    "save_with_remote_code",
    "set_cpu_inference_gemm",
    "shift_tokens_right",
    "smoothed_cross_entropy",
]
