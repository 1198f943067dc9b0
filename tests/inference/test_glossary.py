"""Glossaries (inference/glossary.py): the terms that apply to a source text, the target terms' token ids, and
the word pieces that would continue a completed term, for each kind of tokenizer."""

from __future__ import annotations

import random
import re

import pytest
from helpers.copy_task import copy_tokenizer

from vanilla_transformer.inference.glossary import Glossary, check_terms, term_ids, word_pieces


def test_glossary_matching_rules():
    """Source terms match case-sensitively, Latin-script terms as whole words, Han terms anywhere; the longer of
    two overlapping terms wins; each target term once, in order of occurrence."""
    glossary = Glossary.from_pairs(
        [("cat", "Katze"), ("神", "God"), ("耶稣", "Jesus"), ("耶稣基督", "Jesus Christ"), ("Tom", "")]
    )
    assert glossary.terms_for("the cat and the category") == ["Katze"]
    assert glossary.terms_for("catalogue, Cat") == []
    assert glossary.terms_for("神爱耶稣基督。神说") == ["God", "Jesus Christ"]
    assert glossary.terms_for("Tom met 耶稣") == ["Tom", "Jesus"]
    assert term_ids(copy_tokenizer(), ["x1 x2", "w0"]) == [[15, 16], [4]]


def reference_terms(entries: dict[str, str], text: str) -> list[str]:
    """The terms that apply to ``text`` as the module docstring states the rules, by a search of each term's own
    pattern (every occurrence), the longer of two overlapping ones kept."""
    found = []
    for source, target in entries.items():
        pattern = re.escape(source)
        if source[0].isalnum() and not "\u4e00" <= source[0] <= "\u9fff":
            pattern = r"(?<!\w)" + pattern
        if source[-1].isalnum() and not "\u4e00" <= source[-1] <= "\u9fff":
            pattern += r"(?!\w)"
        found += [(m.start(), m.end(), target) for m in re.finditer(pattern, text)]
    kept: list[tuple[int, int, str]] = []
    for start, end, target in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
        if all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, target))
    return list(dict.fromkeys(target for _, _, target in sorted(kept)))


def test_the_terms_of_a_text_equal_a_search_of_each_term():
    """The one walk over all terms (built once per glossary) finds what a search of each term's pattern finds,
    overlapping and nested terms, word edges and Han terms included."""
    rnd = random.Random(0)
    alphabet = "ab c神爱_1é"
    for _ in range(400):
        entries = {
            "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 4))).strip() or "a": f"t{k}"
            for k in range(rnd.randint(1, 8))
        }
        glossary = Glossary.from_pairs(entries.items())
        for _ in range(5):
            text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 30)))
            assert glossary.terms_for(text) == reference_terms(entries, text), (entries, text)


def test_target_terms_the_model_cannot_write_are_named():
    """A target term written with the unknown token and one longer than the decoder's positions are refused,
    each named; the terms it can write pass."""
    tokenizer = copy_tokenizer()
    check_terms(tokenizer, Glossary.from_pairs([("w1", "x1 x2"), ("w2", "")]), positions=16)
    long_term = " ".join(["x1"] * 15)
    glossary = Glossary.from_pairs([("w1", "x1 x2"), ("w2", "x1 zebra"), ("w3", long_term)])
    with pytest.raises(ValueError, match="2 target term") as refused:
        check_terms(tokenizer, glossary, positions=16)
    assert "'x1 zebra' (the tokenizer writes it with the unknown token" in str(refused.value)
    assert "(15 tokens, more than the 14 the decoder's positions hold)" in str(refused.value)
    assert "'x1 x2'" not in str(refused.value)
    check_terms(tokenizer, Glossary.from_pairs([("w3", long_term)]), positions=None)


def _fast_tokenizer(model, pre_tokenizer, decoder, corpus):
    """A transformers fast tokenizer of the ``tokenizers`` ``model`` trained on ``corpus`` (special tokens first)."""
    from tokenizers import Tokenizer, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(model)
    backend.pre_tokenizer, backend.decoder = pre_tokenizer, decoder
    special = ["<pad>", "<unk>", "</s>"]
    trainer_class = trainers.WordPieceTrainer if type(model).__name__ == "WordPiece" else trainers.BpeTrainer
    backend.train_from_iterator(
        corpus, trainer_class(vocab_size=120, special_tokens=special, show_progress=False)
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", eos_token="</s>"
    )


def test_word_pieces_of_each_tokenizer_kind():
    """`word_pieces` are the tokens that would glue onto the word before them: sentencepiece-style pieces without
    "▁", byte-level ones without "Ġ", WordPiece "##" pieces; never a word start, punctuation, a Han character or a
    special token; none for a tokenizer that joins every token with a space."""
    from tokenizers import decoders, models, pre_tokenizers

    from vanilla_transformer.tokenizer import train_bpe_tokenizer

    corpus = ["Zimri and Zimrias went, with Zadok's sons.", "耶稣说: Zimri walked to Zion."] * 20
    kinds = {
        "metaspace": train_bpe_tokenizer(corpus, vocab_size=300, min_frequency=1),
        "byte-level": _fast_tokenizer(
            models.BPE(unk_token="<unk>"), pre_tokenizers.ByteLevel(), decoders.ByteLevel(), corpus
        ),
        "wordpiece": _fast_tokenizer(
            models.WordPiece(unk_token="<unk>"),
            pre_tokenizers.BertPreTokenizer(),
            decoders.WordPiece(),
            corpus,
        ),
    }
    for kind, tokenizer in kinds.items():
        pieces = word_pieces(tokenizer)

        def ids(text, tokenizer=tokenizer):
            return tokenizer(text_target=[text], add_special_tokens=False)["input_ids"][0]

        # a word the corpus never has whole comes out in several tokens: each after the first continues it
        for word in ["Zimrinno", "Zadokias"]:
            word_ids = ids(word)
            assert len(word_ids) > 1 and word_ids[0] not in pieces, (kind, word_ids)
            assert all(i in pieces for i in word_ids[1:]), (kind, tokenizer.convert_ids_to_tokens(word_ids))
        zimri = ids("Zimri")
        for text in [" and", ",", ".", ":", " 耶"]:
            after = ids("Zimri" + text)
            assert after[: len(zimri)] == zimri and after[len(zimri)] not in pieces, (kind, text)
        assert not pieces & set(tokenizer.all_special_ids), kind
        base = str(tokenizer.decode(zimri))
        for i in pieces:
            glued = str(tokenizer.decode([*zimri, i]))
            assert glued.startswith(base) and glued[len(base)].isalnum(), (kind, glued)
    assert word_pieces(copy_tokenizer()) == frozenset()
