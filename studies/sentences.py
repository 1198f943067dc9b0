"""Sentence splitting on the shipped test books: a paragraph translated whole, sentence by sentence, or in chunks
of sentences (docs/control.md, "Long texts: sentence by sentence").

The zh->en test split (1 Kings and 2 Corinthians, in order) read as it is (one verse per input) and as paragraphs
of ``--verses`` consecutive verses (sources joined as Chinese is written, without spaces; references joined by a
space). Each is translated whole, sentence by sentence (`inference.sentences.split_text`, joined by
`SplitText.join`) and in chunks of consecutive sentences of at most ``--budget`` source tokens (`chunked`); BLEU
and chrF against the (joined) references, and the time of each, with the model's generation config, batch 32.

    OMP_NUM_THREADS=1 nice -n 10 python -m studies.sentences --model outputs/default
"""

from __future__ import annotations

import time
from typing import Any

from studies import study_parser


def chunked(split: Any, size: Any, budget: int) -> Any:
    """The `SplitText` ``split`` of a Chinese text with the sentences of each line grouped, in order, into pieces
    of at most ``budget`` by ``size`` (a longer sentence alone)."""
    from vanilla_transformer.inference.sentences import SplitText

    sentences: list[str] = []
    lines: list[str | None] = []
    for sentence, before in zip(split.sentences, split.lines):
        if before == "" and sentences and size(sentences[-1] + sentence) <= budget:
            sentences[-1] += sentence
        else:
            sentences.append(sentence)
            lines.append(before)
    return SplitText(tuple(sentences), tuple(lines))


def main(argv: list[str] | None = None) -> None:
    parser = study_parser("studies.sentences", __doc__)
    parser.add_argument("--model", required=True, help="a trained zh->en model folder")
    parser.add_argument("--verses", type=int, default=5, help="verses per paragraph")
    parser.add_argument("--budget", type=int, default=64, help="most source tokens per chunk")
    parser.add_argument("--limit", type=int, default=None, help="the first N test pairs only")
    args = parser.parse_args(argv)

    from vanilla_transformer.corpus import DEFAULT_DATA
    from vanilla_transformer.corpus.options import load_split
    from vanilla_transformer.inference import load_model_and_tokenizer, score_translations, translate
    from vanilla_transformer.inference.sentences import SplitText, split_text

    test, _ = load_split(DEFAULT_DATA, "test")
    sources, references = list(test["source"]), list(test["target"])
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    k = args.verses
    paragraphs = ["".join(sources[i : i + k]) for i in range(0, len(sources), k)]
    paragraph_refs = [" ".join(references[i : i + k]) for i in range(0, len(references), k)]
    model, tokenizer = load_model_and_tokenizer(args.model, device="cpu")

    def size(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    print("| input | way | inputs translated | BLEU | chrF | seconds |")
    print("|---|---|---|---|---|---|")
    for name, texts, refs in (("verse", sources, references), (f"{k} verses", paragraphs, paragraph_refs)):
        splits = [split_text(text, "zh") for text in texts]
        ways = {
            "whole": [SplitText((text,), (None,)) for text in texts],
            "by sentence": splits,
            f"chunks of <= {args.budget} tokens": [chunked(split, size, args.budget) for split in splits],
        }
        for way, pieces in ways.items():
            flat = [sentence for split in pieces for sentence in split.sentences]
            start = time.perf_counter()
            outputs = iter(translate(model, tokenizer, flat, batch_size=32))
            seconds = time.perf_counter() - start
            hypotheses = [split.join([next(outputs) for _ in split.sentences]) for split in pieces]
            scores = score_translations(hypotheses, refs)
            print(
                f"| {name} | {way} | {len(flat):,} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | "
                f"{seconds:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
