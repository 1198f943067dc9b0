"""Protected spans (`inference.protected`): what counts as one, and that each comes out exactly once, as written,
inside the element that held it, whatever the translation: a faithful one, one that drops the span, copies it twice,
is empty, or is noise, placed by an alignment or by relative position."""

from __future__ import annotations

import numpy as np
import pytest

from vanilla_transformer.inference.alignment import WordAlignment, word_spans
from vanilla_transformer.inference.documents import DocumentPlan
from vanilla_transformer.inference.protected import protected_spans, split_protected

KINDS = {
    "url": ["https://example.org/a?b=1&c=2", "www.example.org/x", "ftp://host/file.txt"],
    "email": ["alice@example.org", "bob.smith+tag@mail.example.co.uk"],
    "mention": ["@alice", "@alice@example.social"],
    "hashtag": ["#rust", "#café2024"],
    "code": ["`pip install x`", "``a ` b``"],
    "placeholder": ["{name}", "{0}", "{}", "{count:>3}", "{{user}}", "%s", "%d", "%(name)s", "%1$s", "%.2f"],
    "number": ["5 km", "3.5GB", "20 %", "$12", "100 km/h", "37°C"],
}
# translations of "w0 w1 ... SPAN ... w7" a model might write
NOISE = ["", "a", "un deux trois quatre cinq six sept huit neuf dix onze", "这是一个测试"]


@pytest.mark.parametrize("kind", KINDS)
def test_spans_of_each_kind(kind):
    for span in KINDS[kind]:
        text = f"Then {span}, and more."
        found = [(s.kind, text[s.begin : s.end]) for s in protected_spans(text)]
        assert found == [(kind, span)], (span, found)


def test_what_is_not_a_span():
    for text in ["at 5 o'clock", "C# and F#", "ticket #12", "e.g. end.Next", "a@b", "{ not one }"]:
        assert [text[s.begin : s.end] for s in protected_spans(text)] == [], text
    # a percentage is a number with its unit, never a printf conversion ("% o")
    assert [(s.kind, s.begin, s.end) for s in protected_spans("50% of them")] == [("number", 0, 3)]
    # a URL leaves the sentence's punctuation and the bracket around it, keeps a bracket of its own
    text = "See (https://en.wikipedia.org/wiki/Rust_(language)). Or https://x.org/a."
    assert [text[s.begin : s.end] for s in protected_spans(text)] == [
        "https://en.wikipedia.org/wiki/Rust_(language)",
        "https://x.org/a",
    ]


def _alignments(plan, translations, rng):
    """A random alignment for each pair the plan aligns (a model whose alignment is noise)."""
    pairs = plan.pairs() if plan.plan.document is not None else plan.guard_pairs()
    found = []
    for source, target in pairs:
        s, t = len(word_spans(source)), len(word_spans(target))
        links = sorted({(int(rng.integers(s)), j) for j in range(t)}) if s else []
        found.append(WordAlignment(links, rng.random((t, s)).astype(np.float32)))
    return found


def _outputs(span):
    return [*NOISE, f"un {span} deux", f"{span} un {span} deux {span}", f"un deux {span[: len(span) // 2]}"]


@pytest.mark.parametrize("kind", KINDS)
def test_plain_text_keeps_each_span_once(kind):
    rng = np.random.default_rng(0)
    for span in KINDS[kind]:
        text = f"The people said that {span} is here. Then they left."
        plan = DocumentPlan.of(text, split_sentences=True, language="en")
        for output in _outputs(span):
            translated = plan.translated([[output], ["fin"]])
            for alignments in (None, _alignments(translated, None, rng)):
                result = translated.guarded(alignments).render()[0]
                assert result.count(span) == 1, (span, output, result)
        raw = DocumentPlan.of(text, split_sentences=True, language="en", protect=False)
        assert span not in raw.translated([["un"]] * len(raw.sentences)).render()[0]


@pytest.mark.parametrize("kind", KINDS)
def test_html_keeps_each_span_once_inside_its_element(kind):
    from html import escape

    rng = np.random.default_rng(1)
    for span in KINDS[kind]:
        written = escape(span, quote=False)
        document = f'<p>The people <b>said that <i class="x">{written}</i> is</b> here.</p>'
        plan = DocumentPlan.of(document, markup=True)
        for output in _outputs(span):
            translated = plan.translated([[output]])
            for alignments in (None, _alignments(translated, None, rng)):
                result = translated.render(alignments)[0]
                kept = f'<i class="x">{written}</i>'
                assert result.count(written) == 1 and result.count(kept) == 1, (span, output, result)
                assert result.index("<b>") < result.index(kept) < result.index("</b>"), result


MASTODON = (
    '<p>Hello <span class="h-card"><a href="https://example.social/@alice" class="u-url mention">@<span>alice'
    '</span></a></span> see <a href="https://example.org/x" rel="nofollow noopener" translate="no">'
    '<span class="invisible">https://</span><span class="">example.org/x</span></a> '
    '<a href="https://example.social/tags/rust" class="mention hashtag" rel="tag">#<span>rust</span></a></p>'
)


def test_mastodon_and_discourse_posts():
    """The mention's and the hashtag's markup are kept whole (Discourse's mention anchor too), once each, in the
    paragraph, whatever the words around them become."""
    rng = np.random.default_rng(2)
    discourse = (
        '<p>Thanks <a class="mention" href="/u/bob">@bob</a>, <em>see <code>x()</code> and {name}</em>.</p>'
    )
    for document, parts in (
        (MASTODON, ['<span class="h-card">', 'translate="no">', 'rel="tag">#<span>rust</span></a>']),
        (discourse, ['<a class="mention" href="/u/bob">@bob</a>', "<code>x()</code>", "{name}"]),
    ):
        plan = DocumentPlan.of(document, markup=True)
        for output in [
            *NOISE,
            "Bonjour @alice voir https://example.org/x #rust @alice",
            "merci @bob voir x() {name}",
        ]:
            translated = plan.translated([[output]])
            for alignments in (None, _alignments(translated, None, rng)):
                result = translated.render(alignments)[0]
                assert result.startswith("<p>") and result.endswith("</p>"), result
                for part in parts:
                    assert result.count(part) == 1, (part, output, result)
        # a faithful translation that copies them puts them where it writes them
        if document == MASTODON:
            faithful = plan.translated([["Bonjour @alice voir https://example.org/x #rust"]]).render()[0]
            assert faithful.startswith('<p>Bonjour <span class="h-card">') and faithful.endswith("</a></p>")


def test_sentences_are_not_cut_inside_a_span():
    split = split_protected("Read https://example.org/a?b=1. Then pay $3.50 now! Done.", "en")
    assert split.sentences == ("Read https://example.org/a?b=1.", "Then pay $3.50 now!", "Done.")
