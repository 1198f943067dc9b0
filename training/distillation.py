"""Sequence-level knowledge distillation (Kim and Rush, 2016): the training split's targets become a teacher's
translations of its sources, so that a student (e.g. the ``student`` preset: a deep encoder, a one-layer decoder)
learns the teacher's output distribution's mode instead of the references.

The teacher translates through corpus translation (`inference.corpus_translation`): sharded over the run's
processes, in chunks saved under ``OUTPUT_DIR/checkpoints/distill/`` as they finish, so that a killed run resumes the
translation and a resumed run reuses it; with its own decoding (its generation config: beam search) unless
``--distill_beams`` is given. A source it cannot translate (empty, over its length limit) keeps its reference and
is counted. Validation and test keep their references: the run's BLEU is measured against them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vanilla_transformer.corpus.arrow import pairs_hash
from vanilla_transformer.corpus.rows import SOURCE, TARGET

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)


def teacher_job(cfg: Any, sources: list[str], folder: Path, device: str | None) -> Any:
    """The corpus translation job of the teacher over ``sources``: its output file is named by a digest of the
    sources, the teacher and its decoding, so that changed data or another teacher never reuses a translation."""
    from vanilla_transformer.inference.corpus_translation import CorpusJob

    generate_kwargs = {"num_beams": cfg.distill_beams} if cfg.distill_beams is not None else {}
    # the sources as corpus translation reads them (corpus.texts.texts_hash: texts without errors)
    content = pairs_hash(sources, [""] * len(sources))
    h = content.copy()
    h.update(
        f"{Path(cfg.distill_from).resolve()}\0{cfg.distill_engine}\0{sorted(generate_kwargs.items())}".encode()
    )
    digest = h.hexdigest()[:16]
    return CorpusJob(
        input=str(folder / f"train-sources-{digest}"),
        output=str(folder / f"teacher-{digest}.jsonl"),
        model=cfg.distill_from,
        engine=cfg.distill_engine,
        device=device if cfg.distill_engine == "torch" else None,
        generate_kwargs=generate_kwargs,
        seed=cfg.seed,
        input_sha256=content.hexdigest(),
    )


def distill_training_split(
    cfg: Any,
    splits: datasets.DatasetDict,
    folder: Path,
    accelerator: Any,
    event: Callable[[str, dict], None] | None = None,
) -> tuple[datasets.DatasetDict, str]:
    """``splits`` with the training targets replaced by ``cfg.distill_from``'s translations of the training
    sources (every process of ``accelerator`` translates its shard, the main one merges), and a sentence for the
    log and the model card. ``event`` receives "distill_start" (``num_sentences``: this process' shard, ``done``:
    of it, from an earlier run) and "distill_progress" (``n``: sentences just translated)."""
    import datasets
    import pyarrow as pa

    from vanilla_transformer.corpus.texts import texts_schema
    from vanilla_transformer.inference.corpus_translation import (
        merge_parts,
        prepare_parts,
        read_output,
        rows_done,
        run_shard,
    )

    train = splits["train"]
    sources, references = list(train[SOURCE]), list(train[TARGET])
    job = teacher_job(cfg, sources, folder, str(accelerator.device))
    output = Path(job.output)
    if not output.is_file():
        logger.info(
            "the teacher %s translates %d training sources into %s", cfg.distill_from, len(sources), output
        )
        table = pa.table(
            {"id": list(range(len(sources))), "text": sources, "error": [None] * len(sources)},
            schema=texts_schema(),
        )
        prepare_parts(job, len(sources), create=False)
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            prepare_parts(job, len(sources), create=True)
        accelerator.wait_for_everyone()
        index, count = accelerator.process_index, accelerator.num_processes
        emit = event or (lambda name, info: None)
        total, done = rows_done(job, len(sources), index, count)
        emit("distill_start", {"num_sentences": total, "done": done, "path": str(output)})
        run_shard(job, table, index, count, progress=lambda n: emit("distill_progress", {"n": n}))
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            merge_parts(job, len(sources))
        accelerator.wait_for_everyone()
    records = read_output(output)
    if len(records) != len(sources):
        raise ValueError(
            f"{str(output)!r} has {len(records)} translations for {len(sources)} sources: delete it"
        )
    kept: dict[str, int] = {}
    targets = []
    for record, reference in zip(records, references):
        translation = record.get("translation")
        if record.get("error") is None and translation:
            targets.append(translation)
        else:
            reason = str(record.get("error") or "empty translation").split(":")[0]
            kept[reason] = kept.get(reason, 0) + 1
            targets.append(reference)
    distilled = datasets.DatasetDict(splits)
    distilled["train"] = train.remove_columns(TARGET).add_column(TARGET, targets)
    beams = cfg.distill_beams or "its generation config's"
    note = (
        f"Distilled: the training targets are the translations of the teacher {Path(cfg.distill_from).name} "
        f"({cfg.distill_engine}, beams: {beams}) of the {len(sources)} training sources"
    )
    if kept:
        note += " (" + ", ".join(f"{n} kept their reference: {why}" for why, n in sorted(kept.items())) + ")"
    return distilled, note
