#!/usr/bin/env python
"""Translate a parallel file with a saved model and print BLEU and chrF with sacreBLEU's signatures.

    python scripts/evaluate.py --model outputs/default --data data/bible.zh-en.tsv.xz --split test
    python scripts/evaluate.py --model outputs/default --data my_test.tsv --num_beams 4 --length_penalty 0.6

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

from training.data import load_split  # noqa: E402
from training.evaluation import score_translations, translate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="saved model folder (with its tokenizer)")
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
    p.add_argument("--num_beams", type=int, default=4)
    p.add_argument(
        "--length_penalty", type=float, default=0.6, help="transformers' alpha: log-prob / length**alpha"
    )
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--tokenize", default="13a", help="sacreBLEU BLEU tokeniser (13a; zh for Chinese targets)")
    p.add_argument("--output", default=None, help="write hypotheses (one per line) to this file")
    p.add_argument("--json", default=None, help="write the scores as JSON to this file")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(args.model, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    if torch.cuda.is_available():
        model = model.cuda()
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
            model, tokenizer, sources, batch_size=args.batch_size, num_beams=args.num_beams,
            length_penalty=args.length_penalty, progress=bar.update,
        )  # fmt: skip
    scores = score_translations(hyps, references, tokenize=args.tokenize)
    scores.update(model=args.model, data=args.data, split=args.split, num_beams=args.num_beams,
                  length_penalty=args.length_penalty)  # fmt: skip
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
