"""Glossaries (inference/glossary.py): the terms that apply to a source text, the target terms' token ids, and
the word pieces that would continue a completed term, for each kind of tokenizer."""

from __future__ import annotations

from helpers.copy_task import copy_tokenizer

from vanilla_transformer.inference.glossary import Glossary, term_ids, word_pieces


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
