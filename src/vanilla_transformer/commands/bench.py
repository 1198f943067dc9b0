"""Benchmarks against peers measured in the same run (ratios, never bare times).

vanilla-transformer bench speed [--quick]   # ours vs transformers' Marian, CTranslate2, ONNX Runtime
vanilla-transformer bench quality           # ours vs Marian + Seq2SeqTrainer, same budget and data
vanilla-transformer bench tokenizer         # our BPE vs SentencePiece
vanilla-transformer bench kv-cache          # decoding with and without the K/V cache
vanilla-transformer bench soak              # memory and throughput of many translate calls
vanilla-transformer bench serve --model M   # the server: dynamic batching vs one request at a time
vanilla-transformer bench data              # peak memory and start-up on 0.1M-5M-pair synthetic corpora
vanilla-transformer bench gpu               # the gpu tests, speed and memory against Marian on a CUDA device
"""

from __future__ import annotations

import sys

from vanilla_transformer.cli import dispatch

# kind -> one line for the list; each runs the module commands/bench_<kind> ("-" written "_")
LINES = {
    "speed": "training and generation speed against transformers' Marian (same weights)",
    "quality": "BLEU/chrF against Marian + Seq2SeqTrainer with the same budget",
    "tokenizer": "our BPE against SentencePiece: speed, vocabulary use",
    "kv-cache": "generation with and without the key/value cache",
    "soak": "many translate calls: memory stays flat, every reply is right",
    "serve": "the server with dynamic batching against one-at-a-time serving",
    "data": "large synthetic corpora: peak memory and start-up, in memory and streaming",
    "gpu": "on a CUDA device: the gpu tests, speed, memory and MFU against Marian (~8 min)",
}
KINDS = {kind: ("bench_" + kind.replace("-", "_"), line) for kind, line in LINES.items()}


def main(argv: list[str] | None = None) -> int:
    return dispatch(
        "vanilla-transformer bench",
        KINDS,
        sys.argv[1:] if argv is None else list(argv),
        (__doc__ or "").split("\n\n")[0],
    )


if __name__ == "__main__":
    sys.exit(main())
