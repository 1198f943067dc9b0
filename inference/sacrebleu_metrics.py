"""What the shipped `evaluate` metric modules (``metrics/bleu/bleu.py``, ``metrics/chrf/chrf.py``) share: their
`MetricInfo` (inputs, homepage, references) and sacreBLEU's layout of the references.

`evaluate.load(path)` copies a metric script on its own (a relative import would have to sit in the script's own
folder), so the two scripts import this module by its package name, as a library: they load wherever this
package is installed, with no Hub access.
"""

from __future__ import annotations

import datasets
import evaluate

SACREBLEU_URL = "https://github.com/mjpost/sacrebleu"
# the inputs of both metrics, as their `inputs_description` states them
INPUTS_DESCRIPTION = """\
    predictions: list of hypotheses (detokenised strings).
    references: one reference string per prediction, or a list of references per prediction (every
        prediction must have the same number of references)."""


def metric_info(
    description: str, citation: str, inputs_description: str, paper_url: str
) -> evaluate.MetricInfo:
    """The `MetricInfo` of a sacreBLEU metric: string predictions, and one reference string or a list of them
    per prediction (`reference_streams`); sacreBLEU's homepage and the metric's paper (``paper_url``)."""
    return evaluate.MetricInfo(
        description=description,
        citation=citation,
        inputs_description=inputs_description,
        homepage=SACREBLEU_URL,
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
        reference_urls=[SACREBLEU_URL, paper_url],
    )


def reference_streams(references) -> list[list[str]]:
    """sacreBLEU's layout (one list per reference position) of one reference or a list of them per prediction;
    `ValueError` when the predictions have different numbers of references."""
    rows = [[r] if isinstance(r, str) else list(r) for r in references]
    counts = {len(r) for r in rows}
    if len(counts) > 1:
        raise ValueError(f"every prediction needs the same number of references; got {sorted(counts)}")
    return [list(stream) for stream in zip(*rows)]
