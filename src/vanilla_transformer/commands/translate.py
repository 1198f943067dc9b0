"""Translate stdin to stdout, one output line per input line, in the same order.

    vanilla-transformer translate --model runs/base/export < test.zh > test.hyp.en
    vanilla-transformer translate --model alice/zh-en-base --trust_remote_code --num_beams 1 < test.zh
    vanilla-transformer translate --engine ct2 --model outputs/default-ct2 < test.zh   # vanilla-transformer export --engine ct2

Empty input lines give empty output lines. Lines are batched by length internally. Sources longer than the
model maximum are truncated (the count is reported on stderr). With --num_return_sequences N > 1 each
output line holds N tab-separated hypotheses, best first. With --alignments each hypothesis is followed by
" ||| " and its Pharaoh word alignment ("0-0 1-2 ..."). Decoding defaults come from the model's
generation_config.json (the paper's beam 4, length penalty 1.0 unless trained with another --length_penalty);
--do_sample without --num_beams samples with one beam. --engine ct2 / onnx translates with a folder exported by vanilla-transformer export --engine ct2 /
vanilla-transformer export --engine onnx, through the same batching (beams, length penalty, max_new_tokens and n-best; sampling
needs --engine torch). Exit code 2 for bad options or a model that cannot be found.
"""

from __future__ import annotations

import argparse
import io
import logging
import sys
from typing import Any, cast

from vanilla_transformer.commands.arguments import (
    DEFAULT_DECODING_OPTIONS,
    TORCH_DTYPE_HELP,
    add_decoding_arguments,
    add_model_arguments,
    command_parser,
    load_model_from_args,
)
from vanilla_transformer.inference.engines import ENGINE_NAMES

# the decoding options beyond the defaults that translate (and the server) take: n-best and sampling
SAMPLING_OPTIONS = ("num_return_sequences", "do_sample", "temperature", "top_k", "top_p", "seed")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = command_parser("translate", __doc__)
    add_translation_arguments(parser)
    parser.add_argument("--batch_size", type=int, default=32, help="sentences per batch")
    parser.add_argument(
        "--alignments",
        action="store_true",
        help="follow each translation with ' ||| ' and its word alignment with the source in Pharaoh format "
        "('i-j': source word i, target word j, from 0; words are space-separated, each Chinese character one "
        "word), from the cross-attention of the model's alignment_layer / alignment_heads (docs/control.md); "
        "--engine torch or ct2",
    )
    return parser.parse_args(argv)


def add_translation_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, engine and decoding options of translate (and translate-corpus)."""
    add_model_arguments(
        parser,
        "exported model folder or Hub repo id",
        dtype_help=f"{TORCH_DTYPE_HELP}; int8 = int8 linear layers on the CPU (--engine torch) or the int8 graphs "
        "(--engine onnx)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="torch",
        help="torch (the model folder), ct2 or onnx (a folder from vanilla-transformer export --engine ct2 / onnx)",
    )
    add_decoding_arguments(parser, *DEFAULT_DECODING_OPTIONS, *SAMPLING_OPTIONS)


def decoding_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The ``generate()`` options of the parsed decoding arguments (None: the model's generation config);
    --do_sample without --num_beams samples with one beam."""
    return {
        "num_beams": 1 if args.do_sample and args.num_beams is None else args.num_beams,
        "length_penalty": args.length_penalty,
        "max_new_tokens": args.max_new_tokens,
        "num_return_sequences": args.num_return_sequences,
        "do_sample": True if args.do_sample else None,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
    }


def check_decoding(args: argparse.Namespace, generate_kwargs: dict[str, Any]) -> None:
    """`ValueError` for decoding options that do not go together or that the engine does not take, before a
    model is loaded (bad values fail at once)."""
    from vanilla_transformer.inference.engines import check_engine_options
    from vanilla_transformer.modeling import check_generation_arguments

    check_generation_arguments(generate_kwargs)
    if args.engine != "torch":
        check_engine_options(args.engine, {**generate_kwargs, "seed": args.seed})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )

    from vanilla_transformer.inference import translate_lines
    from vanilla_transformer.modeling import check_generation_arguments

    generate_kwargs = decoding_kwargs(args)
    try:
        if args.batch_size < 1:
            raise ValueError(f"batch_size={args.batch_size} is invalid: expected an integer >= 1; e.g. 32")
        check_decoding(args, generate_kwargs)
        model, tokenizer = load_model_from_args(args)
        check_generation_arguments(generate_kwargs, model.generation_config)
        if args.alignments:
            from vanilla_transformer.inference.alignment import check_alignable

            check_alignable(model)
    except (ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    if args.seed is not None:
        from transformers import set_seed

        set_seed(args.seed)
    # the console streams are TextIOWrappers (typeshed types them TextIO)
    cast(io.TextIOWrapper, sys.stdin).reconfigure(encoding="utf-8", errors="replace")
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    outputs = translate_lines(model, tokenizer, lines, batch_size=args.batch_size, **generate_kwargs)
    if args.alignments:
        from vanilla_transformer.inference.alignment import with_alignments

        outputs = with_alignments(model, tokenizer, lines, outputs, args.batch_size)
    cast(io.TextIOWrapper, sys.stdout).reconfigure(encoding="utf-8", newline="\n")
    sys.stdout.writelines(f"{text}\n" for text in outputs)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
