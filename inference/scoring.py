"""Corpus-level BLEU and chrF through `evaluate`, and translation plus scoring: the one scoring home of training,
`vanilla-transformer evaluate` and the quality benchmark.

The metrics are `evaluate` modules shipped with this package (``inference/metrics/bleu``, ``inference/metrics/chrf``)
and loaded by local path (`load_metric`), so scoring needs no Hub access. They compute sacreBLEU's defaults (BLEU:
13a tokenisation unless told otherwise, mixed case, exponential smoothing; chrF2) on detokenised text, and every
score is reported with sacreBLEU's signature so that it can be compared.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import evaluate

METRICS_DIR = Path(__file__).resolve().parent / "metrics"
METRICS = ("bleu", "chrf")


def metric_path(name: str) -> Path:
    """The folder of the shipped `evaluate` module ``name`` ("bleu" or "chrf"): ``evaluate.load(str(path))``."""
    if name not in METRICS:
        raise ValueError(
            f"metric {name!r} is not shipped with this package; choose one of {', '.join(METRICS)}"
        )
    return METRICS_DIR / name


@functools.cache
def load_metric(name: str) -> evaluate.EvaluationModule:
    """The shipped `evaluate` module ``name`` ("bleu" or "chrf"), loaded by local path (no Hub access) and kept in
    memory (no cache files); loaded once per process."""
    import evaluate

    return evaluate.load(str(metric_path(name)), keep_in_memory=True)


def bleu_tokenizer_for(target_lang: str | None, override: str | None = None) -> str:
    """sacreBLEU's BLEU tokeniser for a target language: `override` when given (`ValueError` unless sacreBLEU has
    it), else "zh" for Chinese targets and "13a" for everything else (including an unknown target language)."""
    if override:
        from sacrebleu.metrics.bleu import BLEU

        if override not in BLEU.TOKENIZERS:
            raise ValueError(
                f"sacreBLEU tokeniser {override!r} does not exist; choose one of {', '.join(BLEU.TOKENIZERS)}"
            )
        return override
    return "zh" if target_lang == "zh" else "13a"


def _bleu(hypotheses: Sequence[str], references: Sequence[str], tokenize: str) -> dict:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references; they must align.")
    if not hypotheses:
        raise ValueError("No sentences to score.")
    return computed(
        load_metric("bleu"), predictions=list(hypotheses), references=list(references), tokenize=tokenize
    )


def computed(metric: evaluate.EvaluationModule, **inputs: Any) -> dict:
    """`metric.compute(**inputs)`, which evaluate types as optional: it returns None only on the non-main processes
    of a distributed evaluation, which scoring never runs."""
    scores = metric.compute(**inputs)
    assert scores is not None
    return scores


def score_translations(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> dict:
    """Corpus BLEU and chrF of ``hypotheses`` against one reference each.

    Returns ``{"bleu", "chrf", "bleu_signature", "chrf_signature", "bleu_details", "num_sentences"}``; the scores
    are rounded to 2 decimals. ``tokenize`` is sacreBLEU's BLEU tokeniser ("13a" for English targets, "zh" for
    Chinese targets: `bleu_tokenizer_for`).
    """
    bleu = _bleu(hypotheses, references, tokenize)
    chrf = computed(load_metric("chrf"), predictions=list(hypotheses), references=list(references))
    return {
        "bleu": round(bleu["score"], 2),
        "chrf": round(chrf["score"], 2),
        "bleu_signature": bleu["signature"],
        "chrf_signature": chrf["signature"],
        "bleu_details": bleu["details"],
        "num_sentences": len(hypotheses),
    }


def length_stats(
    hypotheses: Sequence[str], references: Sequence[str], tokenize: str
) -> tuple[float, int, int]:
    """(output/reference length ratio, output length, reference length) in sacreBLEU's BLEU tokens."""
    bleu = _bleu(hypotheses, references, tokenize)
    return bleu["sys_len"] / max(bleu["ref_len"], 1), int(bleu["sys_len"]), int(bleu["ref_len"])


def evaluate_translation(
    model,
    tokenizer,
    sources: Sequence[str],
    references: Sequence[str],
    *,
    tokenize: str = "13a",
    **translate_kwargs: Any,
) -> tuple[dict, list[str]]:
    """Translate ``sources`` with `inference.translate` (``translate_kwargs`` go to it) and score them against
    ``references`` (`score_translations`); returns (scores, hypotheses)."""
    from .translate import translate

    hypotheses = translate(model, tokenizer, sources, **translate_kwargs)
    return score_translations(hypotheses, references, tokenize=tokenize), hypotheses


def evaluate_split(
    model, tokenizer, pairs, *, tokenize: str = "13a", **translate_kwargs: Any
) -> tuple[dict, list[str]]:
    """`evaluate_translation` of a split's ``source`` column against its ``target`` column (a Dataset as
    `corpus.read` returns them, or any mapping of the two columns); returns (scores, hypotheses)."""
    return evaluate_translation(
        model, tokenizer, list(pairs["source"]), list(pairs["target"]), tokenize=tokenize, **translate_kwargs
    )
