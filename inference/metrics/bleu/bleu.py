"""sacreBLEU's corpus BLEU as an `evaluate` metric module, shipped with the package and loaded by path:

    evaluate.load("<package>/inference/metrics/bleu")   # or inference.scoring.load_metric("bleu")

It needs no Hub access (the Hub's "sacrebleu" module is downloaded by ``evaluate.load("sacrebleu")``). The
score is sacreBLEU's own `BLEU.corpus_score` and comes with sacreBLEU's signature, so that it can be compared.
"""

from __future__ import annotations

import datasets
import evaluate
from sacrebleu.metrics import BLEU

_CITATION = """\
@inproceedings{post-2018-call,
    title = "A Call for Clarity in Reporting {BLEU} Scores",
    author = "Post, Matt",
    booktitle = "Proceedings of the Third Conference on Machine Translation: Research Papers",
    year = "2018",
    publisher = "Association for Computational Linguistics",
    url = "https://www.aclweb.org/anthology/W18-6319",
    pages = "186--191",
}
"""

_DESCRIPTION = """\
Corpus BLEU computed by sacreBLEU on detokenised text (its defaults: 13a tokenisation, mixed case, exponential
smoothing), returned with sacreBLEU's signature.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of hypotheses (detokenised strings).
    references: one reference string per prediction, or a list of references per prediction (every
        prediction must have the same number of references).
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


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Bleu(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            homepage="https://github.com/mjpost/sacrebleu",
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string"),
                        "references": datasets.Sequence(datasets.Value("string")),
                    }
                ),
                datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
                ),
            ],
            reference_urls=[
                "https://github.com/mjpost/sacrebleu",
                "https://www.aclweb.org/anthology/W18-6319",
            ],
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


def reference_streams(references) -> list[list[str]]:
    """sacreBLEU's layout (one list per reference position) of one reference or a list of them per prediction."""
    rows = [[r] if isinstance(r, str) else list(r) for r in references]
    counts = {len(r) for r in rows}
    if len(counts) > 1:
        raise ValueError(f"every prediction needs the same number of references; got {sorted(counts)}")
    return [list(stream) for stream in zip(*rows)]
