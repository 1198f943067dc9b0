"""The torch engine's decoding loop (`inference.decoding.decode`) against our `generate()` and transformers'
`MarianMTModel.generate()` with the same weights (`benchmarks.contenders.build_contenders`), in one process:
interleaved rounds (`benchmarks.harness.interleaved`), the median of the per-round speed ratios and their range.

Each call decodes exactly ``--new_tokens`` tokens (min = max new tokens, `benchmarks.contenders.generation_config`)
from sources of ``--source_length`` tokens, greedy and beam 4, batch 1 and 16, at each thread count; the three
outputs are compared token for token first (the loop's equal ours; Marian's are reported). Ratios are Marian's
time / ours (higher is faster).

The last column bounds what any fp32 engine can gain over Marian on the same matrix products: Marian's time over
the time the loop spends in them (the self time of the GEMM and attention kernels in a `torch.profiler` trace of one
loop call: oneDNN's linear, addmm, mm, bmm, scaled dot-product attention). An engine with no cost at all outside
those kernels would run at that ratio; a loop close to it has little left to trim but the products themselves.

    python -m studies.decoding_loop --preset small --threads 1 2 --rounds 5
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from vanilla_transformer.benchmarks.contenders import build_contenders, generation_config
from vanilla_transformer.benchmarks.harness import interleaved, per_round_ratio
from vanilla_transformer.benchmarks.workloads import generate_call, source_batch
from vanilla_transformer.inference.decoding import decode

from . import study_parser

# the kernels that do the matrix products (self time: no Python or dispatch overhead of their callers)
PRODUCT_KERNELS = frozenset(
    {
        "mkldnn::_linear_pointwise",
        "aten::addmm",
        "aten::mm",
        "aten::bmm",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
    }
)


def product_seconds(call) -> float:
    """Seconds of one call spent inside the matrix-product kernels (`PRODUCT_KERNELS`), from a profiler trace."""
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        call()
    return sum(e.self_cpu_time_total for e in trace.key_averages() if e.key in PRODUCT_KERNELS) / 1e6


def measure(preset: str, threads: list[int], rounds: int, new_tokens: int, source_length: int) -> list[str]:
    """One Markdown row per (threads, decoding, batch): the loop's and our generate()'s speed relative to
    Marian's generate()."""
    contenders = build_contenders(preset, with_ct2=False, with_bf16=False)
    ours, marian = contenders.ours, contenders.marian
    vocab = contenders.hp["vocab"]
    rows = []
    for count in threads:
        torch.set_num_threads(count)
        for beams in (1, 4):
            config = generation_config(contenders.pad, beams, new_tokens)
            for batch in (1, 16):
                src, mask = source_batch(vocab, batch, source_length, seed=batch)

                def loop(src=src, mask=mask, config=config) -> torch.Tensor:
                    return decode(ours, src, mask, generation_config=config).sequences

                cases = {
                    "loop": loop,
                    "generate": generate_call(ours, src, mask, config),
                    "marian": generate_call(marian, src, mask, config),
                }
                outputs = {name: case() for name, case in cases.items()}
                same = torch.equal(outputs["loop"], outputs["generate"])
                marian_same = torch.equal(outputs["marian"], outputs["generate"])
                times = interleaved(cases, rounds)
                loop_ratio = per_round_ratio(times["marian"], times["loop"])
                generate_ratio = per_round_ratio(times["marian"], times["generate"])
                bound = per_round_ratio(times["marian"], [product_seconds(loop)] * rounds)
                rows.append(
                    f"| {preset} | {count} | {'greedy' if beams == 1 else f'beam {beams}'} | {batch} | "
                    f"{loop_ratio.fmt()} | {generate_ratio.fmt()} | "
                    f"{per_round_ratio(times['generate'], times['loop']).fmt()} | "
                    f"{'yes' if same else 'NO'} / {'yes' if marian_same else 'no'} | {bound.fmt()} |"
                )
                print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = study_parser("studies.decoding_loop", __doc__)
    parser.add_argument("--preset", nargs="+", default=["small"], choices=["tiny", "small", "base"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new_tokens", type=int, default=32)
    parser.add_argument("--source_length", type=int, default=24)
    args = parser.parse_args(argv)
    previous = torch.get_num_threads()
    header = [
        "| preset | threads | decoding | batch | loop vs Marian | generate() vs Marian | loop vs generate() "
        "| same tokens (loop / Marian) | bound: Marian / loop's products |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    try:
        rows = [
            row
            for preset in args.preset
            for row in measure(preset, args.threads, args.rounds, args.new_tokens, args.source_length)
        ]
    finally:
        torch.set_num_threads(previous)
    print("\n".join(header + rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
