"""Inference: loading a saved model safely, batched translation, sacreBLEU scoring, cross-attention maps.

Modules:
    loading      `load_model_and_tokenizer` (safetensors only, tokenizer checked against the model),
                 `resolve_device`, `check_tokenizer_matches_model`, `hub_config`
    cards        reading a model's card: `load_card`, `card_languages`, `card_examples`
    translate    THE batched translation: `translate` (one output per text), `translate_nbest`,
                 `translate_lines` (n-best joined by tabs, for the CLI), `translate_scored` (with sequence scores),
                 `translate_hypotheses` (`Hypothesis` lists, with per-token log-probabilities),
                 `translation_record` (what the CLI's JSONL and the server report of one line)
    corpus_translation  a whole corpus: `CorpusJob`, part files and resuming, accelerate shards, Ray Data actors
    scoring      `score_translations`, `evaluate_translation`, `evaluate_split` (a split's columns),
                 `length_stats`, `bleu_tokenizer_for`, `load_metric` / `metric_path` (the BLEU and chrF
                 `evaluate` modules shipped in metrics/)
    glossary     terminology: `Glossary` (the terms that apply to a text), `read_glossary`, `term_ids`, `word_pieces`
    constraints  `constrained_beam_search`: lexically constrained beam search (a `generate()` strategy)
    sentences    long texts sentence by sentence: `split_text`, `SplitText.join`, `translate_split`
    shortlist    the vocabulary shortlist: `build_shortlist`, `load_shortlist`, `Shortlist.for_batch`,
                 `shortlisted` (a model view decoding over it), `vmap_lines` (CTranslate2's vocabulary map)
    engines      `load_engine`: an exported CTranslate2 (`engine_ct2.CT2Translator`) or ONNX Runtime
                 (`engine_onnx.OnnxTranslator`) folder driven through the same translation loop
    attention    `cross_attention`, `AttentionMap`, `plot_attention`, `tick_labels`, `find_fonts`

Importing the package is cheap: torch, transformers, sacreBLEU and matplotlib are imported where used, so
that bad input fails in milliseconds.
"""

from .attention import AttentionMap, cross_attention, find_fonts, plot_attention, tick_labels
from .loading import check_tokenizer_matches_model, hub_config, load_model_and_tokenizer, resolve_device
from .scoring import (
    bleu_tokenizer_for,
    evaluate_split,
    evaluate_translation,
    length_stats,
    load_metric,
    metric_path,
    score_translations,
)
from .translate import (
    Hypothesis,
    translate,
    translate_hypotheses,
    translate_lines,
    translate_nbest,
    translate_scored,
    translation_record,
)

__all__ = [
    "AttentionMap",
    "Hypothesis",
    "bleu_tokenizer_for",
    "check_tokenizer_matches_model",
    "cross_attention",
    "evaluate_split",
    "evaluate_translation",
    "find_fonts",
    "hub_config",
    "length_stats",
    "load_metric",
    "load_model_and_tokenizer",
    "metric_path",
    "plot_attention",
    "resolve_device",
    "score_translations",
    "tick_labels",
    "translate",
    "translate_hypotheses",
    "translate_lines",
    "translate_nbest",
    "translate_scored",
    "translation_record",
]
