"""vanilla-transformer: the encoder-decoder Transformer of "Attention Is All You Need", Hugging Face-native, and
the decoder-only and encoder-only models built from the same blocks.

Importing this package registers the configs and models with the auto classes: `AutoConfig`, `AutoModel`,
`AutoModelForSeq2SeqLM` (encoder-decoder), `AutoModelForCausalLM` (decoder-only), `AutoModelForMaskedLM` and
`AutoModelForSequenceClassification` (encoder-only), and the "translation" pipeline (transformers 5.23+ has
none built in). Every `save_pretrained` / `push_to_hub` of the models writes the code with the weights (remote
code).
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .checks_vanilla_transformer import check_generation_arguments
from .configuration_vanilla_transformer import VanillaTransformerConfig
from .kernels_vanilla_transformer import (
    IGNORE_INDEX,
    cpu_inference_gemm,
    cpu_vendor,
    release_cpu_inference_weights,
    set_cpu_inference_gemm,
    smoothed_cross_entropy,
)
from .modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
    build_attention_mask,
    default_generation_config,
    shift_tokens_right,
)

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True)

__all__ = [
    "IGNORE_INDEX",
    "VanillaTransformerConfig",
    "VanillaTransformerModel",
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerPreTrainedModel",
    "build_attention_mask",
    "check_generation_arguments",
    "cpu_inference_gemm",
    "cpu_vendor",
    "default_generation_config",
    "release_cpu_inference_weights",
    "set_cpu_inference_gemm",
    "shift_tokens_right",
    "smoothed_cross_entropy",
]

import transformers.pipelines as _pipelines  # noqa: E402
from transformers.pipelines import PIPELINE_REGISTRY  # noqa: E402

from .export import save_with_remote_code  # noqa: E402
from .pipeline_vanilla_transformer import TASK, TranslationPipeline  # noqa: E402

# transformers >= 5.23 lists "translation" as a removed task and refuses the name before it looks at the registry;
# un-list it so that `pipeline("translation", model=..., tokenizer=...)` reaches our registered pipeline.
getattr(_pipelines, "REMOVED_TASKS", {}).pop(TASK, None)
if TASK not in PIPELINE_REGISTRY.supported_tasks:
    PIPELINE_REGISTRY.register_pipeline(
        TASK, pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )
__all__ += ["TranslationPipeline", "save_with_remote_code"]

# The encoder-only family (masked LM, sequence classification), built from the same blocks.
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification  # noqa: E402

from .configuration_vanilla_encoder_only import VanillaEncoderOnlyConfig  # noqa: E402
from .modeling_vanilla_encoder_only import (  # noqa: E402
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
    VanillaEncoderOnlyModel,
)

AutoConfig.register(VanillaEncoderOnlyConfig.model_type, VanillaEncoderOnlyConfig, exist_ok=True)
AutoModel.register(VanillaEncoderOnlyConfig, VanillaEncoderOnlyModel, exist_ok=True)
AutoModelForMaskedLM.register(VanillaEncoderOnlyConfig, VanillaEncoderOnlyForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(
    VanillaEncoderOnlyConfig, VanillaEncoderOnlyForSequenceClassification, exist_ok=True
)
__all__ += [
    "VanillaEncoderOnlyConfig",
    "VanillaEncoderOnlyModel",
    "VanillaEncoderOnlyForMaskedLM",
    "VanillaEncoderOnlyForSequenceClassification",
]

# The decoder-only family (causal LM), built from the same blocks.
from transformers import AutoModelForCausalLM  # noqa: E402

from .configuration_vanilla_decoder_only import VanillaDecoderOnlyConfig  # noqa: E402
from .modeling_vanilla_decoder_only import (  # noqa: E402
    VanillaDecoderOnlyForCausalLM,
    VanillaDecoderOnlyModel,
    answer_only_example,
    causal_lm_generation_config,
)

AutoConfig.register(VanillaDecoderOnlyConfig.model_type, VanillaDecoderOnlyConfig, exist_ok=True)
AutoModel.register(VanillaDecoderOnlyConfig, VanillaDecoderOnlyModel, exist_ok=True)
AutoModelForCausalLM.register(VanillaDecoderOnlyConfig, VanillaDecoderOnlyForCausalLM, exist_ok=True)
__all__ += [
    "VanillaDecoderOnlyConfig",
    "VanillaDecoderOnlyModel",
    "VanillaDecoderOnlyForCausalLM",
    "answer_only_example",
    "causal_lm_generation_config",
]
