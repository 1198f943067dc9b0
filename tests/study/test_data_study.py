"""The data-pipeline study (`python -m studies.data`): the synthetic corpora, the watched measuring process (its
output, its memory and time limits) and one small run of the whole study."""

from __future__ import annotations

import json
from collections import Counter

from studies import data
from studies.data import make_corpus, run_watched


def test_the_synthetic_corpus_is_seeded_and_each_target_codes_its_source(tmp_path):
    first = make_corpus(tmp_path / "a.tsv", 2_000, seed=3).read_text(encoding="utf-8")
    again = make_corpus(tmp_path / "b.tsv", 2_000, seed=3).read_text(encoding="utf-8")
    other = make_corpus(tmp_path / "c.tsv", 2_000, seed=4).read_text(encoding="utf-8")
    assert hash(first) == hash(again) != hash(other)
    pairs = [line.split("\t") for line in first.splitlines()]
    assert len(pairs) == 2_000 and all(len(p) == 2 for p in pairs)
    lengths = [len(s.split()) for s, _ in pairs]
    assert all(len(s.split()) == len(t.split()) for s, t in pairs)
    assert min(lengths) >= 1 and max(lengths) <= 120 and 18 < sum(lengths) / len(lengths) < 28
    # a source word becomes the same target word, in reverse order (but for the rare word spelt like another)
    seen = Counter((a, b) for s, t in pairs for a, b in zip(s.split(), reversed(t.split())))
    usual = Counter()
    for (a, _), n in seen.items():
        usual[a] = max(usual[a], n)
    assert sum(usual.values()) > 0.97 * sum(seen.values())


def test_a_result_after_more_output_than_a_pipe_holds_is_read():
    code = (
        "import sys, json\n"
        "for _ in range(200): sys.stderr.write('x' * 10_000 + '\\r')\n"
        "print('RESULT ' + json.dumps({'argument': sys.argv[1]}))"
    )
    result = run_watched(code, "seen", limit_mib=4_000, timeout_s=120)
    assert result["argument"] == "seen" and result["sampled_rss_mib"] >= 0


def test_a_process_over_its_time_or_memory_is_ended_and_reported():
    slow = run_watched("import time; time.sleep(120)", "", limit_mib=4_000, timeout_s=1)
    assert slow["failed"] == "over 1 s"
    big = run_watched(
        "import time; b = bytearray(400 << 20); time.sleep(120)", "", limit_mib=200, timeout_s=100
    )
    assert big["failed"] == "resident memory above 200 MiB" and big["sampled_rss_mib"] > 200
    silent = run_watched("raise SystemExit('no result here')", "", limit_mib=4_000, timeout_s=100)
    assert silent["failed"] == ["no result here"]


def test_a_small_run_of_the_benchmark(tmp_path, capsys):
    code = data.main(
        ["--pairs", "1500", "--updates", "2", "--folder", str(tmp_path / "bench"), "--timeout", "600"]
    )
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    cases = [json.loads(line) for line in out if line.startswith("{")]
    assert [(c["pairs"], c["mode"]) for c in cases] == [(1500, "memory"), (1500, "streaming")]
    for case in cases:
        first, second = case["first"], case["second"]
        assert "failed" not in first and "failed" not in second, case
        assert first["peak_rss_mib"] > 0 and first["seconds_to_first_update"] > 0
    memory = cases[0]
    assert not memory["first"]["tokenized_from_cache"] and memory["second"]["tokenized_from_cache"]
    rows = [line for line in out if line.startswith("| 1,500 |")]
    assert len(rows) == 2 and "| memory |" in rows[0] and "| streaming |" in rows[1]
    assert not (tmp_path / "bench").exists()  # no --keep: corpora and caches are deleted
