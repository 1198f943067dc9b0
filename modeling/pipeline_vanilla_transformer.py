"""A "translation" pipeline for encoder-decoder models (transformers 5.23 removed the built-in one).

It is registered under the task name "translation" (`TASK`) when `modeling` is imported, and saved with every
model (`custom_pipelines` in config.json, see `VanillaTransformerPreTrainedModel.save_pretrained`), so that in a
fresh process

    pipeline("translation", model=folder, trust_remote_code=True)("我爱机器翻译")
    -> [{"translation_text": "I love machine translation"}]

works without this project installed. It only imports public transformers API. A tokenizer that does not
fit the model (more tokens than its vocabulary, other pad/eos ids) is a `ValueError` when the pipeline is
built; an empty list of inputs gives an empty list.
"""

from __future__ import annotations

from typing import Any

import transformers.pipelines
from transformers import BatchEncoding, Pipeline, PreTrainedTokenizerBase

from .checks_vanilla_transformer import max_source_length

TASK = "translation"


def unlist_removed_task() -> None:
    """transformers 5 lists "translation" among its removed tasks and refuses the name before it looks at the
    pipeline registry; un-list it so that `pipeline("translation", model=..., tokenizer=...)` reaches ours."""
    transformers.pipelines.REMOVED_TASKS.pop(TASK, None)


def check_vocabulary(config: Any, tokenizer: Any) -> None:
    """Raise `ValueError` unless the tokenizer fits the model: no more tokens than `config.vocab_size` and
    the same pad and eos ids as the config (a different tokenizer gives wrong ids or wrong translations)."""
    problems = []
    vocab_size = getattr(config, "vocab_size", None)
    if tokenizer is None:
        raise ValueError(
            "the translation pipeline needs a tokenizer: pass tokenizer= or a model folder that has one"
        )
    if vocab_size is not None and len(tokenizer) > vocab_size:
        problems.append(
            f"the tokenizer has {len(tokenizer)} tokens but the model's vocab_size is {vocab_size}"
        )
    for name in ("pad_token_id", "eos_token_id"):
        token_id, model_id = getattr(tokenizer, name, None), getattr(config, name, None)
        if token_id is None or model_id is None:
            continue
        if token_id not in (model_id if isinstance(model_id, (list, tuple)) else [model_id]):
            problems.append(f"the tokenizer's {name} is {token_id} but the model's is {model_id}")
    if problems:
        raise ValueError(
            "the tokenizer does not match the model: "
            + "; ".join(problems)
            + ". Use the tokenizer saved with "
            "this model (AutoTokenizer.from_pretrained on the model folder)."
        )


def target_language_inputs(
    tokenizer: Any, text: str, src_lang: str | None, tgt_lang: str | None, **options: Any
) -> BatchEncoding:
    """``tokenizer(text, **options)`` for a translation from ``src_lang`` into ``tgt_lang`` (None: the tokenizer's
    own), in the tokenizer's codes: NLLB-200 (``fra_Latn``) and M2M100 (``fr``) tokenizers mark the source through
    their ``src_lang`` and get the target token's id as ``forced_bos_token_id``; a tokenizer with ``>>fra<<`` tokens
    (OPUS-MT multi-target) gets the token before the text. `ValueError` naming the codes for one it does not have
    and for languages given to a tokenizer that has none."""
    vocabulary = tokenizer.get_vocab()
    if tgt_lang is not None and f">>{tgt_lang.strip('<>')}<<" in vocabulary:
        return tokenizer(f">>{tgt_lang.strip('<>')}<< {text}", **options)
    codes = list(
        getattr(tokenizer, "lang_code_to_id", None) or getattr(tokenizer, "extra_special_tokens", None) or []
    )
    if src_lang is None and tgt_lang is None:
        return tokenizer(text, **options)
    if not hasattr(tokenizer, "src_lang") or not codes:
        targets = sorted(token for token in vocabulary if token.startswith(">>") and token.endswith("<<"))
        raise ValueError(
            f"src_lang={src_lang!r} / tgt_lang={tgt_lang!r}: the model's languages are "
            + (", ".join(targets) if targets else "none (it translates one language pair): leave them out")
        )
    for language in (src_lang, tgt_lang):
        if language is not None and language not in codes:
            raise ValueError(
                f"the model has no language {language!r}; its languages: {', '.join(codes[:12])}, ..."
            )
    saved = tokenizer.src_lang
    tokenizer.src_lang = src_lang or saved
    try:
        inputs = tokenizer(text, **options)
    finally:
        tokenizer.src_lang = saved
    tgt_lang = tgt_lang or getattr(tokenizer, "tgt_lang", None)
    if tgt_lang is not None:
        lang_id = getattr(tokenizer, "get_lang_id", None)
        inputs["forced_bos_token_id"] = (
            lang_id(tgt_lang) if lang_id else tokenizer.convert_tokens_to_ids(tgt_lang)
        )
    return inputs


class TranslationPipeline(Pipeline):
    """A text -> [{"translation_text": str}]; a list of texts -> one {"translation_text": str} per text (as
    transformers' own translation pipeline returned), or one such list per text when `num_return_sequences` > 1.

    Call-time options: `truncation` (default True: sources longer than `max_length` are cut) and `max_length`
    (default `max_source_length`: the model's position limit, none with rotary positions, and the tokenizer's
    `model_max_length`, as `inference.translate` and the server use), `num_beams`, `length_penalty`,
    `max_new_tokens`, `do_sample`, `temperature`, `top_k`, `top_p`, `num_return_sequences` and any other
    `generate()` keyword; `clean_up_tokenization_spaces`; for a multilingual model, `src_lang` and `tgt_lang` in
    its tokenizer's codes (`target_language_inputs`).
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        check_vocabulary(self.model.config, self.tokenizer)

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(inputs, (list, tuple)) and not inputs:
            return []  # an empty batch has no translations (transformers' Pipeline would fail on it)
        result: Any = super().__call__(inputs, *args, **kwargs)
        if isinstance(inputs, (list, tuple)) and all(len(outputs) == 1 for outputs in result):
            return [outputs[0] for outputs in result]
        return result

    def _sanitize_parameters(
        self,
        max_length: int | None = None,
        truncation: bool | None = None,
        clean_up_tokenization_spaces: bool | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
        **generate_kwargs: Any,
    ):
        preprocess_params: dict[str, Any] = {"src_lang": src_lang, "tgt_lang": tgt_lang}
        if max_length is not None:
            preprocess_params["max_length"] = max_length
        if truncation is not None:
            preprocess_params["truncation"] = bool(truncation)
        postprocess_params = {}
        if clean_up_tokenization_spaces is not None:
            postprocess_params["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return preprocess_params, dict(generate_kwargs), postprocess_params

    @property
    def text_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer, which this pipeline always loads (`Pipeline` types it as optional)."""
        assert self.tokenizer is not None
        return self.tokenizer

    def preprocess(
        self,
        text: str,
        max_length: int | None = None,
        truncation: bool = True,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
    ) -> BatchEncoding:
        if not isinstance(text, str):
            raise ValueError(
                f"the translation pipeline takes a string or a list of strings, got {type(text).__name__}"
            )
        if max_length is None:
            max_length = max_source_length(self.model.config, self.tokenizer)
        truncation = truncation and max_length is not None
        return target_language_inputs(
            self.text_tokenizer,
            text,
            src_lang,
            tgt_lang,
            return_tensors="pt",
            truncation=truncation,
            max_length=max_length if truncation else None,
        )

    def _forward(self, model_inputs: dict, **generate_kwargs: Any) -> dict:
        forced = model_inputs.get("forced_bos_token_id")
        if forced is not None:
            generate_kwargs["forced_bos_token_id"] = forced
        model_inputs = {k: v for k, v in model_inputs.items() if k in ("input_ids", "attention_mask")}
        # `Pipeline` types its model as a PreTrainedModel, which has no generate (GenerationMixin's)
        output_ids = self.model.generate(**model_inputs, **generate_kwargs)  # pyright: ignore[reportCallIssue]
        if forced is not None and output_ids.shape[1] > 1:
            # the target-language token is no part of the translation (M2M100's tokenizer would decode it as text)
            column = output_ids[:, 1]
            column[column == forced] = self.model.config.pad_token_id
        return {"output_ids": output_ids}

    def postprocess(self, model_outputs: dict, clean_up_tokenization_spaces: bool = False) -> list[dict]:
        texts = self.text_tokenizer.batch_decode(
            model_outputs["output_ids"],
            skip_special_tokens=True,
            clean_up_tokenization_spaces=clean_up_tokenization_spaces,
        )
        return [{"translation_text": text} for text in texts]
