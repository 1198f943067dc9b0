"""vanilla-transformer score end to end (a subprocess) on the tiny exported model: one line per pair, in order, the
numbers of `inference.forced_decoding.score_pairs`, and bad input answered with one error line."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers.shared import run_command

from vanilla_transformer.inference.forced_decoding import score_pairs

PAIRS = [("起初，神创造天地。", "In the beginning"), ("", "empty source"), ("地是空虚混沌", "")]


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """vanilla-transformer score in a subprocess (the real entry point: exit code, stdout, stderr)."""
    return run_command("score", *args, stdin=stdin)


def test_jsonl_lines_give_the_pairs_scores_in_order(export, loaded):
    model, tokenizer = loaded
    stdin = "".join(f"{source}\t{target}\n" for source, target in PAIRS)
    done = run_cli("--model", str(export), "--batch_size", "2", "--length_penalty", "0.6", stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    records = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    expected = score_pairs(model, tokenizer, [p[0] for p in PAIRS], [p[1] for p in PAIRS])
    assert len(records) == len(PAIRS)
    for record, scored in zip(records, expected):
        assert record["length"] == len(scored.token_ids) == len(record["token_log_probs"])
        assert record["tokens"] == tokenizer.convert_ids_to_tokens(scored.token_ids)
        assert record["log_prob"] == pytest.approx(scored.log_prob, abs=1e-4)
        assert record["score"] == pytest.approx(scored.log_prob / len(scored.token_ids) ** 0.6, abs=1e-4)
    # an empty target is scored as its </s> alone
    assert records[2]["tokens"] == ["</s>"]


def test_tsv_gives_score_and_log_prob_of_the_generation_config_length_penalty(export, loaded):
    """Without --length_penalty the score is normalised with the model's generation config's."""
    model, tokenizer = loaded
    stdin = "".join(f"{source}\t{target}\n" for source, target in PAIRS)
    done = run_cli("--model", str(export), "--format", "tsv", stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    rows = [[float(value) for value in line.split("\t")] for line in done.stdout.decode().splitlines()]
    expected = score_pairs(model, tokenizer, [p[0] for p in PAIRS], [p[1] for p in PAIRS])
    penalty = model.generation_config.length_penalty
    assert [row[1] for row in rows] == pytest.approx([scored.log_prob for scored in expected], abs=1e-5)
    assert [row[0] for row in rows] == pytest.approx([scored.score(penalty) for scored in expected], abs=1e-5)


@pytest.mark.parametrize(
    ("stdin", "message"),
    [("no tab here\n", "line 1 has 0 tabs"), ("a\tb\tc\n", "line 1 has 2 tabs")],
)
def test_bad_lines_exit_2_with_one_error_line(export, stdin, message):
    done = run_cli("--model", str(export), stdin=stdin)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert message in err and err.startswith("error:") and "Traceback" not in err
    assert done.stdout == b""
