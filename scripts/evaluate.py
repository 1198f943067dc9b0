#!/usr/bin/env python
"""Translate a parallel file with a saved model and print BLEU and chrF with sacreBLEU's signatures.

    python scripts/evaluate.py --model outputs/default --data data/bible.zh-en.tsv.xz --split test
    python scripts/evaluate.py --model outputs/default --data my_test.tsv --num_beams 1

Decoding defaults come from the model's generation_config.json (the paper's beam 4, length penalty 0.6); a
batch generates at most ``--max_len_a * longest source + --max_len_b`` tokens. The BLEU tokeniser is "zh" for
Chinese targets (``--target_lang`` or the file name, e.g. ``*.en-zh.tsv``), else "13a", unless ``--tokenize``
says otherwise. Weights are read from safetensors only.

``--split test``/``validation``/``train`` re-creates the split that training made of the same file (same
``--valid_size``, ``--test_size``, ``--split_seed``, ``--split_block_size``); ``--split all`` (default) uses
every pair of the file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from corpus import language_pair, load_split  # noqa: E402
from inference import bleu_tokenizer_for, load_model_and_tokenizer, score_translations, translate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="saved model folder (with its tokenizer) or Hub repo id")
    p.add_argument("--data", required=True, help="parallel file (.tsv/.csv/.jsonl, optionally compressed)")
    p.add_argument("--split", default="all", choices=("all", "train", "validation", "test"))
    p.add_argument("--valid_size", type=int, default=500)
    p.add_argument("--test_size", type=int, default=1000)
    p.add_argument("--split_seed", type=int, default=1234)
    p.add_argument("--split_block_size", type=int, default=20)
    p.add_argument("--source_column", default=None)
    p.add_argument("--target_column", default=None)
    p.add_argument("--source_lang", default=None)
    p.add_argument("--target_lang", default=None)
    p.add_argument("--max_lines", type=int, default=None, help="read only the first N pairs of the file")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N pairs of the split")
    p.add_argument("--num_beams", type=int, default=None, help="1 = greedy (default: the model's, 4)")
    p.add_argument(
        "--length_penalty", type=float, default=None, help="transformers' alpha: log-prob / length**alpha"
    )
    p.add_argument("--max_len_a", type=float, default=2.0, help="at most a * source length + b new tokens")
    p.add_argument("--max_len_b", type=int, default=10)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument(
        "--tokenize", default=None, help="sacreBLEU BLEU tokeniser (default: zh for zh targets, else 13a)"
    )
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    p.add_argument(
        "--trust_remote_code", action="store_true", help="allow a Hub repo's own model code to run"
    )
    p.add_argument("--output", default=None, help="write hypotheses (one per line) to this file")
    p.add_argument("--json", default=None, help="write the scores as JSON to this file")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    try:
        model, tokenizer = load_model_and_tokenizer(
            args.model, device=args.device, trust_remote_code=True if args.trust_remote_code else None
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    pairs, report = load_split(
        args.data, args.split, valid_size=args.valid_size, test_size=args.test_size, block_size=args.split_block_size,
        seed=args.split_seed, source_column=args.source_column, target_column=args.target_column,
        source_lang=args.source_lang, target_lang=args.target_lang, max_lines=args.max_lines,
    )  # fmt: skip
    print(report.summary())
    if args.limit is not None:
        pairs = pairs.select(range(min(args.limit, len(pairs))))
    sources, references = list(pairs["source"]), list(pairs["target"])
    with tqdm(total=len(sources), unit="sent", desc="translating") as bar:
        hyps = translate(
            model, tokenizer, sources, batch_size=args.batch_size, max_len_a=args.max_len_a,
            max_len_b=args.max_len_b, progress=bar.update, num_beams=args.num_beams,
            length_penalty=args.length_penalty,
        )  # fmt: skip
    target_lang = args.target_lang or language_pair(Path(args.data).name)[1]
    scores = score_translations(hyps, references, tokenize=bleu_tokenizer_for(target_lang, args.tokenize))
    generation = model.generation_config
    length_penalty = generation.length_penalty if args.length_penalty is None else args.length_penalty
    scores.update(model=args.model, data=args.data, split=args.split,
                  num_beams=args.num_beams or generation.num_beams, length_penalty=length_penalty)  # fmt: skip
    print(f"BLEU = {scores['bleu']}  ({scores['bleu_details']})")
    print(f"  signature: {scores['bleu_signature']}")
    print(f"chrF = {scores['chrf']}")
    print(f"  signature: {scores['chrf_signature']}")
    if args.output:
        Path(args.output).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(scores, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
