"""Score given translations without decoding (forced decoding): read `source<TAB>target` lines from stdin, write one
line per pair to stdout, in the same order.

    vanilla-transformer score --model outputs/default < pairs.tsv > scores.jsonl
    vanilla-transformer score --engine ct2 --model outputs/default-ct2 --format tsv < pairs.tsv

Each target is scored as a finished translation of its source: the log-probability the model gives each of its
tokens (its `</s>` included) after the source and the tokens before it, from the raw logits (no logits processor;
the way CTranslate2 and fairseq score). --format jsonl (the default) writes, per pair, `score` (the sum divided by
length ** length_penalty, how beam search ranks finished hypotheses; --length_penalty, default the model's
generation config's), `log_prob` (the sum), `length` (tokens scored), `tokens` and `token_log_probs`; --format tsv
writes `score<TAB>log_prob`. The target is text, tokenized as labels; with --target_tokens, a JSON array of tokens
(translate's `tokens`) or token ids, scored as they are: an output's `token_log_probs` are the numbers of its
tokens, which re-tokenizing its text gives back only where the tokenizer splits that text the same way. Rank n-best lists or filter a corpus by these numbers: a higher score is a translation
the model finds likelier. Sources longer than the model maximum are truncated as in `translate` (the count is
reported on stderr); a target longer than the decoder's positions cannot be scored. --engine ct2 / onnx scores
with an exported folder (CTranslate2's `score_batch`; the ONNX decoder). A multilingual model scores in the languages
--src_lang / --tgt_lang (as `translate` takes them): the source marked with its language, the target starting with
the target language's token, which decoding forces and which is listed with log-probability 0, so that a translation
scores what `translate --output_format jsonl` scored it. Exit code 2 for bad options, a line
without a tab, a target too long, or a model that cannot be found.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
from typing import cast

from vanilla_transformer.commands.arguments import (
    TORCH_DTYPE_HELP,
    add_decoding_arguments,
    add_language_arguments,
    add_model_arguments,
    command_parser,
    load_model_from_args,
)
from vanilla_transformer.inference.engines import ENGINE_NAMES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = command_parser("score", __doc__)
    add_model_arguments(parser, "exported model folder or Hub repo id", dtype_help=TORCH_DTYPE_HELP)
    parser.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="torch",
        help="torch (the model folder), ct2 or onnx (a folder from vanilla-transformer export --engine ct2 / onnx)",
    )
    add_decoding_arguments(parser, "length_penalty")
    add_language_arguments(parser)
    parser.add_argument(
        "--format", choices=["jsonl", "tsv"], default="jsonl", help="jsonl (all numbers, default) or tsv"
    )
    parser.add_argument("--batch_size", type=int, default=32, help="pairs per batch")
    parser.add_argument(
        "--target_tokens",
        action="store_true",
        help="each target is a JSON array of tokens (translate's `tokens`, or token ids), scored as they are "
        "instead of re-tokenized from text",
    )
    return parser.parse_args(argv)


def token_targets(targets: list[str]) -> list[list[str | int]]:
    """The targets of --target_tokens: each a JSON array of token strings or ids; `ValueError` naming the first
    line that is not one."""
    parsed = []
    for number, target in enumerate(targets, start=1):
        try:
            tokens = json.loads(target)
        except json.JSONDecodeError:
            tokens = None
        if not isinstance(tokens, list) or not all(
            isinstance(t, str) or (isinstance(t, int) and not isinstance(t, bool)) for t in tokens
        ):
            raise ValueError(
                f"line {number}: with --target_tokens the target is a JSON array of tokens or token ids, e.g. "
                '["▁In", "▁the", "</s>"]'
            )
        parsed.append(tokens)
    return parsed


def read_pairs(lines: list[str]) -> tuple[list[str], list[str]]:
    """Sources and targets of `source<TAB>target` lines; `ValueError` naming the first line without exactly one
    tab."""
    sources, targets = [], []
    for number, line in enumerate(lines, start=1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise ValueError(
                f"line {number} has {len(parts) - 1} tabs: each line is one source<TAB>target pair"
            )
        sources.append(parts[0])
        targets.append(parts[1])
    return sources, targets


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # the console streams are TextIOWrappers (typeshed types them TextIO)
    cast(io.TextIOWrapper, sys.stdin).reconfigure(encoding="utf-8", errors="replace")
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    try:
        if args.batch_size < 1:
            raise ValueError(f"batch_size={args.batch_size} is invalid: expected an integer >= 1; e.g. 32")
        sources, targets = read_pairs(lines)

        from vanilla_transformer.inference.forced_decoding import score_pairs, score_tokens

        tokens = token_targets(targets) if args.target_tokens else None
        model, tokenizer = load_model_from_args(args)
        if tokens is not None:
            scores = score_tokens(
                model, tokenizer, sources, tokens, args.batch_size, args.src_lang, args.tgt_lang
            )
        else:
            scores = score_pairs(
                model, tokenizer, sources, targets, args.batch_size, args.src_lang, args.tgt_lang
            )
    except (ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from vanilla_transformer.inference.forced_decoding import default_length_penalty, score_record

    length_penalty = args.length_penalty
    if length_penalty is None:
        length_penalty = default_length_penalty(model.generation_config)
    cast(io.TextIOWrapper, sys.stdout).reconfigure(encoding="utf-8", newline="\n")
    for scored in scores:
        record = score_record(scored, tokenizer, length_penalty)
        if args.format == "tsv":
            sys.stdout.write(f"{record['score']:.6f}\t{record['log_prob']:.6f}\n")
        else:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
