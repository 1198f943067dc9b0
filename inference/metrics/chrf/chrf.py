"""sacreBLEU's corpus chrF as an `evaluate` metric module, shipped with the package and loaded by path:

    evaluate.load("<package>/inference/metrics/chrf")   # or inference.scoring.load_metric("chrf")

It needs no Hub access (the Hub's "chrf" module is downloaded by ``evaluate.load("chrf")``). The score is
sacreBLEU's own `CHRF.corpus_score` and comes with sacreBLEU's signature, so that it can be compared.
"""

from __future__ import annotations

import datasets
import evaluate
from sacrebleu.metrics import CHRF

_CITATION = """\
@inproceedings{popovic-2015-chrf,
    title = "chr{F}: character n-gram {F}-score for automatic {MT} evaluation",
    author = "Popovi{\\'c}, Maja",
    booktitle = "Proceedings of the Tenth Workshop on Statistical Machine Translation",
    year = "2015",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/W15-3049",
    pages = "392--395",
}
"""

_DESCRIPTION = """\
Corpus chrF computed by sacreBLEU on detokenised text (its defaults: chrF2, character 6-grams, no word n-grams,
mixed case), returned with sacreBLEU's signature.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of hypotheses (detokenised strings).
    references: one reference string per prediction, or a list of references per prediction (every
        prediction must have the same number of references).
    char_order: character n-gram order (default 6); word_order: word n-gram order (default 0; 2 gives chrF++);
    beta: recall weight (default 2); lowercase (default False); whitespace: keep whitespace in character
    n-grams (default False).
Returns:
    score: corpus chrF (0-100, not rounded); signature: sacreBLEU's signature, e.g.
    "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"; char_order, word_order, beta.
Example:
    >>> chrf = evaluate.load("inference/metrics/chrf")
    >>> result = chrf.compute(predictions=["the cat sat on the mat"], references=["the cat sat on the mat"])
    >>> result["signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no")
    True
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Chrf(evaluate.Metric):
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
            reference_urls=["https://github.com/mjpost/sacrebleu", "https://aclanthology.org/W15-3049"],
        )

    def _compute(
        self,
        predictions,
        references,
        char_order: int = 6,
        word_order: int = 0,
        beta: int = 2,
        lowercase: bool = False,
        whitespace: bool = False,
    ) -> dict:
        rows = [[r] if isinstance(r, str) else list(r) for r in references]
        counts = {len(r) for r in rows}
        if len(counts) > 1:
            raise ValueError(f"every prediction needs the same number of references; got {sorted(counts)}")
        chrf = CHRF(
            char_order=char_order,
            word_order=word_order,
            beta=beta,
            lowercase=lowercase,
            whitespace=whitespace,
        )
        result = chrf.corpus_score(list(predictions), [list(s) for s in zip(*rows)])
        return {
            "score": result.score,
            "signature": str(chrf.get_signature()),
            "char_order": char_order,
            "word_order": word_order,
            "beta": beta,
        }
