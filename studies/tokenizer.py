"""Our BPE tokenizer against SentencePiece BPE trained on the same texts with the same vocab size (the peer,
measured in the same run): the measurements behind docs/tokenizer.md.

Prints encode throughput (sentences/s, medians over interleaved rounds, and the ratio ours/SentencePiece)
and the average tokens per sentence of both, per language side.

    RAYON_NUM_THREADS=2 python -m studies.tokenizer data/bible.zh-en.tsv.xz --vocab_size 8000
    python -m studies.tokenizer data/bible.zh-en.tsv.xz --compare_kinds   # char vs byte-level table
    python -m studies.tokenizer data/bible.zh-en.tsv.xz --bpe_dropout 0.1  # cost of a BPE-dropout epoch
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerFast

from studies import study_parser
from vanilla_transformer.commands.arguments import add_tokenizer_arguments
from vanilla_transformer.tokenizer import (
    BYTE_TOKENS,
    PAD_ID,
    UNK_ID,
    load_parallel_texts,
    normalize_text,
    train_bpe_tokenizer,
)
from vanilla_transformer.tokenizer.bpe import TokenizerKind


@dataclass
class EncodingStats:
    """Per-corpus statistics of one tokenizer (special tokens excluded)."""

    sentences: int
    tokens_per_sentence: float
    unk_rate: float  # fraction of tokens that are <unk>
    byte_token_rate: float  # fraction of tokens that are byte-fallback tokens (0 for byte-level BPE)
    round_trip_failures: int  # sentences whose decode differs from normalize_text(sentence)


def encoding_stats(tokenizer: PreTrainedTokenizerFast, texts: Sequence[str]) -> EncodingStats:
    """Encode `texts` without special tokens and measure length, `<unk>`/byte-token rates and round trip."""
    if not texts:
        raise ValueError("encoding_stats needs at least one text; pass a non-empty list.")
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    n_tokens = sum(len(x) for x in ids)
    vocab = tokenizer.get_vocab()
    byte_ids = {vocab[b] for b in BYTE_TOKENS if b in vocab}
    unk = sum(1 for seq in ids for i in seq if i == UNK_ID)
    byte = sum(1 for seq in ids for i in seq if i in byte_ids)
    decoded = tokenizer.batch_decode(ids, skip_special_tokens=True)
    failures = sum(d != normalize_text(t) for d, t in zip(decoded, texts))
    return EncodingStats(
        sentences=len(texts),
        tokens_per_sentence=n_tokens / len(texts),
        unk_rate=unk / max(n_tokens, 1),
        byte_token_rate=byte / max(n_tokens, 1),
        round_trip_failures=failures,
    )


def train_sentencepiece_bpe(
    texts: Sequence[str], vocab_size: int, character_coverage: float = 0.9995, num_threads: int | None = None
) -> Any:
    """Train an in-memory SentencePiece BPE model (byte fallback on, same special ids as ours).

    Returns a `sentencepiece.SentencePieceProcessor`. Requires the `sentencepiece` package (dev extra).
    """
    try:
        import sentencepiece as spm
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The SentencePiece comparison needs the `sentencepiece` package: pip install sentencepiece "
            "(or the project's `dev` extra)."
        ) from e
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=2,
        eos_id=3,
        num_threads=num_threads or os.cpu_count() or 1,
        input_sentence_size=0,
        max_sentence_length=1 << 20,
        minloglevel=2,
    )
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def sentencepiece_tokens_per_sentence(sp: Any, texts: Sequence[str]) -> float:
    ids = sp.encode(list(texts))
    return sum(len(x) for x in ids) / len(texts)


@dataclass
class SpeedComparison:
    """Encode throughput in sentences per second: medians over interleaved rounds."""

    rounds: int
    sentences: int
    ours_backend: float  # tokenizers.Tokenizer.encode_batch_fast -> list of id lists
    ours_transformers: float  # PreTrainedTokenizerFast.__call__ -> input_ids + attention_mask
    sentencepiece: float  # SentencePieceProcessor.encode(list) -> list of id lists

    @property
    def backend_ratio(self) -> float:
        return self.ours_backend / self.sentencepiece

    @property
    def transformers_ratio(self) -> float:
        return self.ours_transformers / self.sentencepiece


def compare_encode_speed(
    tokenizer: PreTrainedTokenizerFast,
    sp: Any,
    texts: Sequence[str],
    rounds: int = 5,
    threads: int | None = None,
) -> SpeedComparison:
    """Time batch encoding of `texts` (no special tokens) by our tokenizer and SentencePiece.

    The three encoders run one after another inside each round (interleaved), so that machine load hits
    them alike; throughputs are medians over `rounds`. Our BPE word cache is cleared before every timed
    run, so each run is a cold single pass like encoding a corpus once. `threads` is passed to SentencePiece; the
    `tokenizers` thread pool is sized by ``RAYON_NUM_THREADS`` (set it to the same number before import).
    """
    if rounds < 1 or not texts:
        raise ValueError(f"rounds={rounds} must be >= 1 and texts non-empty.")
    texts = list(texts)
    backend = tokenizer.backend_tokenizer
    threads = threads or os.cpu_count() or 1

    def ours_backend() -> None:
        [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]

    def ours_transformers() -> None:
        tokenizer(texts, add_special_tokens=False)

    def sentencepiece() -> None:
        sp.encode(texts, num_threads=threads)

    runners: dict[str, Callable[[], None]] = {
        "ours_backend": ours_backend,
        "ours_transformers": ours_transformers,
        "sentencepiece": sentencepiece,
    }
    for run in runners.values():  # warm-up (caches, thread pools)
        run()
    times: dict[str, list[float]] = {k: [] for k in runners}
    clear_cache = getattr(backend.model, "_clear_cache", lambda: None)
    for _ in range(rounds):
        for name, run in runners.items():
            clear_cache()
            gc.collect()
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    rate = {k: len(texts) / statistics.median(v) for k, v in times.items()}
    return SpeedComparison(rounds=rounds, sentences=len(texts), **rate)


@dataclass
class DropoutCost:
    """The cost of one BPE-dropout segmentation of a list of texts (`tokenizer.BPEDropout`, what a training epoch
    with ``--bpe_dropout`` pays), against encoding the same texts with the tokenizer (the peer, same rounds)."""

    rounds: int
    texts: int
    setup_seconds: float  # BPEDropout(...): splitting the texts into unmerged symbols, once per run
    segment_seconds: float  # BPEDropout.segment (median)
    encode_seconds: float  # tokenizer(texts) (median)
    extra_tokens: float  # fraction of tokens the dropout segmentation adds

    @property
    def ratio(self) -> float:
        return self.segment_seconds / self.encode_seconds


def measure_dropout_cost(
    tokenizer: PreTrainedTokenizerFast, texts: Sequence[str], p: float = 0.1, rounds: int = 3
) -> DropoutCost:
    """Time `BPEDropout` on ``texts`` at probability ``p`` against ``tokenizer(texts)`` (interleaved rounds,
    medians; the BPE word cache cleared before each encoding, so it is a cold pass like tokenising a split once)."""
    import numpy as np

    from vanilla_transformer.tokenizer import BPEDropout

    if rounds < 1 or not texts:
        raise ValueError(f"rounds={rounds} must be >= 1 and texts non-empty.")
    texts = list(texts)
    start = time.perf_counter()
    segmenter = BPEDropout(tokenizer, texts)
    setup = time.perf_counter() - start
    clear_cache = getattr(tokenizer.backend_tokenizer.model, "_clear_cache", lambda: None)
    segment_times, encode_times = [], []
    for i in range(rounds):
        gc.collect()
        start = time.perf_counter()
        dropped = segmenter.segment(p, np.random.default_rng(i))
        segment_times.append(time.perf_counter() - start)
        clear_cache()
        gc.collect()
        start = time.perf_counter()
        plain = tokenizer(texts)["input_ids"]
        encode_times.append(time.perf_counter() - start)
    extra = sum(map(len, dropped)) / sum(map(len, plain)) - 1
    return DropoutCost(
        rounds, len(texts), setup, statistics.median(segment_times), statistics.median(encode_times), extra
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = study_parser("studies.tokenizer", __doc__)
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
    kinds: list[TokenizerKind] = ["char", "byte"] if args.compare_kinds else [args.kind]
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
