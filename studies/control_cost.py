"""What each output-control feature costs in translation speed, against plain translation of the same sentences in
the same process (docs/control.md): scores (`translate --output_format jsonl`: one forced-decoding pass per batch),
word alignments (`translate --alignments`), a glossary (constrained beam search; on the sentences a term applies
to), markup transfer (`translate --format html`: the same sentences as one-paragraph documents with the
glossary's first name in bold) and sentence splitting (`translate --split_sentences zh`).

The sentences are the test verses in which a name of `studies.terminology.build_glossary` occurs (the first
``--sentences``), so that every feature works on the same ones. Each round times plain translation and each
feature once, in turn (`inference.translate_hypotheses` with the model's generation config, batch 32, the command
line's own functions); the table gives the median over ``--rounds`` of each feature's time over plain's time in
the same round.

    OMP_NUM_THREADS=1 python -m studies.control_cost --model outputs/default
"""

from __future__ import annotations

import statistics
import time

from studies import study_parser
from studies.terminology import first_term, test_glossary


def main(argv: list[str] | None = None) -> None:
    parser = study_parser("studies.control_cost", __doc__)
    parser.add_argument("--model", required=True, help="a trained zh->en model folder")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args(argv)

    from vanilla_transformer.inference import load_model_and_tokenizer, translate_lines
    from vanilla_transformer.inference.alignment import with_alignments
    from vanilla_transformer.inference.documents import translate_document
    from vanilla_transformer.inference.glossary import Glossary
    from vanilla_transformer.inference.sentences import translate_split
    from vanilla_transformer.inference.translate import translate_hypotheses

    sources, _, pairs = test_glossary()
    glossary = Glossary.from_pairs(pairs)
    chosen = [(s, term[0]) for s in sources if (term := first_term(s, pairs)) is not None][: args.sentences]
    lines = [s for s, _ in chosen]
    document = "\n".join(f"<p>{s.replace(zh, f'<b>{zh}</b>', 1)}</p>" for s, zh in chosen)
    model, tokenizer = load_model_and_tokenizer(args.model, device="cpu")
    size = args.batch_size

    def plain() -> list[str]:
        return translate_lines(model, tokenizer, lines, batch_size=size)

    features = {
        "scores (--output_format jsonl)": lambda: translate_hypotheses(
            model, tokenizer, lines, size, token_scores=True
        ),
        "alignments (--alignments)": lambda: with_alignments(model, tokenizer, lines, plain(), size),
        "glossary (--glossary)": lambda: translate_lines(
            model, tokenizer, lines, batch_size=size, glossary=glossary
        ),
        "markup (--format html)": lambda: translate_document(model, tokenizer, document, size),
        "sentences (--split_sentences)": lambda: translate_split(
            model, tokenizer, lines, "zh", batch_size=size
        ),
    }
    ratios: dict[str, list[float]] = {name: [] for name in features}
    plain_seconds = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        plain()
        base = time.perf_counter() - start
        plain_seconds.append(base)
        for name, run in features.items():
            start = time.perf_counter()
            run()
            ratios[name].append((time.perf_counter() - start) / base)
    print(
        f"{len(lines)} test sentences with a glossary name ({len(glossary)} names), batch {size}, "
        f"{args.rounds} rounds; plain translation {len(lines) / statistics.median(plain_seconds):.1f} sentences/s"
    )
    print("| feature | time / plain translation (median) | rounds |")
    print("|---|---|---|")
    for name, found in ratios.items():
        print(f"| {name} | {statistics.median(found):.2f}x | {', '.join(f'{r:.2f}' for r in found)} |")


if __name__ == "__main__":
    main()
