"""sacreBLEU's corpus chrF as an `evaluate` metric module, shipped with the package and loaded by path:

    evaluate.load("<package>/inference/metrics/chrf")   # or inference.scoring.load_metric("chrf")

It needs no Hub access (the Hub's "chrf" module is downloaded by ``evaluate.load("chrf")``). The score is
sacreBLEU's own `CHRF.corpus_score` and comes with sacreBLEU's signature, so that it can be compared.
"""

from __future__ import annotations

import evaluate
from sacrebleu.metrics.chrf import CHRF

from vanilla_transformer.inference.sacrebleu_metrics import INPUTS_DESCRIPTION, metric_info, reference_streams

_CITATION = (
    "Maja Popović. 2015. chrF: character n-gram F-score for automatic MT evaluation. In Proceedings of the Tenth "
    "Workshop on Statistical Machine Translation, pages 392-395. https://aclanthology.org/W15-3049"
)

_DESCRIPTION = """\
Corpus chrF computed by sacreBLEU on detokenised text (its defaults: chrF2, character 6-grams, no word n-grams,
mixed case), returned with sacreBLEU's signature.
"""

_KWARGS_DESCRIPTION = f"""
Args:
{INPUTS_DESCRIPTION}
    sacreBLEU's `CHRF` options, with its defaults: char_order: character n-gram order (default 6); word_order:
    word n-gram order (default 0; 2 gives chrF++); beta: recall weight (default 2); lowercase (default False);
    whitespace: keep whitespace in character n-grams (default False).
Returns:
    score: corpus chrF (0-100, not rounded); signature: sacreBLEU's signature, e.g.
    "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"; char_order, word_order, beta.
Example:
    >>> chrf = evaluate.load("inference/metrics/chrf")
    >>> round(chrf.compute(predictions=["ab"], references=["abc"])["score"], 2)  # F2 of P = 1, R = 7/12
    63.64
"""


class Chrf(evaluate.Metric):
    """sacreBLEU's corpus chrF (`_DESCRIPTION`); the arguments of `compute` are in `_KWARGS_DESCRIPTION`."""

    def _info(self) -> evaluate.MetricInfo:
        return metric_info(_DESCRIPTION, _CITATION, _KWARGS_DESCRIPTION, "https://aclanthology.org/W15-3049")

    def _compute(self, predictions, references, **options) -> dict:
        chrf = CHRF(**options)  # sacreBLEU's own defaults for the options left out
        result = chrf.corpus_score(list(predictions), reference_streams(references))
        return {
            "score": result.score,
            "signature": str(chrf.get_signature()),
            "char_order": chrf.char_order,
            "word_order": chrf.word_order,
            "beta": chrf.beta,
        }
