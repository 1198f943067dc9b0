"""Benchmark our BPE tokenizer against SentencePiece BPE trained on the same texts with the same vocab size.

Prints encode throughput (sentences/s, medians over interleaved rounds, and the ratio ours/SentencePiece)
and the average tokens per sentence of both, per language side.

    RAYON_NUM_THREADS=2 vanilla-transformer bench tokenizer data/bible.zh-en.tsv.xz --vocab_size 8000
    vanilla-transformer bench tokenizer data/bible.zh-en.tsv.xz --compare_kinds   # char vs byte-level table
    vanilla-transformer bench tokenizer data/bible.zh-en.tsv.xz --bpe_dropout 0.1  # cost of a BPE-dropout epoch
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from vanilla_transformer.benchmarks.tokenizer import (
    compare_encode_speed,
    encoding_stats,
    measure_dropout_cost,
    sentencepiece_tokens_per_sentence,
    train_sentencepiece_bpe,
)
from vanilla_transformer.commands.arguments import add_tokenizer_arguments, command_parser
from vanilla_transformer.tokenizer import load_parallel_texts, train_bpe_tokenizer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = command_parser("bench tokenizer", __doc__)
    p.add_argument("tsv", type=Path, help="parallel source<TAB>target file (.xz ok)")
    add_tokenizer_arguments(p)
    p.add_argument("--max_lines", type=int, default=None, help="use only the first N pairs")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (median reported)")
    p.add_argument(
        "--threads", type=int, default=None, help="threads for SentencePiece (set RAYON_NUM_THREADS alike)"
    )
    p.add_argument(
        "--compare_kinds", action="store_true", help="also print the char vs byte-level comparison"
    )
    p.add_argument(
        "--bpe_dropout",
        type=float,
        default=None,
        help="instead: time one BPE-dropout segmentation of every text at this probability (a training epoch with "
        "--bpe_dropout) against encoding them once",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    src, tgt = load_parallel_texts(args.tsv, max_lines=args.max_lines)
    texts = src + tgt
    threads = args.threads or os.cpu_count() or 1
    print(
        f"corpus: {args.tsv} ({len(src)} pairs), vocab_size={args.vocab_size}, SentencePiece threads={threads}, "
        f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')}"
    )

    if args.bpe_dropout is not None:
        start = time.perf_counter()
        tok = train_bpe_tokenizer(texts, vocab_size=args.vocab_size, kind=args.kind)
        print(f"trained ours ({args.kind}) in {time.perf_counter() - start:.1f} s, {len(tok)} tokens")
        c = measure_dropout_cost(tok, texts, args.bpe_dropout, rounds=args.rounds)
        print(
            f"BPE-dropout {args.bpe_dropout} over {c.texts} texts (median of {c.rounds} interleaved rounds):"
        )
        print(
            f"  one segmentation   : {c.segment_seconds:.2f} s, {c.ratio:.2f} x encoding them once "
            f"({c.encode_seconds:.2f} s, same rounds)"
        )
        print(f"  setup, once per run: {c.setup_seconds:.2f} s")
        print(f"  extra tokens       : {100 * c.extra_tokens:.1f}%")
        return 0
    kinds = ["char", "byte"] if args.compare_kinds else [args.kind]
    tokenizers = {}
    for kind in kinds:
        start = time.perf_counter()
        tokenizers[kind] = train_bpe_tokenizer(texts, vocab_size=args.vocab_size, kind=kind)
        print(f"trained ours ({kind}) in {time.perf_counter() - start:.1f} s, {len(tokenizers[kind])} tokens")
    start = time.perf_counter()
    sp = train_sentencepiece_bpe(texts, vocab_size=args.vocab_size, num_threads=threads)
    print(f"trained SentencePiece BPE in {time.perf_counter() - start:.1f} s, {sp.get_piece_size()} pieces")

    print("\ntokens per sentence (no special tokens)")
    header = f"{'side':<8}" + "".join(f"{'ours-' + k:>12}" for k in kinds) + f"{'sentpiece':>12}"
    extra = "".join(f"{'unk%-' + k:>11}{'byte%-' + k:>12}{'rt-fail-' + k:>14}" for k in kinds)
    print(header + extra)
    for side, side_texts in (("source", src), ("target", tgt)):
        stats = {k: encoding_stats(t, side_texts) for k, t in tokenizers.items()}
        row = f"{side:<8}" + "".join(f"{s.tokens_per_sentence:>12.2f}" for s in stats.values())
        row += f"{sentencepiece_tokens_per_sentence(sp, side_texts):>12.2f}"
        row += "".join(
            f"{100 * s.unk_rate:>11.3f}{100 * s.byte_token_rate:>12.3f}{s.round_trip_failures:>14d}"
            for s in stats.values()
        )
        print(row)

    print(
        f"\nencode throughput, sentences/s (median of {args.rounds} interleaved rounds, {len(texts)} sentences)"
    )
    for kind, tok in tokenizers.items():
        r = compare_encode_speed(tok, sp, texts, rounds=args.rounds, threads=threads)
        print(
            f"ours-{kind} tokenizers backend : {r.ours_backend:>10.0f}   ratio vs SentencePiece {r.backend_ratio:.2f}"
        )
        print(
            f"ours-{kind} transformers call  : {r.ours_transformers:>10.0f}   ratio vs SentencePiece {r.transformers_ratio:.2f}"
        )
        print(f"SentencePiece (same round)    : {r.sentencepiece:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
