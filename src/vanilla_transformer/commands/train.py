"""Train a translation Transformer. With no arguments: the CPU-sized `small` preset on the shipped zh→en
Bible corpus for 25 minutes, then test-set BLEU/chrF and export to outputs/default/.

Examples:
    vanilla-transformer train
    vanilla-transformer train --preset tiny --max_lines 2000 --valid_size 100 --test_size 100 --max_minutes 1
    vanilla-transformer train --resume
    accelerate launch --num_processes 2 -m vanilla_transformer train --preset base --mixed_precision bf16 ...

All options: vanilla-transformer train --help (they are the fields of training.options.TrainConfig).
"""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tqdm.auto import tqdm

from vanilla_transformer.training import TrainConfig, train
from vanilla_transformer.training.cli import parse_dataclass


class Progress:
    """Turns training events into progress bars with an ETA and printed lines (main process only). Training shows
    updates out of ``--max_steps``, or, under a time or epoch budget, the percentage of the budget done (the rule
    that stops the run first); the test translation has a bar of its own."""

    def __init__(self, main: bool, steps_only: bool):
        self.main = main
        self.steps_only = steps_only
        self.bar = None
        self.test_bar = None

    def __call__(self, name: str, info: dict) -> None:
        if not self.main:
            return
        if name == "info":
            tqdm.write(info["message"])
        elif name == "start":
            self.close()
            tqdm.write(
                f"Training {info['num_parameters']:,} parameters, token budget {info['max_tokens']}, "
                f"{info['num_processes']} process(es), from step {info['step']}"
            )
            if self.steps_only:
                self.bar = tqdm(
                    total=info["max_steps"], initial=info["step"], unit="step", dynamic_ncols=True
                )
            else:
                self.bar = tqdm(
                    total=100,
                    unit="%",
                    dynamic_ncols=True,
                    desc="training budget",
                    bar_format="{l_bar}{bar}| {n:.1f}/{total_fmt}% [{elapsed}<{remaining}{postfix}]",
                )
        elif name == "step" and self.bar is not None:
            if self.steps_only:
                self.bar.update(1)
            else:
                self.bar.update(max(0.0, 100 * info["budget"] - self.bar.n))
            self.bar.set_postfix(
                step=info["step"],
                loss=f"{info['loss']:.3f}",
                ppl=f"{info['ppl']:.1f}",
                lr=f"{info['lr']:.2e}",
            )
        elif name == "eval":
            text = f"step {info['step']}: valid loss {info['valid_loss']:.3f}, ppl {info['valid_ppl']:.1f}"
            if "valid_bleu" in info:
                text += f", BLEU {info['valid_bleu']} chrF {info['valid_chrf']} ({info['bleu_signature']})"
            tqdm.write(text)
        elif name == "checkpoint":
            tqdm.write(f"saved {info['path']}")
        elif name == "average":
            steps = info["steps"]
            text = f"averaged the weights at {len(steps)} updates ({steps[0]}..{steps[-1]})"
            if info["valid_loss_final"] is not None:
                text += f": valid ppl {info['valid_ppl_final']:.2f} -> {info['valid_ppl_averaged']:.2f}, " + (
                    "exporting the average" if info["kept"] else "keeping the final weights"
                )
            tqdm.write(text)
        elif name == "export_at":
            avg = f", averaged updates {info['averaged_steps']}" if info["averaged_steps"] else ""
            tqdm.write(f"minute {info['minutes']:g} (update {info['step']}{avg}): exported to {info['path']}")
        elif name in ("test_progress", "distill_progress") and self.test_bar is not None:
            self.test_bar.update(info["n"])
        elif name == "distill_start":
            tqdm.write(f"the teacher translates the training sources into {info['path']}")
            self.test_bar = tqdm(
                total=info["num_sentences"],
                initial=info["done"],
                unit="sent",
                desc="teacher translation",
                dynamic_ncols=True,
            )
        elif name == "test_start":
            self.close()
            self.test_bar = tqdm(
                total=info["num_sentences"], unit="sent", desc="test translation", dynamic_ncols=True
            )
        elif name == "exported":
            self.close()
            tqdm.write(f"exported the model to {info['path']}")

    def close(self) -> None:
        for bar in (self.bar, self.test_bar):
            if bar is not None:
                bar.close()
        self.bar = self.test_bar = None


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_dataclass(
        TrainConfig, argv, description=(__doc__ or "").split("\n\n")[0], prog="vanilla-transformer train"
    )
    main_process = int(os.environ.get("RANK", "0")) == 0
    progress = Progress(
        main_process, steps_only=bool(cfg.max_steps) and not cfg.max_minutes and not cfg.max_epochs
    )
    try:
        result = train(cfg, progress)
    except (ValueError, OSError) as error:  # user errors (bad data, options, checkpoints): no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        progress.close()
    if not main_process:
        return 0
    skipped = f", {result.skipped_updates} skipped (no token to score)" if result.skipped_updates else ""
    print(
        f"Stopped after {result.step} updates{skipped} ({result.stopped_because}); "
        f"{result.target_tokens_per_second:.0f} target tokens/s"
    )
    if result.test_metrics and "perplexity" in result.test_metrics:  # the language-model objectives
        m = result.test_metrics
        print(
            f"Test {m['objective']} loss {m['nll_loss']:.4f}  perplexity {m['perplexity']:.2f}  "
            f"({m['num_examples']} examples)"
        )
    elif result.test_metrics:
        m = result.test_metrics
        decoding = f"beam {m['num_beams']}"
        if m["num_beams"] > 1:
            decoding += f", length penalty {m['length_penalty']}"
        print(f"Test BLEU {m['bleu']}  chrF {m['chrf']}  ({m['num_sentences']} sentences, {decoding})")
        print(f"  {m['bleu_signature']}\n  {m['chrf_signature']}")
        if m.get("bleu_details"):
            print(f"  {m['bleu_details']}")
        if result.split_origin.get("test"):
            print(f"  test split: {result.split_origin['test']}")
    for s in result.samples:
        ref = f"\nREF: {s['reference']}" if s["reference"] is not None else ""
        print(f"\nSRC: {s['source']}{ref}\nHYP: {s['hypothesis']}")
    if cfg.export:
        print(f"\nModel saved to {result.output_dir} (load with trust_remote_code=True)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
