"""The GPU check (`benchmarks.gpu`): the tests marked ``gpu`` (fp16 + gradient scaler and bf16 training through the
trainer against fp32, every sdpa backend against eager attention with fully padded rows, generate() on the CPU and
the GPU and with the static cache compiled, save/load from the GPU), then training and generation speed, peak
memory and MFU against transformers' Marian with the same weights, each part within its own time budget; writes
gpu_check.json and gpu_check.md.

    vanilla-transformer bench gpu --output_dir outputs/gpu_check          # on a CUDA device, ~5 minutes
    vanilla-transformer bench gpu --device cpu --dry_run --output_dir /tmp/gpu_check   # the same code, tiny, CPU
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vanilla_transformer.benchmarks.gpu import Budget, Settings, run_check, write_report
from vanilla_transformer.commands.arguments import command_parser

# the gpu tests of a checkout: <checkout>/tests/gpu (benchmarks/ is a top-level folder of the checkout)
CHECKOUT_TESTS = Path(__file__).resolve().parents[3] / "tests" / "gpu"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = command_parser("bench gpu", __doc__)
    p.add_argument("--device", default="cuda", help="cuda, cuda:1, ... or cpu (with --dry_run); default cuda")
    p.add_argument("--dry_run", action="store_true", help="tiny preset and batches, short budgets (CPU, CI)")
    p.add_argument(
        "--output_dir", type=Path, default=Path("outputs/gpu_check"), help="where the JSON and Markdown go"
    )
    p.add_argument("--budget_s", type=float, default=None, help="total seconds (default 270; dry run 110)")
    p.add_argument(
        "--tests_dir", type=Path, default=CHECKOUT_TESTS, help=f"the gpu tests (default {CHECKOUT_TESTS})"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            f"error: --device {args.device}: torch sees no CUDA device; use --device cpu --dry_run",
            file=sys.stderr,
        )
        return 2
    if device.type == "cpu" and not args.dry_run:
        print("error: --device cpu runs the check's tiny sizes only: add --dry_run", file=sys.stderr)
        return 2
    settings = Settings.dry_run() if args.dry_run else Settings.gpu()
    budget = Budget(args.budget_s if args.budget_s is not None else 110.0 if args.dry_run else 270.0)
    report = run_check(device, settings, budget, args.output_dir, args.tests_dir, log=print)
    report["command"] = "vanilla-transformer bench gpu " + " ".join(sys.argv[1:] if argv is None else argv)
    json_path, md_path = write_report(report, args.output_dir)
    print("\n".join(md_path.read_text(encoding="utf-8").splitlines()))
    print(f"wrote {json_path} and {md_path}")
    return 1 if any(p["status"] in ("failed", "timed out") for p in report["parts"]) else 0


if __name__ == "__main__":
    sys.exit(main())
