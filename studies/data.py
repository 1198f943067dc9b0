"""The data pipeline at corpus scale: peak memory and start-up time of training on large synthetic corpora.

    python -m studies.data                              # 0.1M, 1M and 5M pairs, in memory and streaming
    python -m studies.data --pairs 100000 --updates 20  # a quick look

For each corpus size (`make_corpus`: seeded synthetic pairs with WMT14-like sentence lengths) and
each mode (the Arrow tokenisation cache, ``--streaming``) a fresh process plans a `tiny`-preset run with a BPE
tokenizer trained once on the smallest corpus and does ``--updates`` updates, twice: the first start reads the
file into the Arrow cache (and in memory mode tokenises it all), the second finds the caches. Printed per case:
peak resident memory of the training process (VmHWM; the tokenising worker processes are summed in the
"tree" column, which counts their shared pages twice), its ratio to the smallest corpus in the same mode,
seconds to the first update, the second start's share of the first's, and target tokens per second of the
updates. The corpora and caches live in ``--folder`` and are deleted at the end unless ``--keep``.

`make_corpus` writes a seeded synthetic TSV corpus whose sentence lengths follow WMT14 En-De's (about 23 words
per side, log-normal, 1-120 words) over Zipf-distributed word types, with a target side that is a word-by-word
code of the source (so a model can learn something). `measure_start` runs in a fresh process per case: it plans a
run (read, split, tokenise: `training.planning.plan_run`), builds the trainer and does ``updates`` optimizer updates,
and returns the process's peak resident set size (VmHWM), the seconds to the first update, the seconds of
tokenisation that the log reports, and the target tokens per second of the updates.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from studies import study_parser

WORD_TYPES = 30_000
MEAN_WORDS = 23.0  # WMT14 En-De: about 23 words per sentence
LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _vocabulary(rng: np.random.Generator, size: int) -> np.ndarray:
    lengths = np.clip(rng.poisson(5.0, size) + 1, 1, 14)
    return np.array(["".join(rng.choice(LETTERS, n)) for n in lengths], dtype=object)


def make_corpus(path: str | os.PathLike, pairs: int, seed: int = 0, chunk: int = 100_000) -> Path:
    """Write ``pairs`` synthetic ``source<TAB>target`` lines to ``path`` (module docstring); returns the path."""
    rng = np.random.default_rng(seed)
    src_words, tgt_words = _vocabulary(rng, WORD_TYPES), _vocabulary(rng, WORD_TYPES)
    ranks = np.arange(1, WORD_TYPES + 1, dtype=np.float64)
    zipf = 1.0 / ranks
    zipf /= zipf.sum()
    sigma = 0.6
    mu = np.log(MEAN_WORDS) - sigma**2 / 2
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for start in range(0, pairs, chunk):
            n = min(chunk, pairs - start)
            lengths = np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, 120).astype(np.int64)
            ids = rng.choice(WORD_TYPES, int(lengths.sum()), p=zipf)
            ends = np.cumsum(lengths)
            lines = []
            for a, b in zip(ends - lengths, ends):
                words = ids[a:b]
                lines.append(" ".join(src_words[words]) + "\t" + " ".join(tgt_words[words[::-1]]) + "\n")
            f.write("".join(lines))
    return out


def peak_rss_mib() -> float:
    """The peak resident set size of this process so far (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_start(options: dict, updates: int) -> dict:
    """Plan a run of the `TrainConfig` ``options``, then do ``updates`` updates; the figures of the module
    docstring, as a dict (peak RSS in MiB, seconds, tokens per second)."""
    import logging

    from vanilla_transformer.training import TrainConfig
    from vanilla_transformer.training.loop import Trainer

    notes: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.append(record.getMessage())

    logging.getLogger("vanilla_transformer").addHandler(Keep())
    logging.getLogger("vanilla_transformer").setLevel(logging.INFO)
    start = time.perf_counter()
    trainer = Trainer(TrainConfig(**options))
    planned = time.perf_counter()
    rss_planned = peak_rss_mib()
    first = None
    tokens = 0
    for step in range(updates):
        logs = trainer.train_step(1.0, step)
        if first is None:
            first = time.perf_counter()
        tokens += int(logs["ntokens"]) if logs and "ntokens" in logs else 0
    end = time.perf_counter()
    return {
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "peak_rss_after_planning_mib": round(rss_planned, 1),
        "seconds_to_plan": round(planned - start, 2),
        "seconds_to_first_update": round((first or end) - start, 2),
        "tokens_per_second": round(tokens / max(end - (first or end), 1e-9), 1) if updates > 1 else None,
        "tokenized_from_cache": any("from the tokenisation cache" in n for n in notes),
        "notes": [n for n in notes if "tokenis" in n.lower() or "stream" in n.lower()][:6],
    }


def worker_main(spec: str) -> int:
    """Entry of a measuring subprocess: ``spec`` is JSON ``{"options": {...}, "updates": N}``; prints one JSON
    line with the figures."""
    job = json.loads(spec)
    print("RESULT " + json.dumps(measure_start(job["options"], job["updates"])), flush=True)
    return 0


WORKER = "import sys; from studies.data import worker_main; sys.exit(worker_main(sys.argv[1]))"


def run_case(options: dict, updates: int, limit_mib: float, timeout_s: float) -> dict:
    """`measure_start` in a fresh Python process (so that its peak RSS is its own), watched by `run_watched`."""
    return run_watched(WORKER, json.dumps({"options": options, "updates": updates}), limit_mib, timeout_s)


def run_watched(code: str, argument: str, limit_mib: float, timeout_s: float) -> dict:
    """``python -c code argument``, whose output holds a line ``RESULT {json}``; the parent samples the resident
    memory of the process and its children every 0.2 s and ends it above ``limit_mib`` or after ``timeout_s``.
    Returns the JSON with ``sampled_rss_mib`` (the highest sample) added, or ``{"failed": why, "peak_rss_mib":
    the process's own peak, "sampled_rss_mib": ...}``."""
    import subprocess

    import psutil  # a dependency of accelerate

    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    # the output goes to a file, not a pipe: nothing reads a pipe until the end, and the progress bars of a
    # long tokenisation would fill its buffer and block the writer
    log = tempfile.TemporaryFile("w+", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, argument], stdout=log, stderr=subprocess.STDOUT, env=env
    )
    watched, highest, start, why = psutil.Process(proc.pid), 0.0, time.perf_counter(), None
    own = 0.0  # the training process's own peak (VmHWM), kept for a case that is ended
    while proc.poll() is None:
        try:
            rss = sum(p.memory_info().rss for p in [watched, *watched.children(recursive=True)]) / 2**20
            status = Path(f"/proc/{proc.pid}/status").read_text().split("VmHWM:")[1].split()[0]
            own = max(own, int(status) / 1024)
        except (psutil.Error, OSError, IndexError):
            rss = 0.0
        highest = max(highest, rss)
        if rss > limit_mib or time.perf_counter() - start > timeout_s:
            why = (
                f"resident memory above {limit_mib:.0f} MiB" if rss > limit_mib else f"over {timeout_s:.0f} s"
            )
            for p in [*watched.children(recursive=True), watched]:
                p.kill()
            break
        time.sleep(0.2)
    proc.wait()
    log.seek(0)
    output = log.read()
    log.close()
    found = [line for line in output.splitlines() if line.startswith("RESULT ")]
    if why or not found:
        return {
            "failed": why or output.strip().splitlines()[-1:],
            "peak_rss_mib": round(own, 1),
            "sampled_rss_mib": round(highest, 1),
        }
    result = json.loads(found[-1][len("RESULT ") :])
    result["sampled_rss_mib"] = round(highest, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = study_parser("studies.data", __doc__)
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
