"""The GPU check: what only a CUDA device can show, in one run of a few minutes that records what it saw.

Parts, in order, each with its own time budget inside the run's total (`Budget`):

1. ``tests``: the tests marked ``gpu`` (tests/gpu: fp16 + gradient scaler against fp32 through the trainer, bf16
   autocast against fp32, every sdpa backend against eager attention, generate() across devices and caches,
   save/load from the device; the comparisons are tests/gpu/checks.py), in a pytest subprocess whose outcome
   per test is read from its JUnit XML.
2. ``training``: one training step of ours and of transformers' Marian with the same weights
   (`benchmarks.contenders`), bf16 autocast, a target-token budget per batch: target tokens/s and ours/Marian in
   interleaved rounds (`benchmarks.harness`), peak device memory of a step, MFU against the device's dense bf16
   peak (`PEAK_BF16_TFLOPS`; "unknown" for a device not in the table).
3. ``generation``: generate() of both, fp32 and bf16 weights, greedy and beam search at each batch size: new
   tokens/s, ours/Marian per precision, and whether both produced the same tokens.

A part starts only when its estimated cost fits the time left (`Budget.allows`): the tests part has a declared
cost, the measured parts estimate from their first (warm-up) calls and skip what does not fit; every part says
whether it ran and why not. `write_report` writes everything to one JSON and one Markdown file.

``dry_run`` settings (`Settings.dry_run`) run the same code on the CPU in well under two minutes with the tiny
preset and tiny batches (the tests part runs the ``gpu`` tests' bodies on the CPU with tiny sizes: tests/gpu's
``device`` fixture reads `DEVICE_ENV`).

    python -m studies.gpu --output_dir outputs/gpu_check          # on a CUDA device, ~5 minutes
    python -m studies.gpu --device cpu --dry_run --output_dir /tmp/gpu_check   # the same code, tiny, CPU

Run from a checkout: the tests part runs this checkout's tests/gpu (``--tests_dir``).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from studies import study_parser
from vanilla_transformer.benchmarks.contenders import Contenders, build_contenders, generation_config
from vanilla_transformer.benchmarks.harness import Stat, interleaved, peak_step_memory, per_round_ratio
from vanilla_transformer.benchmarks.workloads import generate_call, source_batch, train_step, training_flops

# the checkout this study runs from, and its gpu tests
ROOT = Path(__file__).resolve().parents[1]
CHECKOUT_TESTS = ROOT / "tests" / "gpu"
# the device the ``gpu`` tests (tests/gpu) run on: "cuda" by default; "cpu" runs their bodies on the CPU with tiny
# sizes (the check's dry run)
DEVICE_ENV = "VANILLA_TRANSFORMER_GPU_CHECK_DEVICE"

# dense (not sparse) bf16 tensor-core peaks in TFLOP/s, by a word of the device name; the first match wins
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("A100", 312.0),
    ("L4", 121.0),
)


def peak_bf16_flops(device_name: str) -> float | None:
    """The dense bf16 peak (FLOP/s) of a device by its name (`torch.cuda.get_device_name`), None when unknown."""
    for key, tflops in PEAK_BF16_TFLOPS:
        if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", device_name):
            return tflops * 1e12
    return None


@dataclass
class Settings:
    """Sizes and per-part budgets (seconds) of one check; `gpu` and `dry_run` are the two used."""

    preset: str
    budget_tokens: int
    src_len: int
    rounds: int
    gen_batches: tuple[int, ...]
    beams: tuple[int, ...]
    new_tokens: int
    part_budgets: dict[str, float]
    tests_cost: float  # declared: what the tests part needs at least
    build_cost: float  # declared: building the contenders of `preset`

    @classmethod
    def gpu(cls) -> Settings:
        return cls(
            "base",
            25000,
            32,
            3,
            (1, 64),
            (1, 4),
            32,
            {"tests": 140, "training": 50, "generation": 80},
            90,
            30,
        )

    @classmethod
    def dry_run(cls) -> Settings:
        return cls(
            "tiny", 64, 8, 1, (1, 2), (1, 2), 4, {"tests": 75, "training": 10, "generation": 10}, 20, 2
        )


class Budget:
    """The run's total time budget; ``clock`` returns seconds (tests pass a fake one)."""

    def __init__(self, total_s: float, clock: Callable[[], float] = time.monotonic):
        self.total_s, self.clock, self.start = total_s, clock, clock()

    def left(self) -> float:
        return self.total_s - (self.clock() - self.start)

    def part(self, declared_s: float) -> float:
        """The seconds a part may use: its declared budget, or what is left of the total if that is less."""
        return max(0.0, min(declared_s, self.left()))

    def allows(self, estimate_s: float, available_s: float) -> tuple[bool, str]:
        """Whether work estimated at ``estimate_s`` fits in ``available_s``, and if not, why (for the report)."""
        if estimate_s <= available_s:
            return True, ""
        return False, f"needs ~{estimate_s:.0f} s, {available_s:.0f} s left in its budget"


@dataclass
class Part:
    """One part's record: ``status`` "ran", "skipped", "failed" (an error or failing tests) or "timed out"."""

    name: str
    status: str = "skipped"
    reason: str = ""
    seconds: float = 0.0
    results: dict = field(default_factory=dict)


def device_info(device: torch.device) -> dict:
    """Name, memory, versions and the bf16 peak of the device the check runs on."""
    import transformers

    info = {"type": device.type, "torch": torch.__version__, "transformers": transformers.__version__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    else:
        import platform

        info.update(name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    peak = peak_bf16_flops(info["name"]) if device.type == "cuda" else None
    info["bf16_peak_tflops"] = peak / 1e12 if peak else "unknown"
    return info


def synced(call: Callable, device: torch.device) -> Callable:
    """``call`` followed by waiting for the device, so that a timer around it measures the work."""
    if device.type != "cuda":
        return call

    def run():
        out = call()
        torch.cuda.synchronize(device)
        return out

    return run


# ---------------------------------------------------------------------------------------------------- tests
def run_tests(tests_dir: Path, device: torch.device, timeout_s: float, junit: Path) -> Part:
    """The ``gpu``-marked tests of ``tests_dir`` in a pytest subprocess on ``device`` (`DEVICE_ENV`), started from
    the checkout's root (which puts `studies` on its path) and stopped after ``timeout_s``; their outcomes from
    the JUnit XML: counts and one row per test. pytest's output (the tracebacks of failing tests) goes to
    ``gpu_tests.log`` next to ``junit``."""
    part = Part("tests")
    if not (tests_dir / "conftest.py").is_file():
        part.reason = f"no gpu tests at {tests_dir} (run from a checkout, or pass --tests_dir)"
        return part
    command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", str(tests_dir.resolve())]
    command += [f"--junitxml={junit.resolve()}"]
    command += ["-p", "no:cacheprovider"]
    # pytest-timeout is the dev extra's; a hung test then fails alone
    if importlib.util.find_spec("pytest_timeout") is not None:
        command += ["--timeout", str(max(1, int(timeout_s)))]
    env = {**os.environ, DEVICE_ENV: str(device)}
    start = time.monotonic()
    try:
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        output = done.stdout + done.stderr
        part.status = "ran" if done.returncode == 0 else "failed"
        tail = output.strip().splitlines()[-1:] or [""]
        part.reason = "" if done.returncode == 0 else f"pytest exit {done.returncode}: {tail[0]}"
    except subprocess.TimeoutExpired as stopped:
        output = "".join(
            o.decode() if isinstance(o, bytes) else o or "" for o in (stopped.stdout, stopped.stderr)
        )
        part.status, part.reason = "timed out", f"pytest ran past its {timeout_s:.0f} s budget"
    (junit.parent / "gpu_tests.log").write_text(output, encoding="utf-8")
    part.seconds = time.monotonic() - start
    part.results = junit_outcomes(junit) if junit.is_file() else {}
    return part


def junit_outcomes(path: Path) -> dict:
    """Counts of passed/failed/skipped tests and each test's outcome (and first message line) from JUnit XML."""
    tests, counts = [], {"passed": 0, "failed": 0, "skipped": 0}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "skipped" if child.tag == "skipped" else "failed"
                message = (child.get("message") or "").splitlines()[0][:200] if child.get("message") else ""
        counts[outcome] += 1
        tests.append(
            {"name": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome, "message": message}
        )
    return {**counts, "tests": tests}


# ----------------------------------------------------------------------------------------------- measuring
def on_device(c: Contenders, device: torch.device) -> dict[str, torch.nn.Module]:
    """Copies of the contenders' fp32 and bf16 models on ``device`` (the originals stay on the CPU)."""
    models = {"marian": c.marian, "ours": c.ours, **{f"{k}_bf16": m for k, m in c.bf16.items()}}
    return {name: copy.deepcopy(model).to(device) for name, model in models.items()}


def peak_memory(step: Callable[[], float], device: torch.device) -> int:
    """Peak bytes allocated during one (warmed-up) call above the level at its start: the CUDA allocator's peak,
    or on the CPU `harness.peak_step_memory`."""
    if device.type != "cuda":
        return peak_step_memory(step)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    step()
    return torch.cuda.max_memory_allocated(device) - base


def timed(call: Callable) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure_training(c: Contenders, s: Settings, device: torch.device, budget: Budget, part: Part) -> None:
    """Ours and Marian training in bf16 autocast on ``budget_tokens // src_len`` sentences of ``src_len`` tokens
    (copies of the fp32 models on the device): the first step of each is the warm-up and the estimate."""
    hp, batch = c.hp, max(1, s.budget_tokens // s.src_len)
    available = budget.part(s.part_budgets["training"])
    start = time.monotonic()
    # transformers wraps PreTrainedModel.to with functools.wraps, so checkers see an unbound method
    models = {
        n: copy.deepcopy(m).to(device)  # pyright: ignore[reportArgumentType]
        for n, m in (("marian", c.marian), ("ours", c.ours))
    }
    steps = {
        n: train_step(m, batch, s.src_len, hp["vocab"], bf16=True, device=device) for n, m in models.items()
    }
    first = {n: timed(step) for n, step in steps.items()}
    used = time.monotonic() - start
    ok, why = budget.allows(used + (s.rounds + 2) * sum(first.values()), available)
    if not ok:
        part.reason = f"first steps took {sum(first.values()):.1f} s: {s.rounds} rounds {why}"
        return
    times = interleaved(steps, s.rounds, warmup=0)
    tokens, flops = batch * s.src_len, training_flops(hp, batch, s.src_len, s.src_len)
    peak = peak_bf16_flops(device_info(device)["name"]) if device.type == "cuda" else None
    rows = {}
    for name, step in steps.items():
        seconds = Stat(times[name])
        rows[name] = {
            "target_tokens_per_s": tokens / seconds.median,
            "seconds_per_step": seconds.values,
            "peak_memory_mib": peak_memory(step, device) / 2**20,
            "mfu": flops / seconds.median / peak if peak else "unknown",
        }
    ratio = per_round_ratio(times["marian"], times["ours"])
    part.results = {
        "batch": f"{batch}x{s.src_len}",
        "target_tokens": tokens,
        "precision": "bf16 autocast",
        "step_flops": flops,
        "contenders": rows,
        "ours_over_marian": {"median": ratio.median, "rounds": ratio.values},
        "peak_memory_ours_over_marian": rows["ours"]["peak_memory_mib"]
        / max(rows["marian"]["peak_memory_mib"], 1e-9),
    }
    part.status = "ran"


def measure_generation(c: Contenders, s: Settings, device: torch.device, budget: Budget, part: Part) -> None:
    """generate() of exactly ``new_tokens`` tokens for every (beams, batch) workload, fp32 and bf16 weights; each
    workload's first calls (the warm-up, and the token comparison) estimate its rounds, and a workload that does
    not fit the part's remaining budget is skipped with the reason."""
    available = budget.part(s.part_budgets["generation"])
    start = time.monotonic()
    models = on_device(c, device)
    rows, skipped = [], []
    for beams in s.beams:
        for batch in s.gen_batches:
            label = f"{'greedy' if beams == 1 else f'beam {beams}'} b{batch}"
            src, mask = (t.to(device) for t in source_batch(c.hp["vocab"], batch, s.src_len, seed=7))
            config = generation_config(c.pad, beams, s.new_tokens)
            calls = {n: synced(generate_call(m, src, mask, config), device) for n, m in models.items()}
            warm = time.monotonic()
            outputs = {n: call() for n, call in calls.items()}
            first = time.monotonic() - warm
            ok, why = budget.allows(s.rounds * first, available - (time.monotonic() - start))
            if not ok:
                skipped.append(f"{label}: {why}")
                continue
            times = interleaved(calls, s.rounds, warmup=0)
            work = batch * s.new_tokens
            rows.append(
                {
                    "workload": label,
                    "new_tokens_per_s": {n: work / Stat(t).median for n, t in times.items()},
                    "ours_over_marian_fp32": per_round_ratio(times["marian"], times["ours"]).median,
                    "ours_over_marian_bf16": per_round_ratio(times["marian_bf16"], times["ours_bf16"]).median,
                    "same_tokens_fp32": torch.equal(outputs["marian"], outputs["ours"]),
                    "same_tokens_bf16": torch.equal(outputs["marian_bf16"], outputs["ours_bf16"]),
                }
            )
    part.results = {
        "new_tokens": s.new_tokens,
        "source_tokens": s.src_len,
        "workloads": rows,
        "skipped": skipped,
    }
    part.status = "ran" if rows else "skipped"
    part.reason = "; ".join(skipped)


def measured_part(
    name: str, measure: Callable, contenders: Callable[[], Contenders], s, device, budget
) -> Part:
    """Run one measuring part: refused when its declared minimum (building the contenders, two steps) does not fit,
    an exception recorded as "failed"."""
    part, start = Part(name), time.monotonic()
    ok, why = budget.allows(s.build_cost, budget.part(s.part_budgets[name]))
    if not ok:
        part.reason = why
        return part
    try:
        measure(contenders(), s, device, budget, part)
    except Exception as error:  # record and go on: the other parts still run and the report is written
        part.status, part.reason = "failed", f"{type(error).__name__}: {error}"
    part.seconds = time.monotonic() - start
    return part


def run_check(
    device: torch.device,
    settings: Settings,
    budget: Budget,
    output_dir: Path,
    tests_dir: Path,
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """All parts in order within ``budget``; returns the report (`write_report` writes it)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": device_info(device)}
    report.update(settings=asdict(settings), budget_s=budget.total_s, parts=[])
    log(f"device: {report['device']}")
    tests_budget = budget.part(settings.part_budgets["tests"])
    ok, why = budget.allows(settings.tests_cost, tests_budget)
    log("part tests" + ("" if ok else f": skipped ({why})"))
    parts = [
        run_tests(tests_dir, device, tests_budget, output_dir / "gpu_tests.xml")
        if ok
        else Part("tests", reason=why)
    ]
    built: list[Contenders] = []

    def contenders() -> Contenders:
        if not built:
            built.append(build_contenders(settings.preset, with_ct2=False, dropout=0.1))
        return built[0]

    for name, measure in (("training", measure_training), ("generation", measure_generation)):
        log(f"part {name}")
        parts.append(measured_part(name, measure, contenders, settings, device, budget))
    report["parts"] = [asdict(p) for p in parts]
    for p in parts:
        log(f"{p.name}: {p.status}" + (f" ({p.reason})" if p.reason else "") + f", {p.seconds:.0f} s")
    return report


def write_report(report: dict, output_dir: Path) -> tuple[Path, Path]:
    """``gpu_check.json`` (everything) and ``gpu_check.md`` (the tables) in ``output_dir``."""
    json_path, md_path = output_dir / "gpu_check.json", output_dir / "gpu_check.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    md_path.write_text("\n".join(markdown(report)) + "\n", encoding="utf-8")
    return json_path, md_path


def _fmt(value, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def markdown(report: dict) -> list[str]:
    """The report as Markdown: the device, each part's status, the tests' outcomes and the measured tables."""
    d, parts = report["device"], {p["name"]: p for p in report["parts"]}
    lines = [
        f"Command: `{report.get('command', 'python -m studies.gpu')}`",
        "",
        f"GPU check on {d['name']} ({d['type']}), {report['date']}, torch {d['torch']}, transformers {d['transformers']}",
    ]
    lines += ["", "| part | status | seconds | why |", "|---|---|---|---|"]
    lines += [
        f"| {p['name']} | {p['status']} | {p['seconds']:.0f} | {p['reason'] or '-'} |"
        for p in report["parts"]
    ]
    tests = parts["tests"]["results"]
    if tests:
        lines += [
            "",
            f"Tests: {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped",
        ]
        lines += [
            f"- {t['name']}: {t['outcome']} {t['message']}".rstrip()
            for t in tests["tests"]
            if t["outcome"] != "passed"
        ]
    training = parts["training"]["results"]
    if training:
        lines += ["", f"Training step, {training['batch']} tokens, {training['precision']}:", ""]
        lines += ["| model | target tok/s | peak memory MiB | MFU (bf16 peak) |", "|---|---|---|---|"]
        for name, row in training["contenders"].items():
            lines.append(
                f"| {name} | {row['target_tokens_per_s']:.0f} | {row['peak_memory_mib']:.0f} | {_fmt(row['mfu'], 3)} |"
            )
        lines.append(
            f"\nours/Marian throughput {training['ours_over_marian']['median']:.2f}, peak memory "
            f"{training['peak_memory_ours_over_marian']:.2f}"
        )
    generation = parts["generation"]["results"]
    if generation and generation["workloads"]:
        lines += ["", f"Generation, exactly {generation['new_tokens']} new tokens:", ""]
        lines += [
            "| workload | Marian tok/s | ours/Marian fp32 | ours/Marian bf16 | same tokens fp32, bf16 |"
        ]
        lines.append("|---|---|---|---|---|")
        for row in generation["workloads"]:
            lines.append(
                f"| {row['workload']} | {row['new_tokens_per_s']['marian']:.0f} | {row['ours_over_marian_fp32']:.2f} | "
                f"{row['ours_over_marian_bf16']:.2f} | {row['same_tokens_fp32']}, {row['same_tokens_bf16']} |"
            )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = study_parser("studies.gpu", __doc__)
    p.add_argument("--device", default="cuda", help="cuda, cuda:1, ... or cpu (with --dry_run); default cuda")
    p.add_argument("--dry_run", action="store_true", help="tiny preset and batches, short budgets (CPU, CI)")
    p.add_argument(
        "--output_dir", type=Path, default=Path("outputs/gpu_check"), help="where the JSON and Markdown go"
    )
    p.add_argument("--budget_s", type=float, default=None, help="total seconds (default 270; dry run 110)")
    p.add_argument(
        "--tests_dir", type=Path, default=CHECKOUT_TESTS, help=f"the gpu tests (default {CHECKOUT_TESTS})"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            f"error: --device {args.device}: torch sees no CUDA device; use --device cpu --dry_run",
            file=sys.stderr,
        )
        return 2
    if device.type == "cpu" and not args.dry_run:
        print("error: --device cpu runs the check's tiny sizes only: add --dry_run", file=sys.stderr)
        return 2
    settings = Settings.dry_run() if args.dry_run else Settings.gpu()
    budget = Budget(args.budget_s if args.budget_s is not None else 110.0 if args.dry_run else 270.0)
    report = run_check(device, settings, budget, args.output_dir, args.tests_dir, log=print)
    report["command"] = "python -m studies.gpu " + " ".join(sys.argv[1:] if argv is None else argv)
    json_path, md_path = write_report(report, args.output_dir)
    print("\n".join(md_path.read_text(encoding="utf-8").splitlines()))
    print(f"wrote {json_path} and {md_path}")
    return 1 if any(p["status"] in ("failed", "timed out") for p in report["parts"]) else 0


if __name__ == "__main__":
    sys.exit(main())
