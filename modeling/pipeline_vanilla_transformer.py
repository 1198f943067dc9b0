"""A "translation" pipeline for encoder-decoder models (transformers 5.23 removed the built-in one).

It is registered under the task name "translation" when `modeling` is imported, and saved next to exported
models (`custom_pipelines` in config.json), so that in a fresh process

    pipeline("translation", model=folder, trust_remote_code=True)("我爱机器翻译")
    -> [{"translation_text": "I love machine translation"}]

works without this project installed. It only imports public transformers API.
"""

from __future__ import annotations

from typing import Any

from transformers import Pipeline


class TranslationPipeline(Pipeline):
    """Text (or a list of texts) -> [{"translation_text": str}] per input.

    Call-time options: `max_length` (source truncation, default the model's maximum), `num_beams`,
    `length_penalty`, `max_new_tokens`, `do_sample`, `temperature`, `top_k`, `top_p`, `num_return_sequences`
    and any other `generate()` keyword; `clean_up_tokenization_spaces`.
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(
        self,
        max_length: int | None = None,
        clean_up_tokenization_spaces: bool | None = None,
        **generate_kwargs: Any,
    ):
        preprocess_params = {}
        if max_length is not None:
            preprocess_params["max_length"] = max_length
        postprocess_params = {}
        if clean_up_tokenization_spaces is not None:
            postprocess_params["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess_params, dict(generate_kwargs), postprocess_params

    def preprocess(self, text: str, max_length: int | None = None) -> dict:
        if not isinstance(text, str):
            raise ValueError(f"the translation pipeline takes a string or a list of strings, got {type(text).__name__}")
        if max_length is None:
            max_length = getattr(self.model.config, "max_position_embeddings", None)
        return self.tokenizer(
            text, return_tensors="pt", truncation=max_length is not None, max_length=max_length
        )

    def _forward(self, model_inputs: dict, **generate_kwargs: Any) -> dict:
        model_inputs = {k: v for k, v in model_inputs.items() if k in ("input_ids", "attention_mask")}
        output_ids = self.model.generate(**model_inputs, **generate_kwargs)
        return {"output_ids": output_ids}

    def postprocess(self, model_outputs: dict, clean_up_tokenization_spaces: bool = False) -> list[dict]:
        texts = self.tokenizer.batch_decode(
            model_outputs["output_ids"],
            skip_special_tokens=True,
            clean_up_tokenization_spaces=clean_up_tokenization_spaces,
        )
        return [{"translation_text": text} for text in texts]
