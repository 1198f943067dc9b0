"""Translate one split of a parallel corpus with a saved model and print BLEU and chrF with sacreBLEU's signatures,
exactly as training scored its test split.

    vanilla-transformer evaluate --model outputs/default                  # the run's own test split
    vanilla-transformer evaluate --model outputs/default --split validation --length_penalty 1.0
    vanilla-transformer evaluate --model alice/zh-en --trust_remote_code --data my_test.tsv --split all
    vanilla-transformer evaluate --engine ct2 --model outputs/default/ct2 --run outputs/default   # CTranslate2

Everything is what training used: the loader (`inference.load_model_and_tokenizer`: safetensors only, tokenizer
checked against the model), decoding from the model's generation_config.json (beams and the length penalty that
training chose) with training's length cap and batch size, the BLEU tokeniser of the target language ("zh" for
Chinese, else "13a"), the metrics (`inference.scoring`) and the split: when the model folder is a training output
folder, the corpus and split options default to the ones the run saved (checkpoints/train_config.json), so
``--model M`` alone re-scores the run's test split. Every corpus option of vanilla-transformer train is also a flag here
and wins over the saved one. Exit code 2, with one line on stderr, for bad options, a model or corpus that
cannot be loaded, or an empty split. ``--engine ct2`` / ``onnx`` scores a folder exported by
vanilla-transformer export --engine ct2 / onnx through the same translation loop (``--run`` names the training output
folder whose split to use). ``--shortlist`` decodes over the model's vocabulary shortlist (vanilla-transformer
shortlist; for --engine ct2 its export's vocabulary map): run it with and without to see what the shortlist costs
in BLEU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tqdm.auto import tqdm
from transformers import PreTrainedModel

from vanilla_transformer.commands.arguments import (
    TORCH_DTYPE_HELP,
    add_decoding_arguments,
    add_language_arguments,
    add_model_arguments,
    command_parser,
    load_model_from_args,
    path_argument,
)
from vanilla_transformer.corpus import DataOptions
from vanilla_transformer.inference import bleu_tokenizer_for, evaluate_split
from vanilla_transformer.inference.decoding import resolved_generation_config
from vanilla_transformer.inference.engines import ENGINE_NAMES
from vanilla_transformer.inference.languages import check_languages, iso_language
from vanilla_transformer.modeling import check_generation_arguments
from vanilla_transformer.training import TrainConfig
from vanilla_transformer.training.run_dir import OPTIONS_FILE, RunDir
from vanilla_transformer.training.validation import LENGTH_CAP

SPLITS = ("test", "validation", "train", "all")
RUN_DEFAULTS = tuple(f.name for f in dataclasses.fields(DataOptions)) + (
    "eval_batch_size",
    "sacrebleu_tokenize",
)
_UNSET = object()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    # the corpus and split: a flag given here, else the run's saved option, else the field's default
    p = command_parser("evaluate", __doc__, DataOptions)
    add_model_arguments(
        p,
        "saved model folder (with its tokenizer) or Hub repo id",
        dtype_help=TORCH_DTYPE_HELP,
    )
    p.add_argument(
        "--engine",
        default="torch",
        choices=ENGINE_NAMES,
        help="torch, or ct2 / onnx for a folder from vanilla-transformer export --engine ct2 / onnx",
    )
    p.add_argument(
        "--run",
        default=None,
        type=path_argument("folder", text=True),
        help="training output folder whose saved corpus and split options are used (default: --model)",
    )
    p.add_argument(
        "--split",
        default="test",
        choices=SPLITS,
        help="split to score; all = every pair of the training source (of a file: every pair)",
    )
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N pairs of the split")
    add_decoding_arguments(p, "num_beams", "length_penalty")
    add_language_arguments(p)
    p.add_argument(
        "--max_len_a",
        type=float,
        default=LENGTH_CAP["max_len_a"],
        help="at most a * longest source + b new tokens per batch, as in training",
    )
    p.add_argument("--max_len_b", type=int, default=LENGTH_CAP["max_len_b"])
    p.add_argument(
        "--batch_size",
        type=int,
        default=None,
        help=f"sentences per batch (default: the run's --eval_batch_size, else {TrainConfig.eval_batch_size})",
    )
    p.add_argument(
        "--tokenize",
        default=None,
        help="sacreBLEU BLEU tokeniser (default: the run's, else zh for Chinese targets, else 13a)",
    )
    p.add_argument(
        "--shortlist",
        action="store_true",
        help="decode over the model's vocabulary shortlist (vanilla-transformer translate --help)",
    )
    p.add_argument(
        "--output",
        default=None,
        type=path_argument("output file", text=True),
        help="write the hypotheses (one per line) to this file",
    )
    p.add_argument(
        "--json",
        default=None,
        type=path_argument("output file", text=True),
        help="write the scores and settings as JSON to this file",
    )
    p.set_defaults(**{f.name: _UNSET for f in dataclasses.fields(DataOptions)})
    return p.parse_args(argv)


def run_options(model: str) -> dict:
    """The options a training run saved in its output folder ``model`` (empty for other folders and repo ids)."""
    saved = RunDir(model).checkpoints / OPTIONS_FILE
    if not saved.is_file():
        return {}
    options = json.loads(saved.read_text(encoding="utf-8"))
    return {k: options[k] for k in RUN_DEFAULTS if k in options}


def data_options(args: argparse.Namespace, saved: dict) -> DataOptions:
    """The corpus options: a flag given on the command line, else the run's saved value, else the default."""
    values = {}
    for f in dataclasses.fields(DataOptions):
        given = getattr(args, f.name)
        if given is not _UNSET:
            values[f.name] = given
        elif f.name in saved:
            values[f.name] = saved[f.name]
    return DataOptions(**values)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    saved = run_options(args.run or args.model)
    options = data_options(args, saved)
    batch_size = args.batch_size or saved.get("eval_batch_size") or TrainConfig.eval_batch_size
    try:
        problems = options.check()
        for name in ("limit", "batch_size"):
            if getattr(args, name) is not None and getattr(args, name) < 1:
                problems.append(f"--{name} must be >= 1, got {getattr(args, name)}")
        if problems:
            raise ValueError("; ".join(problems))
        check_generation_arguments({"num_beams": args.num_beams, "length_penalty": args.length_penalty})
        target = iso_language(args.tgt_lang) if args.tgt_lang else options.languages()[1]
        tokenize = bleu_tokenizer_for(target, args.tokenize or saved.get("sacrebleu_tokenize"))
        shortlist = None
        if args.shortlist:
            from vanilla_transformer.inference.shortlist import load_shortlist

            shortlist = load_shortlist(args.model)
        model, tokenizer = load_model_from_args(args)
        check_languages(tokenizer, model.generation_config, args.src_lang, args.tgt_lang)
        if args.split == "all":
            nothing_held_out = dict(valid_split="none", test_split="none", valid_size=0, test_size=0)
            splits, report = dataclasses.replace(options, **nothing_held_out).load_splits()
            pairs = splits["train"]
        else:
            splits, report = options.load_splits()
            pairs = splits[args.split]
        if not len(pairs):
            raise ValueError(f"the {args.split} split of {options.data} is empty; choose another --split")
    except (ValueError, OSError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.limit is not None:
        pairs = pairs.select(range(min(args.limit, len(pairs))))
    # a converted or imported folder may leave settings unset: the values generate() resolves them to
    generation = (
        resolved_generation_config(model, {})
        if isinstance(model, PreTrainedModel)
        else model.generation_config
    )
    num_beams = args.num_beams or generation.num_beams
    length_penalty = generation.length_penalty if args.length_penalty is None else args.length_penalty
    decoding = dict(
        num_beams=num_beams,
        length_penalty=length_penalty,
        batch_size=batch_size,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
    )
    if shortlist is not None:
        decoding["shortlist"] = shortlist
    print(report.summary())
    with tqdm(total=len(pairs), unit="sent", desc="translating") as bar:
        scores, hyps = evaluate_split(
            model,
            tokenizer,
            pairs,
            tokenize=tokenize,
            max_len_a=args.max_len_a,
            max_len_b=args.max_len_b,
            progress=bar.update,
            **decoding,
        )
    scores.update(
        model=args.model,
        engine=args.engine,
        data=options.data,
        split=args.split,
        num_beams=num_beams,
        length_penalty=length_penalty,
        shortlist=args.shortlist,
    )
    print(
        f"{args.split.capitalize()} BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  "
        f"({scores['num_sentences']} sentences, beam {num_beams}, length penalty {length_penalty}"
        f"{', shortlist' if args.shortlist else ''})"
    )
    print(f"  {scores['bleu_signature']}\n  {scores['chrf_signature']}\n  {scores['bleu_details']}")
    if args.output:
        Path(args.output).write_text("".join(f"{h}\n" for h in hyps), encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(scores, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
