"""Terminology constraints on the shipped test books: glossary term-use rate, BLEU/chrF and speed, with and without
``--glossary`` (docs/control.md, "Terminology").

The glossary is built from the test split itself by a fixed rule, so that its terms are the references' own:
English terms are the capitalised words (``[A-Z][a-z]{2,}``) found in at least ``--min_count`` references and never
written in lower case there (names, not sentence-initial function words); each gets the Chinese character n-gram
(2 to 4 Han characters; the shortest among equals) of the sources with the highest Dice coefficient of sentence
co-occurrence, kept when that coefficient is at least ``--min_dice`` and the two co-occur at least ``--min_count``
times (a Chinese term claimed by two English words goes to the higher coefficient). The glossary is written as TSV (``--glossary_out``), the
file ``vanilla-transformer translate --glossary`` reads.

A term applies to a sentence where its Chinese term occurs in the source (`Glossary.terms_for`); the term-use rate
is the share of (sentence, applying term) pairs whose English term appears in the output (case-sensitive, whole
words), shown for the reference too. Both decodings run the same `inference.translate_scored` loop with the
model's generation config (beam 4), batch 32, timed over the whole split; ``--speed_rounds`` then times them
again, alternating, on sentences that have terms (the cost where constraints apply).

    OMP_NUM_THREADS=1 nice -n 10 python -m studies.terminology --model outputs/default
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

from studies import study_parser

_ENGLISH_TERM = re.compile(r"\b[A-Z][a-z]{2,}\b")
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]+")


def build_glossary(
    sources: list[str], references: list[str], min_count: int = 3, min_dice: float = 0.8
) -> list[tuple[str, str]]:
    """(Chinese term, English term) pairs by the module docstring's rule, sorted by English term."""
    lower = {w for ref in references for w in re.findall(r"\b[a-z]{3,}\b", ref)}
    english = [set(_ENGLISH_TERM.findall(ref)) - {w.capitalize() for w in lower} for ref in references]
    chinese = [
        {run[i : i + n] for run in _HAN_RUN.findall(src) for n in (2, 3, 4) for i in range(len(run) - n + 1)}
        for src in sources
    ]
    word_count = Counter(w for words in english for w in words)
    gram_count = Counter(g for grams in chinese for g in grams)
    best: dict[str, tuple[float, str]] = {}
    for word, count in word_count.items():
        if count < min_count:
            continue
        together = Counter(g for words, grams in zip(english, chinese) if word in words for g in grams)
        scored = [
            (2 * c / (count + gram_count[g]), -len(g), g) for g, c in together.items() if c >= min_count
        ]
        if not scored:
            continue
        dice, _, gram = max(scored)
        if dice >= min_dice and (gram not in best or best[gram][0] < dice):
            best[gram] = (dice, word)
    return sorted(((gram, word) for gram, (_, word) in best.items()), key=lambda p: p[1])


def test_glossary(
    limit: int | None = None, min_count: int = 3, min_dice: float = 0.8
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """The shipped corpus's test sources and references (the first ``limit``) and the glossary built from them
    (`build_glossary`)."""
    from vanilla_transformer.corpus import DEFAULT_DATA
    from vanilla_transformer.corpus.options import load_split

    test, _ = load_split(DEFAULT_DATA, "test")
    sources, references = list(test["source"]), list(test["target"])
    if limit:
        sources, references = sources[:limit], references[:limit]
    return sources, references, build_glossary(sources, references, min_count, min_dice)


def first_term(source: str, pairs: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The (Chinese term, English term) of ``pairs`` whose Chinese term occurs first in ``source``, or None."""
    found = [(source.index(zh), zh, en) for zh, en in pairs if zh in source]
    return min(found)[1:] if found else None


def term_used(term: str, text: str) -> bool:
    """Whether ``term`` appears in ``text`` as whole words."""
    return re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", text) is not None


def main(argv: list[str] | None = None) -> None:
    parser = study_parser("studies.terminology", __doc__)
    parser.add_argument("--model", required=True, help="a trained zh->en model folder")
    parser.add_argument(
        "--glossary_out", default="terminology-glossary.tsv", help="where the glossary is written"
    )
    parser.add_argument("--min_count", type=int, default=3)
    parser.add_argument("--min_dice", type=float, default=0.8)
    parser.add_argument("--limit", type=int, default=None, help="the first N test pairs only")
    parser.add_argument("--outputs", default=None, help="a folder to write both decodings' translations to")
    parser.add_argument(
        "--speed_rounds",
        type=int,
        default=0,
        help="then time both decodings on the sentences with terms (the first --speed_sentences), alternating, "
        "this many rounds each",
    )
    parser.add_argument("--speed_sentences", type=int, default=200)
    args = parser.parse_args(argv)

    from vanilla_transformer.inference import load_model_and_tokenizer, score_translations, translate_scored
    from vanilla_transformer.inference.glossary import read_glossary

    sources, references, pairs = test_glossary(args.limit, args.min_count, args.min_dice)
    Path(args.glossary_out).write_text("".join(f"{zh}\t{en}\n" for zh, en in pairs), encoding="utf-8")
    glossary = read_glossary(args.glossary_out)
    applying = [glossary.terms_for(src) for src in sources]
    print(
        f"glossary: {len(glossary)} terms ({args.glossary_out}); they apply to "
        f"{sum(map(bool, applying))} of {len(sources)} sentences, {sum(map(len, applying))} (sentence, term) pairs"
    )

    model, tokenizer = load_model_and_tokenizer(args.model, device="cpu")
    rows = []
    for name, given in (("beam 4", None), ("beam 4 + glossary", glossary)):
        start = time.perf_counter()
        outputs, _ = translate_scored(model, tokenizer, sources, 32, scores=False, glossary=given)
        seconds = time.perf_counter() - start
        hypotheses = [hyps[0] for hyps in outputs]
        if args.outputs:
            Path(args.outputs).mkdir(parents=True, exist_ok=True)
            written = "".join(f"{hyp}\n" for hyp in hypotheses)
            (Path(args.outputs) / f"{name.replace(' ', '_').replace('+', 'with')}.en").write_text(
                written, "utf-8"
            )
        used = sum(term_used(t, hyp) for terms, hyp in zip(applying, hypotheses) for t in terms)
        scores = score_translations(hypotheses, references)
        rows.append((name, used, scores["bleu"], scores["chrf"], len(sources) / seconds))
    in_reference = sum(term_used(t, ref) for terms, ref in zip(applying, references) for t in terms)
    total = sum(map(len, applying))
    print("| decoding | term use | BLEU | chrF | sentences/s |")
    print("|---|---|---|---|---|")
    for name, used, bleu, chrf, speed in rows:
        print(
            f"| {name} | {used}/{total} ({100 * used / total:.1f} %) | {bleu:.2f} | {chrf:.2f} | {speed:.2f} |"
        )
    print(f"| reference | {in_reference}/{total} ({100 * in_reference / total:.1f} %) | | | |")
    with_terms = [src for src, terms in zip(sources, applying) if terms][: args.speed_sentences]
    for round_number in range(args.speed_rounds):
        seconds = {}
        for name, given in (("plain", None), ("glossary", glossary)):
            start = time.perf_counter()
            translate_scored(model, tokenizer, with_terms, 32, scores=False, glossary=given)
            seconds[name] = time.perf_counter() - start
        print(
            f"round {round_number + 1}: {len(with_terms)} sentences with terms, "
            f"{len(with_terms) / seconds['plain']:.2f} sentences/s plain, "
            f"{len(with_terms) / seconds['glossary']:.2f} with the glossary "
            f"(time ratio {seconds['glossary'] / seconds['plain']:.2f})"
        )


if __name__ == "__main__":
    main()
