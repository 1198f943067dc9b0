"""How the work of parsing user documents grows with what they hold (docs/reliability.md, "Documents and
glossaries"): HTML documents nested ``depth`` elements deep, parsed and rendered (`inference.markup`: the markup
placed by relative position, as for an engine without attention), and a glossary of ``--glossary_terms`` terms
matched against lines of text (`inference.glossary.Glossary.terms_for`). Each row gives its time and its ratio to
the first row of its table, measured in the same run: linear work keeps time / size about constant.

    OMP_NUM_THREADS=1 python -m studies.input_bounds
"""

from __future__ import annotations

import random
import time

from studies import study_parser

SHAPES = {
    "nested": lambda depth: "<p>" + "<b>" * depth + "one two three" + "</b>" * depth + "</p>",
    "a word at every level": lambda depth: "<p>" + "<b>w " * depth + "</b>" * depth + "</p>",
    "unclosed quotes": lambda depth: "<p>" + "<a title='" * depth,
}


def _best_of(repeats: int, work) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = study_parser("studies.input_bounds", __doc__)
    parser.add_argument("--depths", default="128,256,512", help="nesting depths, comma-separated")
    parser.add_argument("--glossary_terms", type=int, default=50000, help="terms of the generated glossary")
    parser.add_argument("--lines", type=int, default=1000, help="lines matched against the glossary")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each measurement (the best is kept)")
    args = parser.parse_args(argv)

    from vanilla_transformer.inference.glossary import Glossary
    from vanilla_transformer.inference.markup import split_document

    depths = [int(d) for d in args.depths.split(",")]

    def parse_and_render(document: str) -> None:
        split = split_document(document, max_depth=max(depths) + 2)
        translations = [" ".join(["mot"] * len(s.text.split())) for s in split.segments]
        split.render(translations, [None] * len(translations))

    for shape, build in SHAPES.items():
        print(f"\n{shape}: depth | bytes | seconds | seconds per 1,000 levels")
        for depth in depths:
            document = build(depth)
            seconds = _best_of(args.repeats, lambda document=document: parse_and_render(document))
            print(f"{depth} | {len(document.encode()):,} | {seconds:.3f} | {1000 * seconds / depth:.4f}")

    rnd = random.Random(0)
    words = [
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9)))
        for _ in range(20000)
    ]
    pairs = [(f"{' '.join(rnd.sample(words, 2))} {k}", f"term{k}") for k in range(args.glossary_terms)]
    size = sum(len(s) + len(t) + 2 for s, t in pairs)
    lines = [" ".join(rnd.choice(words) for _ in range(25)) for _ in range(args.lines)]
    start = time.perf_counter()
    glossary = Glossary.from_pairs(pairs)
    glossary.terms_for("")
    built = time.perf_counter() - start
    matched = _best_of(args.repeats, lambda: [glossary.terms_for(line) for line in lines])
    print(
        f"\nglossary of {len(pairs):,} terms ({size / 1e6:.1f} MB): built in {built:.2f} s, "
        f"{args.lines} lines matched in {matched:.3f} s ({1e3 * matched / args.lines:.3f} ms a line)"
    )


if __name__ == "__main__":
    main()
