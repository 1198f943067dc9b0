"""Speed of our model against transformers' MarianMTModel (same weights) and CTranslate2 (if installed), and of
our model exported to CTranslate2 (fp32, int8) and ONNX Runtime (if the `export` extras are installed); ours and
Marian also in bf16 (training under autocast, generation with bf16 weights) in the same rounds, with each system's
best precision on this machine.

Every figure is a median over interleaved rounds of the ratio against Marian measured in the same round.

    vanilla-transformer bench speed                    # presets small and base, all workloads (tens of minutes)
    vanilla-transformer bench speed --quick            # small preset, fewer rounds, no 4k-token training
    vanilla-transformer bench speed --preset base --rounds 7

With --model M (a saved model, best a training output folder) it prints instead the translation table that
CTranslate2 publishes, on the test split of M's run (or --data): target tokens/s, peak memory and BLEU of
transformers' Marian with M's weights, our generate(), our default torch engine (fp32, bf16 where the CPU has it)
with and without M's shortlist, and M exported to CTranslate2 (fp32, int8, with and without the vocabulary map)
and ONNX Runtime (fp32, int8), at 1 and 2 threads, batch 1 and 32 (`benchmarks.translation`). --table prints
that table for a random model of --preset (random text: BLEU blank) for a quick look at the format.

    vanilla-transformer bench speed --model outputs/default                  # all test verses (long)
    vanilla-transformer bench speed --model outputs/default --limit 200 --rounds 3
    vanilla-transformer bench speed --table --preset small --rounds 1        # random model, random text
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from vanilla_transformer.benchmarks.contenders import VOCAB_SIZES, build_contenders
from vanilla_transformer.benchmarks.speed import Settings, format_rows, quick_settings, run_preset
from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.inference.precision import cpu_bf16_flags
from vanilla_transformer.modeling import cpu_inference_gemm, cpu_vendor, set_cpu_inference_gemm
from vanilla_transformer.training.allocator import tune_cpu_allocator


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = command_parser("bench speed", __doc__)
    p.add_argument(
        "--preset", choices=list(VOCAB_SIZES), action="append", help="repeatable; default small and base"
    )
    p.add_argument("--quick", action="store_true", help="small preset, 3 rounds, no 4k-token training step")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5, quick 3)")
    p.add_argument("--new_tokens", type=int, default=None, help="tokens generated per sentence (default 32)")
    p.add_argument("--src_len", type=int, default=None, help="source and training target length (default 32)")
    p.add_argument("--train_batch", type=int, default=None, help="sentences per training step (default 32)")
    p.add_argument("--budget_tokens", type=int, default=None, help="target tokens of the large training step")
    p.add_argument("--gen_batches", type=int, nargs="+", default=None, help="generation batch sizes (1 16)")
    p.add_argument("--beams", type=int, nargs="+", default=None, help="beam sizes (1 4)")
    p.add_argument(
        "--no_ct2", action="store_true", help="skip CTranslate2 on Marian's weights even if installed"
    )
    p.add_argument(
        "--no_engines",
        action="store_true",
        help="skip the deployed columns of ours: exported to CTranslate2 and ONNX Runtime (fp32, int8) and "
        "torch_int8 (int8 linear layers in PyTorch); with --model or --table, the CTranslate2 and ONNX Runtime rows",
    )
    p.add_argument("--no_cache_runs", action="store_true", help="skip the generation runs without KV cache")
    p.add_argument("--no_bf16", action="store_true", help="skip the bf16 columns of ours and Marian")
    p.add_argument("--threads", type=int, default=2, help="torch (and CTranslate2) threads")
    p.add_argument(
        "--allocator",
        choices=("tuned", "default"),
        default="tuned",
        help="'tuned': the CPU allocator settings our trainer uses (training.allocator), for every contender alike",
    )
    p.add_argument(
        "--cpu_gemm",
        choices=("auto", "onednn", "default"),
        default=None,
        help="GEMM of our model's CPU decoding (default: $VANILLA_TRANSFORMER_CPU_GEMM, else auto = oneDNN on "
        "non-Intel x86, PyTorch's default elsewhere); Marian always uses PyTorch's default",
    )
    table = p.add_argument_group("the translation table (--model or --table)")
    table.add_argument(
        "--model",
        default=None,
        type=path_argument("file or folder", text=True),
        help="saved model folder: print its translation table",
    )
    table.add_argument(
        "--table", action="store_true", help="the translation table of a random --preset model"
    )
    table.add_argument(
        "--data",
        default=None,
        help="parallel corpus whose test split to translate (default: the one --model's run saved)",
    )
    table.add_argument(
        "--limit", type=int, default=None, help="translate the first N test pairs (default all)"
    )
    table.add_argument("--table_threads", type=int, nargs="+", default=[1, 2], help="thread counts (1 2)")
    table.add_argument(
        "--table_batches", type=int, nargs="+", default=[1, 32], help="sentences per batch (1 32)"
    )
    table.add_argument("--num_beams", type=int, default=None, help="beam size (default: the model's)")
    table.add_argument("--no_memory", action="store_true", help="skip the peak-memory processes")
    return p.parse_args(argv)


def test_sentences(args: argparse.Namespace) -> tuple[list[str], list[str], str]:
    """(sources, references, sacreBLEU tokenizer) of the test split of --model's run or of --data, first
    --limit pairs."""
    from vanilla_transformer.commands.evaluate import run_options
    from vanilla_transformer.corpus import DataOptions
    from vanilla_transformer.inference import bleu_tokenizer_for

    saved = run_options(args.model)
    if args.data is None and "data" not in saved:
        raise ValueError(
            f"{args.model} is not a training output folder (no checkpoints/train_config.json): pass --data FILE, "
            "whose test split is translated"
        )
    fields = {f.name for f in dataclasses.fields(DataOptions)}
    given = {"data": args.data} if args.data is not None else {}
    options = DataOptions(**{**{k: v for k, v in saved.items() if k in fields}, **given})
    pairs = options.load_splits()[0]["test"]
    if args.limit is not None:
        pairs = pairs.select(range(min(args.limit, len(pairs))))
    tokenize = bleu_tokenizer_for(options.languages()[1], saved.get("sacrebleu_tokenize"))
    return list(pairs["source"]), list(pairs["target"]), tokenize


def print_table(args: argparse.Namespace) -> int:
    """--model / --table: the translation table (`benchmarks.translation`)."""
    from pathlib import Path

    from vanilla_transformer.benchmarks.translation import (
        TableSettings,
        format_table,
        prepare_systems,
        random_model_folder,
        run_table,
        work_folder,
    )

    settings = TableSettings(
        threads=tuple(args.table_threads),
        batches=tuple(args.table_batches),
        rounds=args.rounds or 3,
        num_beams=args.num_beams,
        memory=not args.no_memory,
    )
    work = work_folder()
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    try:
        if args.model is not None:
            sources, references, tokenize = test_sentences(args)
            folder = Path(args.model)
        else:
            preset = (args.preset or ["small"])[0]
            folder, sources = random_model_folder(
                preset, work, sentences=args.limit or 64, new_tokens=args.new_tokens or 32
            )
            references, tokenize = None, "13a"
        systems, notes = prepare_systems(
            folder, work, bf16=bool(cpu_bf16_flags()), engines=not args.no_engines, log=log
        )
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, load "
        f"average {os.getloadavg()[0]:.1f}; model {args.model or 'random ' + (args.preset or ['small'])[0]}; "
        f"{len(sources)} sentences; bf16 CPU features: {', '.join(cpu_bf16_flags()) or 'none'}"
    )
    print("\n".join(notes))
    blocks = run_table(systems, sources, references, settings, bleu_tokenize=tokenize, log=log)
    print("\n".join(format_table(blocks, settings)))
    if settings.memory:
        print(
            f"\npeak MiB: resident memory of a fresh process that loads the system and translates the sentences "
            f"once at {max(settings.threads)} threads, batch {max(settings.batches)}"
        )
    return 0


def settings_from(args: argparse.Namespace) -> Settings:
    s = quick_settings() if args.quick else Settings()
    for name in ("rounds", "new_tokens", "src_len", "train_batch", "budget_tokens"):
        if getattr(args, name) is not None:
            setattr(s, name, getattr(args, name))
    if args.gen_batches:
        s.gen_batches = tuple(args.gen_batches)
    if args.beams:
        s.beams = tuple(args.beams)
    if args.no_cache_runs:
        s.no_cache = False
    if args.no_bf16:
        s.bf16 = False
    return s


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.model is not None or args.table:
        return print_table(args)
    torch.set_num_threads(args.threads)
    tuned = args.allocator == "tuned" and tune_cpu_allocator()
    if args.cpu_gemm:
        set_cpu_inference_gemm(args.cpu_gemm)
    settings = settings_from(args)
    presets = args.preset or (["small"] if args.quick else ["small", "base"])
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f}, "
        f"allocator {'tuned (training.allocator, all contenders)' if tuned else 'default'}"
    )
    print(
        f"CPU vendor {cpu_vendor() or 'unknown'}; our CPU decoding GEMM: {cpu_inference_gemm()}; "
        f"bf16 CPU features: {', '.join(cpu_bf16_flags()) or 'none (no AMX-BF16, no AVX512-BF16)'}"
    )
    print(f"settings: {settings}")
    for preset in presets:
        contenders = build_contenders(
            preset,
            with_ct2=not args.no_ct2,
            with_engines=not args.no_engines,
            new_tokens=settings.new_tokens,
            with_bf16=settings.bf16,
        )
        print(f"\n== preset {preset}: {contenders.hp}; {contenders.ct2_note or 'CTranslate2: -'}")
        if not args.no_engines:
            print(
                f"ours exported: {', '.join(contenders.engines) or '-'}; "
                + "; ".join(contenders.engine_notes)
            )
        rows, summary = run_preset(contenders, settings, log=lambda m: print(m, file=sys.stderr, flush=True))
        print("\n".join(format_rows(rows)))
        print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
