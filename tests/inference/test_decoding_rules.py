"""The decoding rules that every entry point shares, checked at each entry point: the position limit
(`modeling.position_limit`: none with rotary positions, else `max_position_embeddings`) and the default length
penalty (`modeling.DEFAULT_LENGTH_PENALTY`, through the model's generation config).

Each test records what reaches `generate()` or the torch engine's decoding loop (the source length, the length penalty in effect) from `generate()`
itself, the translation pipeline, `inference.translate`, `vanilla-transformer translate`, `vanilla-transformer
evaluate` and the server, and what the exported engines' runtimes decode with."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MAX_POSITIONS, tiny_family_config, tiny_model, tiny_tokenizer
from helpers.shared import run_main

from vanilla_transformer.modeling import (
    DEFAULT_LENGTH_PENALTY,
    VanillaDecoderOnlyConfig,
    VanillaTransformerForConditionalGeneration,
    causal_lm_generation_config,
    save_with_remote_code,
)

# 44 tokens of the tiny tokenizer: longer than the models' MAX_POSITIONS (24)
LONG = "起初神创造天地。地是空虚混沌，渊面黑暗；神的灵运行在水面上。神说：要有光，就有了光。"


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture
def generate_calls(monkeypatch) -> list[dict]:
    """Every decoding call of the encoder-decoder model from now on (`generate()`, or the torch engine's loop
    `inference.decoding.decode`), as a dict: ``source_length`` (the input width), ``length_penalty`` (the one in
    effect: the argument, else the model's generation config) and ``max_new_tokens`` (the argument, else the
    generation config's)."""
    from vanilla_transformer.inference import decoding

    calls = []
    generate = VanillaTransformerForConditionalGeneration.generate
    decode = decoding.decode

    def record(model, input_ids, kwargs):
        config = model.generation_config
        calls.append(
            {
                "source_length": input_ids.shape[1],
                "length_penalty": kwargs.get("length_penalty", config.length_penalty),
                "max_new_tokens": kwargs.get("max_new_tokens", config.max_new_tokens),
            }
        )

    def recording(self, *args, **kwargs):
        record(self, kwargs["input_ids"], kwargs)
        return generate(self, *args, **kwargs)

    def recording_loop(model, input_ids, *args, **kwargs):
        record(model, input_ids, kwargs)
        return decode(model, input_ids, *args, **kwargs)

    monkeypatch.setattr(VanillaTransformerForConditionalGeneration, "generate", recording)
    monkeypatch.setattr(decoding, "decode", recording_loop)
    return calls


def entry_points(model, tokenizer, folder, monkeypatch, capsys, text: str, **decoding) -> dict[str, Any]:
    """Translate ``text`` through each torch entry point with the ``decoding`` options given in their own form:
    name -> the outcome (the pipeline's, translate()'s and the CLI's output; the server's HTTP status)."""
    from helpers.serving import post, served_app
    from transformers import pipeline

    from vanilla_transformer.inference import translate
    from vanilla_transformer.serving import start_in_thread

    flags = [f"--{name}={value}" for name, value in decoding.items()]
    # transformers' pipeline() overloads list only its own tasks; "translation" is the one this package registers
    translator = pipeline("translation", model=model, tokenizer=tokenizer)  # pyright: ignore[reportCallIssue, reportArgumentType]
    outcome = {
        "pipeline": translator(text, **decoding),
        "translate": translate(model, tokenizer, [text], **decoding),
        "cli": run_main(monkeypatch, capsys, "--model", str(folder), *flags, stdin=text + "\n")[:2],
    }
    # request-level batching: its engine calls are translate()'s, which `generate_calls` records (continuous
    # batching's replies equal each request decoded alone: tests/serving/test_continuous.py)
    with start_in_thread(served_app(folder, scheduling="request")) as running:
        outcome["server"] = post(running.url, "/translate", {"text": text, **decoding}).status_code
    return outcome


@pytest.mark.parametrize("position_encoding", ["rope", "sinusoidal"])
def test_rope_sources_are_never_truncated_and_table_positions_still_are(
    position_encoding, tokenizer, generate_calls, tmp_path, monkeypatch, capsys
):
    """A source longer than `max_position_embeddings` reaches a RoPE model whole from every entry point, and
    `max_new_tokens` above the table is kept; a model with a position table gets at most its table, from the
    pipeline and translate (truncated) and the CLI, and the server refuses the source (422)."""
    model = tiny_model(
        vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS, position_encoding=position_encoding
    )
    model.generation_config.max_new_tokens = 4
    folder = save_with_remote_code(model, tmp_path / "model", tokenizer)
    length = len(tokenizer(LONG)["input_ids"])
    assert length > MAX_POSITIONS
    rope = position_encoding == "rope"
    outcome = entry_points(model, tokenizer, folder, monkeypatch, capsys, LONG, num_beams=1)

    expected = length if rope else MAX_POSITIONS
    # the pipeline, translate, the CLI (and the server with RoPE)
    assert [call["source_length"] for call in generate_calls] == [expected] * (3 + rope)
    assert outcome["cli"][0] == 0 and outcome["server"] == (200 if rope else 422)
    # the default max_new_tokens: 256 without a position table, else inside it (a causal LM: half of it)
    fresh = VanillaTransformerForConditionalGeneration(model.config).generation_config.max_new_tokens
    assert fresh == (256 if rope else MAX_POSITIONS - 1)
    causal = tiny_family_config(
        VanillaDecoderOnlyConfig, "decoder", MAX_POSITIONS, vocab_size=97, position_encoding=position_encoding
    )
    assert causal_lm_generation_config(causal).max_new_tokens == (256 if rope else MAX_POSITIONS // 2)
    from vanilla_transformer.inference import translate

    generate_calls.clear()
    # without the default output limit relative to the source (max_len_a=None), which would be lower
    translate(model, tokenizer, ["起初"], max_new_tokens=MAX_POSITIONS + 8, max_len_a=None)
    assert generate_calls[0]["max_new_tokens"] == (MAX_POSITIONS + 8 if rope else MAX_POSITIONS)


def test_every_entry_point_decodes_with_the_default_length_penalty(
    tokenizer, generate_calls, tmp_path, monkeypatch, capsys
):
    """A new model's generation config holds `DEFAULT_LENGTH_PENALTY`, and generate(), the pipeline, translate(),
    the translate and evaluate commands and the server decode with it; the CTranslate2 and ONNX Runtime engines
    decode with their folder's generation config (the same value) when no length penalty is given."""
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    assert model.generation_config.length_penalty == DEFAULT_LENGTH_PENALTY
    assert model.generation_config.num_beams > 1
    model.generation_config.max_new_tokens = 4
    folder = save_with_remote_code(model, tmp_path / "model", tokenizer)
    model.generate(**tokenizer("起初", return_tensors="pt"))
    outcome = entry_points(model, tokenizer, folder, monkeypatch, capsys, "起初")
    assert outcome["cli"][0] == 0 and outcome["server"] == 200

    data = tmp_path / "pairs.tsv"
    data.write_text("起初\tIn the beginning\n神说\tGod said\n", encoding="utf-8")
    from vanilla_transformer.commands import evaluate

    assert evaluate.main(["--model", str(folder), "--data", str(data), "--split", "all"]) == 0
    # generate, pipeline, translate, CLI, server, evaluate
    assert len(generate_calls) == 6
    assert {call["length_penalty"] for call in generate_calls} == {DEFAULT_LENGTH_PENALTY}

    from vanilla_transformer.inference import engine_onnx
    from vanilla_transformer.inference.engines import DecodingOptions

    # the ONNX Runtime translator's settings for generate_ids(ids, num_beams=4)
    onnx = engine_onnx.resolve_decoding(model.generation_config, **vars(DecodingOptions(num_beams=4)))
    assert onnx.length_penalty == DEFAULT_LENGTH_PENALTY
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.inference.engine_ct2 import CT2Translator

    model.generation_config.length_penalty = 1.3  # a folder's own value is the engine's default
    translator = CT2Translator(export_ct2(model, tmp_path / "ct2", tokenizer=tokenizer), num_threads=1)
    assert translator.decoding_options(DecodingOptions(num_beams=4))["length_penalty"] == 1.3
    assert translator.decoding_options(DecodingOptions(num_beams=1))["length_penalty"] == 0.0
