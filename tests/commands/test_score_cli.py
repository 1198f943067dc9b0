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


def test_target_tokens_give_back_a_translations_token_log_probs(export, loaded):
    """--target_tokens scores the tokens given (a JSON array of pieces or ids), not their text re-tokenized: a
    translation's own tokens give its token_log_probs back, and tokens whose text the tokenizer splits otherwise
    get the numbers of those tokens (score_ids), not those of the text re-tokenized."""
    from vanilla_transformer.inference.forced_decoding import score_ids
    from vanilla_transformer.inference.translate import translate_hypotheses

    model, tokenizer = loaded
    sources = ["起初，神创造天地。", "地是空虚混沌"]
    hypotheses = [
        h[0] for h in translate_hypotheses(model, tokenizer, sources, token_scores=True, num_beams=1)
    ]
    # tokens that decode to a text the tokenizer splits otherwise: "Inthe", which it splits "▁ I n t h e"
    split = ["I", "n", "t", "h", "e"]
    text = tokenizer.decode(tokenizer.convert_tokens_to_ids(split))
    vocabulary = tokenizer.get_vocab()
    assert tokenizer.convert_ids_to_tokens(tokenizer(text_target=text)["input_ids"])[:-1] != split
    lines = [
        *(
            f"{s}\t{json.dumps(tokenizer.convert_ids_to_tokens(h.tokens.token_ids))}"
            for s, h in zip(sources, hypotheses)
        ),
        f"{sources[0]}\t{json.dumps(split, ensure_ascii=False)}",
        f"{sources[0]}\t{json.dumps([vocabulary[p] for p in split])}",
    ]
    done = run_cli("--model", str(export), "--target_tokens", stdin="".join(f"{line}\n" for line in lines))
    assert done.returncode == 0, done.stderr.decode()
    records = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    for record, hypothesis in zip(records, hypotheses):
        # scored as a finished translation: a </s> follows an output cut at the length limit
        given_scores = hypothesis.tokens.token_log_probs
        assert record["token_log_probs"][: len(given_scores)] == pytest.approx(given_scores, abs=1e-4)
    source_ids = tokenizer([sources[0]])["input_ids"]
    (given,) = score_ids(model, source_ids, [[vocabulary[p] for p in split]])
    (whole,) = score_pairs(model, tokenizer, [sources[0]], [text])
    assert records[2]["tokens"] == [*split, "</s>"] and records[3] == records[2]
    assert records[2]["token_log_probs"] == pytest.approx(given.token_log_probs, abs=1e-4)
    assert records[2]["log_prob"] != pytest.approx(whole.log_prob, abs=1e-4)
    from vanilla_transformer.commands.score import token_targets
    from vanilla_transformer.inference.forced_decoding import score_tokens

    with pytest.raises(ValueError, match=r"^line 2: with --target_tokens the target is a JSON array"):
        token_targets(['["a"]', "In the"])
    with pytest.raises(
        ValueError, match=r"row 1: 1 token\(s\) not in the tokenizer's vocabulary \('no such piece'\)"
    ):
        score_tokens(model, tokenizer, [sources[0]], [["I", "no such piece"]])
