"""vanilla-transformer translate-corpus on the tiny exported model: one process, two `accelerate launch` processes,
a run killed with SIGKILL and resumed, Ray Data with two local actors; rows that cannot be translated; the column
rules of corpus.texts; the scores and token budgets of THE translation loop."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from helpers.shared import accelerate_cpu_launcher

from vanilla_transformer.commands import translate_corpus
from vanilla_transformer.corpus import read_parallel_splits
from vanilla_transformer.corpus.texts import read_texts, texts_hash
from vanilla_transformer.inference import translate_lines, translate_nbest
from vanilla_transformer.inference.corpus_translation import read_output
from vanilla_transformer.inference.translate import translate_scored

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
SENTENCES = [
    "起初，神创造天地。",
    "神说：「要有光」，就有了光。",
    "地是空虚混沌",
    "神看光是好的，就把光暗分开了。",
    "神称光为昼，称暗为夜。",
]
# more than the tiny model's 24 positions
LONG = "神说：「要有光」，就有了光。" * 10


def corpus_lines(rows: int) -> list[str]:
    """``rows`` lines: the sentences, with an empty line and a blank line among them."""
    lines = [SENTENCES[i % len(SENTENCES)][: 3 + i % 9] for i in range(rows)]
    lines[1], lines[4] = "", "   "
    return lines


def write_tsv(path: Path, lines: list[str], extra: bytes = b"") -> Path:
    path.write_bytes("".join(f"{line}\tx\n" for line in lines).encode() + extra)
    return path


def run_corpus(
    *args: str, launcher: tuple[str, ...] = (), check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """translate-corpus in a subprocess (the real entry point), greedy on the CPU unless ``args`` say otherwise."""
    command = launcher or (sys.executable,)
    done = subprocess.run(
        [
            *command,
            "-m",
            "vanilla_transformer",
            "translate-corpus",
            "--num_beams",
            "1",
            "--no_progress",
            *args,
        ],
        capture_output=True,
        env=env or ENV,
        timeout=240,
    )
    if check:
        assert done.returncode == 0, done.stderr.decode()
    return done


def command_job(export: Path, data: Path, out: Path):
    """The job of `translate-corpus --model EXPORT --input DATA --output OUT --chunk_size 2 --num_beams 1`."""
    from vanilla_transformer.inference.corpus_translation import CorpusJob

    return CorpusJob(
        input=str(data),
        output=str(out),
        model=str(export),
        generate_kwargs={"num_beams": 1},
        chunk_size=2,
        input_sha256=texts_hash(read_texts(data)),
    )


def test_one_process_rows_in_order_with_reasons(export, loaded, tmp_path):
    """Every input row gives one record, in order, ids 0..n-1; empty rows, an over-long row and an undecodable
    line are recorded with their reason and the others are translated as the translation loop translates
    them alone, with the score of the translation loop."""
    lines = [*corpus_lines(6), LONG]
    data = write_tsv(tmp_path / "in.tsv", lines, extra=b"\xff\xfe\tx\n" + "地是空虚混沌\tx\n".encode())
    out = tmp_path / "out.jsonl"
    run_corpus("--model", str(export), "--input", str(data), "--output", str(out), "--chunk_size", "3")
    records = read_output(out)
    assert [r["id"] for r in records] == list(range(len(lines) + 2))
    model, tokenizer = loaded
    reasons = [r["error"] for r in records]
    assert reasons[1] == reasons[4] == "empty"
    assert reasons[6].startswith("too long: ") and reasons[7].startswith("undecodable: ")
    assert records[7]["source"] is None and records[6]["source"] == LONG
    for record in records:
        if record["error"] is None:
            texts, scores = translate_scored(model, tokenizer, [record["source"]], num_beams=1)
            assert record["translation"] == texts[0][0] != ""
            assert record["score"] == pytest.approx(scores[0][0], abs=1e-4)
        else:
            assert record["translation"] == "" and record["score"] is None
    assert not (tmp_path / "out.jsonl.parts").exists()
    # the output is a parallel corpus for training (a student, back-translation): the translated rows are its pairs
    pairs, _ = read_parallel_splits(out, target_column="translation", cache_dir=tmp_path / "cache")
    translated = [r for r in records if r["error"] is None]
    assert pairs["train"]["source"] == [r["source"] for r in translated]
    assert pairs["train"]["target"] == [r["translation"] for r in translated]


def test_two_accelerate_processes_equal_one(export, tmp_path):
    """Two `accelerate launch --multi_gpu` processes on the CPU (gloo, as training launches them): both run, as
    processes 1/2 and 2/2 of one group, each translates its contiguous half of the chunks (counted from each
    process's summary line), and the output equals the one-process output byte for byte (greedy): order and empty
    rows kept."""
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(13))
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    common = ("--model", str(export), "--input", str(data), "--chunk_size", "2")
    run_corpus(*common, "--output", str(one))
    launcher = tuple(accelerate_cpu_launcher(2))
    done = run_corpus(
        *common, "--output", str(two), launcher=launcher, env={**ENV, "CUDA_VISIBLE_DEVICES": ""}
    )
    summaries = re.findall(r"process (\d)/(\d) \(pid (\d+)\): translated (\d+) chunk", done.stderr.decode())
    assert sorted((index, count) for index, count, _, _ in summaries) == [("1", "2"), ("2", "2")], done.stderr
    assert len({pid for _, _, pid, _ in summaries}) == 2
    # 13 rows in chunks of 2: 7 chunks, 3 for the first process and 4 for the second
    assert sorted(int(chunks) for *_, chunks in summaries) == [3, 4]
    assert two.read_bytes() == one.read_bytes()
    assert [r["id"] for r in read_output(two)] == list(range(13))


def test_killed_run_resumes_without_gaps_or_duplicates(export, tmp_path):
    """A run killed with SIGKILL after some chunks leaves their parts; the same command then translates the rest
    only and the output equals an uninterrupted run's, every id once."""
    lines = corpus_lines(120)
    data = write_tsv(tmp_path / "in.tsv", lines)
    out, whole = tmp_path / "out.jsonl", tmp_path / "whole.jsonl"
    common = ("--model", str(export), "--input", str(data), "--chunk_size", "2", "--num_beams", "1")
    parts = tmp_path / "out.jsonl.parts"
    command = [sys.executable, "-m", "vanilla_transformer", "translate-corpus", "--no_progress", *common]
    process = subprocess.Popen([*command, "--output", str(out)], env=ENV, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while (
        len(list(parts.glob("rows-*.jsonl"))) < 3 and time.monotonic() < deadline and process.poll() is None
    ):
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done_before = sorted(p.name for p in parts.glob("rows-*.jsonl"))
    assert 3 <= len(done_before) < 60 and not out.exists()
    run_corpus(*common, "--output", str(out))
    run_corpus(*common, "--output", str(whole))
    assert out.read_bytes() == whole.read_bytes()
    assert [r["id"] for r in read_output(out)] == list(range(len(lines)))
    assert not parts.exists()


def test_resume_keeps_the_parts_it_finds(export, tmp_path):
    """The parts folder is the progress: a chunk with a part is not translated again (its records are taken as
    they are); a job with other decoding options refuses the folder, naming the option."""
    from vanilla_transformer.inference.corpus_translation import CorpusJob, part_path, prepare_parts

    data = write_tsv(tmp_path / "in.tsv", corpus_lines(6))
    out = tmp_path / "out.jsonl"
    common = ("--model", str(export), "--input", str(data), "--chunk_size", "2")
    run_corpus(*common, "--output", str(tmp_path / "whole.jsonl"))
    job = command_job(export, data, out)
    prepare_parts(job, 6, create=True)
    marked = {"id": 2, "source": "marked", "translation": "kept", "score": None, "error": None}
    other = {**marked, "id": 3}
    part_path(job.parts, 2, 4).write_text(
        json.dumps(marked) + "\n" + json.dumps(other) + "\n", encoding="utf-8"
    )
    changed = CorpusJob(**{**vars(job), "generate_kwargs": {"num_beams": 1, "max_new_tokens": 3}})
    with pytest.raises(ValueError, match="other max_new_tokens: None there, 3 now"):
        prepare_parts(changed, 6, create=False)
    run_corpus(*common, "--output", str(out))
    records = read_output(out)
    whole = read_output(tmp_path / "whole.jsonl")
    assert records[2:4] == [marked, other]
    assert records[:2] + records[4:] == whole[:2] + whole[4:]


def test_ray_two_actors_equal_one_process(export, tmp_path):
    """Ray Data, a local Ray with two actors (one model each), gives the one-process output."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed: pip install 'vanilla-transformer[ray]'")
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(9))
    one, ray_out = tmp_path / "one.jsonl", tmp_path / "ray.jsonl"
    common = ("--model", str(export), "--input", str(data), "--chunk_size", "2")
    run_corpus(*common, "--output", str(one))
    run_corpus(*common, "--output", str(ray_out), "--ray_actors", "2")
    assert ray_out.read_bytes() == one.read_bytes()


def test_missing_column_is_one_error_line(export, tmp_path, capsys):
    """A column the input lacks: exit code 2, one `error:` line listing the columns it has, no traceback."""
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"zh": "起初"}\n', encoding="utf-8")
    parquet = tmp_path / "in.parquet"
    pq.write_table(pa.table({"zh": ["起初"]}), parquet)
    tsv = tmp_path / "in.tsv"
    tsv.write_text("zh\ten\n起初\tx\n", encoding="utf-8")
    for data, column in ((jsonl, "de"), (parquet, "de"), (tsv, "de"), (jsonl, None)):
        extra = ("--column", column) if column else ()
        code = translate_corpus.main(
            ["--model", str(export), "--input", str(data), "--output", str(tmp_path / "o.jsonl"), *extra]
        )
        errors = capsys.readouterr().err.splitlines()
        assert code == 2 and len(errors) == 1 and errors[0].startswith("error: ") and "['zh'" in errors[0]
        assert not (tmp_path / "o.jsonl").exists()


def test_read_texts_keeps_every_row(tmp_path):
    """JSON Lines: invalid JSON, a non-object, a missing field and an empty line are rows with a reason (or an
    empty text); Parquet, Arrow and a saved dataset give their column; a TSV column by header name."""
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"source": "a"}\n{nope\n[1]\n\n{"other": 1}\n{"source": "b"}\n', encoding="utf-8")
    table = read_texts(jsonl).to_pydict()
    assert table["id"] == list(range(6)) and table["text"] == ["a", None, None, "", None, "b"]
    assert [e and e.split(":")[0] for e in table["error"]] == [
        None,
        "invalid JSON",
        "not a JSON object",
        None,
        "no 'source' field",
        None,
    ]
    import datasets

    ds = datasets.Dataset.from_dict({"zh": ["x", None, "z"], "n": [1, 2, 3]})
    ds.save_to_disk(str(tmp_path / "saved"))
    pq.write_table(ds.data.table, tmp_path / "in.parquet")
    for source in (tmp_path / "saved", tmp_path / "in.parquet", *(tmp_path / "saved").glob("*.arrow")):
        read = read_texts(source, "zh").to_pydict()
        assert read["text"] == ["x", None, "z"] and read["error"][1] == "no text in column 'zh'", source
    tsv = tmp_path / "in.tsv"
    tsv.write_text("en\tzh\nx\t起初\ny\t\n", encoding="utf-8")
    assert read_texts(tsv, "zh").to_pydict()["text"] == ["起初", ""]
    assert read_texts(tsv, 1, has_header=True).to_pydict()["text"] == ["起初", ""]


def test_parquet_output_and_sampled_nbest(export, tmp_path):
    """Parquet output holds the JSON Lines records; sampling with a seed (back-translation) gives N hypotheses
    and N log-probability scores per row, the same in two runs (seeded per chunk)."""
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(5))
    common = ("--model", str(export), "--input", str(data), "--chunk_size", "2")
    sample = ("--do_sample", "--top_k", "20", "--num_return_sequences", "3", "--seed", "7")
    run_corpus(*common, *sample, "--output", str(tmp_path / "a.parquet"))
    run_corpus(*common, *sample, "--output", str(tmp_path / "b.jsonl"))
    a, b = read_output(tmp_path / "a.parquet"), read_output(tmp_path / "b.jsonl")
    assert a == b
    translated = [r for r in a if r["error"] is None]
    assert translated and all(len(r["translations"]) == len(r["scores"]) == 3 for r in translated)
    assert all(score <= 0 for r in translated for score in r["scores"])


def test_greedy_score_is_the_teacher_forced_log_probability(loaded):
    """The greedy score of translate_scored is the sum of log p of the output tokens ("</s>" included) under the
    model run on them (teacher forcing), the generation config's suppressed tokens removed before the softmax:
    an independent forward pass, not generate()'s scores."""
    model, tokenizer = loaded
    sources = SENTENCES[:3]
    _, scores = translate_scored(model, tokenizer, sources, num_beams=1, max_new_tokens=5)
    for source, (score,) in zip(sources, scores):
        enc = tokenizer([source], return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**enc, num_beams=1, max_new_tokens=5)
            logits = model(**enc, decoder_input_ids=out[:, :-1]).logits
        logits[..., model.generation_config.suppress_tokens] = float("-inf")
        log_probs = logits.log_softmax(-1).gather(-1, out[:, 1:, None]).squeeze(-1)
        eos = model.generation_config.eos_token_id
        tokens = out[0, 1:].tolist()
        used = tokens.index(eos) + 1 if eos in tokens else len(tokens)
        assert score == pytest.approx(float(log_probs[0, :used].sum()), abs=1e-4)


def test_token_budget_bounds_every_batch(loaded):
    """max_tokens bounds a batch's padded source tokens: with a budget of 1, every line is a batch of its own
    (without it, one batch of batch_size lines); the translations do not change."""
    model, tokenizer = loaded
    lines = [*SENTENCES, "", *SENTENCES[:2]]
    budgeted: list[int] = []
    unbounded: list[int] = []
    one_each = translate_nbest(
        model, tokenizer, lines, 64, max_tokens=1, progress=budgeted.append, num_beams=1
    )
    translate_nbest(model, tokenizer, lines, 64, progress=unbounded.append, num_beams=1)
    assert budgeted == [1] * len(lines) and unbounded == [1, len(lines) - 1]
    assert [h[0] for h in one_each] == translate_lines(model, tokenizer, lines, num_beams=1)


@pytest.mark.parametrize("engine", ["ct2", "onnx"])
def test_engine_greedy_scores_equal_torch(loaded, engine, tmp_path):
    """An exported engine's greedy translations and sequence scores through translate_scored equal PyTorch's."""
    pytest.importorskip({"ct2": "ctranslate2", "onnx": "onnxruntime"}[engine])
    from vanilla_transformer.export import exporter
    from vanilla_transformer.inference.engines import load_engine

    model, tokenizer = loaded
    folder = exporter(engine)(model, tmp_path / engine, tokenizer=tokenizer)
    engine_model, engine_tokenizer = load_engine(engine, folder)
    sources = [*SENTENCES, ""]
    expected_texts, expected_scores = translate_scored(model, tokenizer, sources, num_beams=1)
    texts, scores = translate_scored(engine_model, engine_tokenizer, sources, num_beams=1)
    assert texts == expected_texts and scores[-1] == [None]
    torch.testing.assert_close(
        torch.tensor(scores[:-1]), torch.tensor(expected_scores[:-1]), atol=1e-3, rtol=0
    )


def test_glossary_terms_reach_every_row_and_bind_the_progress(export, loaded, tmp_path, capsys):
    """--glossary: each row's translation is THE loop's with the glossary (its terms in the rows whose source has
    them); the terms are part of the job, so a parts folder of other terms is refused, naming the glossary; a
    bad glossary file or --engine ct2 is one error line, exit 2."""
    from vanilla_transformer.inference.corpus_translation import CorpusJob, prepare_parts
    from vanilla_transformer.inference.glossary import read_glossary

    model, tokenizer = loaded
    lines = corpus_lines(6)
    data = write_tsv(tmp_path / "in.tsv", lines)
    glossary_file = tmp_path / "terms.tsv"
    glossary_file.write_text("光\tlight\n神\tGod\n", encoding="utf-8")
    glossary = read_glossary(glossary_file)
    out = tmp_path / "out.jsonl"
    # room for both terms beyond the tiny model's 6 new tokens
    common = ["--model", str(export), "--input", str(data), "--num_beams", "2", "--max_new_tokens", "16"]
    assert translate_corpus.main([*common, "--output", str(out), "--glossary", str(glossary_file)]) == 0
    records = read_output(out)
    texts = [line for line in lines if line.strip()]
    expected, _ = translate_scored(model, tokenizer, texts, glossary=glossary, num_beams=2, max_new_tokens=16)
    assert [r["translation"] for r in records if r["error"] is None] == [hyps[0] for hyps in expected]
    for record in records:
        for term in glossary.terms_for(record["source"] or ""):
            assert term in record["translation"], record
    assert any(glossary.terms_for(line) for line in lines)
    job = CorpusJob(
        input=str(data),
        output=str(tmp_path / "o.jsonl"),
        model=str(export),
        glossary=glossary.entries,
        input_sha256=texts_hash(read_texts(data)),
    )
    prepare_parts(job, 6, create=True)
    other = CorpusJob(**{**vars(job), "glossary": (("光", "brightness"),)})
    with pytest.raises(ValueError, match="other glossary"):
        prepare_parts(other, 6, create=False)
    capsys.readouterr()
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\tc\n", encoding="utf-8")
    for options, message in (
        (["--glossary", str(bad)], "3 tab-separated columns"),
        (["--glossary", str(glossary_file), "--engine", "ct2"], "--engine ct2 does not take --glossary"),
    ):
        code = translate_corpus.main([*common, "--output", str(tmp_path / "x.jsonl"), *options])
        errors = capsys.readouterr().err.splitlines()
        assert code == 2 and len(errors) == 1 and message in errors[0], errors


def test_a_glossary_term_the_model_cannot_write_is_refused_before_anything_is_written(
    export, tmp_path, capsys
):
    """A target term longer than the decoder's positions could only be dropped by constrained beam search: one
    error line naming it, exit 2, and neither the output nor its parts folder exist, so the corrected glossary
    starts afresh instead of meeting a manifest of the bad one."""
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(6))
    glossary_file = tmp_path / "terms.tsv"
    glossary_file.write_text("光\t" + "light " * 2000 + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    arguments = ["--model", str(export), "--input", str(data), "--num_beams", "2", "--output", str(out)]
    assert translate_corpus.main([*arguments, "--glossary", str(glossary_file)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        error.startswith("error: ")
        and "target term(s) the model cannot write" in error
        and "tokens, more than the" in error
    ), error
    assert not out.exists() and not Path(f"{out}.parts").exists()
    glossary_file.write_text("光\tlight\n", encoding="utf-8")
    assert (
        translate_corpus.main([*arguments, "--max_new_tokens", "16", "--glossary", str(glossary_file)]) == 0
    )


def test_ray_refuses_what_the_model_refuses_before_ray_starts(export, tmp_path, capsys, monkeypatch):
    """--ray_actors: a glossary target term the model cannot write, a --tgt_lang for a model without languages,
    and more hypotheses than the model's default beams (4) are each one error line, exit 2, before Ray starts (the
    model loaded and checked in the driver), with neither the output nor its folder written; good options pass
    the check and reach Ray."""
    # importing Ray sets it
    monkeypatch.setenv("RAY_CLIENT_MODE", os.environ.get("RAY_CLIENT_MODE", "0"))
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'vanilla-transformer[ray]'")
    started = []

    def start(*args, **kwargs):
        started.append(args)
        raise RuntimeError("the test starts no Ray")

    monkeypatch.setattr(ray, "init", start)
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(6))
    glossary_file = tmp_path / "terms.tsv"
    glossary_file.write_text("光\t" + "light " * 2000 + "\n", encoding="utf-8")
    out = tmp_path / "out" / "ray.jsonl"
    arguments = ["--model", str(export), "--input", str(data), "--output", str(out), "--ray_actors", "2"]
    for extra, message in (
        (["--num_beams", "2", "--glossary", str(glossary_file)], "target term(s) the model cannot write"),
        (["--tgt_lang", "fr"], "fr"),
        (["--num_return_sequences", "5"], "larger than num_beams=4"),
    ):
        assert translate_corpus.main([*arguments, "--no_progress", *extra]) == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert error.startswith("error: ") and message in error, (extra, error)
        assert not started and not out.parent.exists()
    with pytest.raises(RuntimeError, match="the test starts no Ray"):
        translate_corpus.main(
            [*arguments, "--no_progress", "--num_beams", "2", "--num_return_sequences", "2"]
        )
    assert len(started) == 1 and not out.parent.exists()


def one_error(capsys, code: int) -> str:
    """The one `error:` line of a command that exited with 2."""
    errors = capsys.readouterr().err.splitlines()
    assert code == 2 and len(errors) == 1 and errors[0].startswith("error: "), errors
    return errors[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_resume_after_the_input_was_edited_is_refused_and_writes_nothing(export, tmp_path, capsys):
    """Half of the chunks are done (process 1 of 2), then one row of the input is edited (same number of rows):
    the resumed command exits 2 with one line naming the input, and the parts folder and the output are as they
    were; with the input restored it finishes."""
    from vanilla_transformer.inference.corpus_translation import prepare_parts, run_shard

    lines = corpus_lines(6)
    data = write_tsv(tmp_path / "in.tsv", lines)
    out = tmp_path / "out.jsonl"
    table = read_texts(data)
    job = command_job(export, data, out)
    prepare_parts(job, len(table), create=True)
    assert run_shard(job, table, 0, 2) == (1, 2)
    before = snapshot(job.parts)
    edited = [*lines[:3], "神称暗为夜", *lines[4:]]
    assert edited != lines and len(edited) == len(lines)
    write_tsv(data, edited)
    capsys.readouterr()
    argv = ["--model", str(export), "--input", str(data), "--output", str(out), "--chunk_size", "2"]
    error = one_error(capsys, translate_corpus.main([*argv, "--num_beams", "1"]))
    assert f"the input {str(data)!r} changed" in error and "delete that folder to start over" in error
    assert snapshot(job.parts) == before and not out.exists()
    write_tsv(data, lines)
    assert translate_corpus.main([*argv, "--num_beams", "1", "--no_progress"]) == 0
    assert [r["source"] for r in read_output(out)] == lines


def test_a_manifest_of_another_shape_is_one_error_line_naming_it(export, tmp_path, capsys):
    """A parts folder whose manifest is not JSON, JSON of another shape, or a manifest without the input's hash:
    exit 2, one line naming the manifest, nothing written."""
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(6))
    out = tmp_path / "out.jsonl"
    manifest = tmp_path / "out.jsonl.parts" / "manifest.json"
    manifest.parent.mkdir()
    valid = {"input": str(data), "rows": 6, "model": str(export), "engine": "torch", "chunk_size": 2}
    for text in ("{nope", "[1, 2]", '"manifest"', json.dumps(valid), json.dumps({**valid, "rows": "6"})):
        manifest.write_text(text, encoding="utf-8")
        code = translate_corpus.main(["--model", str(export), "--input", str(data), "--output", str(out)])
        assert str(manifest) in one_error(capsys, code)
        assert manifest.read_text(encoding="utf-8") == text and not out.exists()


def test_outputs_that_cannot_be_written_are_one_error_line(export, tmp_path, capsys):
    """--output under a regular file (refused by argparse), a parts path that is a file, an output that is a folder:
    exit 2, an error line naming the path, no traceback."""
    data = write_tsv(tmp_path / "in.tsv", corpus_lines(6))
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x", encoding="utf-8")
    (tmp_path / "out.jsonl.parts").write_text("x", encoding="utf-8")
    (tmp_path / "folder.jsonl").mkdir()
    for output, named in (
        (a_file / "out.jsonl", str(a_file)),
        (tmp_path / "out.jsonl", str(tmp_path / "out.jsonl.parts")),
        (tmp_path / "folder.jsonl", str(tmp_path / "folder.jsonl")),
    ):
        try:
            code = translate_corpus.main(
                ["--model", str(export), "--input", str(data), "--output", str(output)]
            )
        except SystemExit as stop:  # refused as the argument is parsed (commands.arguments.path_argument)
            last = capsys.readouterr().err.strip().splitlines()[-1]
            assert stop.code == 2 and "error: argument --output" in last and named in last, last
            continue
        assert named in one_error(capsys, code)


def test_a_damaged_part_is_named_at_the_merge(export, tmp_path):
    """A part file that is not JSON Lines, or holds other rows: the merge names it and what to do."""
    from vanilla_transformer.inference.corpus_translation import (
        CorpusJob,
        merge_parts,
        part_path,
        prepare_parts,
    )

    job = CorpusJob(
        input="in.tsv", output=str(tmp_path / "out.jsonl"), model=str(export), chunk_size=2, input_sha256="0"
    )
    prepare_parts(job, 2, create=True)
    record = {"id": 1, "source": "a", "translation": "b", "score": None, "error": None}
    for text in ("{nope\n", json.dumps(record) + "\n"):
        part_path(job.parts, 0, 2).write_text(text, encoding="utf-8")
        with pytest.raises(
            ValueError, match=r"the part .*rows-000000000000-000000000002.jsonl' is not .*delete it"
        ):
            merge_parts(job, 2)
