"""The document plan (inference/documents.py) without a model: what it hands out to translate and align, and how it
puts the translations it is given back together (hand-made translations and alignments make each test an exact
specification). That the command line and the server drive it alike is tests/serving/test_against_the_cli.py."""

from __future__ import annotations

import numpy as np
import pytest

from vanilla_transformer.inference.alignment import WordAlignment, word_spans
from vanilla_transformer.inference.documents import DocumentPlan
from vanilla_transformer.inference.markup import split_document


def identity(source: str, target: str) -> WordAlignment:
    """Word i of ``target`` aligned to word i of ``source`` (weights 1 on the links)."""
    count = min(len(word_spans(source)), len(word_spans(target)))
    weights = np.zeros((len(word_spans(target)), len(word_spans(source))), dtype=np.float32)
    for i in range(count):
        weights[i, i] = 1.0
    return WordAlignment([(i, i) for i in range(count)], weights)


def test_a_plain_text_is_one_sentence_or_its_sentences():
    assert DocumentPlan.of("One. Two.").sentences == ["One. Two."]
    plan = DocumentPlan.of("One. Two.\nThree.", split_sentences=True, language="en")
    assert plan.sentences == ["One.", "Two.", "Three."]
    translated = plan.translated([["Eins.", "Ein."], ["Zwei."], ["Drei."]])
    # hypothesis k of the whole joins hypothesis k of each sentence (its last when it has fewer), line breaks kept
    assert translated.render() == ["Eins. Zwei.\nDrei.", "Ein. Zwei.\nDrei."]
    assert translated.pairs(best_only=True) == [("One.", "Eins."), ("Two.", "Zwei."), ("Three.", "Drei.")]
    assert len(translated.pairs()) == 6
    with pytest.raises(ValueError, match="2 n-best lists for 3 sentences"):
        plan.translated([["Eins."], ["Zwei."]])


def test_a_plain_texts_alignment_is_its_sentences_numbered_over_the_text():
    plan = DocumentPlan.of("a b. c d.", split_sentences=True, language="en")
    translated = plan.translated([["x y."], ["z w."]])
    found = translated.alignment([identity(s, t) for s, t in translated.pairs(best_only=True)])
    assert sorted(found.links) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_a_document_hands_out_its_segments_and_aligns_only_those_with_markup():
    document = "<h1>Title here</h1><p>Some <b>bold</b> words.</p><p>Plain.</p>"
    plan = DocumentPlan.of(document, markup=True)
    assert plan.pieces == ("Title here", "Some bold words.", "Plain.")
    assert plan.sentences == list(plan.pieces)
    translated = plan.translated([["TITLE HERE"], ["SOME BOLD WORDS."], ["PLAIN."]])
    assert translated.pairs() == [("Some bold words.", "SOME BOLD WORDS.")]
    rendered = translated.render([identity("Some bold words.", "SOME BOLD WORDS.")])
    assert rendered == ["<h1>TITLE HERE</h1><p>SOME <b>BOLD</b> WORDS.</p><p>PLAIN.</p>"]
    # the same as the document rendered directly with that alignment
    direct = split_document(document).render(
        ["TITLE HERE", "SOME BOLD WORDS.", "PLAIN."],
        [None, identity("Some bold words.", "SOME BOLD WORDS."), None],
    )
    assert rendered == [direct]
    with pytest.raises(ValueError, match="2 alignments for 1"):
        translated.render([identity("a", "b")] * 2)
    with pytest.raises(ValueError, match="call render"):
        translated.alignment([])


def test_a_documents_nbest_puts_hypothesis_k_of_each_segment_in_place():
    plan = DocumentPlan.of("<p>One <i>two</i>.</p><p>Three.</p>", markup=True)
    translated = plan.translated([["EINS <ZWEI>.", "UNO DOS."], ["DREI."]])
    pairs = translated.pairs()
    assert pairs == [("One two.", "EINS <ZWEI>."), ("One two.", "UNO DOS.")]
    rendered = translated.render([identity(*pair) for pair in pairs])
    # translations are escaped as text; the second segment's one hypothesis stands in both documents
    assert rendered == [
        "<p>EINS <i>&lt;ZWEI&gt;</i>.</p><p>DREI.</p>",
        "<p>UNO <i>DOS</i>.</p><p>DREI.</p>",
    ]
    # without alignments (an engine without attention) the markup is placed by relative position
    assert translated.render()[1] == "<p>UNO <i>DOS</i>.</p><p>DREI.</p>"


def test_a_document_segment_is_cut_into_sentences_and_aligned_sentence_by_sentence():
    plan = DocumentPlan.of(
        "<p>One two. <b>Three</b> four.</p>", markup=True, split_sentences=True, language="en"
    )
    assert plan.pieces == ("One two. Three four.",)
    assert plan.sentences == ["One two.", "Three four."]
    translated = plan.translated([["Eins zwei."], ["Drei vier."]])
    pairs = translated.pairs()
    assert pairs == [("One two.", "Eins zwei."), ("Three four.", "Drei vier.")]
    assert translated.render([identity(*pair) for pair in pairs]) == ["<p>Eins zwei. <b>Drei</b> vier.</p>"]
