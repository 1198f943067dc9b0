"""The translation table CTranslate2 publishes for its own releases (target tokens per second, peak memory, BLEU),
for our model and its peers translating real text with the same weights, in one run.

Rows (`prepare_systems`): transformers' `MarianMTModel` with our model's weights (`benchmarks.marian.marian_peer`),
our model through `generate()`, our default torch engine (float32, bf16 where the CPU has bf16 instructions), each
with and without the vocabulary shortlist (`inference.shortlist`), our CTranslate2 export in float32 and int8
(with and without its vocabulary map), and our ONNX Runtime export in float32 and int8. Every row translates
through THE translation loop (`inference.translate`): same batching by length, same length limits, same decoding
options, so a row differs from another only in what decodes a batch. The "generate()" row sets
`DECODER_ENV` to "generate" for its calls, which makes the translation loop decode with `model.generate()`
wherever the torch engine has a decoding loop of its own.

Columns, per thread count and batch size (`TableSettings`): target tokens per second (the outputs re-tokenized,
so every row counts alike; median over interleaved rounds), the median (min-max) of per-round ratios against
Marian in the same rounds (against `generate()` where Marian cannot compute the model), how many outputs equal
`generate()`'s, and BLEU and chrF against the references (blank without references); and the peak resident memory of a
fresh process that loads the row's model and translates the sentences once at the largest batch and thread count
(CTranslate2's "max memory"). The logic is here; `vanilla-transformer bench speed --model M` (or ``--table`` for
a random model) parses arguments and prints.
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .harness import Stat, interleaved, per_round_ratio

# the environment variable that chooses what decodes a PyTorch model in the translation loop ("generate" or the
# torch engine's own loop), read at every call
DECODER_ENV = "VANILLA_TRANSFORMER_DECODER"
MARIAN, GENERATE = "Marian (transformers)", "generate()"


@dataclass
class TableSettings:
    """Thread counts and batch sizes (sentences per batch) of the table's blocks, interleaved rounds per block,
    the beam size (None: the model's generation config) and whether to measure peak memory."""

    threads: tuple[int, ...] = (1, 2)
    batches: tuple[int, ...] = (1, 32)
    rounds: int = 3
    num_beams: int | None = None
    memory: bool = True


@dataclass(frozen=True)
class System:
    """One row: its ``name``, what runs it (``engine``: "marian", "generate", "torch", "ct2" or "onnx"), the
    ``folder`` it loads from, the ``dtype`` (torch: float32 / bfloat16; onnx: float32 / int8) and whether it decodes
    over the shortlist."""

    name: str
    engine: str
    folder: Path
    dtype: str | None = None
    shortlist: bool = False


@dataclass
class TableRow:
    """A row of one block: throughput (target tokens/s per round), ratio against the peer, outputs equal to
    `generate()`'s, BLEU and chrF (None without references) and peak memory in MiB (None: not measured)."""

    system: System
    throughput: Stat
    ratio: Stat | None
    agree: int
    bleu: float | None
    chrf: float | None = None
    memory_mib: float | None = None


@dataclass
class TableBlock:
    threads: int
    batch: int
    sentences: int
    rows: list[TableRow] = field(default_factory=list)


def prepare_systems(
    folder: Path,
    work: Path,
    *,
    bf16: bool,
    engines: bool = True,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[list[System], list[str]]:
    """The rows for our saved model ``folder`` (exports written under ``work``; none without ``engines``) and
    notes on the rows left out and why (Marian cannot compute the model, an engine is not installed or refuses the
    model, no shortlist)."""
    from vanilla_transformer.export import exporter
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.shortlist import shortlist_path

    from .marian import marian_peer, save_marian_peer

    notes: list[str] = []
    model, tokenizer = load_model_and_tokenizer(str(folder), device="cpu", dtype="float32")
    has_shortlist = shortlist_path(folder) is not None
    if not has_shortlist:
        notes.append(f"no shortlist rows: {folder} has none (vanilla-transformer shortlist --model {folder})")
    systems: list[System] = []
    try:
        marian = marian_peer(model)
    except ValueError as error:
        notes.append(f"no Marian row: {error}; ratios are against {GENERATE}")
    else:
        save_marian_peer(marian, work / "marian")
        tokenizer.save_pretrained(work / "marian")
        systems.append(System(MARIAN, "marian", work / "marian"))
    systems.append(System(GENERATE, "generate", folder, "float32"))
    for dtype in ("float32", "bfloat16") if bf16 else ("float32",):
        for shortlist in (False, True) if has_shortlist else (False,):
            name = f"ours {'fp32' if dtype == 'float32' else 'bf16'}" + (" + shortlist" if shortlist else "")
            systems.append(System(name, "torch", folder, dtype, shortlist))
    if not bf16:
        notes.append("no bf16 rows: this CPU has no bf16 instructions (AMX-BF16, AVX512-BF16)")
    if not engines:
        notes.append("no CTranslate2 and ONNX Runtime rows: --no_engines")
    for engine, variants in (
        (
            ("ct2", (("fp32", None, {}), ("int8", None, {"quantization": "int8"}))),
            ("onnx", (("fp32", "float32", {}), ("int8", "int8", {}))),
        )
        if engines
        else ()
    ):
        exported: dict[tuple, Path] = {}
        for label, dtype, options in variants:
            key = tuple(sorted(options.items()))
            try:
                if key not in exported:
                    log(f"exporting {engine} {label}")
                    exported[key] = exporter(engine)(folder, work / f"{engine}_{label}", **options)
            except ImportError as error:
                notes.append(f"no {engine} rows: {error}")
                break
            except ValueError as error:
                notes.append(f"no {engine} {label} row: {error}")
                continue
            title = "CTranslate2" if engine == "ct2" else "ONNX Runtime"
            with_map = (False, True) if engine == "ct2" and has_shortlist else (False,)
            if True in with_map:
                from vanilla_transformer.inference.engine_ct2 import CT2Translator

                problem = CT2Translator(exported[key]).vmap_problem()
                if problem is not None:
                    notes.append(f"no {title} {label} + vmap row: {problem}")
                    with_map = (False,)
            for shortlist in with_map:
                name = f"{title} {label}" + (" + vmap" if shortlist else "")
                systems.append(System(name, engine, exported[key], dtype, shortlist))
    return systems, notes


def load_system(system: System, threads: int) -> tuple[Any, Any, Any]:
    """(model, tokenizer, shortlist or None) of a row, computing on ``threads`` threads."""
    import torch

    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.inference.shortlist import load_shortlist

    shortlist = load_shortlist(system.folder) if system.shortlist else None
    if system.engine == "marian":
        from vanilla_transformer.tokenizer.prepare import load_tokenizer

        from .marian import load_marian_peer

        torch.set_num_threads(threads)
        model = load_marian_peer(system.folder, attn_implementation="sdpa")
        return model, load_tokenizer(system.folder), None
    if system.engine in ("generate", "torch"):
        torch.set_num_threads(threads)
        model, tokenizer = load_engine("torch", system.folder, device="cpu", dtype=system.dtype)
        return model, tokenizer, shortlist
    model, tokenizer = load_engine(system.engine, system.folder, num_threads=threads, dtype=system.dtype)
    return model, tokenizer, shortlist


@contextlib.contextmanager
def decoder_choice(system: System) -> Iterator[None]:
    """`DECODER_ENV` set to "generate" while the "generate()" row translates (module docstring)."""
    if system.engine != "generate":
        yield
        return
    before = os.environ.get(DECODER_ENV)
    os.environ[DECODER_ENV] = "generate"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DECODER_ENV, None)
        else:
            os.environ[DECODER_ENV] = before


def translation_call(
    system: System, loaded: tuple[Any, Any, Any], sources: Sequence[str], batch: int, options: dict[str, Any]
) -> Callable[[], list[str]]:
    """One pass of a row over ``sources`` in batches of ``batch`` sentences (the timed unit)."""
    from vanilla_transformer.inference.translate import translate_hypotheses

    model, tokenizer, shortlist = loaded
    extra = {"shortlist": shortlist} if shortlist is not None else {}

    def run() -> list[str]:
        with decoder_choice(system):
            nbest = translate_hypotheses(model, tokenizer, sources, batch, scores=False, **options, **extra)
        return [hyps[0].text for hyps in nbest]

    return run


def target_tokens(tokenizer: Any, outputs: Sequence[str]) -> int:
    """The target tokens of ``outputs`` (re-tokenized, no special tokens): what every row is counted in."""
    encoded = tokenizer(text_target=list(outputs), add_special_tokens=False)["input_ids"]
    return sum(len(ids) for ids in encoded)


def run_block(
    systems: Sequence[System],
    sources: Sequence[str],
    references: Sequence[str] | None,
    threads: int,
    batch: int,
    settings: TableSettings,
    *,
    bleu_tokenize: str = "13a",
    log: Callable[[str], None] = lambda _: None,
) -> TableBlock:
    """Every row translating ``sources`` at ``threads`` threads and ``batch`` sentences per batch, in
    `settings.rounds` interleaved rounds (after one warm-up pass over a few sentences)."""
    from vanilla_transformer.inference import score_translations

    options = {} if settings.num_beams is None else {"num_beams": settings.num_beams}
    calls, outputs = {}, {}
    for system in systems:
        loaded = load_system(system, threads)
        calls[system.name] = translation_call(system, loaded, sources, batch, options)
        translation_call(system, loaded, sources[: max(batch, 4)], batch, options)()  # warm-up
        outputs[system.name] = (loaded[1], calls[system.name]())
    log(f"threads {threads}, batch {batch}: {settings.rounds} rounds of {len(systems)} systems")
    times = interleaved(calls, settings.rounds, warmup=0)
    peer = MARIAN if MARIAN in times else GENERATE
    reference_outputs = outputs[GENERATE][1]
    block = TableBlock(threads, batch, len(sources))
    for system in systems:
        tokenizer, texts = outputs[system.name]
        tokens = target_tokens(tokenizer, texts)
        scores = {}
        if references is not None:
            scores = score_translations(texts, references, tokenize=bleu_tokenize)
        block.rows.append(
            TableRow(
                system,
                Stat([tokens / t for t in times[system.name]]),
                None if system.name == peer else per_round_ratio(times[peer], times[system.name]),
                sum(a == b for a, b in zip(texts, reference_outputs)),
                scores.get("bleu"),
                scores.get("chrf"),
            )
        )
    return block


def peak_memory_mib(system: System, threads: int, batch: int, sources: Sequence[str], options: dict) -> float:
    """Peak resident memory (MiB) of a fresh Python process that loads ``system`` and translates ``sources``
    once (`memory_child`)."""
    import json
    import subprocess
    import sys

    job = dict(
        system={**system.__dict__, "folder": str(system.folder)},
        threads=threads,
        batch=batch,
        sources=list(sources),
        options=options,
    )
    code = "from vanilla_transformer.benchmarks.translation import memory_child; memory_child()"
    done = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(job), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"measuring the memory of {system.name} failed: {done.stderr.strip()[-2000:]}")
    return int(done.stdout.split()[-1]) / 1024


def memory_child() -> None:
    """The child of `peak_memory_mib`: reads its job (JSON) from stdin, prints its peak resident KiB."""
    import json
    import re
    import sys

    job = json.loads(sys.stdin.read())
    system = System(**{**job["system"], "folder": Path(job["system"]["folder"])})
    loaded = load_system(system, job["threads"])
    translation_call(system, loaded, job["sources"], job["batch"], job["options"])()
    # VmHWM: the high-water mark of this process's own memory map. Not getrusage's ru_maxrss, which Linux carries
    # over from the parent through fork and exec (every row read as the parent's peak)
    peak = re.search(r"^VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    if peak is None:
        raise RuntimeError("no VmHWM line in /proc/self/status: peak memory is measured on Linux only")
    print(peak.group(1))  # KiB


def run_table(
    systems: Sequence[System],
    sources: Sequence[str],
    references: Sequence[str] | None,
    settings: TableSettings,
    *,
    bleu_tokenize: str = "13a",
    log: Callable[[str], None] = lambda _: None,
) -> list[TableBlock]:
    """Every block of `settings` (threads x batch sizes), then each row's peak memory at the largest of both."""
    import torch

    threads_before = torch.get_num_threads()
    try:
        blocks = [
            run_block(
                systems, sources, references, threads, batch, settings, bleu_tokenize=bleu_tokenize, log=log
            )
            for threads in settings.threads
            for batch in settings.batches
        ]
    finally:
        torch.set_num_threads(threads_before)
    if settings.memory:
        threads, batch = max(settings.threads), max(settings.batches)
        options = {} if settings.num_beams is None else {"num_beams": settings.num_beams}
        for system in systems:
            log(f"peak memory of {system.name}")
            memory = peak_memory_mib(system, threads, batch, sources, options)
            for block in blocks:
                for row in block.rows:
                    if row.system == system:
                        row.memory_mib = memory
    return blocks


def format_table(blocks: Sequence[TableBlock], settings: TableSettings) -> list[str]:
    """The blocks as text tables, one per thread count and batch size, CTranslate2's columns first."""
    lines = []
    for block in blocks:
        peer = MARIAN if any(r.system.name == MARIAN for r in block.rows) else GENERATE
        lines.append(
            f"\nthreads {block.threads}, batch {block.batch}: {block.sentences} sentences, "
            f"beam {settings.num_beams or 'of the model'}, {settings.rounds} rounds"
        )
        lines.append(
            f"{'system':<30}{'target tok/s':>14}{'vs ' + peer:>28}{'= generate()':>14}{'BLEU':>8}{'chrF':>8}"
            f"{'peak MiB':>10}"
        )
        for row in block.rows:
            ratio = row.ratio.fmt() if row.ratio is not None else "1.00"
            lines.append(
                f"{row.system.name:<30}{row.throughput.median:>14.1f}{ratio:>28}"
                f"{f'{row.agree}/{block.sentences}':>14}"
                f"{'' if row.bleu is None else f'{row.bleu:.2f}':>8}"
                f"{'' if row.chrf is None else f'{row.chrf:.2f}':>8}"
                f"{'' if row.memory_mib is None else f'{row.memory_mib:.0f}':>10}"
            )
    return lines


# ---------------------------------------------------------------------------------------------------------------
# A random model for a quick run: text of word-level tokens, no references (BLEU blank)
# ---------------------------------------------------------------------------------------------------------------


def random_model_folder(
    preset: str, work: Path, *, sentences: int = 64, new_tokens: int = 32, seed: int = 0
) -> tuple[Path, list[str]]:
    """A random model of the benchmark ``preset`` (`benchmarks.contenders.build_contenders`: Marian's weights
    converted) saved with a word-level tokenizer, its shortlist built from random pairs (for the shortlist rows'
    format; a random corpus gives no real shortlist), decoding exactly ``new_tokens`` tokens, and ``sentences``
    random sources of 5 to 40 tokens."""
    from vanilla_transformer.inference.shortlist import build_shortlist
    from vanilla_transformer.modeling import save_with_remote_code

    from .contenders import build_contenders, ct2_tokens, generation_config, word_level_tokenizer

    contenders = build_contenders(preset, seed=seed, with_ct2=False, with_bf16=False)
    model, vocab = contenders.ours, contenders.hp["vocab"]
    model.generation_config = generation_config(contenders.pad, 4, new_tokens)
    # every hypothesis has exactly new_tokens tokens: early stopping changes nothing, and CTranslate2 needs it
    model.generation_config.early_stopping = True
    folder = save_with_remote_code(model, work / "random", word_level_tokenizer(vocab))
    draw = random.Random(seed)
    tokens = ct2_tokens(vocab)[2:-1]

    def sentence() -> list[int]:
        return [draw.randrange(2, vocab - 1) for _ in range(draw.randint(5, 40))]

    pairs = [(sentence(), sentence()) for _ in range(500)]
    build_shortlist(pairs, vocab, vocab, always=[0, 1, vocab - 1]).save(folder)
    sources = [" ".join(draw.choice(tokens) for _ in range(draw.randint(5, 40))) for _ in range(sentences)]
    return folder, sources


def work_folder() -> Path:
    """A new temporary folder for the exports of one run."""
    return Path(tempfile.mkdtemp(prefix="bench_table_"))
