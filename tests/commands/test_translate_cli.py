"""vanilla-transformer translate end to end (subprocesses) and inference.translate in process, on a tiny exported model
with a tiny BPE tokenizer trained on a few hundred lines of data/bible.zh-en.tsv.xz."""

from __future__ import annotations

import json
import subprocess
from typing import cast

import pytest
from conftest import MAX_POSITIONS, export_scoring_model
from helpers.shared import run_command, run_main

from vanilla_transformer.inference import translate_lines, translate_nbest
from vanilla_transformer.inference.forced_decoding import score_ids
from vanilla_transformer.modeling import check_generation_arguments


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """vanilla-transformer translate in a subprocess (the real entry point: exit code, stdout, stderr)."""
    return run_command("translate", *args, stdin=stdin)


SOURCES = [
    "起初，神创造天地。",
    "",
    "神说：「要有光」，就有了光。",
    "   ",
    "地是空虚混沌",
    "神看光是好的，就把光暗分开了。",
]
LONG = "神说：「要有光」，就有了光。" * 10


def test_cli_keeps_count_order_and_empty_lines(export, loaded):
    """Subprocess: one line out per line in, empty lines kept empty, and each output equals the line
    translated alone (greedy), so sorting by length for batching does not reorder or mix outputs."""
    stdin = "\n".join(SOURCES) + "\n"
    done = run_cli(
        "--model", str(export), "--num_beams", "1", "--batch_size", "2", "--device", "cpu", stdin=stdin
    )
    assert done.returncode == 0, done.stderr.decode()
    outputs = done.stdout.decode("utf-8").split("\n")
    assert outputs[-1] == "" and len(outputs) - 1 == len(SOURCES)
    model, tokenizer = loaded
    for source, output in zip(SOURCES, outputs[:-1]):
        if source.strip():
            assert output == translate_lines(model, tokenizer, [source], num_beams=1)[0] and output != ""
        else:
            assert output == ""
    assert "Traceback" not in done.stderr.decode()


def test_cli_bad_input_exit_2_without_traceback(tmp_path):
    """Subprocess: a bad option value and a missing model folder end with exit code 2 and a message."""
    bad_option = run_cli("--model", str(tmp_path), "--top_p", "1.5", stdin="起初\n")
    assert bad_option.returncode == 2 and "top_p=1.5 is invalid" in bad_option.stderr.decode()
    missing = run_cli("--model", str(tmp_path / "nope"), stdin="起初\n")
    assert missing.returncode == 2 and "does not exist" in missing.stderr.decode()
    # a seed numpy cannot take, refused as it is parsed (one error line), not by set_seed after loading the model
    bad_seed = run_cli("--model", str(tmp_path), "--do_sample", "--seed", "-1", stdin="起初\n")
    errors = [line for line in bad_seed.stderr.decode().splitlines() if "error:" in line]
    assert bad_seed.returncode == 2 and len(errors) == 1 and "seed=-1 is invalid" in errors[0]
    for done in (bad_option, missing, bad_seed):
        assert "Traceback" not in done.stderr.decode() and done.stdout == b""


def test_batched_equals_one_at_a_time_with_beams(loaded):
    model, tokenizer = loaded
    sources = [s for s in SOURCES if s.strip()]
    batched = translate_lines(model, tokenizer, sources, batch_size=3, num_beams=3, length_penalty=0.6)
    alone = [translate_lines(model, tokenizer, [s], num_beams=3, length_penalty=0.6)[0] for s in sources]
    assert batched == alone


def test_nbest_and_truncation_warning(loaded, caplog):
    model, tokenizer = loaded
    with caplog.at_level("WARNING", logger="vanilla_transformer.inference.translate"):
        nbest = translate_nbest(model, tokenizer, [LONG, "", "起初"], num_beams=3, num_return_sequences=2)
    assert [len(h) for h in nbest] == [2, 2, 2] and nbest[1] == ["", ""]
    assert f"1 of 2 input lines were longer than {MAX_POSITIONS} tokens" in caplog.text


@pytest.fixture
def restore_rng():
    """Seeding (the CLI's --seed, set_seed here) changes the process's random generators: put them back."""
    import random

    import numpy as np
    import torch

    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])


def test_main_sampling_is_reproducible_and_nbest_is_tab_separated(
    export, loaded, monkeypatch, capsys, restore_rng
):
    """--do_sample/--top_k/--top_p/--temperature/--seed reach generate(): the output equals sampling in this process
    with the same options after set_seed(seed), a second seed gives other samples, and leaving out any one
    option (greedy, no top-k, no top-p, default temperature) changes the output."""
    from transformers import set_seed

    sources = ["起初，神创造天地。", "", "地是空虚混沌", "神看光是好的，就把光暗分开了。", LONG]
    stdin = "\n".join(sources) + "\n"
    options = {"do_sample": True, "top_k": 5, "top_p": 0.6, "temperature": 3.0}
    args = ("--model", str(export), "--do_sample", "--top_k", "5", "--top_p", "0.6", "--temperature", "3")
    code, first, _ = run_main(monkeypatch, capsys, *args, "--seed", "3", stdin=stdin)
    assert code == 0 and len(first.split("\n")) == len(sources) + 1
    assert run_main(monkeypatch, capsys, *args, "--seed", "3", stdin=stdin)[1] == first
    assert run_main(monkeypatch, capsys, *args, "--seed", "4", stdin=stdin)[1] != first
    model, tokenizer = loaded

    def sampled(seed: int = 3, **changes) -> str:
        set_seed(seed)
        kwargs = {k: v for k, v in {**options, **changes}.items() if v is not None}
        outputs = translate_lines(model, tokenizer, sources, num_beams=1, **kwargs)
        return "".join(f"{line}\n" for line in outputs)

    assert first == sampled()
    without = [
        sampled(do_sample=None, top_k=None, top_p=None, temperature=None),
        sampled(top_k=None),
        sampled(top_p=None),
        sampled(temperature=None),
    ]
    assert all(out != first for out in without)
    code, out, _ = run_main(
        monkeypatch, capsys, "--model", str(export), "--num_return_sequences", "3", stdin=stdin
    )
    assert code == 0 and [len(line.split("\t")) for line in out.split("\n")[:5]] == [3, 3, 3, 3, 3]


@pytest.mark.parametrize(
    "args, expected",
    [
        ("--top_p 0", "top_p=0.0 is invalid: expected 0 < top_p <= 1"),
        ("--temperature 0", "temperature=0.0 is invalid: expected a finite number from 0.001 to 1000"),
        ("--num_beams 2 --num_return_sequences 3", "raise num_beams to at least 3"),
        ("--num_return_sequences 5", "at most num_beams=4"),  # the model's default beam size
        ("--num_beams 0", "num_beams=0 is invalid"),
        ("--max_new_tokens 0", "max_new_tokens=0 is invalid"),
        ("--top_k -1", "top_k=-1 is invalid"),
        ("--batch_size 0", "batch_size=0 is invalid"),
        (
            "--do_sample --seed 4294967296",
            "seed=4294967296 is invalid: expected an integer from 0 to 4294967295",
        ),
        ("--do_sample --temperature nan", "temperature=nan is invalid"),
        ("--do_sample --temperature 1e-320", "temperature=1e-320 is invalid"),
        ("--do_sample --temperature inf", "temperature=inf is invalid"),
        ("--length_penalty=-inf", "length_penalty=-inf is invalid: expected a number from -10 to 10"),
        ("--top_p nan", "top_p=nan is invalid"),
        ("--num_beams four", "num_beams='four' is invalid: expected an integer >= 1"),
        ("--device tpu9", "tpu9"),
    ],
)
def test_main_bad_options_exit_2(export, monkeypatch, capsys, args, expected):
    """`args`: the options of one call, separated by spaces."""
    code, out, err = run_main(monkeypatch, capsys, "--model", str(export), *args.split(), stdin="起初\n")
    assert code == 2 and expected in err and out == "", err


def test_main_bad_model_exit_2(tmp_path, monkeypatch, capsys):
    code, _, err = run_main(monkeypatch, capsys, "--model", str(tmp_path), stdin="起初\n")
    assert code == 2 and "has no config.json" in err
    (tmp_path / "config.json").write_text("{not json")
    code, _, err = run_main(monkeypatch, capsys, "--model", str(tmp_path), stdin="起初\n")
    assert code == 2 and "is not valid JSON" in err
    code, _, err = run_main(monkeypatch, capsys, "--model", str(tmp_path / "config.json"), stdin="起初\n")
    assert code == 2 and "is a file" in err


def test_check_generation_arguments_messages_name_the_fix():
    with pytest.raises(ValueError, match=r"top_p=2 is invalid: expected 0 < top_p <= 1; use e.g. 0.9"):
        check_generation_arguments({"top_p": 2})
    with pytest.raises(ValueError, match="greedy"):
        check_generation_arguments({"num_beams": 1, "num_return_sequences": 2})
    check_generation_arguments({"num_beams": 1, "num_return_sequences": 2, "do_sample": True})
    # beam count unknown: checked once the model is loaded
    check_generation_arguments({"num_return_sequences": 9})


@pytest.mark.parametrize("engine", ["ct2", "onnx"])
def test_engine_folders_translate_like_torch_and_refuse_what_they_cannot_do(
    engine, export, tmp_path, monkeypatch, capsys
):
    """--engine ct2/onnx on an exported folder prints the lines --engine torch prints (same batching, empty lines
    kept, default beam search and greedy); sampling flags and --device are one-line errors with exit 2."""
    pytest.importorskip("ctranslate2" if engine == "ct2" else "onnxruntime")
    from vanilla_transformer.export import export_ct2, export_onnx

    folder = (export_ct2 if engine == "ct2" else export_onnx)(export, tmp_path / engine)
    lines = "起初神创造天地。\n\n地是空虚混沌。\n我爱机器翻译\n"
    for options in ([], ["--num_beams", "1"]):
        code, expected, _ = run_main(monkeypatch, capsys, "--model", str(export), *options, stdin=lines)
        assert code == 0 and expected.count("\n") == 4 and expected.split("\n")[1] == ""
        code, out, err = run_main(
            monkeypatch, capsys, "--engine", engine, "--model", str(folder), *options, stdin=lines
        )
        assert (code, out) == (0, expected), err
    for options, flag in (
        (["--do_sample"], "--do_sample"),
        (["--top_k", "5"], "--top_k"),
        (["--device", "cpu"], "--device"),
    ):
        code, out, err = run_main(
            monkeypatch, capsys, "--engine", engine, "--model", str(folder), *options, stdin=lines
        )
        assert code == 2 and out == "" and err.count("\n") == 1 and flag in err, err


def test_torch_int8_translates_like_the_quantized_model(export, loaded, monkeypatch, capsys):
    """--engine torch --dtype int8 prints what `modeling.kernels_vanilla_transformer.quantize_int8` of the model
    translates (greedy and beams); int8 on another device is a one-line error with exit 2."""
    from vanilla_transformer.modeling.kernels_vanilla_transformer import quantize_int8

    model, tokenizer = loaded
    int8 = quantize_int8(model)
    lines = "起初神创造天地。\n\n地是空虚混沌。\n"
    for beams in ("1", "3"):
        code, out, err = run_main(
            monkeypatch, capsys, "--model", str(export), "--dtype", "int8", "--num_beams", beams, stdin=lines
        )
        expected = translate_lines(int8, tokenizer, lines.splitlines(), num_beams=int(beams))
        assert (code, out) == (0, "".join(f"{line}\n" for line in expected)), err
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(export), "--dtype", "int8", "--device", "cuda", stdin=lines
    )
    assert code == 2 and out == "" and err.count("\n") == 1 and "--dtype int8 runs on the CPU" in err, err


def test_onnx_folder_in_the_three_file_layout_exit_2(tmp_path):
    """Subprocess: an ONNX folder in the three-file layout (graphs at the top, no onnx/) ends with exit code 2 and
    one line that names the layout and the command that re-exports the model."""
    pytest.importorskip("onnxruntime")
    old = tmp_path / "old"
    old.mkdir()
    for name in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx", "config.json"):
        (old / name).write_bytes(b"x")
    done = run_cli("--engine", "onnx", "--model", str(old), stdin="起初\n")
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b"", err
    assert err.count("\n") == 1 and err.startswith("error: ") and "three-file layout" in err, err
    assert "vanilla-transformer export --engine onnx" in err


@pytest.fixture(scope="module")
def scoring_folder(tmp_path_factory):
    """`conftest.export_scoring_model`: a generation config that alters no logits, so beam search's scores are
    forced decoding's."""
    return export_scoring_model(tmp_path_factory.mktemp("scoring"))


def test_jsonl_gives_each_line_its_scores_and_sorted_nbest_as_forced_decoding(scoring_folder):
    """Subprocess: --output_format jsonl writes one record per input line, its best hypothesis' translation, score,
    log_prob, length, tokens and token_log_probs, and nbest: num_return_sequences records sorted by score; each
    score is forced decoding's score of that output (1e-4) and the translations are the text output's."""
    from vanilla_transformer.inference.engines import load_engine

    stdin = "\n".join(SOURCES) + "\n"
    options = (
        "--model",
        str(scoring_folder),
        "--num_beams",
        "4",
        "--length_penalty",
        "0.6",
        "--batch_size",
        "2",
    )
    done = run_cli(*options, "--num_return_sequences", "3", "--output_format", "jsonl", stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    records = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    model, tokenizer = load_engine("torch", scoring_folder, dtype="float32")
    texts = translate_nbest(
        model, tokenizer, SOURCES, num_beams=4, length_penalty=0.6, num_return_sequences=3
    )
    assert len(records) == len(SOURCES)
    for source, record, hypotheses in zip(SOURCES, records, texts):
        assert [r["translation"] for r in record["nbest"]] == hypotheses
        assert {k: v for k, v in record.items() if k != "nbest"} == record["nbest"][0]
        if not source.strip():
            assert record["score"] is None and record["tokens"] == [] and record["log_prob"] is None
            continue
        scores = [r["score"] for r in record["nbest"]]
        assert scores == sorted(scores, reverse=True)
        # a list of tokens gives a list of ids
        ids = [cast(list[int], tokenizer.convert_tokens_to_ids(r["tokens"])) for r in record["nbest"]]
        sources = [tokenizer(source)["input_ids"]] * len(ids)
        for r, forced in zip(record["nbest"], score_ids(model, sources, ids, append_eos=False)):
            assert r["length"] == len(r["tokens"]) == len(r["token_log_probs"])
            assert r["token_log_probs"] == pytest.approx(forced.token_log_probs, abs=1e-4)
            assert r["log_prob"] == pytest.approx(forced.log_prob, abs=1e-4)
            assert r["score"] == pytest.approx(forced.score(0.6), abs=1e-4)


def test_tsv_gives_translation_score_and_log_prob_per_hypothesis(scoring_folder, monkeypatch, capsys):
    stdin = "起初神创造天地。\n\n地是空虚混沌\n"
    options = ("--model", str(scoring_folder), "--num_beams", "1")
    code, out, _ = run_main(monkeypatch, capsys, *options, "--output_format", "jsonl", stdin=stdin)
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    code, out, _ = run_main(monkeypatch, capsys, *options, "--output_format", "tsv", stdin=stdin)
    assert code == 0
    rows = [line.split("\t") for line in out.split("\n")[:-1]]
    assert rows[1] == ["", "", ""]
    for row, record in zip(rows[::2], records[::2]):
        assert row[0] == record["translation"]
        # greedy: the score is the sum of the token log-probabilities
        assert float(row[1]) == pytest.approx(record["score"], abs=1e-6)
        assert float(row[2]) == pytest.approx(record["log_prob"], abs=1e-6)
        assert record["score"] == pytest.approx(record["log_prob"], abs=1e-4)
    code, out, _ = run_main(
        monkeypatch,
        capsys,
        *options,
        "--num_beams",
        "2",
        "--num_return_sequences",
        "2",
        "--output_format",
        "tsv",
        stdin=stdin,
    )
    assert code == 0 and [len(line.split("\t")) for line in out.split("\n")[:-1]] == [6, 6, 6]


def test_help_explains_the_output_formats_and_their_fields(capsys):
    from vanilla_transformer.commands.translate import parse_args

    with pytest.raises(SystemExit) as exited:
        parse_args(["--help"])
    text = capsys.readouterr().out
    assert exited.value.code == 0
    for field in (
        "--output_format",
        "jsonl",
        "tsv",
        "score",
        "log_prob",
        "length",
        "tokens",
        "token_log_probs",
    ):
        assert field in text
    assert "length_penalty" in text and "forced decoding" in text and "nbest" in text


def test_html_nesting_deeper_than_the_limit_exit_2_in_one_line(export, monkeypatch, capsys):
    options = ("--model", str(export), "--format", "html", "--max_markup_depth", "4")
    code, out, err = run_main(
        monkeypatch, capsys, *options, stdin="<p>" + "<b>" * 3 + "起初" + "</b>" * 3 + "</p>"
    )
    assert code == 0 and out.startswith("<p><b><b><b>") and out.endswith("</b></b></b></p>"), err
    deep = "<p>" + "<b>" * 4 + "起初" + "</b>" * 4 + "</p>"
    code, out, err = run_main(monkeypatch, capsys, *options, stdin=deep)
    last = err.strip().splitlines()[-1]
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert last.startswith("error: ") and "more than 4 elements deep" in last and "--max_markup_depth" in last


def test_a_glossary_term_the_model_cannot_write_exit_2_naming_it(export, monkeypatch, capsys, tmp_path):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("起初\tIn the beginning\n神\t\U0001f984\n", encoding="utf-8")
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(export), "--glossary", str(glossary), stdin="起初\n"
    )
    last = err.strip().splitlines()[-1]
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert last.startswith("error: the glossary has 1 target term(s)") and "'\U0001f984'" in last, last


def test_protected_spans_come_out_as_written(export, loaded, monkeypatch, capsys):
    """A URL, a placeholder, an e-mail address and a hashtag come out once each, as written, also with
    --split_sentences and --format html; --no_protect gives the model's raw translation, as translate_lines."""
    lines = ["神说 https://x.org/a 要有光", "地是 {name} 空虚 %s", "神 bob@x.org 光 #光明"]
    spans = [["https://x.org/a"], ["{name}", "%s"], ["bob@x.org", "#光明"]]
    stdin = "\n".join(lines) + "\n"
    for extra in ((), ("--split_sentences", "zh")):
        code, out, _ = run_main(monkeypatch, capsys, "--model", str(export), *extra, stdin=stdin)
        assert code == 0
        for output, wanted in zip(out.split("\n"), spans):
            assert all(output.count(span) == 1 for span in wanted), (output, wanted)
    code, raw, _ = run_main(monkeypatch, capsys, "--model", str(export), "--no_protect", stdin=stdin)
    assert code == 0 and raw.split("\n")[:3] == translate_lines(*loaded, lines)  # pyright: ignore[reportCallIssue]
    document = f"<p><b>{lines[1]}</b></p>"
    code, out, _ = run_main(monkeypatch, capsys, "--model", str(export), "--format", "html", stdin=document)
    assert code == 0 and out.count("{name}") == 1 and out.count("%s") == 1
