"""Alignment error rate of the models' word alignments against eflomal's, with and without guided alignment
(docs/control.md "Alignments").

``reference`` aligns every pair of the corpus with eflomal (Östling & Tiedemann 2016; ``pip install eflomal``), in
both directions, on the words `vanilla_transformer.inference.alignment` counts (space-separated; each Chinese
character one word; English lowercased for the aligner), and writes two Pharaoh files: ``OUT.sure`` with the links
both directions agree on (the ``--alignment_data`` of a guided run) and ``OUT.ref`` with those as sure links
(``i-j``) and the other links of either direction as possible ones (``i?j``), the reference AER is measured against.

``cost`` times a training batch with and without the guided-alignment loss (same batches, interleaved rounds).

``measure`` aligns the test split's pairs (the split a training run with the same data options holds out) with each
model by forced decoding of the reference translation (`align_pairs`) and prints its AER against ``OUT.ref``, and
the cost of ``translate --alignments``: the time of translating the test sources with and without alignments in the
same run (ratio).

    python -m studies.alignment reference data/bible.zh-en.tsv.xz --out runs/align/eflomal
    python -m studies.alignment measure data/bible.zh-en.tsv.xz --reference runs/align/eflomal.ref \\
        --models runs/plain runs/guided
    python -m studies.alignment cost data/bible.zh-en.tsv.xz --reference runs/align/eflomal.sure
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from studies import study_parser
from vanilla_transformer.corpus import SOURCE, TARGET, DataOptions
from vanilla_transformer.inference.alignment import (
    align_pairs,
    alignment_error_rate,
    parse_pharaoh,
    word_spans,
)


def words(text: str) -> list[str]:
    return [text[a:b] for a, b in word_spans(text)]


def reference(data: str, out: Path, max_lines: int | None) -> None:
    # the reference aligner is the study's own tool, not a dependency of the project: pip install eflomal
    import eflomal  # pyright: ignore[reportMissingImports]

    rows = DataOptions(data=data, max_lines=max_lines).read_training_rows()
    sources = [" ".join(words(text)) for text in rows[SOURCE]]
    targets = [" ".join(words(text)).lower() for text in rows[TARGET]]
    with tempfile.TemporaryDirectory() as folder:
        forward, backward = Path(folder) / "fwd", Path(folder) / "rev"
        eflomal.Aligner().align(
            sources, targets, links_filename_fwd=str(forward), links_filename_rev=str(backward)
        )
        fwd = forward.read_text(encoding="utf-8").splitlines()
        rev = backward.read_text(encoding="utf-8").splitlines()
    out.parent.mkdir(parents=True, exist_ok=True)
    sure_lines, reference_lines = [], []
    for one, other in zip(fwd, rev):
        a, b = parse_pharaoh(one)[0], parse_pharaoh(other)[0]
        sure = a & b
        sure_lines.append(" ".join(f"{i}-{j}" for i, j in sorted(sure)))
        reference_lines.append(
            " ".join(f"{i}-{j}" if (i, j) in sure else f"{i}?{j}" for i, j in sorted(a | b))
        )
    Path(f"{out}.sure").write_text("\n".join(sure_lines) + "\n", encoding="utf-8")
    Path(f"{out}.ref").write_text("\n".join(reference_lines) + "\n", encoding="utf-8")
    print(f"{len(rows)} pairs aligned: {out}.sure, {out}.ref")


def measure(data: str, reference_file: Path, models: list[str], max_lines: int | None, limit: int) -> None:
    from vanilla_transformer.inference import load_model_and_tokenizer, translate
    from vanilla_transformer.inference.alignment import with_alignments

    options = DataOptions(data=data, max_lines=max_lines)
    rows = options.read_training_rows()
    lines = reference_file.read_text(encoding="utf-8").splitlines()
    by_pair = dict(zip(zip(rows[SOURCE], rows[TARGET]), lines))
    splits, _ = options.load_splits()
    test = splits["test"].select(range(min(limit, len(splits["test"]))))
    sources, targets = list(test[SOURCE]), list(test[TARGET])
    references = [by_pair[pair] for pair in zip(sources, targets)]
    print(f"{len(sources)} test pairs ({sum(len(parse_pharaoh(r)[1]) for r in references)} reference links)")
    for folder in models:
        model, tokenizer = load_model_and_tokenizer(folder, device="cpu", dtype="float32")
        config = model.config
        predicted = align_pairs(model, tokenizer, sources, targets)
        aer = alignment_error_rate(predicted, references)
        start = time.perf_counter()
        outputs = translate(model, tokenizer, sources)
        plain = time.perf_counter() - start
        start = time.perf_counter()
        with_alignments(model, tokenizer, sources, outputs)
        extra = time.perf_counter() - start
        print(
            f"{folder}: AER {aer:.3f} (layer {config.alignment_layer_index}, heads {config.alignment_heads or 'all'}); "
            f"translate {plain:.1f} s, alignments +{extra:.1f} s ({extra / plain:.1%} more)"
        )


def cost(data: str, reference_file: Path, batches: int, rounds: int) -> None:
    """Seconds of a training batch (forward and backward, `small` preset, one thread) with and without the
    guided-alignment loss on the same batches, interleaved rounds, and their ratio."""
    import statistics

    import torch

    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration
    from vanilla_transformer.tokenizer import load_or_train_tokenizer
    from vanilla_transformer.training.alignment import attach_alignments
    from vanilla_transformer.training.objectives import Translation
    from vanilla_transformer.training.presets import build_config

    rows = DataOptions(data=data).read_training_rows()
    pairs = rows.select(range(32 * batches))
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = load_or_train_tokenizer(None, Path(folder), pairs, 8000)
        encoded = tokenizer(list(pairs[SOURCE]), text_target=list(pairs[TARGET]))
        sources, targets = encoded["input_ids"], encoded["labels"]
        aligned, _ = attach_alignments(str(reference_file), rows, pairs, targets, tokenizer)
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(
        build_config("small", len(tokenizer), alignment_heads=1)
    )
    plain, guided = Translation(), Translation(alignment_loss_weight=0.05)
    chunks = [slice(32 * k, 32 * (k + 1)) for k in range(batches)]
    ready = {
        name: [objective.collate(sources[c], examples[c], model.config) for c in chunks]
        for name, objective, examples in (("plain", plain, targets), ("guided", guided, aligned))
    }
    times: dict[str, list[float]] = {"plain": [], "guided": []}
    for _ in range(rounds):
        for name, objective in (("plain", plain), ("guided", guided)):
            start = time.perf_counter()
            for batch in ready[name]:
                loss, _ = objective.loss(model, batch, 0.1)
                loss.backward()
            times[name].append((time.perf_counter() - start) / batches)
    a, b = statistics.median(times["plain"]), statistics.median(times["guided"])
    print(f"training batch (32 pairs): {a:.3f} s plain, {b:.3f} s guided: {b / a:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = study_parser("studies.alignment", __doc__)
    parser.add_argument("task", choices=("reference", "measure", "cost"))
    parser.add_argument("data", help="the parallel corpus (as train --data)")
    parser.add_argument("--out", type=Path, help="reference: the Pharaoh files' prefix")
    parser.add_argument(
        "--reference", type=Path, help="measure: the OUT.ref file of `reference`; cost: its OUT.sure file"
    )
    parser.add_argument("--models", nargs="+", default=[], help="measure: exported model folders")
    parser.add_argument("--max_lines", type=int, default=None, help="as train --max_lines")
    parser.add_argument("--limit", type=int, default=500, help="measure: the first N test pairs")
    args = parser.parse_args(argv)
    if args.task == "reference":
        if args.out is None:
            parser.error("reference needs --out")
        reference(args.data, args.out, args.max_lines)
    elif args.task == "cost":
        if args.reference is None:
            parser.error("cost needs --reference")
        cost(args.data, args.reference, batches=4, rounds=5)
    else:
        if args.reference is None or not args.models:
            parser.error("measure needs --reference and --models")
        measure(args.data, args.reference, args.models, args.max_lines, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
