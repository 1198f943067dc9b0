"""Markup transfer (inference/markup.py): documents cut into segments between block elements, and inline markup put
back into each segment's translation where a word alignment says. Most tests give the alignment by hand (a
translation that reorders or rewrites the words, with the links a model would give); the end-to-end tests use the
tiny copy model (tests/helpers/copy_task.py) and the command line."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

from vanilla_transformer.inference.alignment import WordAlignment, word_spans
from vanilla_transformer.inference.markup import TagRules, proportional_alignment, split_document


def aligned(links: list[tuple[int, int]], source: str, target: str) -> WordAlignment:
    """A hand-made alignment: ``links`` (source word, target word), weights 1 on the links."""
    weights = np.zeros((len(word_spans(target)), len(word_spans(source))), dtype=np.float32)
    for i, j in links:
        weights[j, i] = 1.0
    return WordAlignment(sorted(links), weights)


def identity(text: str) -> WordAlignment:
    count = len(word_spans(text))
    return aligned([(i, i) for i in range(count)], text, text)


def copied(document: str) -> str:
    """``document`` rendered with each segment translated as itself, word i aligned to word i."""
    split = split_document(document)
    texts = [segment.text for segment in split.segments]
    return split.render(texts, [identity(text) for text in texts])


class _Checker(HTMLParser):
    """Fails on an end tag that does not close the element open last (void elements need none)."""

    VOID = {
        "img",
        "br",
        "hr",
        "input",
        "meta",
        "link",
        "wbr",
        "source",
        "area",
        "col",
        "embed",
        "param",
        "track",
    }

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()


def well_formed(document: str) -> bool:
    checker = _Checker()
    checker.feed(document)
    checker.close()
    return not checker.open


def tags(document: str) -> list[str]:
    """The tags of ``document`` as written, sorted."""
    return sorted(re.findall(r"<[^>]*>", document))


@pytest.mark.parametrize(
    "document",
    [
        '<p>In the beginning <b>God</b> created the <a href="/heaven?a=1&amp;b=2">heavens</a> and the earth.</p>',
        "<ul><li>one <i>two <u>three</u></i> four</li><li>five</li></ul>\n<p>six &lt;seven&gt; &amp; eight</p>",
        "plain text without markup",
        '<div><h1>Title</h1><p>A <span class="x">nested <em>inline</em> run</span>.<br>Next line</p></div>',
        "<table><tr><td>cell <b>one</b></td><td>cell two</td></tr></table>",
        '<!DOCTYPE html><div class="a">起初 <b>神</b>&amp;人<script>var x = "<b>";</script>'
        "<?xml-stylesheet x?><!-- c --></div> \n",
    ],
)
def test_a_copy_with_the_identity_alignment_gives_the_document_back(document):
    assert copied(document) == document


def test_segments_are_the_text_between_block_elements_whitespace_collapsed():
    document = (
        "<html><head><title>The title</title><style>p { color: red }</style></head><body>\n"
        "  <p>First\n     paragraph with <b>bold\ntext</b>,</p>\n"
        "  <p>line one<br>line two</p><!-- a comment -->\n"
        "  <div><p>inside</p> after the block</div>\n"
        "  <script>var s = '<b>not text</b>';</script><pre>  kept   as is </pre>\n"
        "</body></html>"
    )
    split = split_document(document)
    assert [s.text for s in split.segments] == [
        "The title",
        "First paragraph with bold text,",
        "line one",
        "line two",
        "inside",
        "after the block",
    ]
    rendered = split.render(
        [s.text.upper() for s in split.segments], [identity(s.text) for s in split.segments]
    )
    # whitespace around a segment, everything between segments and the kept elements are written as they are
    assert "<style>p { color: red }</style>" in rendered and "<pre>  kept   as is </pre>" in rendered
    assert "<script>var s = '<b>not text</b>';</script>" in rendered and "<!-- a comment -->" in rendered
    assert "<p>\n" not in rendered and "  <p>FIRST PARAGRAPH WITH <b>BOLD TEXT</b>,</p>\n" in rendered
    assert (
        "<p>LINE ONE<br>LINE TWO</p>" in rendered and "<div><p>INSIDE</p> AFTER THE BLOCK</div>" in rendered
    )
    assert well_formed(rendered) and tags(rendered) == tags(document)


def test_inline_elements_follow_their_words_when_the_translation_reorders_them():
    document = '<p>the <b>red</b> house of <a href="/x">my father</a></p>'
    split = split_document(document)
    [segment] = split.segments
    assert segment.text == "the red house of my father"
    # French-like order: la maison rouge de mon père
    target = "la maison rouge de mon père"
    links = [(0, 0), (2, 1), (1, 2), (3, 3), (4, 4), (5, 5)]
    assert split.render([target], [aligned(links, segment.text, target)]) == (
        '<p>la maison <b>rouge</b> de <a href="/x">mon père</a></p>'
    )
    # the link's words come first in the translation: the link moves with them
    target = "mon père a la maison rouge"
    links = [(4, 0), (5, 1), (3, 2), (0, 3), (2, 4), (1, 5)]
    assert split.render([target], [aligned(links, segment.text, target)]) == (
        '<p><a href="/x">mon père</a> a la maison <b>rouge</b></p>'
    )


def test_an_element_covers_its_childrens_words_and_small_gaps():
    document = "<p>x <b>one <i>two</i> three</b> y</p>"
    split = split_document(document)
    [segment] = split.segments
    # "two" comes out after "three" and beside an unaligned word: b still holds i, and the gap inside is filled
    target = "x one filler three two y"
    links = [(0, 0), (1, 1), (3, 3), (2, 4), (4, 5)]
    assert split.render([target], [aligned(links, segment.text, target)]) == (
        "<p>x <b>one filler three <i>two</i></b> y</p>"
    )


def test_an_element_whose_words_the_translation_moves_apart_goes_around_its_main_part():
    document = "<p><b>a b c</b> d e f g h</p>"
    split = split_document(document)
    [segment] = split.segments
    target = "a b d e f g h c"
    links = [(0, 0), (1, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 6), (2, 7)]
    assert split.render([target], [aligned(links, segment.text, target)]) == "<p><b>a b</b> d e f g h c</p>"


def test_crossing_elements_are_closed_and_reopened_so_the_output_is_well_formed():
    document = "<p><b>one two</b> <i>three four</i></p>"
    split = split_document(document)
    [segment] = split.segments
    # the translation interleaves the two elements' words
    target = "one three two four"
    links = [(0, 0), (2, 1), (1, 2), (3, 3)]
    rendered = split.render([target], [aligned(links, segment.text, target)])
    assert well_formed(rendered)
    assert re.sub(r"<[^>]*>", "", rendered) == target
    assert rendered.count("<b>") >= 1 and rendered.count("<i>") >= 1


def test_an_element_no_link_reaches_goes_around_the_word_that_attends_most_to_it():
    document = "<p>a <b>b</b> c</p>"
    split = split_document(document)
    [segment] = split.segments
    target = "x y z"
    alignment = aligned([(0, 0), (2, 2)], segment.text, target)
    alignment.weights[1, 1] = 0.7
    alignment.weights[2, 1] = 0.2
    assert split.render([target], [alignment]) == "<p>x <b>y</b> z</p>"


def test_markup_without_words_follows_the_word_it_touches_or_precedes_the_next():
    document = '<p>one <img src="a.png"> two<a id="anchor"></a> three<!-- note --></p>'
    split = split_document(document)
    [segment] = split.segments
    assert segment.text == "one two three"
    target = "three two one"
    links = [(0, 2), (1, 1), (2, 0)]
    rendered = split.render([target], [aligned(links, segment.text, target)])
    # the anchor and the comment touch the end of "two" and "three"; the image stands before "two"
    assert rendered == '<p>three<!-- note --> <img src="a.png">two<a id="anchor"></a> one</p>'


def test_do_not_translate_elements_are_written_as_they_are():
    document = (
        '<p>Call <code>run()</code> on <span translate="no">Acme Cloud</span> and '
        '<em class="brand notranslate">VTX</em> now</p>'
    )
    split = split_document(document)
    [segment] = split.segments
    # the model reads their words in context
    assert segment.text == "Call run() on Acme Cloud and VTX now"
    target = "Appelez RUN() sur ACME NUAGE et vtx maintenant"
    links = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
    assert split.render([target], [aligned(links, segment.text, target)]) == (
        '<p>Appelez <code>run()</code> sur <span translate="no">Acme Cloud</span> et '
        '<em class="brand notranslate">VTX</em> maintenant</p>'
    )
    # whitespace inside a kept element stays inside it
    trailing = "<p>Run <code>make all </code></p>"
    assert copied(trailing) == trailing
    # a block marked translate="no" is kept whole and is no segment
    kept = '<div translate="no"><p>Name</p></div><p>text</p>'
    assert [s.text for s in split_document(kept).segments] == ["text"]
    assert copied(kept) == kept


def test_broken_markup_keeps_every_tag_and_closes_what_it_opened():
    # an inline element left open, a stray end tag, a paragraph closed by the next one
    document = "<p>one <b>two three</p><p>four</i> five<p>six"
    split = split_document(document)
    assert [s.text for s in split.segments] == ["one two three", "four five", "six"]
    rendered = copied(document)
    assert rendered == "<p>one <b>two three</b></p><p>four</i> five<p>six"


def test_xml_tags_keep_their_case_and_unknown_elements_are_inline():
    document = '<Doc><Title>The <Term id="t1">Lord</Term> speaks</Title></Doc>'
    split = split_document(document)
    assert [s.text for s in split.segments] == ["The Lord speaks"]
    target = "Der Herr spricht"
    rendered = split.render([target], [aligned([(0, 0), (1, 1), (2, 2)], "The Lord speaks", target)])
    assert rendered == '<Doc><Title>Der <Term id="t1">Herr</Term> spricht</Title></Doc>'


def test_the_callers_tag_rules_split_join_and_keep():
    """`TagRules` (DeepL's splitting_tags, non_splitting_tags, ignore_tags): named elements end a segment, never
    end one (an HTML block element included), or are kept as written; names in any case."""
    document = "<doc><s>One two.</s><s>Three <x>four</x> five.</s><p>six <Keep>seven</Keep></p></doc>"
    assert [s.text for s in split_document(document).segments] == ["One two.Three four five.", "six seven"]
    rules = TagRules.of(splitting=["S", " "], non_splitting=["p"], ignored=["keep"])
    split = split_document(document, rules)
    assert [s.text for s in split.segments] == ["One two.", "Three four five.", "six seven"]
    texts = [s.text for s in split.segments]
    assert split.render(texts, [identity(text) for text in texts]) == document
    targets = ["Eins zwei.", "Drei vier fünf.", "sechs sieben"]
    rendered = split.render(targets, [identity(text) for text in targets])
    assert (
        rendered == "<doc><s>Eins zwei.</s><s>Drei <x>vier</x> fünf.</s><p>sechs <Keep>seven</Keep></p></doc>"
    )
    # a block element never splitting: its text joins the text around it
    joined = split_document("<div>a <p>b</p> c</div>", TagRules.of(non_splitting=["p", "div"]))
    assert [s.text for s in joined.segments] == ["a b c"]


def test_text_is_escaped_and_chinese_characters_are_words():
    document = "<p>起初<b>神</b>创造天地</p>"
    split = split_document(document)
    [segment] = split.segments
    assert segment.text == "起初神创造天地"
    target = "In the beginning God created <heaven> & earth"
    links = [(0, 2), (1, 2), (2, 3), (3, 4), (4, 4), (5, 5), (6, 7)]
    assert split.render([target], [aligned(links, segment.text, target)]) == (
        "<p>In the beginning <b>God</b> created &lt;heaven&gt; &amp; earth</p>"
    )


def test_proportional_alignment_places_tags_by_relative_position():
    alignment = proportional_alignment(4, 8)
    assert [i for i, _ in alignment.links] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert alignment.weights.shape == (8, 4)
    document = "<p>a b <b>c d</b></p>"
    split = split_document(document)
    target = "1 2 3 4 5 6 7 8"
    assert split.render([target], [None]) == "<p>1 2 3 4 <b>5 6 7 8</b></p>"


def test_render_needs_one_translation_and_alignment_per_segment():
    split = split_document("<p>a</p><p>b</p>")
    with pytest.raises(ValueError, match="2 segments"):
        split.render(["x"], [None])


def test_whitespace_only_and_empty_documents_come_back_as_they_are():
    for document in ("", "   \n", "<p>  </p>\n<br/>", "<!DOCTYPE html><html><body></body></html>"):
        split = split_document(document)
        assert split.segments == [] and split.render([], []) == document


@pytest.fixture(scope="module")
def copy_model():
    from helpers.copy_task import train_copy_model

    return train_copy_model()


def test_translate_document_places_the_markup_by_the_models_own_alignments(copy_model):
    from vanilla_transformer.inference.alignment import align_words
    from vanilla_transformer.inference.documents import translate_document

    model, tokenizer = copy_model
    document = "<p>w1 <b>w2 w3</b> w4</p>\n<ul><li>w5 <a href='#w6'>w6</a> w8 w2</li><li>w0 w4 <i>w9</i> w1 w3</li></ul>"
    translated = translate_document(model, tokenizer, document)
    split = split_document(document)
    texts = [segment.text for segment in split.segments]
    from vanilla_transformer.inference import translate_lines

    outputs = translate_lines(model, tokenizer, texts)
    alignments = align_words(model, tokenizer, texts, outputs)
    # the document of the model's own translations and alignments, rendered segment by segment
    assert translated == split.render(
        outputs, [a if s.has_markup else None for a, s in zip(alignments, split.segments)]
    )
    # the copy model copies, and where its alignment is the diagonal the document comes back as it was
    assert outputs == texts
    diagonal = [a.links == [(i, i) for i in range(len(word_spans(t)))] for a, t in zip(alignments, texts)]
    assert re.sub(r"<[^>]*>", "", translated) == re.sub(r"<[^>]*>", "", document)
    assert well_formed(translated) and tags(translated) == tags(document)
    if all(diagonal):
        assert translated == document


def test_translate_format_html_on_the_command_line(copy_model, tmp_path, monkeypatch, capsys):
    import io
    import sys

    from vanilla_transformer.commands import translate

    model, tokenizer = copy_model
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    document = "<html><body><p>w1 <i>w2</i> w3</p>\n</body></html>\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(document.encode())))
    assert translate.main(["--model", str(tmp_path / "model"), "--format", "html", "--num_beams", "1"]) == 0
    out = capsys.readouterr().out
    assert re.sub(r"<[^>]*>", "", out) == re.sub(r"<[^>]*>", "", document)
    assert tags(out) == tags(document) and well_formed(out)
    for extra in (["--alignments"], ["--output_format", "jsonl"], ["--num_return_sequences", "2"]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(document.encode())))
        assert translate.main(["--model", str(tmp_path / "model"), "--format", "html", *extra]) == 2
        assert "--format html writes one translated document" in capsys.readouterr().err


def test_an_engine_without_attention_places_the_markup_by_relative_position(copy_model, monkeypatch):
    from vanilla_transformer.inference import alignment, translate_lines
    from vanilla_transformer.inference.documents import translate_document

    def no_attention(model):
        raise ValueError("--engine onnx cannot return attention weights")

    def never(*args, **kwargs):
        raise AssertionError("aligned although the engine returns no attention")

    model, tokenizer = copy_model
    monkeypatch.setattr(alignment, "check_alignable", no_attention)
    monkeypatch.setattr(alignment, "align_words", never)
    document = "<p>w0 w4 w9 <b>w1 w3</b></p>"
    [output] = translate_lines(model, tokenizer, ["w0 w4 w9 w1 w3"])
    expected = split_document(document).render([output], [None])
    assert translate_document(model, tokenizer, document) == expected


def test_translate_plans_asks_once_per_call_whether_the_engine_returns_attention(copy_model, monkeypatch):
    from vanilla_transformer.inference import alignment
    from vanilla_transformer.inference.documents import DocumentPlan, translate_plans

    asked = []

    def no_attention(model):
        asked.append(model)
        raise ValueError("--engine onnx cannot return attention weights")

    model, tokenizer = copy_model
    monkeypatch.setattr(alignment, "check_alignable", no_attention)
    plans = [DocumentPlan.of(f"<p>w{i % 10} <b>w{(i + 1) % 10}</b></p>", markup=True) for i in range(20)]
    groups = []
    # batch_size 1: groups of 8 sentences, so the 20 one-sentence plans go in 3 groups
    rendered = translate_plans(
        model, tokenizer, plans, 1, lambda done, total: groups.append(done), num_beams=1
    )
    assert groups == [8, 16, 20] and all("<b>" in document for document in rendered)
    assert len(asked) == 1


@pytest.mark.parametrize("weak, expected", [(0.3, "<p>w <b>x</b> y z</p>"), (0.6, "<p>w <b>x y</b> z</p>")])
def test_an_elements_words_are_where_both_directions_agree_grown_into_strong_neighbours(weak, expected):
    document = "<p>a <b>b</b> c</p>"
    split = split_document(document)
    target = "w x y z"
    # y is linked to b as well (its most attended source word), but b attends most to x
    alignment = aligned([(0, 0), (1, 1), (1, 2), (2, 3)], "a b c", target)
    alignment.weights[1, 1], alignment.weights[2, 1] = 0.9, weak
    assert split.render([target], [alignment]) == expected


def test_an_element_whose_words_a_kept_element_replaces_is_still_written():
    document = "<p><b>one</b> <code>two</code></p>"
    split = split_document(document)
    target = "X"
    rendered = split.render([target], [aligned([(0, 0), (1, 0)], "one two", target)])
    assert "<code>two</code>" in rendered and "<b>" in rendered and "</b>" in rendered
    assert tags(rendered) == tags(document) and well_formed(rendered)


def test_random_well_formed_documents_keep_every_tag_and_stay_well_formed():
    import random

    rng = random.Random(0)
    inline = ["b", "i", "a href='x'", "span class='notranslate'", "code", "u", "X-Y"]
    words = ["alpha", "beta", "gamma", "起初", "神", "&amp;", "x.", "(y)"]

    def nested(depth: int) -> str:
        out = []
        for _ in range(rng.randint(0, 4)):
            r = rng.random()
            if r < 0.5:
                out.append(rng.choice(words) + rng.choice([" ", ""]))
            elif r < 0.8 and depth < 4:
                tag = rng.choice(inline)
                out.append(f"<{tag}>{nested(depth + 1)}</{tag.split()[0]}>")
            elif r < 0.9 and depth < 4:
                tag = rng.choice(["p", "div", "li"])
                out.append(f"<{tag}>{nested(depth + 1)}</{tag}>")
            else:
                out.append(rng.choice(["<img src='y'>", "<br>", "<!-- c -->"]))
        return "".join(out)

    for n in range(300):
        document = nested(0)
        split = split_document(document)
        translations, alignments = [], []
        for segment in split.segments:
            # a shuffled translation, each target word linked to a random source word
            shuffled = segment.text.split()
            rng.shuffle(shuffled)
            target = " ".join(shuffled)
            count_source, count_target = len(word_spans(segment.text)), len(word_spans(target))
            links = sorted({(rng.randrange(count_source), j) for j in range(count_target)})
            weights = np.random.default_rng(n).random((count_target, count_source)).astype(np.float32)
            translations.append(target)
            alignments.append(WordAlignment(links, weights))
        rendered = split.render(translations, alignments)
        assert well_formed(rendered), (document, rendered)
        opening = [tag for tag in tags(document) if not tag.startswith("</")]
        written = [tag for tag in tags(rendered) if not tag.startswith("</")]
        assert all(written.count(tag) >= opening.count(tag) for tag in opening), (document, rendered)


def test_a_construct_left_open_takes_the_rest_of_the_document_as_markup():
    """An unclosed tag, quoted attribute value or comment takes the rest of the document as markup written back as
    it is (as a browser reads it), in one pass however many of them follow."""
    for rest in ("<a title='x>world</p>", "<!-- world</p>", "<b", "</b", "<a b='" * 2000):
        document = split_document("<p>Hello " + rest)
        assert [segment.text for segment in document.segments] == ["Hello"], rest[:40]
        rendered = document.render(["Hallo"], [None])
        assert rendered.startswith("<p>Hallo") and rest in rendered, rendered[:80]


def test_nesting_deeper_than_the_limit_is_refused():
    from vanilla_transformer.inference.markup import MarkupTooDeep

    assert split_document("<p>" + "<b>" * 3 + "Hello" + "</b>" * 3, max_depth=4).segments[0].text == "Hello"
    # unclosed elements count as open, closed ones do not
    assert split_document("<b>a</b>" * 50, max_depth=1).segments[0].text == "a" * 50
    for deep in ("<p>" + "<b>" * 4 + "Hello", "<p>" + "<b>" * 4 + "Hello" + "</b>" * 4 + "</p>"):
        with pytest.raises(MarkupTooDeep, match="more than 4 elements deep") as refused:
            split_document(deep, max_depth=4)
        assert refused.value.limit == 4
