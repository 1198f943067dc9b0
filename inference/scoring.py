"""Corpus-level BLEU and chrF with sacreBLEU (its own API, no Hub download), and translation plus scoring.

Scores are sacreBLEU's defaults (BLEU: 13a tokenisation unless told otherwise, mixed case, exponential
smoothing; chrF2) on detokenised text, and are always reported with sacreBLEU's signature so that they can be
compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def bleu_tokenizer_for(target_lang: str | None, override: str | None = None) -> str:
    """sacreBLEU's BLEU tokeniser for a target language: `override` when given, else "zh" for Chinese targets
    and "13a" for everything else (including an unknown target language)."""
    if override:
        return override
    return "zh" if target_lang == "zh" else "13a"


def score_translations(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> dict:
    """Corpus BLEU and chrF of ``hypotheses`` against one reference each.

    Returns ``{"bleu", "chrf", "bleu_signature", "chrf_signature", "bleu_details", "num_sentences"}``.
    ``tokenize`` is sacreBLEU's BLEU tokeniser ("13a" for English targets, "zh" for Chinese targets).
    """
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references; they must align.")
    if not hypotheses:
        raise ValueError("No sentences to score.")
    bleu = BLEU(tokenize=tokenize)
    chrf = CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return {
        "bleu": round(b.score, 2),
        "chrf": round(c.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_details": str(b),
        "num_sentences": len(hypotheses),
    }


def length_stats(
    hypotheses: Sequence[str], references: Sequence[str], tokenize: str
) -> tuple[float, int, int]:
    """(output/reference length ratio, output length, reference length) in sacreBLEU's BLEU tokens."""
    from sacrebleu.metrics import BLEU

    score = BLEU(tokenize=tokenize).corpus_score(list(hypotheses), [list(references)])
    return score.sys_len / max(score.ref_len, 1), int(score.sys_len), int(score.ref_len)


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
    ``references``; returns (scores, hypotheses)."""
    from .translate import translate

    hypotheses = translate(model, tokenizer, sources, **translate_kwargs)
    return score_translations(hypotheses, references, tokenize=tokenize), hypotheses
