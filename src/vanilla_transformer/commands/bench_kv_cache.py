"""The KV cache, in numbers (`benchmarks.kv_cache`): per component of our encoder-decoder's decoder, the analytic
FLOPs of greedy decoding of T tokens with and without the cache and their exact ratio next to the study notes'
T/2 and T/3, the measured wall-clock speed-up of generate(use_cache=True) over generate(use_cache=False) in the
same rounds, and the cache memory of our presets and of a 7B-class model.

    vanilla-transformer bench kv-cache --plot docs/img/kv_cache.png     # small preset, T = 16 .. 256 (~1-2 min)
    vanilla-transformer bench kv-cache --quick                          # tiny preset, two lengths, one round
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from vanilla_transformer.benchmarks.contenders import VOCAB_SIZES
from vanilla_transformer.benchmarks.kv_cache import format_study, plot_study, run_study, write_csv
from vanilla_transformer.commands.arguments import command_parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = command_parser("bench kv-cache", __doc__)
    p.add_argument("--preset", choices=list(VOCAB_SIZES), default=None, help="model sizes (default small)")
    p.add_argument(
        "--lengths", type=int, nargs="+", default=None, help="decoded lengths T (16 32 64 128 256)"
    )
    p.add_argument("--source_length", type=int, default=None, help="source tokens S (default 32)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 5)")
    p.add_argument("--batch", type=int, default=1, help="sentences per generate() call")
    p.add_argument("--quick", action="store_true", help="tiny preset, T = 8 16, source 8, one round")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: batch-1 decoding gains little from a second thread, and two threads on a "
        "busy 2-core machine wait for each other at every operator, which swamps the measurement)",
    )
    p.add_argument("--plot", type=Path, default=None, help="write the plot (PNG) here")
    p.add_argument("--csv", type=Path, default=None, help="write the FLOP rows and speed-ups (CSV) here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    defaults = (
        dict(preset="tiny", lengths=[8, 16], source_length=8, rounds=1)
        if args.quick
        else dict(preset="small", lengths=[16, 32, 64, 128, 256], source_length=32, rounds=5)
    )
    chosen = {
        name: getattr(args, name) if getattr(args, name) is not None else value
        for name, value in defaults.items()
    }
    if args.batch < 1 or chosen["rounds"] < 1 or chosen["source_length"] < 1 or min(chosen["lengths"]) < 1:
        print("error: --batch, --rounds, --source_length and --lengths must be >= 1", file=sys.stderr)
        return 2
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        print(
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
            f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f}"
        )
        try:
            study = run_study(
                chosen["preset"],
                tuple(chosen["lengths"]),
                chosen["source_length"],
                chosen["rounds"],
                args.batch,
            )
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    finally:
        torch.set_num_threads(threads)
    print("\n".join(format_study(study)))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.csv:
        print(f"wrote {write_csv(study, args.csv)}")
    if args.plot:
        try:
            print(f"wrote {plot_study(study, args.plot)}")
        except ImportError:
            fallback = write_csv(study, args.plot.with_suffix(".csv"))
            print(f"matplotlib is not installed (pip install matplotlib): no plot; wrote {fallback} instead")
    return 0


if __name__ == "__main__":
    sys.exit(main())
