"""sacreBLEU's corpus BLEU as an `evaluate` metric module, shipped with the package and loaded by path:

    evaluate.load("<package>/inference/metrics/bleu")   # or inference.scoring.load_metric("bleu")

It needs no Hub access (the Hub's "sacrebleu" module is downloaded by ``evaluate.load("sacrebleu")``). The
score is sacreBLEU's own `BLEU.corpus_score` and comes with sacreBLEU's signature, so that it can be compared.
"""

from __future__ import annotations

import evaluate
from sacrebleu.metrics.bleu import BLEU

from vanilla_transformer.inference.sacrebleu_metrics import INPUTS_DESCRIPTION, metric_info, reference_streams

_CITATION = (
    "Matt Post. 2018. A Call for Clarity in Reporting BLEU Scores. In Proceedings of the Third Conference on Machine "
    "Translation: Research Papers, pages 186-191. https://www.aclweb.org/anthology/W18-6319"
)

_DESCRIPTION = """\
Corpus BLEU computed by sacreBLEU on detokenised text (its defaults: 13a tokenisation, mixed case, exponential
smoothing), returned with sacreBLEU's signature.
"""

_KWARGS_DESCRIPTION = f"""
Args:
{INPUTS_DESCRIPTION}
    tokenize: sacreBLEU's BLEU tokeniser: "13a" (default), "zh", "intl", "char", "none", ...
    lowercase: lowercase before scoring (default False).
    smooth_method: "exp" (default), "floor", "add-k" or "none".
Returns:
    score: corpus BLEU (0-100, not rounded); signature: sacreBLEU's signature, e.g.
    "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"; details: sacreBLEU's one-line summary
    ("BLEU = ... (BP = ... ratio = ... hyp_len = ... ref_len = ...)"); counts, totals, precisions (per n-gram
    order), bp, sys_len, ref_len.
Example:
    >>> bleu = evaluate.load("inference/metrics/bleu")
    >>> result = bleu.compute(predictions=["the cat sat on the mat"], references=["the cat sat on the mat"])
    >>> result["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    True
"""


class Bleu(evaluate.Metric):
    """sacreBLEU's corpus BLEU (`_DESCRIPTION`); the arguments of `compute` are in `_KWARGS_DESCRIPTION`."""

    def _info(self) -> evaluate.MetricInfo:
        return metric_info(
            _DESCRIPTION, _CITATION, _KWARGS_DESCRIPTION, "https://www.aclweb.org/anthology/W18-6319"
        )

    def _compute(
        self,
        predictions,
        references,
        tokenize: str = "13a",
        lowercase: bool = False,
        smooth_method: str = "exp",
    ) -> dict:
        streams = reference_streams(references)
        bleu = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
        result = bleu.corpus_score(list(predictions), streams)
        return {
            "score": result.score,
            "signature": str(bleu.get_signature()),
            "details": str(result),
            "counts": result.counts,
            "totals": result.totals,
            "precisions": result.precisions,
            "bp": result.bp,
            "sys_len": result.sys_len,
            "ref_len": result.ref_len,
        }
