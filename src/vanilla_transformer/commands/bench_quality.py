"""Translation quality of our model and recipe against transformers' MarianMTModel trained with Seq2SeqTrainer
and the standard HF recipe: same size, tokenizer, training split and wall-clock budget, one after the other on
this machine, then BLEU/chrF (with sacreBLEU signatures), updates, tokens seen and output/reference length ratio
on the same held-out test split (beam 4, length penalty 1.0).

Examples:
    vanilla-transformer bench quality                                  # 25 minutes per system, small preset
    vanilla-transformer bench quality --budget_minutes 50 --output_dir outputs/bq50
    vanilla-transformer bench quality --systems ours --ours "lr_scale=1.0 warmup_steps=400" --output_dir outputs/bq-lr
    vanilla-transformer bench quality --budget_minutes 0.2 --preset tiny --max_lines 300 --valid_size 20 \
        --test_size 8 --vocab_size 1200                             # smoke run

All options: vanilla-transformer bench quality --help (the fields of benchmarks.quality_options.QualityConfig).
Writes OUTPUT_DIR/{ours,marian}/ (loadable models), OUTPUT_DIR/plots/comparison.png and OUTPUT_DIR/results.json.
"""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from vanilla_transformer.benchmarks.quality import run_quality_benchmark
from vanilla_transformer.benchmarks.quality_options import QualityConfig, QualityResult
from vanilla_transformer.training.cli import parse_dataclass


class Progress:
    """Prints one line per logged window of updates, per validation and per phase."""

    def __init__(self, log_every: int):
        self.log_every = log_every

    def __call__(self, name: str, info: dict) -> None:
        system = info.get("system", "")
        if name == "start":
            print(f"[{system}] training {info['num_parameters']:,} parameters", flush=True)
        elif name == "step" and (system == "marian" or info["step"] % self.log_every == 0):
            print(
                f"[{system}] step {info['step']}  {info['seconds'] / 60:.1f} min  loss {info['loss']:.3f}",
                flush=True,
            )
        elif name == "eval":
            text = f"[{system}] step {info['step']}: valid ppl {info['valid_ppl']:.1f}"
            if "valid_bleu" in info:
                text += f", greedy BLEU {info['valid_bleu']} chrF {info['valid_chrf']}"
            print(text, flush=True)
        elif name == "average":
            text = f"[{system}] averaged the weights at updates {info['steps'][0]}..{info['steps'][-1]}"
            if info["valid_ppl_final"] is not None:
                text += f": valid ppl {info['valid_ppl_final']:.2f} -> {info['valid_ppl_averaged']:.2f}, " + (
                    "kept" if info["kept"] else "discarded (final weights kept)"
                )
            print(text, flush=True)
        elif name == "test_start":
            print(f"[{system}] translating {info['num_sentences']} test sentences", flush=True)
        elif name == "info":
            print(f"[{system}] {info['message']}", flush=True)


def report(result: QualityResult) -> str:
    """The side-by-side table, signatures, ratios against the first system, and sample translations."""
    rows = [
        (
            "system",
            "BLEU",
            "chrF",
            "len ratio",
            "updates",
            "tgt tokens",
            "tokens/s",
            "epochs",
            "valid ppl",
            "minutes",
            "params",
        )
    ]
    for r in result.systems:
        ppl = f"{r.valid_ppl:.1f}" if r.valid_ppl is not None else "n/a"
        rows.append(
            (
                r.name,
                f"{r.test['bleu']:.2f}",
                f"{r.test['chrf']:.2f}",
                f"{r.length_ratio:.2f}",
                str(r.steps),
                f"{r.target_tokens:,}",
                f"{r.tokens_per_second:.0f}",
                f"{r.epochs:.2f}",
                ppl,
                f"{r.train_seconds / 60:.1f}",
                f"{r.num_parameters:,}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    first = result.systems[0]
    lines.append(
        f"\nTest: {result.test_pairs} held-out pairs, beam {first.test['num_beams']}, length penalty "
        f"{first.test['length_penalty']}; training split {result.train_pairs} pairs."
    )
    for r in result.systems:
        lines.append(
            f"\n{r.name}: {r.description}\n  BLEU {r.test['bleu']:.2f}  {r.test['bleu_signature']}\n"
            f"  chrF {r.test['chrf']:.2f}  {r.test['chrf_signature']}\n  {r.test['bleu_details']}"
        )
    for other in result.systems[1:]:
        lines.append(
            f"\n{other.name} / {first.name}: tokens/s x{other.tokens_per_second / max(first.tokens_per_second, 1e-9):.2f}, "
            f"updates x{other.steps / max(first.steps, 1):.2f}, tokens seen x{other.target_tokens / max(first.target_tokens, 1):.2f}"
        )
    for r in result.systems:
        for s in r.samples:
            lines.append(
                f"\n[{r.name}] SRC: {s['source']}\n[{r.name}] REF: {s['reference']}\n[{r.name}] HYP: {s['hypothesis']}"
            )
    lines.append(f"\nPlot: {result.plot}\nResults: {result.results_file}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_dataclass(
        QualityConfig, argv, description=__doc__.split("\n\n")[0], prog="vanilla-transformer bench quality"
    )
    result = run_quality_benchmark(cfg, Progress(cfg.log_every))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
