"""Languages given by ISO 639 / BCP 47 resolve to an NLLB-200 model's FLORES-200 codes (transformers' NllbTokenizer
list), macrolanguages included; an ambiguous language is refused naming its choices."""

from __future__ import annotations

import itertools
import string

import langcodes
import pytest
from langcodes.data_dicts import MACROLANGUAGES
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES as NLLB_CODES

from vanilla_transformer.inference.languages import Languages, iso_language

NLLB = Languages("nllb", tuple(NLLB_CODES))
# NLLB-200's code for the macrolanguages (and a few others whose code is not their ISO 639-1 one), from its model card
EXPECTED = {
    "ar": "arb_Arab",
    "zh": "zho_Hans",
    "zh-Hant": "zho_Hant",
    "zh-TW": "zho_Hant",
    "fa": "pes_Arab",
    "fa-AF": "prs_Arab",
    "ms": "zsm_Latn",
    "sw": "swh_Latn",
    "et": "est_Latn",
    "lv": "lvs_Latn",
    "uz": "uzn_Latn",
    "ne": "npi_Deva",
    "mn": "khk_Cyrl",
    "om": "gaz_Latn",
    "ps": "pbt_Arab",
    "sq": "als_Latn",
    "az": "azj_Latn",
    "az-Arab": "azb_Arab",
    "ku": "kmr_Latn",
    "ku-Arab": "ckb_Arab",
    "yi": "ydd_Hebr",
    "mg": "plt_Latn",
    "qu": "quy_Latn",
    "ay": "ayr_Latn",
    "or": "ory_Orya",
    "tl": "tgl_Latn",
    "id": "ind_Latn",
    "nb": "nob_Latn",
    "nn": "nno_Latn",
    "pt-BR": "por_Latn",
    "arb": "arb_Arab",
    "ARB_arab": "arb_Arab",
}


@pytest.mark.parametrize("language", sorted(EXPECTED))
def test_iso_and_bcp47_codes_resolve_to_nllbs_code(language):
    assert NLLB_CODES.count(EXPECTED[language]) == 1
    assert NLLB.resolve(language, "target") == EXPECTED[language]


def test_every_iso_639_1_language_of_nllb_resolves_to_one_of_its_codes():
    """Every two-letter code that names an NLLB language (as the language itself, or as the macrolanguage of its
    individual languages, by the IANA registry that langcodes ships) resolves to one of them or is refused naming
    them; each code's `iso_language`, which the server lists, resolves back to a code of that language."""
    resolved, ambiguous = 0, []
    for language in map("".join, itertools.product(string.ascii_lowercase, repeat=2)):
        if not langcodes.tag_is_valid(language):
            continue
        # a deprecated code may stand for a language in one script ("sh": Serbo-Croatian, sr-Latn)
        wanted = langcodes.Language.get(language)
        name = wanted.language
        of_language = {
            code
            for code in NLLB_CODES
            if name
            in (
                (tag := langcodes.Language.get(code.replace("_", "-"))).language,
                MACROLANGUAGES.get(tag.language or ""),
            )
            and wanted.script in (None, tag.script)
        }
        if not of_language:
            assert NLLB.choices(language) == (), language
            continue
        choices = NLLB.choices(language)
        assert choices and set(choices) <= of_language, (language, choices, of_language)
        if len(choices) == 1:
            resolved += 1
            continue
        ambiguous.append(language)
        with pytest.raises(ValueError) as refused:
            NLLB.resolve(language, "source")
        assert all(code in str(refused.value) for code in choices)
    # Norwegian is Bokmål and Nynorsk, neither of them dominant
    assert (resolved, ambiguous) == (140, ["no"])
    for code in NLLB_CODES:
        assert iso_language(NLLB.resolve(iso_language(code), "target")) == iso_language(code), code


def test_an_ambiguous_macrolanguage_is_refused_naming_its_choices():
    with pytest.raises(ValueError, match="'no' names several of the model's languages: nno_Latn, nob_Latn"):
        NLLB.resolve("no", "target")
    with pytest.raises(ValueError, match="the model has no source language 'xx'"):
        NLLB.resolve("xx", "source")
