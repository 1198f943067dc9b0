#!/usr/bin/env python
"""Translate one sentence and draw the decoder's cross-attention as a heat map (rows: output tokens, columns:
source tokens; each row sums to 1).

    python scripts/plot_attention.py --model outputs/default --text "我爱机器翻译" -o attention.png
    python scripts/plot_attention.py --model outputs/default --text "起初神创造天地。" --layer 0 --head 2 -o a.png

Works for our models and for any seq2seq model that returns attention weights (MarianMTModel included; it
is loaded with attn_implementation="eager"). Without a CJK-capable font, Chinese tokens are labelled by id.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _head(text: str) -> int | str:
    if text == "mean":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--head must be an integer or 'mean', got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="model folder or Hub id (with its tokenizer)")
    parser.add_argument("--text", required=True, help="source sentence to translate")
    parser.add_argument(
        "--layer", type=int, default=-1, help="decoder layer, negative from the last (default -1)"
    )
    parser.add_argument("--head", type=_head, default="mean", help="attention head index or 'mean' (default)")
    parser.add_argument("--num_beams", type=int, default=4, help="beams for the translation (default 4)")
    parser.add_argument("--max_new_tokens", type=int, default=None, help="cap on generated tokens")
    parser.add_argument(
        "-o", "--output", default="attention.png", help="PNG to write (default attention.png)"
    )
    args = parser.parse_args(argv)

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import modeling  # noqa: F401  (registers our Auto classes)
    from training.plots import cross_attention, plot_attention

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, attn_implementation="eager")
    amap = cross_attention(model, tokenizer, args.text, layer=args.layer, head=args.head,
                           num_beams=args.num_beams, max_new_tokens=args.max_new_tokens)  # fmt: skip
    path = plot_attention(amap, args.output)
    print(f"{args.text} -> {amap.translation}")
    print(f"Cross-attention ({len(amap.target_tokens)} x {len(amap.source_tokens)} tokens) written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
