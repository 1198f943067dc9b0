"""Parity of converted multilingual models against transformers' own: M2M100 and NLLB-200
(`M2M100ForConditionalGeneration` with `M2M100Tokenizer` / `NllbTokenizer`) and a multi-target OPUS-MT Marian with
separate vocabularies; tiny random models and SentencePiece tokenizers built in the test (helpers.multilingual)."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
import torch
from helpers.multilingual import (
    M2M100_TARGETS,
    MARIAN_TARGETS,
    NLLB_TARGETS,
    SAMPLE,
    m2m100_folder,
    marian_multi_target_folder,
    nllb_folder,
)
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    M2M100ForConditionalGeneration,
    MarianMTModel,
    pipeline,
)

from vanilla_transformer.commands.score import main as score_command
from vanilla_transformer.commands.translate import main as translate_command
from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint
from vanilla_transformer.convert.marian import convert_marian_checkpoint
from vanilla_transformer.inference.forced_decoding import default_length_penalty, score_pairs, score_tokens
from vanilla_transformer.inference.languages import model_languages, source_side
from vanilla_transformer.inference.sources import encode_sources
from vanilla_transformer.inference.translate import translate, translate_hypotheses
from vanilla_transformer.tokenizer.loading import load_tokenizer

# model -> (builder, transformers class, converter, source language, target languages)
MODELS = {
    "nllb": (
        nllb_folder,
        M2M100ForConditionalGeneration,
        convert_m2m100_checkpoint,
        "eng_Latn",
        NLLB_TARGETS,
    ),
    "m2m100": (
        m2m100_folder,
        M2M100ForConditionalGeneration,
        convert_m2m100_checkpoint,
        "en",
        M2M100_TARGETS,
    ),
    "marian": (marian_multi_target_folder, MarianMTModel, convert_marian_checkpoint, None, MARIAN_TARGETS),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def pair(request, tmp_path_factory):
    """(name, the transformers model, its tokenizer, our converted model, our loaded tokenizer, its folder)."""
    build, model_class, convert, _, _ = MODELS[request.param]
    root = tmp_path_factory.mktemp(request.param)
    source = build(root)
    ours = convert(source, root / "ours")
    reference = model_class.from_pretrained(source).eval()
    converted = AutoModelForSeq2SeqLM.from_pretrained(ours).eval()
    # decoding settings as the converted folder's generation config (M2M100's has beam 4 and no pad or <s> added)
    reference.generation_config = copy.deepcopy(converted.generation_config)
    return (
        request.param,
        reference,
        AutoTokenizer.from_pretrained(source),
        converted,
        load_tokenizer(ours),
        ours,
    )


def reference_inputs(name: str, tokenizer, texts: list[str], src_lang: str | None, tgt_lang: str):
    """transformers' own way of asking for ``tgt_lang``: the tokenizer's ``src_lang`` and the forced first token
    (NLLB, M2M100), or the ``>>xxx<<`` token at the start of the source (Marian)."""
    if name == "marian":
        return tokenizer([f">>{tgt_lang}<< {text}" for text in texts], return_tensors="pt", padding=True), {}
    tokenizer.src_lang, tokenizer.tgt_lang = src_lang, tgt_lang
    forced = (
        tokenizer.get_lang_id(tgt_lang) if name == "m2m100" else tokenizer.convert_tokens_to_ids(tgt_lang)
    )
    return tokenizer(texts, return_tensors="pt", padding=True), {"forced_bos_token_id": forced}


def test_languages_are_read_from_the_tokenizer(pair):
    name, _, _, _, tokenizer, _ = pair
    languages = model_languages(tokenizer)
    assert languages is not None
    assert set(MODELS[name][4]) <= set(languages.codes)
    # NLLB: the 202 FLORES-200 codes; M2M100: its 100 ISO codes; Marian: the >>xxx<< tokens of the source vocabulary
    assert len(languages.codes) == {"nllb": 202, "m2m100": 100, "marian": 3}[name]


def test_token_ids_match_the_tokenizer_of_transformers(pair):
    name, model, reference, ours, tokenizer, _ = pair
    src_lang = MODELS[name][3]
    for tgt_lang in MODELS[name][4]:
        expected, _ = reference_inputs(name, reference, SAMPLE, src_lang, tgt_lang)
        got = encode_sources(ours, tokenizer, SAMPLE, src_lang, tgt_lang)
        for row, ids in enumerate(got):
            assert ids == expected["input_ids"][row][expected["attention_mask"][row].bool()].tolist()
        # the target side (training labels) too
        if name != "marian":
            tokenizer.tgt_lang = tgt_lang
        assert tokenizer(text_target=SAMPLE)["input_ids"] == reference(text_target=SAMPLE)["input_ids"]


def test_logits_match(pair):
    name, model, reference, ours, _, _ = pair
    inputs, _ = reference_inputs(name, reference, SAMPLE, MODELS[name][3], MODELS[name][4][0])
    labels = reference(text_target=SAMPLE[::-1], return_tensors="pt", padding=True)["input_ids"]
    labels[labels == reference.pad_token_id] = -100
    with torch.no_grad():
        expected = model(**inputs, labels=labels)
        got = ours(**inputs, labels=labels)
    # M2M100 gives a padded target position the padding position's vector, we the absolute position: the logits of
    # ignored positions differ, and no loss nor decoding reads them
    kept = labels != -100
    torch.testing.assert_close(got.logits[kept], expected.logits[kept], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_beams", [1, 4])
def test_translations_match_for_three_target_languages(pair, num_beams):
    """`translate(..., src_lang=, tgt_lang=)` (our decoding loop) gives transformers' `generate()` outputs for each
    target, and the targets give different outputs."""
    name, model, reference, ours, tokenizer, _ = pair
    src_lang = MODELS[name][3]
    outputs = {}
    for tgt_lang in MODELS[name][4]:
        inputs, forced = reference_inputs(name, reference, SAMPLE, src_lang, tgt_lang)
        with torch.no_grad():
            ids = model.generate(
                **inputs, **forced, num_beams=num_beams, max_new_tokens=8, length_penalty=1.0
            )
        # the translation leaves out the forced target-language token (M2M100's tokenizer would keep it as text)
        texts = reference.batch_decode(ids[:, 2:] if forced else ids, skip_special_tokens=True)
        expected = [" ".join(text.split()) for text in texts]
        got = translate(
            ours,
            tokenizer,
            SAMPLE,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            num_beams=num_beams,
            max_new_tokens=8,
            length_penalty=1.0,
            max_len_a=None,
        )
        assert got == expected, tgt_lang
        if forced:
            with torch.no_grad():
                ours_ids = ours.generate(
                    **inputs, **forced, num_beams=num_beams, max_new_tokens=8, length_penalty=1.0
                )
            assert torch.equal(ours_ids, ids)
        outputs[tgt_lang] = got
    assert len({tuple(texts) for texts in outputs.values()}) == len(outputs)


def test_unknown_and_missing_languages_are_refused_by_name(pair):
    name, _, _, ours, tokenizer, _ = pair
    with pytest.raises(ValueError, match="no target language 'xx_Yyyy'; its languages: "):
        translate(ours, tokenizer, SAMPLE[:1], tgt_lang="xx_Yyyy")
    if name != "marian":
        with pytest.raises(ValueError, match="no source language 'qq'"):
            translate(ours, tokenizer, SAMPLE[:1], src_lang="qq", tgt_lang=MODELS[name][4][0])


def test_moe_and_other_model_types_are_refused_by_name(tmp_path):
    (tmp_path / "moe").mkdir()
    (tmp_path / "moe" / "config.json").write_text(json.dumps({"model_type": "nllb_moe"}))
    with pytest.raises(ValueError, match="NLLB-MoE replaces feed-forward layers by mixtures of experts"):
        convert_m2m100_checkpoint(tmp_path / "moe", tmp_path / "out")
    (tmp_path / "moe" / "config.json").write_text(json.dumps({"model_type": "bart"}))
    with pytest.raises(ValueError, match="holds a 'bart' model, not a M2M100 model"):
        convert_m2m100_checkpoint(tmp_path / "moe", tmp_path / "out")


def stdin(text: str) -> io.TextIOWrapper:
    """A console-like standard input holding ``text``."""
    return io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")


def test_the_command_line_and_the_pipeline_select_the_target(pair, monkeypatch, capsys):
    """`translate --src_lang --tgt_lang` and `pipeline(..., src_lang=, tgt_lang=)` give `translate()`'s outputs;
    an unknown language is one error line naming the model's languages."""
    name, _, _, ours, tokenizer, folder = pair
    src_lang, targets = MODELS[name][3], MODELS[name][4]
    translator = pipeline("translation", model=ours, tokenizer=tokenizer)  # pyright: ignore[reportCallIssue, reportArgumentType]
    for tgt_lang in targets[1:2]:
        options: dict[str, Any] = dict(num_beams=2, max_new_tokens=8)
        expected = translate(ours, tokenizer, SAMPLE, src_lang=src_lang, tgt_lang=tgt_lang, **options)
        languages = ["--tgt_lang", tgt_lang] + (["--src_lang", src_lang] if src_lang else [])
        monkeypatch.setattr("sys.stdin", stdin("\n".join(SAMPLE) + "\n"))
        assert (
            translate_command(
                ["--model", str(folder), "--num_beams", "2", "--max_new_tokens", "8", *languages]
            )
            == 0
        )
        assert capsys.readouterr().out.splitlines() == expected
        got = translator(SAMPLE, src_lang=src_lang, tgt_lang=tgt_lang, **options)
        assert [" ".join(output["translation_text"].split()) for output in got] == expected
    monkeypatch.setattr("sys.stdin", stdin(SAMPLE[0]))
    assert translate_command(["--model", str(folder), "--tgt_lang", "qq_Zzzz"]) == 2
    assert "no target language 'qq_Zzzz'; its languages: " in capsys.readouterr().err


def stopping(model, tokenizer, src_lang: str | None, tgt_lang: str):
    """A copy of ``model`` whose translations of `SAMPLE` end within a few tokens: its output row of ``</s>`` along
    the mean of its decoder's final states (a random model's translations run to the length limit)."""
    model = copy.deepcopy(model)
    with source_side(tokenizer, SAMPLE, src_lang, tgt_lang) as texts:
        batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        states = model.model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["input_ids"].clamp(max=model.config.decoder_vocab_size - 1),
        ).last_hidden_state.flatten(0, 1)
        mean = states.mean(0)
        model.get_output_embeddings().weight[model.config.eos_token_id] = 3.0 * mean / mean.norm() ** 2
    return model


def test_a_translation_scores_what_translate_scored_it(pair, monkeypatch, capsys):
    """Forced decoding of the model's own beam-search translation, in the same languages (a source language other
    than the tokenizer's default), gives the sequence score decoding gave it: the library, and `vanilla-transformer
    score --target_tokens --src_lang --tgt_lang`; a text target starts with the target language's token, log-prob 0."""
    name, _, _, ours, tokenizer, folder = pair
    src_lang = {"nllb": "deu_Latn", "m2m100": "de", "marian": None}[name]
    tgt_lang = MODELS[name][4][0]
    model = stopping(ours, tokenizer, src_lang, tgt_lang)
    found = translate_hypotheses(
        model,
        tokenizer,
        SAMPLE,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        num_beams=3,
        max_new_tokens=20,
        token_scores=True,
    )
    # the translations that decoding finished (a hypothesis cut at the length limit has no </s> of its own)
    eos = model.config.eos_token_id
    rows = [
        k
        for k, h in enumerate(found)
        if h[0].tokens and h[0].tokens.token_ids[-1] == eos and len(h[0].tokens.token_ids) < 20
    ]
    assert len(rows) >= 3, [h[0].tokens for h in found]
    best = [found[k][0] for k in rows]
    sources = [SAMPLE[k] for k in rows]
    targets = [hypothesis.tokens.token_ids for hypothesis in best if hypothesis.tokens is not None]
    length_penalty = default_length_penalty(model.generation_config)
    scored = score_tokens(model, tokenizer, sources, targets, src_lang=src_lang, tgt_lang=tgt_lang)
    for hypothesis, got in zip(best, scored, strict=True):
        assert hypothesis.score is not None
        torch.testing.assert_close(got.score(length_penalty), hypothesis.score, rtol=1e-5, atol=1e-5)
    if name != "marian":
        (text,) = score_pairs(
            model, tokenizer, sources[:1], [best[0].text], src_lang=src_lang, tgt_lang=tgt_lang
        )
        assert tokenizer.convert_ids_to_tokens(text.token_ids[0]) in (tgt_lang, f"__{tgt_lang}__")
        assert text.token_log_probs[0] == 0.0
    # the command line reads the folder: the model as it was converted
    found = translate_hypotheses(
        ours,
        tokenizer,
        SAMPLE[:2],
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        num_beams=3,
        max_new_tokens=8,
        token_scores=True,
    )
    best = [hypotheses[0] for hypotheses in found]
    targets = [hypothesis.tokens.token_ids for hypothesis in best if hypothesis.tokens is not None]
    expected = score_tokens(ours, tokenizer, SAMPLE[:2], targets, src_lang=src_lang, tgt_lang=tgt_lang)
    languages = ["--tgt_lang", tgt_lang] + (["--src_lang", src_lang] if src_lang else [])
    monkeypatch.setattr(
        "sys.stdin", stdin("".join(f"{s}\t{json.dumps(t)}\n" for s, t in zip(SAMPLE, targets)))
    )
    assert score_command(["--model", str(folder), "--target_tokens", *languages]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["token_log_probs"] for r in records] == [
        pytest.approx(e.token_log_probs, abs=2e-6) for e in expected
    ]
