"""Build the vocabulary shortlist of a saved model from its training corpus and save it in the model folder
(shortlist.safetensors, `inference.shortlist`), for decoding over a few thousand target tokens per batch instead
of the whole vocabulary (translate --shortlist, serve --shortlist; docs/deploy.md, "Vocabulary shortlist").

    vanilla-transformer shortlist --model outputs/default              # the run's corpus and training split
    vanilla-transformer shortlist --model M --data data/bible.zh-en.tsv.xz --top_k 50 --frequent 200

Each source token keeps its --top_k most probable target tokens by IBM Model 1's p(t | s) (--iterations EM
iterations over the training pairs), and every batch keeps the --frequent most frequent target tokens and the
special tokens. Only the training split is read: when the model folder is a training output folder, the corpus and
split options default to the ones the run saved (checkpoints/train_config.json), as in vanilla-transformer
evaluate, so the held-out books never enter the shortlist; every corpus option of vanilla-transformer train is
also a flag here and wins over the saved one. Export the model again (vanilla-transformer export --engine ct2) to
give its CTranslate2 folder the shortlist and its vocabulary map. Exit code 2, with one line on stderr, for bad
options, a model or corpus that cannot be loaded, or a model folder that is not local.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.commands.evaluate import _UNSET, data_options, run_options
from vanilla_transformer.corpus import DataOptions
from vanilla_transformer.inference.shortlist import (
    DEFAULT_FREQUENT,
    DEFAULT_ITERATIONS,
    DEFAULT_TOP_K,
    build_shortlist,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    # the corpus and split: a flag given here, else the run's saved option, else the field's default
    p = command_parser("shortlist", __doc__, DataOptions)
    p.add_argument(
        "--model",
        required=True,
        type=path_argument("folder", text=True),
        help="saved model folder (with its tokenizer); the shortlist goes here",
    )
    p.add_argument(
        "--run",
        default=None,
        type=path_argument("folder", text=True),
        help="training output folder whose saved corpus and split options are used (default: --model)",
    )
    p.add_argument("--top_k", type=int, default=DEFAULT_TOP_K, help="target candidates kept per source token")
    p.add_argument(
        "--frequent",
        type=int,
        default=DEFAULT_FREQUENT,
        help="most frequent target tokens in every batch's vocabulary",
    )
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="EM iterations of IBM Model 1")
    p.set_defaults(**{f.name: _UNSET for f in dataclasses.fields(DataOptions)})
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    options = data_options(args, run_options(args.run or args.model))
    try:
        problems = options.check()
        for name in ("top_k", "frequent", "iterations"):
            if getattr(args, name) < 0:
                problems.append(f"--{name} must be >= 0, got {getattr(args, name)}")
        if not Path(args.model).is_dir():
            problems.append(
                f"--model {args.model!r} is not a local folder: the shortlist is saved in the folder"
            )
        if problems:
            raise ValueError("; ".join(problems))
        from vanilla_transformer.inference import load_model_and_tokenizer

        model, tokenizer = load_model_and_tokenizer(args.model, device="cpu")
        splits, report = options.load_splits()
        pairs = splits["train"]
        if not len(pairs):
            raise ValueError(f"the training split of {options.data} is empty; pass another --data")
    except (ValueError, OSError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.summary())
    config = model.config
    sources = tokenizer(list(pairs["source"]), add_special_tokens=True)["input_ids"]
    targets = tokenizer(text_target=list(pairs["target"]), add_special_tokens=True)["input_ids"]
    special = {*tokenizer.all_special_ids}
    special |= {config.pad_token_id, config.eos_token_id, config.decoder_start_token_id, config.bos_token_id}
    target_size = config.decoder_vocab_size
    shortlist = build_shortlist(
        zip(sources, targets),
        config.vocab_size,
        target_size,
        top_k=args.top_k,
        frequent=args.frequent,
        always=sorted(i for i in special if i is not None and 0 <= i < target_size),
        iterations=args.iterations,
    )
    path = shortlist.save(args.model)
    sizes = [len(shortlist.candidates(i)) for i in range(config.vocab_size)]
    print(
        f"shortlist of {len(pairs)} training pairs: {sum(1 for n in sizes if n)} source tokens with candidates "
        f"(up to {args.top_k} each), {len(shortlist.always)} target tokens in every batch -> {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
