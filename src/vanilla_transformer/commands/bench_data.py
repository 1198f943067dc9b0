"""The data pipeline at corpus scale: peak memory and start-up time of training on large synthetic corpora.

    vanilla-transformer bench data                              # 0.1M, 1M and 5M pairs, in memory and streaming
    vanilla-transformer bench data --pairs 100000 --updates 20  # a quick look

For each corpus size (`benchmarks.data.make_corpus`: seeded synthetic pairs with WMT14-like sentence lengths) and
each mode (the Arrow tokenisation cache, ``--streaming``) a fresh process plans a `tiny`-preset run with a BPE
tokenizer trained once on the smallest corpus and does ``--updates`` updates, twice: the first start reads the
file into the Arrow cache (and in memory mode tokenises it all), the second finds the caches. Printed per case:
peak resident memory of the training process (VmHWM; the tokenising worker processes are summed in the
"tree" column, which counts their shared pages twice), its ratio to the smallest corpus in the same mode,
seconds to the first update, the second start's share of the first's, and target tokens per second of the
updates. The corpora and caches live in ``--folder`` and are deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from vanilla_transformer.benchmarks.data import make_corpus, run_case
from vanilla_transformer.commands.arguments import command_parser


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("bench data", __doc__)
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument(
        "--modes", nargs="+", default=["memory", "streaming"], choices=["memory", "streaming"]
    )
    parser.add_argument("--updates", type=int, default=200, help="updates per start (tokens/s is over them)")
    parser.add_argument("--folder", help="where corpora and caches go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep corpora and caches")
    parser.add_argument(
        "--limit_mib", type=float, default=12_000, help="end a case above this resident memory"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="end a case after this many seconds")
    args = parser.parse_args(argv)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="bench-data-"))
    from vanilla_transformer.tokenizer.bpe import train_bpe_tokenizer

    sizes = sorted(args.pairs)
    corpora = {n: make_corpus(folder / f"synthetic-{n}.tsv", n) for n in sizes}
    tokenizer = folder / "tokenizer"
    train_bpe_tokenizer(str(corpora[sizes[0]]), vocab_size=8000, max_lines=100_000).save_pretrained(tokenizer)
    rows, smallest = [], {}
    try:
        for mode in args.modes:
            for n in sizes:
                options = dict(
                    data=str(corpora[n]),
                    tokenizer=str(tokenizer),
                    preset="tiny",
                    valid_size=500,
                    test_size=500,
                    split_by="blocks",
                    max_length=256,
                    skip_too_long=True,
                    cpu=True,
                    export=False,
                    overwrite=True,
                    streaming=mode == "streaming",
                    cache_dir=str(folder / "tokens"),
                    data_cache_dir=str(folder / "pairs"),
                    output_dir=str(folder / f"run-{mode}-{n}"),
                )
                first = run_case(options, args.updates, args.limit_mib, args.timeout)
                second = run_case(options, args.updates, args.limit_mib, args.timeout)
                smallest.setdefault(mode, first.get("peak_rss_mib"))
                rows.append((n, mode, first, second))
                print(json.dumps({"pairs": n, "mode": mode, "first": first, "second": second}), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(table(rows, smallest))
    return 0


def table(rows: list, smallest: dict) -> str:
    """The Markdown table of the cases (module docstring)."""
    lines = [
        "| pairs | mode | peak RSS MiB (tree) | x smallest | s to 1st update | 2nd start | 2nd start / 1st "
        "| target tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, mode, first, second in rows:
        if "failed" in first:
            lines.append(
                f"| {n:,} | {mode} | > {first['peak_rss_mib']:.0f} | | failed: {first['failed']} | | | |"
            )
            continue
        ratio = first["peak_rss_mib"] / smallest[mode] if smallest.get(mode) else float("nan")
        again = second.get("seconds_to_first_update", float("nan"))
        lines.append(
            f"| {n:,} | {mode} | {first['peak_rss_mib']:.0f} ({first['sampled_rss_mib']:.0f}) | {ratio:.2f} | "
            f"{first['seconds_to_first_update']:.1f} | {again:.1f} | {again / first['seconds_to_first_update']:.2f} | "
            f"{first['tokens_per_second'] or 0:.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
