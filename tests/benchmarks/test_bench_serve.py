"""`vanilla-transformer bench serve` end to end on the tiny served model (24 positions, 6 new tokens), with 1 and
2 clients of 2 requests each on loopback, through the server's own API and LibreTranslate's, and an open-loop
load at two rates: it exits 0, reports one line per (API, mode, client count) and per (rate, mode), the Markdown
tables with a row per API and client count and per rate, every request answered, and that no reply differed
between continuous batching, request-level batching and one-at-a-time serving."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


def test_bench_serve_reports_both_modes_and_equal_replies(served_folder):
    command = [sys.executable, "-m", "vanilla_transformer", "bench", "serve", "--model", str(served_folder)]
    command += ["--clients", "1", "2", "--per_client", "2", "--num_beams", "1", "--threads", "1"]
    command += [
        "--api",
        "own",
        "libretranslate",
        "--rates",
        "20",
        "40",
        "--requests",
        "6",
        "--long_clauses",
        "3",
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"model {served_folder}") and "num_beams=1" in lines[0]
    rounds = [line for line in lines if re.search(r"\d+ clients: .* sentences/s, p50 .* ms, p95 .* ms", line)]
    assert [tuple(line.split()[:2]) + (int(line.split(" clients")[0].split()[-1]),) for line in rounds] == [
        (api, mode, clients)
        for api in ("own", "libretranslate")
        for clients in (1, 2)
        for mode in ("one-at-a-time", "request-level", "continuous")
    ]
    assert "(2 sentences in" in rounds[0] and "(4 sentences in" in rounds[-1]
    header = lines.index(
        "| API | clients | one-at-a-time sent/s | p50 / p95 ms | request-level sent/s | p50 / p95 ms "
        "| continuous sent/s | p50 / p95 ms | speed-ups |"
    )
    rows = lines[header + 2 : header + 6]
    assert [row.split("|")[1:3] for row in rows] == [
        [f" {api} ", f" {clients} "] for api in ("own", "libretranslate") for clients in (1, 2)
    ]
    pattern = r"\| \w+ \| \d+ (\| [\d.]+ \| \d+ / \d+ ){3}\| [\d.]+x / [\d.]+x \|"
    assert all(re.fullmatch(pattern, row) for row in rows), rows
    spans = [line for line in lines if line.startswith("open loop: short requests ")]
    short, long = re.fullmatch(
        r"open loop: short requests (\d+)-\d+ source tokens, long (\d+)-\d+", spans[0]
    ).groups()
    assert int(long) > int(short), spans
    opened = [line for line in lines if line.startswith("open loop ")]
    assert [line.split()[2:5] for line in opened] == [
        [rate, "requests/s", mode]
        for rate in ("20.00", "40.00")
        for mode in ("request-level:", "continuous:")
    ]
    header = next(i for i, line in enumerate(lines) if line.startswith("| offered requests/s |"))
    rows = lines[header + 2 : header + 4]
    assert [row.split("|")[1] for row in rows] == [" 20 ", " 40 "]
    assert "open loop: replies that differ between request-level and continuous batching: 0" in lines
    assert lines[-2:] == [
        "requests answered: 60 of 60",
        "replies that differ from one-at-a-time serving: request-level 0, continuous 0",
    ]
