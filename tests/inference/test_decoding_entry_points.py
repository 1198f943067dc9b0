"""The commands users run decode with the torch engine's loop (`inference.decoding.decode`) by default, never
calling `generate()`, and give what they gave through `generate()` (VANILLA_TRANSFORMER_DECODER=generate):
`translate` (text and JSONL with scores), the server's batcher, `translate-corpus`, `evaluate`; `score` decodes
nothing (forced decoding) and is the same either way."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from conftest import export_scoring_model
from helpers.shared import run_main

from vanilla_transformer.inference import decoding
from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

SOURCES = ["起初神创造天地。", "地是空虚混沌，渊面黑暗；", "神说：要有光，就有了光。", "神看光是好的", "起初"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tiny exported model whose outputs end at different lengths (its output bias leans to </s>)."""
    return export_scoring_model(tmp_path_factory.mktemp("entry") / "model")


@pytest.fixture
def calls(monkeypatch) -> dict[str, int]:
    """How many times `generate()` and the loop have run since the test started."""
    counts = {"generate": 0, "loop": 0}
    generate, decode = VanillaTransformerForConditionalGeneration.generate, decoding.decode

    def counted_generate(self, *args, **kwargs):
        counts["generate"] += 1
        return generate(self, *args, **kwargs)

    def counted_decode(*args, **kwargs):
        counts["loop"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(VanillaTransformerForConditionalGeneration, "generate", counted_generate)
    monkeypatch.setattr(decoding, "decode", counted_decode)
    return counts


Result = TypeVar("Result")


def both_ways(monkeypatch, calls: dict[str, int], run: Callable[[], Result]) -> tuple[Result, Result]:
    """``run()`` with the default decoder (which must be the loop alone) and with generate() (alone)."""
    monkeypatch.delenv(decoding.DECODER_ENV, raising=False)
    by_loop = run()
    assert calls["loop"] > 0 and calls["generate"] == 0
    calls.update(loop=0, generate=0)
    monkeypatch.setenv(decoding.DECODER_ENV, "generate")
    by_generate = run()
    assert calls["generate"] > 0 and calls["loop"] == 0
    return by_loop, by_generate


@pytest.mark.parametrize(
    "flags",
    [
        (),
        ("--num_beams", "4"),
        ("--num_beams", "4", "--num_return_sequences", "3", "--length_penalty", "0.6"),
        ("--num_beams", "1", "--output_format", "jsonl"),
        ("--num_beams", "3", "--output_format", "tsv"),
    ],
)
def test_translate_decodes_with_the_loop(folder, calls, monkeypatch, capsys, flags):
    stdin = "".join(line + "\n" for line in SOURCES)

    def run():
        code, out, err = run_main(monkeypatch, capsys, "--model", str(folder), *flags, stdin=stdin)
        assert code == 0, err
        return out

    by_loop, by_generate = both_ways(monkeypatch, calls, run)
    if "jsonl" in flags:
        loop_records = [json.loads(line) for line in by_loop.splitlines()]
        generate_records = [json.loads(line) for line in by_generate.splitlines()]
        assert [r["translation"] for r in loop_records] == [r["translation"] for r in generate_records]
        for mine, theirs in zip(loop_records, generate_records):
            assert mine["score"] == pytest.approx(theirs["score"], abs=1e-4)
            assert mine["token_log_probs"] == pytest.approx(theirs["token_log_probs"], abs=1e-4)
    else:
        assert by_loop == by_generate
    assert len(by_loop.splitlines()) == len(SOURCES)


def test_sampling_goes_to_generate(folder, calls, monkeypatch, capsys):
    monkeypatch.delenv(decoding.DECODER_ENV, raising=False)
    stdin = "".join(line + "\n" for line in SOURCES)
    code, _, err = run_main(
        monkeypatch, capsys, "--model", str(folder), "--do_sample", "--seed", "1", stdin=stdin
    )
    assert code == 0, err
    assert calls["generate"] > 0 and calls["loop"] == 0


@pytest.mark.parametrize("options", [{"num_beams": 1}, {"num_beams": 3, "num_return_sequences": 2}])
def test_the_servers_batcher_decodes_with_the_loop(folder, calls, monkeypatch, options):
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.serving import Batcher

    model, tokenizer = load_model_and_tokenizer(str(folder))

    def run():
        batcher = Batcher(model, tokenizer, max_wait_s=0.0, max_batch_tokens=10**6)
        futures = [batcher.submit(SOURCES[i : i + 2], options, tokens=20) for i in range(0, len(SOURCES), 2)]
        batcher.start()
        try:
            return [
                [[h.text for h in hypotheses] for hypotheses in future.result(timeout=120)]
                for future in futures
            ]
        finally:
            batcher.close(timeout=60)

    by_loop, by_generate = both_ways(monkeypatch, calls, run)
    assert by_loop == by_generate


def test_translate_corpus_decodes_with_the_loop(folder, calls, monkeypatch, tmp_path):
    from vanilla_transformer.commands import translate_corpus

    data = tmp_path / "in.tsv"
    data.write_text("".join(line + "\n" for line in SOURCES), encoding="utf-8")
    runs = iter(range(2))

    def run():
        out = tmp_path / f"out{next(runs)}.jsonl"
        code = translate_corpus.main(
            ["--model", str(folder), "--input", str(data), "--output", str(out), "--num_beams", "2"]
        )
        assert code == 0
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    by_loop, by_generate = both_ways(monkeypatch, calls, run)
    assert [r["translation"] for r in by_loop] == [r["translation"] for r in by_generate]
    assert [r["score"] for r in by_loop] == pytest.approx([r["score"] for r in by_generate], abs=1e-4)
    assert len(by_loop) == len(SOURCES)


def test_evaluate_decodes_with_the_loop(folder, calls, monkeypatch, tmp_path):
    from vanilla_transformer.commands import evaluate

    data = tmp_path / "pairs.zh-en.tsv"
    data.write_text("".join(f"{line}\tIn the beginning\n" for line in SOURCES), encoding="utf-8")
    runs = iter(range(2))

    def run():
        hypotheses, scores = tmp_path / f"h{next(runs)}.txt", tmp_path / "s.json"
        argv = ["--model", str(folder), "--data", str(data), "--split", "all", "--output", str(hypotheses)]
        assert evaluate.main([*argv, "--json", str(scores)]) == 0
        return hypotheses.read_text(encoding="utf-8"), json.loads(scores.read_text())["bleu"]

    by_loop, by_generate = both_ways(monkeypatch, calls, run)
    assert by_loop == by_generate and len(by_loop[0].splitlines()) == len(SOURCES)


def test_score_decodes_nothing_and_is_the_same_either_way(folder, calls, monkeypatch, capsys):
    import io
    import sys

    from vanilla_transformer.commands import score

    stdin = "".join(f"{line}\tIn the beginning\n" for line in SOURCES)

    def run():
        stdout = io.BytesIO()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(stdout))
        assert score.main(["--model", str(folder)]) == 0
        sys.stdout.flush()
        return stdout.getvalue().decode()

    monkeypatch.delenv(decoding.DECODER_ENV, raising=False)
    by_default = run()
    monkeypatch.setenv(decoding.DECODER_ENV, "generate")
    assert run() == by_default and len(by_default.splitlines()) == len(SOURCES)
    assert calls == {"generate": 0, "loop": 0}
