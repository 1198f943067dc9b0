"""Translate one sentence and draw the decoder's cross-attention as a heat map (rows: output tokens, columns:
source tokens; each row sums to 1).

    vanilla-transformer plot-attention --model outputs/default --text "我爱机器翻译" -o attention.png
    vanilla-transformer plot-attention --model outputs/default --text "起初神创造天地。" --layer 0 --head 2 -o a.png

Works for our models and for any seq2seq model that returns attention weights (MarianMTModel included; it
is loaded with attn_implementation="eager"; weights from safetensors only). Without a CJK-capable font,
Chinese tokens are labelled by id. Exit code 2 for a model that cannot be loaded.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from vanilla_transformer.commands.arguments import (
    add_decoding_arguments,
    add_model_arguments,
    command_parser,
    path_argument,
)


def _head(text: str) -> int | str:
    if text == "mean":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--head must be an integer or 'mean', got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("plot-attention", __doc__)
    add_model_arguments(parser, "model folder or Hub id (with its tokenizer)")
    parser.add_argument("--text", required=True, help="source sentence to translate")
    parser.add_argument(
        "--layer", type=int, default=-1, help="decoder layer, negative from the last (default -1)"
    )
    parser.add_argument("--head", type=_head, default="mean", help="attention head index or 'mean' (default)")
    add_decoding_arguments(parser, "num_beams", "max_new_tokens")
    parser.add_argument(
        "-o",
        "--output",
        default="attention.png",
        type=path_argument("output file", text=True),
        help="PNG to write (default attention.png)",
    )
    args = parser.parse_args(argv)

    from vanilla_transformer.inference import cross_attention, load_model_and_tokenizer, plot_attention

    try:
        model, tokenizer = load_model_and_tokenizer(
            args.model,
            device=args.device,
            trust_remote_code=True if args.trust_remote_code else None,
            attn_implementation="eager",
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    amap = cross_attention(
        model,
        tokenizer,
        args.text,
        layer=args.layer,
        head=args.head,
        num_beams=args.num_beams,
        max_new_tokens=args.max_new_tokens,
    )
    path = plot_attention(amap, args.output)
    print(f"{args.text} -> {amap.translation}")
    print(f"Cross-attention ({len(amap.target_tokens)} x {len(amap.source_tokens)} tokens) written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
