"""The exports of a converted multilingual model (tiny NLLB-200 and M2M100, helpers.multilingual) select the target
language: CTranslate2 through its target prefix, with the tokens of CTranslate2's own converter
(`ctranslate2.converters.TransformersConverter`) of the same transformers folder; ONNX Runtime through the forced
first token, with the tokens of the PyTorch model."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.multilingual import M2M100_TARGETS, NLLB_TARGETS, SAMPLE, m2m100_folder, nllb_folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(the transformers folder, our converted folder)."""
    from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint

    root = tmp_path_factory.mktemp("multilingual-export")
    source = nllb_folder(root)
    return source, convert_m2m100_checkpoint(source, root / "ours")


@pytest.mark.parametrize("num_beams", [1, 4])
def test_ct2_export_gives_the_tokens_of_ctranslate2s_own_converter(folders, tmp_path, num_beams):
    ctranslate2 = pytest.importorskip(
        "ctranslate2", reason="the export extra (in dev): pip install -e '.[dev]'"
    )
    from ctranslate2.converters import TransformersConverter
    from transformers import AutoTokenizer

    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.inference.translate import translate

    source, ours = folders
    theirs = ctranslate2.Translator(TransformersConverter(str(source)).convert(str(tmp_path / "theirs")))
    model, tokenizer = load_engine("ct2", export_ct2(ours, tmp_path / "ours"))
    reference = AutoTokenizer.from_pretrained(source, src_lang="eng_Latn")
    tokens = [reference.convert_ids_to_tokens(reference(text)["input_ids"]) for text in SAMPLE]
    for tgt_lang in NLLB_TARGETS:
        results = theirs.translate_batch(
            tokens,
            target_prefix=[[tgt_lang]] * len(tokens),
            beam_size=num_beams,
            max_decoding_length=8,
            # what the converted folder's generation config sets: no pad, no <s>
            suppress_sequences=[["<pad>"], ["<s>"]],
        )
        ids = [reference.convert_tokens_to_ids(result.hypotheses[0][1:]) for result in results]
        expected = [" ".join(text.split()) for text in reference.batch_decode(ids, skip_special_tokens=True)]
        got = translate(
            model,
            tokenizer,
            SAMPLE,
            src_lang="eng_Latn",
            tgt_lang=tgt_lang,
            num_beams=num_beams,
            length_penalty=1.0,
            max_new_tokens=8,
            max_len_a=None,
        )
        assert got == expected, tgt_lang


def test_onnx_export_gives_the_tokens_of_torch_for_each_target(tmp_path):
    """A converted M2M100 exported to ONNX translates into two target languages with the PyTorch model's tokens
    (greedy and beam 3), its scores within 1e-3."""
    for name in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(name)
    from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint
    from vanilla_transformer.export.onnx import export_onnx
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.inference.translate import translate_hypotheses

    ours = convert_m2m100_checkpoint(m2m100_folder(tmp_path), tmp_path / "ours")
    model, tokenizer = load_model_and_tokenizer(str(ours), dtype="float32")
    engine, engine_tokenizer = load_engine("onnx", export_onnx(ours, tmp_path / "onnx"))
    outputs = {}
    for tgt_lang in M2M100_TARGETS[:2]:
        for num_beams in (1, 3):
            options: dict[str, Any] = dict(
                src_lang="en", tgt_lang=tgt_lang, num_beams=num_beams, max_new_tokens=8
            )
            expected = translate_hypotheses(model, tokenizer, SAMPLE, token_scores=True, **options)
            got = translate_hypotheses(engine, engine_tokenizer, SAMPLE, token_scores=True, **options)
            for want, have in zip(expected, got, strict=True):
                assert have[0].text == want[0].text and have[0].tokens and want[0].tokens
                assert have[0].tokens.token_ids == want[0].tokens.token_ids, (tgt_lang, num_beams)
                assert have[0].score == pytest.approx(want[0].score, abs=1e-3)
            outputs[tgt_lang] = [h[0].tokens.token_ids for h in got if h[0].tokens]
    # the target language decides the first token and the translation
    first, second = (outputs[code] for code in M2M100_TARGETS[:2])
    assert all(a[0] != b[0] for a, b in zip(first, second)) and first != second
