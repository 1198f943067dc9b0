"""Translate one column of a corpus file into a JSON Lines or Parquet file: one record per input row, in input
order, with the row id, the source, the translation(s), their sequence scores and, for a row not translated,
why (empty, too long, undecodable, ...).

    vanilla-transformer translate-corpus --model runs/base/export --input mono.zh.tsv --output mono.en.jsonl
    vanilla-transformer translate-corpus --model M --input books.parquet --column zh --output bt.parquet \\
        --do_sample --top_k 10 --seed 1                         # back-translation by sampling
    accelerate launch --num_processes 4 -m vanilla_transformer translate-corpus --model M --input I --output O
    accelerate launch --multi_gpu --num_processes 2 -m vanilla_transformer translate-corpus ...   # 2 CPU processes
    vanilla-transformer translate-corpus --model M --input I --output O --ray_actors 8 --ray_address auto

Input: TSV/TXT (optionally .xz/.gz/.bz2; --column is a 0-based index, default 0, or a header name), JSON Lines,
Parquet, Arrow or a folder written by datasets' save_to_disk (--column names a field; default source, else
text). Output: *.jsonl or *.parquet. The rows are translated in chunks of --chunk_size rows, each chunk in
length-sorted batches of at most --batch_size sentences and --max_tokens padded source tokens, and each chunk
is saved in OUTPUT.parts/ when done: run the same command again after an interruption and it continues where it
stopped; an input edited since is refused (its content is in the manifest): delete OUTPUT.parts/ to start over.
Under `accelerate launch`, each process translates one contiguous run of chunks (on its own GPU when there are
GPUs; on CPU, launch with --multi_gpu: --cpu starts one process) and prints its chunks and rows/s, and the main
process writes the output. With --ray_actors N, Ray Data translates the chunks with N actors, one model each
(pip install 'vanilla-transformer[ray]'; --ray_address for a cluster). Exit code 2 for bad options, a missing
column, an output that cannot be written, a changed input or a model that cannot be found.

--glossary FILE puts terminology into the translations as `vanilla-transformer translate --glossary` does (one
"source term<TAB>target term" per line; --engine torch, beam search); the terms travel with the job to every
process and Ray actor, and a run resumes only with the same terms.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
from typing import TYPE_CHECKING

from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.commands.translate import (
    add_glossary_argument,
    add_translation_arguments,
    check_decoding,
    decoding_kwargs,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from vanilla_transformer.inference.corpus_translation import CorpusJob


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = command_parser("translate-corpus", __doc__)
    add_translation_arguments(parser)
    add_glossary_argument(parser)
    parser.add_argument(
        "--input",
        required=True,
        type=path_argument("file or folder", text=True),
        help="the file (or saved dataset folder) to translate",
    )
    parser.add_argument(
        "--column",
        default=None,
        help="the column to translate (TSV: index or header name; else a field name)",
    )
    parser.add_argument(
        "--has_header", action="store_true", help="the TSV file's first line names its columns"
    )
    parser.add_argument(
        "--output", required=True, type=path_argument("output file", text=True), help="*.jsonl or *.parquet"
    )
    parser.add_argument("--batch_size", type=int, default=64, help="at most this many sentences per batch")
    parser.add_argument(
        "--max_tokens", type=int, default=4096, help="at most this many padded source tokens per batch"
    )
    parser.add_argument(
        "--chunk_size",
        type=int,
        default=1000,
        help="rows per saved part (the unit of progress and of resuming)",
    )
    parser.add_argument(
        "--no_progress", action="store_true", help="no progress bar (none when stderr is not a tty)"
    )
    parser.add_argument(
        "--ray_actors",
        type=int,
        default=None,
        help="translate with Ray Data and this many actors (one model each)",
    )
    parser.add_argument("--ray_address", default=None, help="the Ray cluster (default: a local Ray)")
    parser.add_argument(
        "--ray_cpus_per_actor", type=float, default=1, help="CPUs (and torch threads) per actor"
    )
    parser.add_argument("--ray_gpus_per_actor", type=float, default=0, help="GPUs per actor")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    from vanilla_transformer.corpus.texts import read_texts, texts_hash
    from vanilla_transformer.inference.corpus_translation import CorpusJob
    from vanilla_transformer.inference.glossary import read_glossary

    generate_kwargs = decoding_kwargs(args)
    try:
        glossary = read_glossary(args.glossary).entries if args.glossary is not None else None
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    job = CorpusJob(
        input=args.input,
        output=args.output,
        model=args.model,
        column=args.column,
        has_header=True if args.has_header else None,
        engine=args.engine,
        device=args.device,
        dtype=args.dtype,
        trust_remote_code=True if args.trust_remote_code else None,
        generate_kwargs={k: v for k, v in generate_kwargs.items() if v is not None},
        batch_size=args.batch_size,
        max_tokens=args.max_tokens,
        chunk_size=args.chunk_size,
        seed=args.seed,
        glossary=glossary,
    )
    try:
        job.check()
        check_decoding(args, generate_kwargs)
        if args.ray_actors is not None and args.ray_actors < 1:
            raise ValueError(f"--ray_actors {args.ray_actors} is invalid: expected an integer >= 1")
        table = read_texts(job.input, job.column, has_header=job.has_header)
        # the rows read, by content: a resumed run refuses parts translated from an edited input
        job = dataclasses.replace(job, input_sha256=texts_hash(table))
        if args.ray_actors is not None:
            from vanilla_transformer.inference.corpus_translation import translate_with_ray

            translate_with_ray(
                job,
                table,
                actors=args.ray_actors,
                cpus_per_actor=args.ray_cpus_per_actor,
                gpus_per_actor=args.ray_gpus_per_actor,
                address=args.ray_address,
                progress=not args.no_progress and sys.stderr.isatty(),
            )
            return 0
        return _run_processes(job, table, show_progress=not args.no_progress)
    except (ValueError, ImportError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run_processes(job: CorpusJob, table: pa.Table, *, show_progress: bool) -> int:
    """This process' shard (one of `accelerate launch`'s processes, or the only one), then the merge by the main
    process once every shard is done."""
    from accelerate import PartialState
    from tqdm.auto import tqdm

    from vanilla_transformer.inference.corpus_translation import (
        chunks,
        load_translator,
        merge_parts,
        pending,
        prepare_parts,
        rows_done,
        run_shard,
        shard,
    )
    from vanilla_transformer.training.hardware import (
        check_launched,
        cpu_threads,
        launched_processes,
        process_device,
    )

    # without a GPU (or with --device cpu) the processes of `accelerate launch` join one gloo group, as training's
    state = PartialState(cpu=process_device(cpu=job.device == "cpu").type == "cpu")
    try:
        check_launched(state.num_processes)
    except RuntimeError as err:
        raise ValueError(str(err)) from None
    if state.device is not None and state.device.type == "cpu" and launched_processes() > 1:
        import torch

        # the cores shared by the processes
        torch.set_num_threads(cpu_threads())
    # under accelerate launch on GPUs: each process on its own device
    if (
        job.device is None
        and job.engine == "torch"
        and state.device is not None
        and state.device.type != "cpu"
    ):
        job = dataclasses.replace(job, device=str(state.device))
    prepare_parts(job, len(table), create=False)
    # the model, and the options and glossary checked against it, before anything is written
    mine = shard(chunks(len(table), job.chunk_size), state.process_index, state.num_processes)
    translator = load_translator(job) if pending(job, mine) else None
    state.wait_for_everyone()
    if state.is_main_process:
        prepare_parts(job, len(table), create=True)
    state.wait_for_everyone()
    total, done = rows_done(job, len(table), state.process_index, state.num_processes)
    bar = tqdm(
        total=total,
        initial=done,
        unit="sent",
        desc=f"shard {state.process_index + 1}/{state.num_processes}",
        position=state.process_index,
        disable=not show_progress or not sys.stderr.isatty(),
        file=sys.stderr,
    )

    def progress(rows: int) -> None:
        bar.update(rows)

    started = time.perf_counter()
    with bar:
        done_chunks, rows = run_shard(
            job, table, state.process_index, state.num_processes, progress=progress, translator=translator
        )
    seconds = time.perf_counter() - started
    print(
        f"process {state.process_index + 1}/{state.num_processes} (pid {os.getpid()}): translated {done_chunks} "
        f"chunk(s), {rows} rows in {seconds:.1f} s ({rows / max(seconds, 1e-9):.1f} rows/s)",
        file=sys.stderr,
    )
    state.wait_for_everyone()
    if state.is_main_process:
        merge_parts(job, len(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
