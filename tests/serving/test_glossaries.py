"""DeepL's glossary API driven by the `deepl` SDK: create (TSV entries, and CSV), list, get, entries, delete, the
language pairs, and ``translate_text(..., glossary=...)`` whose output holds every term; each key sees only its own
glossaries; the bounds on their count and size are refusals in DeepL's shape."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")
deepl = pytest.importorskip("deepl")


@pytest.fixture(scope="module")
def server(served_folder, tmp_path_factory):
    """A server with two keys over the tiny zh -> en model, at most 2 glossaries a key of at most 3 entries."""
    from helpers.serving import served_app, with_card

    from vanilla_transformer.serving import Limits, start_in_thread

    folder = with_card(served_folder, tmp_path_factory.mktemp("glossaries") / "tiny-zh-en", ("zh", "en"))
    limits = Limits(
        max_texts=8, max_request_bytes=4096, max_new_tokens=20, max_glossaries=2, max_glossary_entries=3
    )
    app = served_app(folder, max_wait_ms=5, limits=limits, api_keys=frozenset({"key-one", "key-two"}))
    with start_in_thread(app) as running:
        yield running.url


def test_glossary_life_and_translation(server, served_sources):
    one = deepl.Translator("key-one", server_url=server)
    two = deepl.Translator("key-two", server_url=server)
    pairs = one.get_glossary_languages()
    assert [(p.source_lang, p.target_lang) for p in pairs] == [("zh", "en")]

    texts = served_sources[:3]
    terms = {texts[0][:2]: "light", texts[1][:2]: "water", texts[2][:2]: "bread"}
    glossary = one.create_glossary("terms", "ZH", "EN-US", terms)
    assert (glossary.name, glossary.source_lang, glossary.target_lang, glossary.entry_count) == (
        "terms",
        "ZH",
        "EN",
        3,
    )
    assert [g.glossary_id for g in one.list_glossaries()] == [glossary.glossary_id]
    assert one.get_glossary(glossary.glossary_id).name == "terms"
    assert one.get_glossary_entries(glossary) == terms

    results = one.translate_text(texts, source_lang="ZH", target_lang="EN-US", glossary=glossary)
    for result, term in zip(results, terms.values()):
        assert term in result.text, (term, result.text)
    plain = [r.text for r in one.translate_text(texts, source_lang="ZH", target_lang="EN-US")]
    assert not all(term in text for text, term in zip(plain, terms.values()))

    # a document file with the same glossary (POST /v2/document with glossary_id): every term in its line
    out = io.BytesIO()
    one.translate_document(
        "\n".join(texts).encode(),
        out,
        source_lang="ZH",
        target_lang="EN-US",
        glossary=glossary,
        filename="terms.txt",
    )
    lines = out.getvalue().decode().split("\n")
    assert len(lines) == len(texts)
    for line, term in zip(lines, terms.values()):
        assert term in line, (term, line)

    # another key sees none of them, and cannot use or delete them
    assert two.list_glossaries() == []
    with pytest.raises(deepl.GlossaryNotFoundException):
        two.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="not found"):
        two.translate_text(texts[0], source_lang="ZH", target_lang="EN-US", glossary=glossary.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        two.delete_glossary(glossary.glossary_id)

    from_csv = one.create_glossary_from_csv(
        "csv", "ZH", "EN", f'"{texts[0][:2]}",light\n{texts[1][:2]},water,zh,en\n'
    )
    assert one.get_glossary_entries(from_csv) == {texts[0][:2]: "light", texts[1][:2]: "water"}
    # bounds: a key's third glossary (400), a glossary over 3 entries (413), malformed entries (400)
    with pytest.raises(deepl.DeepLException, match="Too many glossaries") as refused:
        one.create_glossary("third", "ZH", "EN", {"a": "b"})
    assert refused.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException, match="max_glossary_entries") as refused:
        two.create_glossary("big", "ZH", "EN", {f"s{i}": f"t{i}" for i in range(4)})
    assert refused.value.http_status_code == 413
    with pytest.raises(deepl.DeepLException, match="line 1"):
        two.create_glossary_from_csv("bad", "ZH", "EN", "one,two,three\n")
    with pytest.raises(deepl.DeepLException, match="language pair"):
        two.create_glossary("fr", "DE", "FR", {"a": "b"})

    one.delete_glossary(glossary)
    assert [g.glossary_id for g in one.list_glossaries()] == [from_csv.glossary_id]
    with pytest.raises(deepl.GlossaryNotFoundException):
        one.get_glossary_entries(glossary)
