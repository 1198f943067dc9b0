"""Source-language detection on short texts (docs/deploy.md, "Language detection"): the server's detector
(`inference.languages.detect_language`, py3langid restricted to the served languages) against its fallback, the
vocabulary-share guess (`serving.lanes.read_share`: the model whose vocabulary reads most of the text).

Texts: ``--lines`` lines of each language of the shipped corpora (zh and en of data/bible.zh-en, de of
data/bible.de-en), from the end of each file, cut to their first 5, 20 and 100 characters. The fallback's
vocabularies: one BPE per language (``--vocab_size``, an unknown token and no byte fallback, as the vocabulary of a
model from that language) trained on ``--train_lines`` other lines of the same file. Accuracy by length, for the
three languages and for each language pair.

    OMP_NUM_THREADS=1 nice -n 10 python -m studies.language_detection
"""

from __future__ import annotations

import lzma
from pathlib import Path

from studies import study_parser

DATA = Path(__file__).resolve().parents[1] / "data"
# language -> (corpus file, column)
SOURCES = {"zh": ("bible.zh-en.tsv.xz", 0), "en": ("bible.zh-en.tsv.xz", 1), "de": ("bible.de-en.tsv.xz", 0)}
LENGTHS = (5, 20, 100)


def read_lines(name: str, column: int) -> list[str]:
    with lzma.open(DATA / name, "rt", encoding="utf-8") as file:
        return [line.rstrip("\n").split("\t")[column] for line in file if line.strip()]


def vocabulary(lines: list[str], vocab_size: int):
    """A BPE tokenizer of ``lines`` with an unknown token (what a model from that language reads)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>")


def main(argv: list[str] | None = None) -> None:
    from vanilla_transformer.inference.languages import detect_language
    from vanilla_transformer.serving.lanes import read_share

    parser = study_parser("studies.language_detection", __doc__)
    parser.add_argument("--lines", type=int, default=300, help="test lines per language")
    parser.add_argument("--train_lines", type=int, default=3000, help="lines per fallback vocabulary")
    parser.add_argument("--vocab_size", type=int, default=4000)
    args = parser.parse_args(argv)

    texts, vocabularies = {}, {}
    for language, (name, column) in SOURCES.items():
        lines = [line for line in read_lines(name, column) if len(line) >= max(LENGTHS)]
        texts[language] = lines[-args.lines :]
        vocabularies[language] = vocabulary(lines[: args.train_lines], args.vocab_size)

    def fallback(text: str, candidates: list[str]) -> str:
        shares = [read_share(vocabularies[code], text) for code in candidates]
        return candidates[max(range(len(shares)), key=lambda i: (shares[i], -i))]

    def detector(text: str, candidates: list[str]) -> str:
        return detect_language(text, candidates)[0][0]

    groups = [list(SOURCES), ["zh", "en"], ["de", "en"], ["zh", "de"]]
    print(f"{'served':<10} {'chars':>5} {'py3langid':>10} {'vocabulary share':>17}")
    for candidates in groups:
        for length in LENGTHS:
            cases = [(text[:length], code) for code in candidates for text in texts[code]]
            correct = {
                name: sum(guess(text, candidates) == code for text, code in cases) / len(cases)
                for name, guess in (("detector", detector), ("fallback", fallback))
            }
            print(
                f"{'+'.join(candidates):<10} {length:>5} {100 * correct['detector']:>9.1f}% "
                f"{100 * correct['fallback']:>16.1f}%"
            )


if __name__ == "__main__":
    main()
