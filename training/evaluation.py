"""Translation of many sentences and corpus-level BLEU/chrF with sacreBLEU (its own API, no Hub download).

Scores are sacreBLEU's defaults (BLEU: 13a tokenisation, mixed case, exponential smoothing; chrF2) on
detokenised text, and are always reported with sacreBLEU's signature so that they can be compared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from sacrebleu.metrics import BLEU, CHRF

logger = logging.getLogger(__name__)


@torch.no_grad()
def translate(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    num_beams: int = 4,
    length_penalty: float = 0.6,
    max_new_tokens: int = 256,
    max_len_a: float = 2.0,
    max_len_b: int = 10,
    max_source_length: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Translate ``texts`` with ``model.generate`` in length-sorted batches; returns outputs in input order.

    Sources longer than ``max_source_length`` tokens (default: the model's ``max_position_embeddings``) are
    truncated. A batch generates at most ``min(max_new_tokens, max_len_a * longest_source + max_len_b)``
    tokens (fairseq's ``max_len_a``/``max_len_b``), which bounds the time spent on an untrained model. ``progress(n)`` is called after each batch with the number of sentences done in it.
    ``length_penalty`` is transformers' (sum log-prob / length ** alpha).
    """
    if max_source_length is None:
        max_source_length = getattr(model.config, "max_position_embeddings", None)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[str] = [""] * len(texts)
    try:
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer(
                [texts[i] for i in idx],
                return_tensors="pt",
                padding=True,
                truncation=max_source_length is not None,
                max_length=max_source_length,
            )
            limit = min(max_new_tokens, int(max_len_a * enc["input_ids"].shape[1] + max_len_b))
            beam_kwargs = dict(length_penalty=length_penalty, early_stopping=True) if num_beams > 1 else {}
            generated = model.generate(
                input_ids=enc["input_ids"].to(device),
                attention_mask=enc["attention_mask"].to(device),
                num_beams=num_beams,
                max_new_tokens=limit,
                **beam_kwargs,
            )
            for i, text in zip(idx, tokenizer.batch_decode(generated, skip_special_tokens=True)):
                out[i] = text.strip()
            if progress is not None:
                progress(len(idx))
    finally:
        model.train(was_training)
    return out


def score_translations(hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a") -> dict:
    """Corpus BLEU and chrF of ``hypotheses`` against one reference each.

    Returns ``{"bleu", "chrf", "bleu_signature", "chrf_signature", "bleu_details", "num_sentences"}``.
    ``tokenize`` is sacreBLEU's BLEU tokeniser ("13a" for English targets, "zh" for Chinese targets).
    """
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


def evaluate_translation(
    model,
    tokenizer,
    sources: Sequence[str],
    references: Sequence[str],
    *,
    tokenize: str = "13a",
    **translate_kwargs,
) -> tuple[dict, list[str]]:
    """Translate ``sources`` and score them against ``references``; returns (scores, hypotheses)."""
    hypotheses = translate(model, tokenizer, sources, **translate_kwargs)
    return score_translations(hypotheses, references, tokenize=tokenize), hypotheses
