"""Translating a whole corpus: one column of a file (`corpus.texts.read_texts`) into a JSON Lines or Parquet file
with one record per input row, in input order, through THE translation loop (`inference.translate`).

A record is ``id`` (the input row number, from 0), ``source`` (the text, None when the row has none),
``translation`` and ``score`` (the sequence score of `inference.translate.translate_scored`; with
``num_return_sequences`` N > 1, ``translations`` and ``scores``, N each, best first) and ``error``: why the row
was not translated (``empty``, ``too long: ...`` for a source over the model's limit `modeling.max_source_length`,
which is not truncated here, or the reader's reason: undecodable, invalid JSON, ...), None for a translated row.

The rows are cut into chunks of `CorpusJob.chunk_size` rows on a fixed grid; a chunk is translated in
length-sorted batches bounded by `CorpusJob.max_tokens` and written atomically as one part file
(``OUTPUT.parts/rows-START-END.jsonl``) with the job's manifest beside the parts. That folder is the progress:
a run finds the chunks done and translates the others, so a killed run continues with no row missing and none
twice, with any number of workers. Sampling is seeded per chunk (``seed + the chunk's first row``), so a chunk's
output does not depend on which worker translates it or when. Two ways to run the chunks:

- processes (`run_shard`, `merge_parts`): worker ``i`` of ``n`` (an `accelerate launch` process) takes the ``i``-th
  contiguous run of chunks; when all are done, the main process writes the ordered output and removes the parts.
- Ray Data (`translate_with_ray`): the rows become a `ray.data.Dataset`; `map_batches` sends chunks to a pool of
  actors, one model each (`ChunkTranslator`), locally or on a cluster; the driver writes the ordered output.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pyarrow as pa
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .engines import EngineModel

logger = logging.getLogger(__name__)

OUTPUT_FORMATS = (".jsonl", ".parquet")
MANIFEST = "manifest.json"
EMPTY = "empty"
# the fields of a CorpusJob that the parts do not depend on (or that the manifest keeps another way)
MANIFEST_SKIPPED = ("output", "device", "batch_size", "max_tokens", "generate_kwargs", "glossary")


@dataclass(frozen=True)
class CorpusJob:
    """What a corpus translation reads, with which model and decoding, and where it writes.

    `input`/`column`/`has_header`: `corpus.texts.read_texts`' arguments. `output`: a ``.jsonl`` or ``.parquet``
    file; its parts go to ``OUTPUT.parts/``. `engine`, `model`, `device`, `dtype`, `trust_remote_code`:
    `inference.engines.load_engine`'s. `generate_kwargs`: the decoding options (None = the model's generation
    config), checked by `modeling.check_generation_arguments`. `batch_size`/`max_tokens`: the batches of
    `inference.translate.translate_scored`. `chunk_size`: rows per part file (the unit of progress). `seed`:
    sampling seed (per chunk: ``seed + first row``). `glossary`: terminology (`inference.glossary.Glossary`'s
    entries, carried in the job so that every worker and Ray actor has them). `input_sha256`: the content of the
    rows read (`corpus.texts.texts_hash`), so that a resumed run refuses parts translated from other rows."""

    input: str
    output: str
    model: str
    column: str | int | None = None
    has_header: bool | None = None
    engine: str = "torch"
    device: str | None = None
    dtype: str | None = None
    trust_remote_code: bool | None = None
    generate_kwargs: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 64
    max_tokens: int | None = 4096
    chunk_size: int = 1000
    seed: int | None = None
    glossary: tuple[tuple[str, str], ...] | None = None
    input_sha256: str | None = None

    def check(self) -> None:
        """`ValueError` for an output format, chunk size, batch size or token budget that cannot work, or an
        output (or parts folder) that cannot be written: a folder in its place, a file in place of a folder."""
        if Path(self.output).suffix.lower() not in OUTPUT_FORMATS:
            raise ValueError(
                f"--output {self.output!r} is neither JSON Lines nor Parquet: name it *.jsonl or *.parquet"
            )
        output = Path(self.output)
        if output.is_dir():
            raise ValueError(
                f"--output {self.output!r} is a folder: name the *.jsonl or *.parquet file to write"
            )
        above = next((p for p in output.absolute().parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise ValueError(
                f"--output {self.output!r} cannot be written: {str(above)!r} is a file, not a folder; choose "
                "another --output"
            )
        if self.parts.exists() and not self.parts.is_dir():
            raise ValueError(
                f"{str(self.parts)!r} (where --output {self.output!r} keeps its progress) is a file, not a folder: "
                "move or delete it, or choose another --output"
            )
        for name in ("batch_size", "chunk_size", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}={value!r} is invalid: expected an integer >= 1")

    @property
    def parts(self) -> Path:
        """The folder of the part files and the manifest."""
        return Path(f"{self.output}.parts")

    def manifest(self, rows: int) -> dict[str, Any]:
        """What the parts depend on: a run with another manifest cannot reuse them. `ValueError` without
        `input_sha256`: parts of unknown rows could not be told from another input's."""
        if self.input_sha256 is None:
            raise ValueError(
                "a corpus job keeps parts only with input_sha256 (corpus.texts.texts_hash of its rows)"
            )
        kept = {k: v for k, v in asdict(self).items() if k not in MANIFEST_SKIPPED}
        # the terms themselves (a glossary may hold thousands) by their hash
        kept["glossary"] = (
            hashlib.sha256(json.dumps(self.glossary).encode()).hexdigest()
            if self.glossary is not None
            else None
        )
        return {**kept, **self.generate_kwargs, "input": str(Path(self.input).resolve()), "rows": rows}

    @property
    def num_return_sequences(self) -> int:
        return self.generate_kwargs.get("num_return_sequences") or 1


def chunks(rows: int, chunk_size: int) -> list[tuple[int, int]]:
    """The fixed grid of [start, end) row ranges."""
    return [(start, min(start + chunk_size, rows)) for start in range(0, rows, chunk_size)]


def shard(grid: list[tuple[int, int]], index: int, count: int) -> list[tuple[int, int]]:
    """Worker ``index`` of ``count``'s contiguous run of chunks (sizes differ by at most one chunk)."""
    return grid[index * len(grid) // count : (index + 1) * len(grid) // count]


def part_path(parts: Path, start: int, end: int) -> Path:
    return parts / f"rows-{start:012d}-{end:012d}.jsonl"


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path`` (`CorpusJob.manifest`'s fields with their types, and decoding options); a
    `ValueError` naming the file when it is not valid JSON or not of that shape."""
    fix = f"delete {str(path.parent)!r} to start over"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{str(path)!r} is not a valid manifest of a corpus translation ({err}); {fix}"
        ) from None
    if not isinstance(found, dict):
        raise ValueError(
            f"{str(path)!r} is not a valid manifest of a corpus translation (a JSON {type(found).__name__}, "
            f"not an object); {fix}"
        )
    wrong = [
        f"{name} {'missing' if name not in found else 'is ' + type(found[name]).__name__}"
        for name, kind in _manifest_types().items()
        if name not in found or not isinstance(found[name], kind)
    ]
    if wrong:
        raise ValueError(
            f"{str(path)!r} is not a manifest of this version of corpus translation ({', '.join(wrong[:5])}); {fix}"
        )
    return found


def _manifest_types() -> dict[str, Any]:
    """The type of each field of `CorpusJob.manifest` (the decoding options aside)."""
    import typing

    hints = typing.get_type_hints(CorpusJob)
    kept = {f: hints[f] for f in hints if f not in MANIFEST_SKIPPED}
    # the glossary's terms are kept by their hash
    return {**kept, "glossary": str | None, "input": str, "input_sha256": str, "rows": int}


def prepare_parts(job: CorpusJob, rows: int, *, create: bool) -> None:
    """Check the parts folder against this job (`ValueError` when it holds another job's parts, parts of another
    input, a manifest that is not one, or when the output exists already); with ``create``, make it and write the
    manifest. Every worker checks before any creates, so that all of them fail alike; nothing is written when the
    check fails."""
    manifest = job.manifest(rows)
    found = job.parts / MANIFEST
    if found.is_file():
        earlier = read_manifest(found)
        if (earlier["input_sha256"], earlier["rows"]) != (manifest["input_sha256"], manifest["rows"]):
            raise ValueError(
                f"the input {job.input!r} changed since {str(job.parts)!r} was written ({earlier['rows']} rows of "
                f"sha256 {earlier['input_sha256'][:12]} there, {rows} rows of sha256 "
                f"{str(manifest['input_sha256'])[:12]} now): resume with the input as it was, or delete that "
                "folder to start over"
            )
        if earlier != manifest:
            changed = sorted(k for k in manifest.keys() | earlier.keys() if earlier.get(k) != manifest.get(k))
            differences = ", ".join(
                f"{k}: {earlier.get(k)!r} there, {manifest.get(k)!r} now" for k in changed
            )
            raise ValueError(
                f"{str(job.parts)!r} holds the progress of a job with other {differences}: resume with the same "
                "options, or delete that folder to start again"
            )
    elif Path(job.output).exists():
        raise ValueError(f"--output {job.output!r} exists; delete it or choose another file")
    if create:
        job.parts.mkdir(parents=True, exist_ok=True)
        if not found.is_file():
            _write_atomic(found, json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")


def pending(job: CorpusJob, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The chunks of ``ranges`` without a part file."""
    return [(s, e) for s, e in ranges if not part_path(job.parts, s, e).is_file()]


def load_translator(job: CorpusJob) -> tuple[PreTrainedModel | EngineModel, PreTrainedTokenizerBase]:
    """The model and tokenizer of the job, with its decoding options, languages and glossary terms checked against
    the model (`ValueError`)."""
    from vanilla_transformer.modeling import check_generation_arguments, position_limit

    from .engines import load_engine
    from .glossary import Glossary, check_terms
    from .languages import check_languages

    model, tokenizer = load_engine(
        job.engine, job.model, device=job.device, trust_remote_code=job.trust_remote_code, dtype=job.dtype
    )
    check_generation_arguments(job.generate_kwargs, model.generation_config)
    check_languages(
        tokenizer,
        model.generation_config,
        job.generate_kwargs.get("src_lang"),
        job.generate_kwargs.get("tgt_lang"),
    )
    if job.glossary:
        check_terms(tokenizer, Glossary(job.glossary), position_limit(model.config))
    return model, tokenizer


def check_on_the_cpu(job: CorpusJob) -> None:
    """`load_translator`'s checks of the job's decoding options, languages and glossary terms (`ValueError`), the
    model loaded on the CPU and dropped: for a driver that hands the work to workers (which may hold the GPUs)."""
    load_translator(replace(job, device="cpu") if job.engine == "torch" else job)


def translate_rows(
    job: CorpusJob,
    model: PreTrainedModel | EngineModel,
    tokenizer: PreTrainedTokenizerBase,
    ids: list[int],
    texts: list[str | None],
    errors: list[str | None],
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """The records (module docstring) of one chunk of rows; rows with an error, empty rows and rows over the
    model's source limit are recorded with their reason, not translated. `progress(n)` after every n rows."""
    from vanilla_transformer.modeling import max_source_length

    from .translate import translate_scored

    n = job.num_return_sequences
    reasons = list(errors)
    for k, text in enumerate(texts):
        if reasons[k] is None and (text is None or not text.strip()):
            reasons[k] = EMPTY
    todo = [k for k, reason in enumerate(reasons) if reason is None]
    limit = max_source_length(model.config, tokenizer)
    if limit is not None and todo:
        lengths = [
            len(ids)
            for ids in tokenizer([texts[k] or "" for k in todo], add_special_tokens=True)["input_ids"]
        ]
        for k, length in zip(todo, lengths):
            if length > limit:
                reasons[k] = f"too long: {length} tokens, the model takes at most {limit}"
        todo = [k for k in todo if reasons[k] is None]
    if progress is not None and len(todo) < len(texts):
        progress(len(texts) - len(todo))
    if job.seed is not None:
        from transformers import set_seed

        set_seed(job.seed + ids[0])
    from .glossary import Glossary

    hyps, scores = translate_scored(
        model,
        tokenizer,
        [texts[k] or "" for k in todo],
        job.batch_size,
        max_tokens=job.max_tokens,
        progress=progress,
        glossary=Glossary(job.glossary) if job.glossary else None,
        **job.generate_kwargs,
    )
    done = dict(zip(todo, zip(hyps, scores)))
    records = []
    for k, row in enumerate(ids):
        texts_k, scores_k = done.get(k, ([""] * n, [None] * n))
        record: dict[str, Any] = {"id": row, "source": texts[k]}
        if n == 1:
            record.update(translation=texts_k[0], score=scores_k[0])
        else:
            record.update(translations=list(texts_k), scores=list(scores_k))
        record["error"] = reasons[k]
        records.append(record)
    return records


def run_shard(
    job: CorpusJob,
    table: pa.Table,
    index: int = 0,
    count: int = 1,
    *,
    progress: Callable[[int], None] | None = None,
    translator: tuple[PreTrainedModel | EngineModel, PreTrainedTokenizerBase] | None = None,
) -> tuple[int, int]:
    """Translate the chunks of worker ``index`` of ``count`` that have no part file yet, each written as one part
    when it is done; returns (chunks, rows) translated. The parts folder exists (`prepare_parts`). ``translator``:
    the job's model and tokenizer when loaded already (`load_translator`), else loaded when a chunk is left."""
    todo = pending(job, shard(chunks(len(table), job.chunk_size), index, count))
    if not todo:
        return 0, 0
    model, tokenizer = translator if translator is not None else load_translator(job)
    for start, end in todo:
        rows = table.slice(start, end - start).to_pydict()
        records = translate_rows(job, model, tokenizer, rows["id"], rows["text"], rows["error"], progress)
        _write_atomic(part_path(job.parts, start, end), "".join(_json_line(r) for r in records))
    return len(todo), sum(end - start for start, end in todo)


def rows_done(job: CorpusJob, rows: int, index: int = 0, count: int = 1) -> tuple[int, int]:
    """(rows of worker ``index``'s shard, rows of it already in part files)."""
    ranges = shard(chunks(rows, job.chunk_size), index, count)
    left = pending(job, ranges)
    return sum(e - s for s, e in ranges), sum(e - s for s, e in ranges) - sum(e - s for s, e in left)


def merge_parts(job: CorpusJob, rows: int) -> None:
    """Write the output from the part files in row order, then delete the parts folder; `ValueError` naming
    the chunks that have no part."""
    grid = chunks(rows, job.chunk_size)
    missing = pending(job, grid)
    if missing:
        raise ValueError(
            f"{len(missing)} chunk(s) of {str(job.parts)!r} are not translated (rows {missing[0][0]}..): run the "
            "same command again to finish them"
        )
    write_output(job, (read_part(part_path(job.parts, s, e), s, e) for s, e in grid))
    for s, e in grid:
        part_path(job.parts, s, e).unlink()
    (job.parts / MANIFEST).unlink()
    job.parts.rmdir()


def write_output(job: CorpusJob, batches: Iterator[list[dict[str, Any]]]) -> None:
    """Write batches of records, in the order given, to ``job.output`` (JSON Lines or Parquet), atomically."""
    out = Path(job.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        if out.suffix.lower() == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            schema = output_schema(job.num_return_sequences)
            with pq.ParquetWriter(partial, schema) as writer:
                for batch in batches:
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
        else:
            with open(partial, "w", encoding="utf-8", newline="\n") as f:
                for batch in batches:
                    f.writelines(_json_line(r) for r in batch)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)


def output_schema(num_return_sequences: int = 1) -> pa.Schema:
    """The Arrow schema of the output records (module docstring)."""
    import pyarrow as pa

    if num_return_sequences == 1:
        hyps = [("translation", pa.string()), ("score", pa.float64())]
    else:
        hyps = [("translations", pa.list_(pa.string())), ("scores", pa.list_(pa.float64()))]
    return pa.schema([("id", pa.int64()), ("source", pa.string()), *hyps, ("error", pa.string())])


def read_output(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of an output file (JSON Lines or Parquet)."""
    p = Path(path)
    if p.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(p).to_pylist()
    return _read_part(p)


class ChunkTranslator:
    """A Ray Data actor: loads the job's model once, then translates batches of rows (``id``, ``text``,
    ``error`` columns) into columns of records (`translate_rows`)."""

    def __init__(self, job: CorpusJob, num_threads: int | None = None):
        if num_threads is not None:
            import torch

            torch.set_num_threads(num_threads)
        self.job = job
        self.model, self.tokenizer = load_translator(job)

    def __call__(self, batch: dict[str, Any]) -> pa.Table:
        import pyarrow as pa

        records = translate_rows(
            self.job,
            self.model,
            self.tokenizer,
            [int(i) for i in batch["id"]],
            list(batch["text"]),
            list(batch["error"]),
        )
        return pa.Table.from_pylist(records, schema=output_schema(self.job.num_return_sequences))


def translate_with_ray(
    job: CorpusJob,
    table: pa.Table,
    *,
    actors: int = 2,
    cpus_per_actor: float = 1,
    gpus_per_actor: float = 0,
    address: str | None = None,
    progress: bool = False,
) -> None:
    """Translate ``table`` (`corpus.texts.read_texts`) with Ray Data: `map_batches` over chunks of
    ``job.chunk_size`` rows with a pool of ``actors`` `ChunkTranslator` actors (``cpus_per_actor`` CPUs, as many
    torch threads, and ``gpus_per_actor`` GPUs each), on a local Ray (``address`` None: `ray.init()` starts one)
    or the cluster at ``address``; the driver writes ``job.output`` in row order. The model folder and the input
    must be readable at the same path on every node; ``progress``: Ray Data's progress bars. The model is loaded
    once in the driver first, on the CPU (`check_on_the_cpu`), so that options it refuses fail as one `ValueError`
    before Ray starts and before anything is written. `ImportError` with the install command without Ray."""
    try:
        import ray
        import ray.data
    except ImportError as err:
        raise ImportError(
            "Ray Data is not installed: pip install 'vanilla-transformer[ray]' (or pip install 'ray[data]')"
        ) from err
    if Path(job.output).exists():
        raise ValueError(f"--output {job.output!r} exists; delete it or choose another file")
    check_on_the_cpu(job)
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = progress
        # one block per chunk: the actors share the chunks
        dataset = ray.data.from_arrow([table.slice(s, e - s) for s, e in chunks(len(table), job.chunk_size)])
        translated = dataset.map_batches(
            ChunkTranslator,
            fn_constructor_kwargs={"job": job, "num_threads": max(1, int(cpus_per_actor))},
            batch_size=job.chunk_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=cpus_per_actor,
            num_gpus=gpus_per_actor,
        )
        batches = translated.iter_batches(batch_format="pyarrow", batch_size=None)
        write_output(job, (cast("pa.Table", batch).to_pylist() for batch in batches))
    finally:
        if started:
            ray.shutdown()


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _read_part(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_part(path: Path, start: int, end: int) -> list[dict[str, Any]]:
    """The records of the part of rows [start, end); a `ValueError` naming the file when it is not JSON Lines or
    not the records of those rows (ids start..end-1 in order)."""
    try:
        records = _read_part(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        problem = f"not JSON Lines ({err})"
    else:
        ids = [r.get("id") if isinstance(r, dict) else None for r in records]
        if ids == list(range(start, end)):
            return records
        problem = f"not the records of rows {start}..{end - 1}"
    raise ValueError(
        f"the part {str(path)!r} is {problem}: delete it and run the same command again to translate its rows again"
    )


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a killed writer leaves no partial file."""
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
