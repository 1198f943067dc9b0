"""Sentence splitting (inference/sentences.py): where texts are cut, how translations are put back together, the
alignment of a text translated in parts, and `translate --split_sentences` / `translate_split` on a tiny model
against translating each sentence on its own."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers.copy_task import train_copy_model
from helpers.shared import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from vanilla_transformer.inference import translate_nbest
from vanilla_transformer.inference.alignment import WordAlignment, joined_alignment, word_spans
from vanilla_transformer.inference.sentences import (
    SplitText,
    split_alignments,
    split_text,
    translate_sentences,
    translate_split,
)
from vanilla_transformer.modeling import save_with_remote_code


@pytest.mark.parametrize(
    ("language", "text", "sentences"),
    [
        (
            "en",
            'Mr. Smith went to Washington. He said: "Hello!" Then he left... What now? 3.5 is a number.',
            [
                "Mr. Smith went to Washington.",
                'He said: "Hello!"',
                "Then he left...",
                "What now?",
                "3.5 is a number.",
            ],
        ),
        # a closing quotation mark the rules leave at the next sentence's start goes back to its sentence (a
        # quotation that ends a question and the words after it stay one sentence: pySBD's rule)
        (
            "zh",
            "耶稣说：“你们要彼此相爱。”门徒就去了。他们问：「这是什么意思？」他回答。",
            ["耶稣说：“你们要彼此相爱。”", "门徒就去了。", "他们问：「这是什么意思？」他回答。"],
        ),
        (
            "de",
            "Am 3. Mai kam Dr. Müller, z. B. mit Nr. 5 an. Dann ging er.",
            ["Am 3. Mai kam Dr. Müller, z. B. mit Nr. 5 an.", "Dann ging er."],
        ),
        # a region is dropped; a language pySBD does not know gets English rules
        ("pt-BR", "Olá. Tudo bem?", ["Olá.", "Tudo bem?"]),
        ("sw", "Habari. Asante sana!", ["Habari.", "Asante sana!"]),
        # without a language: Chinese rules for Chinese, English rules otherwise
        (None, "他来了。她走了。", ["他来了。", "她走了。"]),
        (None, "He came. She left.", ["He came.", "She left."]),
        (None, "one sentence without an end", ["one sentence without an end"]),
        ("en", "  \n\n ", []),
    ],
)
def test_where_texts_are_cut(language, text, sentences):
    assert list(split_text(text, language).sentences) == sentences


def test_line_breaks_are_kept_and_sentences_joined_in_the_targets_way():
    """Line breaks are cut points written back as they were (a blank line stays one, spaces around them go);
    sentences of one line are joined by a space, or by nothing between Chinese or Japanese ones."""
    split = split_text("  Hello there. How are you?\n\n  Fine!  Bye.\r\nOk\n", "en")
    assert split.sentences == ("Hello there.", "How are you?", "Fine!", "Bye.", "Ok")
    assert split.join([s.upper() for s in split.sentences]) == "HELLO THERE. HOW ARE YOU?\n\nFINE! BYE.\nOK"
    assert (
        split.join(["你好。", "「你好吗？」", "好！", "再见。", "OK"])
        == "你好。「你好吗？」\n\n好！再见。\nOK"
    )
    assert split.join(["Hi.", "你好吗？", "好！", " ", "x"]) == "Hi. 你好吗？\n\n好！\nx"
    # newlines=False: a line break is a space (DeepL's nonewlines)
    flat = split_text("Hello there.\nHow\nare you?", "en", newlines=False)
    assert flat.sentences == ("Hello there.", "How are you?") and flat.join(["A.", "B?"]) == "A. B?"
    with pytest.raises(ValueError, match="2 translations for 5 sentences"):
        split.join(["a", "b"])


def test_nbest_lists_are_joined_hypothesis_by_hypothesis():
    split = split_text("One. Two. Three.\nFour.", "en")
    assert split.join_nbest([["a", "b", "c"], ["d"], ["e", "f"], ["g", "h"]]) == [
        "a d e\ng",
        "b d f\nh",
        "c d f\nh",
    ]
    assert SplitText((), ()).join_nbest([]) == [""]


words = st.sampled_from(
    ["the", "Dr.", "U.S.", "3.5", "yes", "他", "来了", "「好", "」", "“", "”", '"', "e.g.", "Nr."]
)
ends = st.sampled_from([".", "!", "?", "...", "。", "？", "！", "", ","])
spaces = st.sampled_from([" ", "  ", "\n", " \n\n ", "\t"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.lists(words, min_size=1, max_size=6), ends, spaces), max_size=8),
    st.sampled_from(["en", "zh", "de", None]),
)
def test_no_character_is_lost_or_added(parts, language):
    """Whatever the text, its sentences hold every non-space character of it, in order, and joining them back
    gives the text with its line breaks and without other space runs changed but inside a sentence."""
    text = "".join(" ".join(ws) + end + space for ws, end, space in parts)
    split = split_text(text, language)
    assert "".join(re.sub(r"\s", "", s) for s in split.sentences) == re.sub(r"\s", "", text)
    assert all(s == s.strip() and s for s in split.sentences)
    joined = split.join(list(split.sentences))
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", text)
    assert joined.count("\n") == sum(m.count("\n") for m in re.findall(r"\s*\n\s*", text.strip()))


def test_joined_alignment_renumbers_each_parts_words():
    """Each part's links and weights move to the words of the whole they lie in; no link crosses parts."""
    source, target = "A b. 他来了。", "x y. He came."
    first = WordAlignment([(0, 1), (1, 0)], np.array([[0.1, 0.9], [0.8, 0.2]], dtype=np.float32))
    # 他 来 了 。 -> He came.
    second = WordAlignment([(0, 0), (1, 1), (2, 1)], np.full((2, 4), 0.25, dtype=np.float32))
    joined = joined_alignment(source, target, [("A b.", "x y.", first), ("他来了。", "He came.", second)])
    assert len(word_spans(source)) == 6 and len(word_spans(target)) == 4
    assert joined.links == [(0, 1), (1, 0), (2, 2), (3, 3), (4, 3)]
    assert joined.weights.shape == (4, 6)
    assert np.allclose(joined.weights[:2, :2], first.weights) and np.allclose(joined.weights[2:, 2:], 0.25)
    assert not joined.weights[:2, 2:].any() and not joined.weights[2:, :2].any()


@pytest.fixture(scope="module")
def copier():
    return train_copy_model()


def test_translate_split_is_each_sentence_translated_on_its_own(copier):
    """`translate_split` joins what each sentence gives when translated alone (copy model: w words)."""
    model, tokenizer = copier
    texts = ["w1 w2. w3 w4! w5", "w6 w7 w8", "", "w9 w0.\nw1 w2?"]
    got = translate_split(model, tokenizer, texts, "en", num_beams=3, num_return_sequences=2)
    for text, nbest in zip(texts, got):
        split = split_text(text, "en")
        alone = [
            translate_nbest(model, tokenizer, [s], num_beams=3, num_return_sequences=2)[0]
            for s in split.sentences
        ]
        assert nbest == split.join_nbest(alone)
    assert got[2] == [""] and "\n" in got[3][0]


def test_cli_split_sentences(copier, tmp_path, monkeypatch, capsys):
    """`translate --split_sentences` writes one line per input line, each the joined sentence translations (with
    --alignments, each followed by its alignment); with scores, or a LANG that is not a language code, one error
    line and exit 2."""
    model, tokenizer = copier
    folder = save_with_remote_code(model, tmp_path / "model", tokenizer)
    lines = ["w1 w2. w3 w4! w5", "", "w6 w7"]
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(folder), "--split_sentences", stdin="\n".join(lines) + "\n"
    )
    expected = [hyps[0] for hyps in translate_split(model, tokenizer, lines)]
    assert (code, out) == (0, "".join(f"{line}\n" for line in expected)), err
    # --alignments: each hypothesis followed by its alignment, the sentences' alignments put together
    code, out, err = run_main(
        monkeypatch,
        capsys,
        "--model",
        str(folder),
        "--split_sentences",
        "--alignments",
        stdin="\n".join(lines) + "\n",
    )
    translated = translate_sentences(model, tokenizer, lines)
    aligned = split_alignments(model, tokenizer, lines, translated)
    expected = [
        f"{split.join_nbest(hyps)[0]} ||| {links[0]}" for (split, hyps), links in zip(translated, aligned)
    ]
    assert (code, out) == (0, "".join(f"{line}\n" for line in expected)), err
    for options, message in (
        (
            ["--split_sentences", "en", "--output_format", "jsonl"],
            "--output_format jsonl (the model's scores",
        ),
        (["--split_sentences", "english please"], "is not a language code"),
    ):
        code, out, err = run_main(monkeypatch, capsys, "--model", str(folder), *options, stdin="w1\n")
        assert (code, out) == (2, "") and err.count("\n") == 1 and message in err, err


def test_split_alignments_are_each_sentences_own_numbered_over_the_whole(copier):
    """The alignment of a text translated sentence by sentence: each sentence's own alignment with its
    translation (`align_pairs` of the pair alone), its source words numbered after the sentences before it and its
    target words after their translations, for every hypothesis."""
    from vanilla_transformer.inference.alignment import align_pairs, parse_pharaoh

    model, tokenizer = copier
    texts = ["w1 w2 w3\nw4 w5", "w6 w7 w8 w9", ""]
    translated = translate_sentences(model, tokenizer, texts, num_beams=2, num_return_sequences=2)
    aligned = split_alignments(model, tokenizer, texts, translated)
    for (split, nbest), links in zip(translated, aligned):
        assert len(links) == len(split.join_nbest(nbest))
        for k, found in enumerate(links):
            expected: set[tuple[int, int]] = set()
            source_at = target_at = 0
            for sentence, hyps in zip(split.sentences, nbest):
                hypothesis = hyps[min(k, len(hyps) - 1)]
                [own] = align_pairs(model, tokenizer, [sentence], [hypothesis])
                expected |= {(i + source_at, j + target_at) for i, j in own}
                source_at += len(word_spans(sentence))
                target_at += len(word_spans(hypothesis))
            assert parse_pharaoh(found)[0] == expected, (split, nbest, found)
    assert aligned[0][0] and "\n" in translated[0][0].join([h[0] for h in translated[0][1]])


def test_cli_split_language_is_lang_else_the_cards_source_language(tmp_path):
    """--split_sentences LANG uses LANG's rules; without LANG, the source language of the model card's two
    languages; a model whose card names none, rules by script (None)."""
    from vanilla_transformer.commands.translate import parse_args, split_language

    (tmp_path / "README.md").write_text("---\nlanguage:\n- de\n- en\n---\n# a model\n", encoding="utf-8")
    bare = tmp_path / "bare"
    bare.mkdir()
    assert split_language(parse_args(["--model", str(tmp_path), "--split_sentences"])) == "de"
    assert split_language(parse_args(["--model", str(tmp_path), "--split_sentences", "zh"])) == "zh"
    assert split_language(parse_args(["--model", str(bare), "--split_sentences"])) is None


def test_cli_html_split_sentences(copier, tmp_path, monkeypatch, capsys):
    """--format html --split_sentences: a segment of several sentences translated sentence by sentence, its
    inline markup kept around the copied words (the copy model's alignment, sentence by sentence)."""
    model, tokenizer = copier
    folder = save_with_remote_code(model, tmp_path / "model", tokenizer)
    document = "<p>w1 w2. w3 <b>w4</b> w5!</p><p>w6 <i>w7</i></p>"
    code, out, err = run_main(
        monkeypatch,
        capsys,
        "--model",
        str(folder),
        "--format",
        "html",
        "--split_sentences",
        "en",
        stdin=document,
    )
    assert code == 0, err
    expected = split_text("w1 w2. w3 w4 w5!", "en")
    translated = [translate_nbest(model, tokenizer, [s])[0][0] for s in expected.sentences]
    assert re.sub(r"<[^>]*>", "", out).startswith(expected.join(translated))
    assert sorted(re.findall(r"<[^>]*>", out)) == sorted(re.findall(r"<[^>]*>", document))


def test_long_lines_are_read_a_window_at_a_time():
    """pySBD reads a long line a window at a time (its rules take time that grows with the square of what they
    read): on ordinary text the sentences are those of the whole line read at once, and a sentence that never ends
    is cut into pieces of bounded length, no character lost."""
    import pysbd

    from vanilla_transformer.inference.sentences import LONGEST, WINDOW

    for language, line in (
        (
            "en",
            " ".join(f"Number {i} says e.g. {i}.5 things to Dr. Who? Yes... it does." for i in range(150)),
        ),
        ("zh", "".join(f"他说：「第{i}个。」她问：这是什么？他回答。" for i in range(300))),
    ):
        assert len(line) > 10 * WINDOW
        whole = [s.strip() for s in pysbd.Segmenter(language=language, clean=False).segment(line)]
        assert list(split_text(line, language).sentences) == [s for s in whole if s]
    endless = "word " * 3000
    pieces = split_text(endless, "en").sentences
    assert len(pieces) > 1 and all(len(piece) <= LONGEST + WINDOW for piece in pieces)
    assert "".join(pieces).replace(" ", "") == endless.replace(" ", "")
