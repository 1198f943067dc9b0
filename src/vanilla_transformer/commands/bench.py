"""Benchmarks against peers measured in the same run (ratios, never bare times), on your own hardware.

vanilla-transformer bench speed [--quick]   # ours vs transformers' Marian, CTranslate2, ONNX Runtime
vanilla-transformer bench serve --model M   # the server: continuous vs request-level batching vs one at a time

The studies behind the docs (quality against Marian, the tokenizer against SentencePiece, the KV cache, the data
pipeline at scale, the soak run, the GPU check) run from a checkout: python -m studies.NAME (studies/__init__.py).
"""

from __future__ import annotations

import sys

from vanilla_transformer.cli import dispatch

# kind -> one line for the list; each runs the module commands/bench_<kind> ("-" written "_")
LINES = {
    "speed": "training and generation speed against transformers' Marian (same weights)",
    "serve": "the server with continuous and request-level batching against one-at-a-time serving",
}
KINDS = {kind: ("bench_" + kind.replace("-", "_"), line) for kind, line in LINES.items()}
# kind -> the extras it needs (`vanilla_transformer.cli.NEEDS`)
NEEDS = {"serve": ("serve", "train")}


def main(argv: list[str] | None = None) -> int:
    # --help shows the first paragraph of this docstring and its last (where the studies are); none under -OO
    paragraphs = (__doc__ or "").strip().split("\n\n")
    return dispatch(
        "vanilla-transformer bench",
        KINDS,
        sys.argv[1:] if argv is None else list(argv),
        "\n\n".join(dict.fromkeys([paragraphs[0], paragraphs[-1]])),
        NEEDS,
    )


if __name__ == "__main__":
    sys.exit(main())
