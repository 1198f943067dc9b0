"""The languages of a multilingual model, read from its tokenizer, and the one place that puts a source and a
target language into what the model reads.

A model selects its languages in one of three ways (`Languages.style`):
  * "nllb" (`NllbTokenizer`, FLORES-200 codes such as ``fra_Latn``) and "m2m100" (`M2M100Tokenizer`, ISO 639 codes
    such as ``fr``, tokens ``__fr__``): the tokenizer marks the source with the source language's token (set
    through its ``src_lang``), and the target language's token is the decoder's forced first token
    (``forced_bos_token_id``);
  * "target-token" (OPUS-MT multi-target Marian models: tokens such as ``>>fra<<`` in the source vocabulary): the
    target language's token starts the source text; the source language is not marked.
A tokenizer with none of these has no `Languages` (a model of one language pair).

A language is given as the model's own code (``fra_Latn``, ``fr``, ``fra``), or for "target-token" also as the token
itself (``>>fra<<``), or by ISO 639 / BCP 47, macrolanguages included (``ar`` -> ``arb_Arab``); `Languages.code` maps it
(case-insensitively) to the model's code, `Languages.resolve` raises the one message for a language the model does
not have (`unknown_language`) or names ambiguously (``no``: ``nob_Latn`` or ``nno_Latn``).
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# the options that choose a multilingual model's languages (translate's keywords, the command line's flags)
LANGUAGE_OPTIONS = ("src_lang", "tgt_lang")
TARGET_TOKEN = re.compile(r"^>>(.+)<<$")
FLORES_CODE = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")
# setting a tokenizer's src_lang changes its special tokens: one thread at a time encodes with a chosen source
_SOURCE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Languages:
    """The languages of a multilingual model: its ``style`` (module docstring) and its ``codes``, in the
    tokenizer's order."""

    style: str
    codes: tuple[str, ...]

    def code(self, language: str) -> str | None:
        """The model's code for ``language``, None when the model has none or several (`choices`)."""
        choices = self.choices(language)
        return choices[0] if len(choices) == 1 else None

    def choices(self, language: str) -> tuple[str, ...]:
        """The model's codes that ``language`` names: one when it decides the code, several when it is ambiguous, none
        when the model does not have it. Its own code in any case (for "target-token" also the ``>>xxx<<`` token)
        names one; else the codes of the same language by ISO 639 / BCP 47 (``fr``, ``FR``, ``fra``, ``zh-Hant``,
        ``PT-BR``: `langcodes`), of the script given or else of the language's usual script (``zh`` ->
        ``zho_Hans``), of the region given where a code has one (``fa-AF`` -> ``prs_Arab``). A macrolanguage names its
        individual languages (ISO 639-3, `langcodes`' registry data): the language's own code first, else its
        dominant individual language (``ar`` -> ``arb_Arab``, ``fa`` -> ``pes_Arab``, ``ms`` -> ``zsm_Latn``), else
        all of them (``no`` -> ``nob_Latn``, ``nno_Latn``)."""
        if self.style == "target-token" and (match := TARGET_TOKEN.match(language)):
            language = match.group(1)
        if language in self.codes:
            return (language,)
        folded = {code.casefold(): code for code in self.codes}
        if language.casefold() in folded:
            return (folded[language.casefold()],)
        return _same_language(self.codes, language)

    def resolve(self, language: str, role: str) -> str:
        """The model's code for the ``role`` ("source" or "target") ``language``; `ValueError` naming the model's
        languages when it has none, and the choices when ``language`` names several."""
        choices = self.choices(language)
        if len(choices) > 1:
            raise ValueError(
                f"the {role} language {language!r} names several of the model's languages: {', '.join(choices)}; "
                "pass one of these codes"
            )
        if not choices:
            raise ValueError(unknown_language(self, language, role))
        return choices[0]

    @property
    def marks_source(self) -> bool:
        """Whether the model reads which language the source is in (the source language must be one of `codes`)."""
        return self.style != "target-token"


def _same_language(codes: tuple[str, ...], language: str) -> tuple[str, ...]:
    """The codes of ``codes`` that name ``language`` (a BCP 47 tag) by its ISO 639 language, script and region
    (`Languages.choices`); none when none does (or ``language`` is no tag)."""
    import langcodes
    from langcodes.data_dicts import MACROLANGUAGES

    try:
        wanted = langcodes.Language.get(language.replace("_", "-"))
    except (ValueError, LookupError):
        return ()
    if wanted.language is None:
        return ()
    tags = {code: _tag(code) for code in codes}
    same = [
        code
        for code, tag in tags.items()
        if wanted.language in (tag.language, MACROLANGUAGES.get(tag.language or ""))
    ]
    script = wanted.script or wanted.maximize().script
    found = [code for code in same if tags[code].script in (None, script)] or ([] if wanted.script else same)
    found = [code for code in found if tags[code].territory == wanted.territory] or found
    own = [
        code
        for code in found
        if tags[code].language == wanted.language and tags[code].territory in (None, wanted.territory)
    ]
    dominant = [code for code in found if tags[code].prefer_macrolanguage().language == wanted.language]
    return tuple(own or dominant or found)


def iso_language(code: str) -> str:
    """The ISO 639 language of a model code (``zho_Hans`` -> ``zh``, ``fra`` -> ``fr``, ``>>deu<<`` -> ``de``), the
    macrolanguage for its dominant individual language (``arb_Arab`` -> ``ar``, ``pes_Arab`` -> ``fa``): a code that
    `Languages.code` maps back to the same language; the code itself when it is no language tag."""
    match = TARGET_TOKEN.match(code)
    return _tag(match.group(1) if match else code).prefer_macrolanguage().language or code


def _tag(code: str):
    """A model code as a `langcodes.Language` (FLORES-200's ``zho_Hans`` is the tag ``zho-Hans``)."""
    import langcodes

    try:
        return langcodes.Language.get(code.replace("_", "-"))
    except (ValueError, LookupError):
        return langcodes.Language()


@functools.cache
def _identifier() -> Any:
    """py3langid's identifier (its model ships in its wheel), with probabilities normalised over its languages."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect_language(text: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
    """The ``candidates`` (ISO 639 codes) that ``text`` may be in, most likely first, each with its probability in
    percent among them, by py3langid (a naive Bayes model of byte n-grams over 97 languages, BSD licence, offline);
    empty when py3langid knows none of the candidates, or is not installed (the caller falls back to its own guess)."""
    try:
        identifier = _identifier()
    except ImportError:
        return []
    known = {iso_language(code): code for code in candidates if iso_language(code) in identifier.labels}
    if not known:
        return []
    ranked = [(known[label], float(p)) for label, p in identifier.rank(text) if label in known]
    total = sum(p for _, p in ranked) or 1.0
    return [(code, round(100.0 * p / total, 1)) for code, p in ranked]


# each tokenizer's `Languages` and the size of its vocabulary then: reading a whole vocabulary takes milliseconds,
# and every source encoded asks
_LANGUAGES: weakref.WeakKeyDictionary[Any, tuple[int, Languages | None]] = weakref.WeakKeyDictionary()


def model_languages(tokenizer: PreTrainedTokenizerBase) -> Languages | None:
    """The `Languages` of the model whose tokenizer is ``tokenizer``; None for a model of one language pair.
    Worked out once per tokenizer (again when tokens are added to it)."""
    size = len(tokenizer)
    known = _LANGUAGES.get(tokenizer)
    if known is not None and known[0] == size:
        return known[1]
    languages = _model_languages(tokenizer)
    _LANGUAGES[tokenizer] = (size, languages)
    return languages


def _model_languages(tokenizer: PreTrainedTokenizerBase) -> Languages | None:
    from transformers import M2M100Tokenizer, NllbTokenizer

    if isinstance(tokenizer, M2M100Tokenizer):
        return Languages("m2m100", tuple(tokenizer.lang_code_to_id))
    if isinstance(tokenizer, NllbTokenizer):
        special: Any = tokenizer.extra_special_tokens
        tokens = special.values() if isinstance(special, dict) else special or ()
        codes = tuple(str(token) for token in tokens if FLORES_CODE.match(str(token)))
        return Languages("nllb", codes) if codes else None
    codes = tuple(match.group(1) for token in tokenizer.get_vocab() if (match := TARGET_TOKEN.match(token)))
    return Languages("target-token", tuple(sorted(codes))) if codes else None


def shown_codes(codes: Sequence[str], limit: int = 12) -> str:
    """The first ``limit`` of ``codes``, and how many there are in all, for a message."""
    more = f", ... ({len(codes)} in all)" if len(codes) > limit else ""
    return ", ".join(codes[:limit]) + more


def unknown_language(languages: Languages, language: str, role: str) -> str:
    """The message for a ``role`` ("source" or "target") ``language`` that the model does not have."""
    return f"the model has no {role} language {language!r}; its languages: {shown_codes(languages.codes)}"


def resolve_languages(
    tokenizer: PreTrainedTokenizerBase, src_lang: str | None, tgt_lang: str | None
) -> tuple[str | None, str | None]:
    """``src_lang`` and ``tgt_lang`` as the model's codes (`Languages.code`); None where not given, and for a model
    of one pair. `ValueError` naming the model's languages for a code it does not have, and for a language given
    to a model of one pair."""
    languages = model_languages(tokenizer)
    if languages is None:
        given = [value for value in (src_lang, tgt_lang) if value is not None]
        if given:
            raise ValueError(
                f"src_lang/tgt_lang {', '.join(map(repr, given))} given, but the model translates one language pair "
                "(its tokenizer has no language codes); leave them out"
            )
        return None, None
    resolved = []
    for language, role in ((src_lang, "source"), (tgt_lang, "target")):
        if language is None or (role == "source" and not languages.marks_source):
            resolved.append(None)
            continue
        resolved.append(languages.resolve(language, role))
    return resolved[0], resolved[1]


def target_options(
    tokenizer: PreTrainedTokenizerBase, generation_config: Any, tgt_lang: str | None
) -> dict[str, Any]:
    """The generation options that select ``tgt_lang`` (a code `resolve_languages` returned): the forced first
    token of "nllb" and "m2m100" models; none for "target-token" models (their source carries it) and for models
    of one pair. Without ``tgt_lang``, the tokenizer's own ``tgt_lang`` or ``generation_config``'s
    ``forced_bos_token_id``; `ValueError` naming the languages when a forced-token model has neither."""
    languages = model_languages(tokenizer)
    if languages is None or not languages.marks_source:
        return {}
    if tgt_lang is None:
        saved = getattr(tokenizer, "tgt_lang", None)
        if saved is None and getattr(generation_config, "forced_bos_token_id", None) is not None:
            return {}
        tgt_lang = languages.code(saved) if saved is not None else None
        if tgt_lang is None:
            raise ValueError(
                "the model translates into several languages: pass tgt_lang (--tgt_lang), one of "
                + shown_codes(languages.codes)
            )
    return {"forced_bos_token_id": target_token_id(tokenizer, languages, tgt_lang)}


def check_languages(
    tokenizer: PreTrainedTokenizerBase, generation_config: Any, src_lang: str | None, tgt_lang: str | None
) -> None:
    """`ValueError` (the messages of `resolve_languages` and `target_options`) when the model cannot translate from
    ``src_lang`` into ``tgt_lang``: what an entry point checks before it reads any input."""
    target_options(tokenizer, generation_config, resolve_languages(tokenizer, src_lang, tgt_lang)[1])


def set_pair(tokenizer: PreTrainedTokenizerBase, source: str | None, target: str | None) -> None:
    """Make an "nllb" or "m2m100" tokenizer mark sources with ``source`` and targets (training labels) with
    ``target`` (ISO 639 or the model's codes: the languages of the training data), so that training, validation and
    the saved tokenizer's defaults use that pair; None leaves a side as it is. Other tokenizers are left as they are
    (an OPUS-MT multi-target model's data carries its ``>>xxx<<`` tokens). `ValueError` naming the model's languages
    for a language it does not have."""
    languages = model_languages(tokenizer)
    if languages is None or not languages.marks_source:
        return
    for language, role, attribute in ((source, "source", "src_lang"), (target, "target", "tgt_lang")):
        if language is not None:
            setattr(tokenizer, attribute, languages.resolve(language, role))


def target_token_id(tokenizer: PreTrainedTokenizerBase, languages: Languages, tgt_lang: str) -> int:
    """The id of the token that selects the target ``tgt_lang`` (a model code)."""
    if languages.style == "m2m100":
        return int(cast(Any, tokenizer).get_lang_id(tgt_lang))
    token = f">>{tgt_lang}<<" if languages.style == "target-token" else tgt_lang
    return int(tokenizer.convert_tokens_to_ids(token))  # pyright: ignore[reportArgumentType]


def target_language_tokens(tokenizer: PreTrainedTokenizerBase) -> dict[str, int]:
    """The tokens that start a translation into each of an "nllb" or "m2m100" model's languages (the forced first
    tokens) and their ids; empty for other models. `M2M100Tokenizer` leaves its ``__fr__`` tokens out of
    ``get_vocab()``."""
    languages = model_languages(tokenizer)
    if languages is None or not languages.marks_source:
        return {}
    ids = [target_token_id(tokenizer, languages, code) for code in languages.codes]
    return dict(zip(map(str, tokenizer.convert_ids_to_tokens(ids)), ids))


def without_target_token(output_ids: Any, options: dict[str, Any], pad_id: int) -> Any:
    """The (B, T) ``output_ids`` (decoder start first) with the forced target-language token that ``options``
    (`target_options`) asked for replaced by ``pad_id``, so that decoding the text leaves it out even where the
    tokenizer does not count it as special (M2M100's ``__fr__``)."""
    forced = options.get("forced_bos_token_id")
    if forced is None or output_ids.shape[1] < 2:
        return output_ids
    output_ids = output_ids.clone()
    column = output_ids[:, 1]
    column[column == forced] = pad_id
    return output_ids


def target_prefix(tokenizer: PreTrainedTokenizerBase, tgt_lang: str | None) -> list[str]:
    """The target tokens an engine that decodes from a given prefix (CTranslate2) starts with: the forced first
    token of "nllb" and "m2m100" models for ``tgt_lang`` (a model code; None: none)."""
    languages = model_languages(tokenizer)
    if tgt_lang is None or languages is None or not languages.marks_source:
        return []
    return [str(tokenizer.convert_ids_to_tokens(target_token_id(tokenizer, languages, tgt_lang)))]


@contextmanager
def source_side(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], src_lang: str | None, tgt_lang: str | None
) -> Iterator[list[str]]:
    """Within the block, ``tokenizer`` marks sources with ``src_lang`` ("nllb", "m2m100"; None: its own), and the
    texts it yields carry the ``>>tgt_lang<<`` token ("target-token"; None: as given). Codes as
    `resolve_languages` returns them. Other threads that encode for a model that marks its source wait for the block."""
    languages = model_languages(tokenizer)
    if languages is not None and languages.style == "target-token" and tgt_lang is not None:
        yield [f">>{tgt_lang}<< {text}" for text in texts]
        return
    if languages is None or not languages.marks_source:
        yield list(texts)
        return
    with _SOURCE_LOCK:
        saved = tokenizer.src_lang  # pyright: ignore[reportAttributeAccessIssue]
        if src_lang is not None:
            tokenizer.src_lang = src_lang  # pyright: ignore[reportAttributeAccessIssue]
        try:
            yield list(texts)
        finally:
            if src_lang is not None:
                tokenizer.src_lang = saved  # pyright: ignore[reportAttributeAccessIssue]


@contextmanager
def target_side(tokenizer: PreTrainedTokenizerBase, tgt_lang: str | None) -> Iterator[None]:
    """Within the block, an "nllb" or "m2m100" ``tokenizer`` marks targets (``text_target``) with ``tgt_lang`` (a
    code `resolve_languages` returned; None: its own), as the forced first token marks a translation into it. Other
    threads that encode for a model that marks its source wait for the block."""
    languages = model_languages(tokenizer)
    if tgt_lang is None or languages is None or not languages.marks_source:
        yield
        return
    with _SOURCE_LOCK:
        saved = tokenizer.tgt_lang  # pyright: ignore[reportAttributeAccessIssue]
        tokenizer.tgt_lang = tgt_lang  # pyright: ignore[reportAttributeAccessIssue]
        try:
            yield
        finally:
            tokenizer.tgt_lang = saved  # pyright: ignore[reportAttributeAccessIssue]
