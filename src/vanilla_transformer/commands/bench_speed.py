"""Speed of our model against transformers' MarianMTModel (same weights) and CTranslate2 (if installed), and of
our model exported to CTranslate2 (fp32, int8) and ONNX Runtime (if the `export` extras are installed); ours and
Marian also in bf16 (training under autocast, generation with bf16 weights) in the same rounds, with each system's
best precision on this machine.

Every figure is a median over interleaved rounds of the ratio against Marian measured in the same round.

    vanilla-transformer bench speed                    # presets small and base, all workloads (tens of minutes)
    vanilla-transformer bench speed --quick            # small preset, fewer rounds, no 4k-token training
    vanilla-transformer bench speed --preset base --rounds 7
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from vanilla_transformer.benchmarks.contenders import VOCAB_SIZES, build_contenders
from vanilla_transformer.benchmarks.speed import Settings, format_rows, quick_settings, run_preset
from vanilla_transformer.commands.arguments import command_parser
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
        "torch_int8 (int8 linear layers in PyTorch)",
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
    return p.parse_args(argv)


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
