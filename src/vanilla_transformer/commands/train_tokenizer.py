"""Train the joint source-target BPE tokenizer and save it as a transformers tokenizer folder.

Examples:
    vanilla-transformer train-tokenizer data/bible.zh-en.tsv.xz --output outputs/tokenizer-zh-en
    vanilla-transformer train-tokenizer src.txt tgt.txt --vocab_size 16000 --output outputs/tok
    vanilla-transformer train-tokenizer --dataset wmt14 --dataset_config de-en --columns translation --output outputs/tok

Load the result anywhere with ``AutoTokenizer.from_pretrained(OUTPUT)``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from vanilla_transformer.commands.arguments import add_tokenizer_arguments, command_parser, path_argument
from vanilla_transformer.tokenizer import (
    DEFAULT_MIN_FREQUENCY,
    SPECIAL_TOKENS,
    train_bpe_tokenizer,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = command_parser("train-tokenizer", __doc__)
    p.add_argument(
        "files",
        nargs="*",
        type=path_argument("file"),
        help="text files (one text per line) or .tsv files; .xz/.gz/.bz2 ok",
    )
    p.add_argument(
        "--columns",
        default=None,
        help="comma-separated TSV column indices (e.g. 0,1) or dataset column names",
    )
    p.add_argument(
        "--dataset", default=None, help="a `datasets` dataset name or local path (loaded with load_dataset)"
    )
    p.add_argument("--dataset_config", default=None, help="dataset configuration name")
    p.add_argument("--split", default="train", help="dataset split (default: train)")
    add_tokenizer_arguments(p)
    p.add_argument(
        "--min_frequency", type=int, default=DEFAULT_MIN_FREQUENCY, help=f"default {DEFAULT_MIN_FREQUENCY}"
    )
    p.add_argument(
        "--limit_alphabet",
        default="auto",
        help="max distinct characters kept (char kind): int, 'auto' or 'none'",
    )
    p.add_argument(
        "--han_characters",
        action="store_true",
        help="every Han (Chinese) character is a piece of its own: no multi-character Chinese tokens",
    )
    p.add_argument("--max_lines", type=int, default=None, help="read at most this many lines per file")
    p.add_argument("--model_max_length", type=int, default=512)
    p.add_argument("--output", "-o", type=path_argument("output folder"), required=True, help="output folder")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bars")
    args = p.parse_args(argv)
    if not args.files and not args.dataset:
        p.error("give input files and/or --dataset")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    columns = None
    if args.columns:
        columns = [int(c) if c.strip().lstrip("-").isdigit() else c.strip() for c in args.columns.split(",")]
    limit = args.limit_alphabet.lower()
    limit_alphabet = None if limit == "none" else "auto" if limit == "auto" else int(limit)
    corpus = None
    if args.dataset:
        from datasets import load_dataset

        corpus = load_dataset(args.dataset, args.dataset_config, split=args.split)
    start = time.perf_counter()
    try:
        tok = train_bpe_tokenizer(
            corpus,
            files=args.files,
            columns=columns,
            vocab_size=args.vocab_size,
            min_frequency=args.min_frequency,
            kind=args.kind,
            limit_alphabet=limit_alphabet,
            han_characters=args.han_characters,
            max_lines=args.max_lines,
            model_max_length=args.model_max_length,
            show_progress=not args.no_progress,
        )
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tok.save_pretrained(args.output)
    print(
        f"trained a {args.kind} BPE tokenizer with {len(tok)} tokens in {time.perf_counter() - start:.1f} s; "
        f"saved to {args.output}"
    )
    print("special tokens: " + ", ".join(f"{t}={i}" for i, t in enumerate(SPECIAL_TOKENS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
