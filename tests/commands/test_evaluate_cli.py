"""vanilla-transformer evaluate: on a model trained by vanilla-transformer train it prints the test BLEU/chrF that training printed
(both scripts in subprocesses, as a user runs them); it decodes with the model's generation config and scores a
Chinese target with sacreBLEU's zh tokeniser; bad input is exit code 2 and one line."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
from conftest import SMALL_RUN_LINES
from helpers.shared import SMALL_CORPUS_FLAGS, run_checked

from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus, split_corpus
from vanilla_transformer.inference import translate

TRAIN_FLAGS = [
    *SMALL_CORPUS_FLAGS,
    *"--preset tiny --max_steps 120 --max_minutes none --max_tokens 512 --vocab_size 1200".split(),
    *"--eval_every 1000 --bleu_samples 0 --num_threads 1 --report_to none".split(),
]
SCORE_LINE = re.compile(
    r"^Test BLEU ([\d.]+)  chrF ([\d.]+)  \((\d+) sentences, beam (\d+)(?:, length penalty ([\d.]+))?\)$",
    re.M,
)


def run_script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return run_checked([sys.executable, "-m", "vanilla_transformer", name, *args], cwd, env, timeout=240)


def load_evaluate_script():
    return importlib.import_module("vanilla_transformer.commands.evaluate")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, str]:
    """(output folder, stdout) of `vanilla-transformer train` on the first 300 pairs of the shipped corpus: 120 updates of
    the tiny preset, length penalty 0.6 (not the default), beam-4 test score."""
    root = tmp_path_factory.mktemp("train_cli")
    done = run_script("train", *TRAIN_FLAGS, "--length_penalty", "0.6", "--output_dir", "out", cwd=root)
    return root / "out", done.stdout


def test_evaluate_reproduces_the_test_scores_that_training_printed(trained, tmp_path):
    out, train_stdout = trained
    bleu, chrf, n, beams, lp = SCORE_LINE.search(train_stdout).groups()
    # training's own printed samples: the first test pairs with their hypotheses
    samples = re.findall(r"^SRC: (.*)\nREF: (.*)\nHYP: (.*)$", train_stdout, re.M)
    assert len(samples) == 3 and all(h for _, _, h in samples), train_stdout
    # 300 lines hold one book: the default split (auto) falls back to blocks and says why
    origin = re.search(r"^  test split: (.*)$", train_stdout, re.M)[1]
    assert origin.startswith("held out from 'train' (seeded random blocks of 20 lines"), origin
    assert "not by the groups of bible.zh-en.refs.xz: no group is small enough" in origin

    done = run_script(
        "evaluate", "--model", str(out), "--output", "hyps.txt", "--json", "scores.json", cwd=tmp_path
    )
    e_bleu, e_chrf, e_n, e_beams, e_lp = SCORE_LINE.search(done.stdout).groups()
    assert (f"{float(e_bleu):.2f}", f"{float(e_chrf):.2f}") == (f"{float(bleu):.2f}", f"{float(chrf):.2f}")
    assert (e_n, e_beams) == (n, beams) == ("6", "4")
    generation = json.loads((out / "generation_config.json").read_text())
    assert float(e_lp) == float(lp) == generation["length_penalty"] == 0.6
    written = json.loads((out / "eval_results.json").read_text())
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert (scores["bleu"], scores["chrf"]) == (written["bleu"], written["chrf"])
    assert (scores["bleu_signature"], scores["chrf_signature"]) == (
        written["bleu_signature"],
        written["chrf_signature"],
    )
    assert f"  {written['bleu_signature']}\n  {written['chrf_signature']}\n" in done.stdout
    hypotheses = (tmp_path / "hyps.txt").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 6 and hypotheses[:3] == [h for _, _, h in samples]


def test_command_line_flags_win_over_the_runs_saved_options(trained, tmp_path, capsys):
    out, _ = trained
    script = load_evaluate_script()
    argv = [
        "--model",
        str(out),
        "--split",
        "validation",
        "--limit",
        "3",
        "--num_beams",
        "1",
        "--json",
        str(tmp_path / "s.json"),
    ]
    assert script.main(argv) == 0
    scores = json.loads((tmp_path / "s.json").read_text())
    assert (scores["split"], scores["num_sentences"], scores["num_beams"]) == ("validation", 3, 1)
    assert scores["data"] == str(DEFAULT_DATA)  # the run's corpus, saved in its train_config.json
    out = capsys.readouterr().out
    assert f": {SMALL_RUN_LINES} pairs from " in out and "Validation BLEU" in out  # the run's --max_lines


def test_an_engine_folder_scores_the_runs_test_split_like_torch(trained, tmp_path, capsys):
    """--engine ct2 on a CTranslate2 export of the run, with --run naming the run: the run's test split and the
    scores and hypotheses of the torch model."""
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export import export_ct2

    out, _ = trained
    script = load_evaluate_script()
    assert script.main(["--model", str(out), "--json", str(tmp_path / "torch.json")]) == 0
    folder = export_ct2(out, tmp_path / "ct2")
    argv = [
        "--engine",
        "ct2",
        "--model",
        str(folder),
        "--run",
        str(out),
        "--json",
        str(tmp_path / "ct2.json"),
    ]
    assert script.main(argv) == 0
    torch_scores, ct2_scores = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("torch", "ct2"))
    assert ct2_scores["engine"] == "ct2" and ct2_scores["num_sentences"] == torch_scores["num_sentences"] == 6
    assert {k: ct2_scores[k] for k in ("bleu", "chrf", "split", "data", "num_beams", "length_penalty")} == {
        k: torch_scores[k] for k in ("bleu", "chrf", "split", "data", "num_beams", "length_penalty")
    }
    assert script.main([*argv[:4], "--device", "cpu"]) == 2
    assert "runs on the CPU; leave out --device" in capsys.readouterr().err


@pytest.fixture
def zh_target_model(export, tmp_path) -> tuple[Path, Path]:
    """(model folder with beam 3 and length penalty 1.7 in its generation config, a 40-pair en->zh TSV file)."""
    model = tmp_path / "model"
    shutil.copytree(export, model)
    generation = json.loads((model / "generation_config.json").read_text())
    generation.update(num_beams=3, length_penalty=1.7)
    (model / "generation_config.json").write_text(json.dumps(generation))
    pairs, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=40)
    data = tmp_path / "pairs.en-zh.tsv"  # the file name gives the languages: Chinese targets
    data.write_text(
        "".join(f"{t}\t{s}\n" for s, t in zip(pairs["source"], pairs["target"])), encoding="utf-8"
    )
    return model, data


def test_evaluate_decodes_with_the_generation_config_and_scores_chinese_with_the_zh_tokeniser(
    zh_target_model, tmp_path
):
    model_dir, data = zh_target_model
    argv = [
        "--model",
        str(model_dir),
        "--data",
        str(data),
        "--valid_size",
        "5",
        "--test_size",
        "8",
        "--output",
        str(tmp_path / "h.txt"),
        "--json",
        str(tmp_path / "s.json"),
    ]
    assert load_evaluate_script().main(argv) == 0
    scores = json.loads((tmp_path / "s.json").read_text())
    assert (scores["split"], scores["num_sentences"], scores["num_beams"], scores["length_penalty"]) == (
        "test",
        8,
        3,
        1.7,
    )
    assert "|tok:zh|" in scores["bleu_signature"]
    test = split_corpus(load_parallel_corpus(data)[0], valid_size=5, test_size=8)["test"]
    from vanilla_transformer.inference import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(str(model_dir))
    expected = translate(
        model,
        tokenizer,
        list(test["source"]),
        num_beams=3,
        length_penalty=1.7,
        max_len_a=2.0,
        max_len_b=10,
        batch_size=64,
    )
    hypotheses = (tmp_path / "h.txt").read_text(encoding="utf-8").splitlines()
    assert hypotheses == expected
    reference = sacrebleu.corpus_bleu(hypotheses, [list(test["target"])], tokenize="zh")
    assert scores["bleu"] == round(reference.score, 2)
    everything = [
        "--model",
        str(model_dir),
        "--data",
        str(data),
        "--split",
        "all",
        "--num_beams",
        "1",
        "--json",
        str(tmp_path / "all.json"),
    ]
    assert load_evaluate_script().main(everything) == 0
    assert json.loads((tmp_path / "all.json").read_text())["num_sentences"] == 40


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--model", "{tmp}/nope"), "does not exist"),
        (("--data", "{tmp}/missing.tsv"), "missing.tsv"),
        (("--valid_size", "0", "--split", "validation"), "the validation split of"),
        (("--tokenize", "bogus"), "sacreBLEU tokeniser 'bogus' does not exist"),
        (("--limit", "0"), "--limit must be >= 1, got 0"),
        (("--batch_size", "0"), "--batch_size must be >= 1, got 0"),
    ],
)
def test_bad_input_is_exit_2_and_one_line(zh_target_model, tmp_path, capsys, args, expected):
    model_dir, data = zh_target_model
    argv = ["--model", str(model_dir), "--data", str(data), "--valid_size", "5", "--test_size", "5"]
    argv += [a.format(tmp=tmp_path) for a in args]
    assert load_evaluate_script().main(argv) == 2
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("error: ") and expected in last and "Traceback" not in captured.err, captured.err
    assert captured.out == ""


def test_a_bad_decoding_value_is_an_argparse_error_with_its_rules_message(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_evaluate_script().main(["--model", "x", "--num_beams", "0"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "argument --num_beams: num_beams=0 is invalid" in err


def test_a_corpus_option_out_of_its_range_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_evaluate_script().main(["--model", "x", "--split_block_size", "0"])
    err = capsys.readouterr().err
    assert (
        exit_info.value.code == 2 and "argument --split_block_size: expected an integer >= 1, got '0'" in err
    )


def test_unknown_split_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_evaluate_script().main(["--model", "x", "--split", "dev"])
    assert exit_info.value.code == 2 and "invalid choice: 'dev'" in capsys.readouterr().err
