"""Where markup transfer puts a tag, on the shipped test books (docs/control.md, "Markup").

Each test verse in which a name of the terminology glossary occurs (`studies.terminology.build_glossary`: the
references' own names and their Chinese n-grams) becomes a one-paragraph document with the first such Chinese
name in bold, ``<p>...<b>亚哈</b>...</p>``. Each model translates the documents (`inference.markup`: the verse
translated whole, the bold placed by the model's word alignment) and, for comparison, the same translations get
their bold by relative position alone (`proportional_alignment`, what an engine without attention gets). Counted
over the documents whose translation holds the English name at all: how often the bold holds it (**hit**) and how
often the bold holds exactly it, punctuation aside (**exact**). The cost is the time of aligning the translations
for the markup against the time of translating them (one batch loop each, batch 32, same process).

    OMP_NUM_THREADS=1 python -m studies.markup --models runs/align/plain runs/align/guided
"""

from __future__ import annotations

import re
import time

from studies import study_parser
from studies.terminology import first_term, term_used, test_glossary

_BOLD = re.compile(r"<b>(.*?)</b>", re.DOTALL)


def placement(rendered: list[str], names: list[str]) -> tuple[int, int, int]:
    """(documents whose translation holds the name, of them those whose bold holds it, those whose bold is exactly
    it, punctuation aside)."""
    present = hit = exact = 0
    for document, name in zip(rendered, names):
        text = re.sub(r"<[^>]*>", "", document)
        if not term_used(name, text):
            continue
        present += 1
        bold = " ".join(_BOLD.findall(document))
        hit += term_used(name, bold)
        exact += re.sub(r"[^\w\s]", "", bold).strip() == name
    return present, hit, exact


def main(argv: list[str] | None = None) -> None:
    parser = study_parser("studies.markup", __doc__)
    parser.add_argument("--models", nargs="+", required=True, help="trained zh->en model folders")
    parser.add_argument("--limit", type=int, default=None, help="the first N test pairs only")
    parser.add_argument("--min_count", type=int, default=3)
    parser.add_argument("--min_dice", type=float, default=0.8)
    args = parser.parse_args(argv)

    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.alignment import align_words
    from vanilla_transformer.inference.markup import split_document
    from vanilla_transformer.inference.translate import translate_hypotheses

    sources, _, glossary = test_glossary(args.limit, args.min_count, args.min_dice)
    documents, names = [], []
    for source in sources:
        term = first_term(source, glossary)
        if term is not None:
            documents.append(f"<p>{source.replace(term[0], f'<b>{term[0]}</b>', 1)}</p>")
            names.append(term[1])
    print(f"{len(documents)} documents with a bold name ({len(glossary)} names)")
    print("| model | placement | name in translation | bold holds it | bold is exactly it |")
    print("|---|---|---|---|---|")
    for folder in args.models:
        model, tokenizer = load_model_and_tokenizer(folder, device="cpu")
        splits = [split_document(document) for document in documents]
        texts = [split.segments[0].text for split in splits]
        start = time.perf_counter()
        nbest = translate_hypotheses(model, tokenizer, texts, 32, scores=False)
        translated = time.perf_counter() - start
        translations = [hyps[0].text for hyps in nbest]
        start = time.perf_counter()
        alignments = align_words(model, tokenizer, texts, translations, 32)
        aligned = time.perf_counter() - start
        for method, chosen in (("word alignment", alignments), ("relative position", [None] * len(texts))):
            rendered = [
                split.render([translation], [alignment])
                for split, translation, alignment in zip(splits, translations, chosen)
            ]
            present, hit, exact = placement(rendered, names)
            print(
                f"| {folder} | {method} | {present} | {hit} ({100 * hit / max(present, 1):.1f} %) | "
                f"{exact} ({100 * exact / max(present, 1):.1f} %) |"
            )
        print(
            f"{folder}: translating {translated:.1f} s, aligning for the markup {aligned:.1f} s "
            f"(+{100 * aligned / translated:.0f} %)"
        )


if __name__ == "__main__":
    main()
