"""The CTranslate2 export of a converted multilingual model (a tiny NLLB-200, helpers.multilingual) selects the target
language through its target prefix, with the tokens of CTranslate2's own converter
(`ctranslate2.converters.TransformersConverter`) of the same transformers folder."""

from __future__ import annotations

import pytest
from helpers.multilingual import NLLB_TARGETS, SAMPLE, nllb_folder

pytest.importorskip("ctranslate2", reason="the export extra (in dev): pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(the transformers folder, our converted folder)."""
    from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint

    root = tmp_path_factory.mktemp("multilingual-export")
    source = nllb_folder(root)
    return source, convert_m2m100_checkpoint(source, root / "ours")


@pytest.mark.parametrize("num_beams", [1, 4])
def test_ct2_export_gives_the_tokens_of_ctranslate2s_own_converter(folders, tmp_path, num_beams):
    import ctranslate2
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
