"""The OPUS-MT layout written for imported models: SentencePiece pieces, the toolkit's ids, checked against
sentencepiece itself and loaded back with AutoTokenizer."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from transformers import AutoTokenizer, MarianTokenizer

from vanilla_transformer.convert.vocabulary import write_sentencepiece_tokenizer

sentencepiece = pytest.importorskip("sentencepiece")

DATA = Path(__file__).resolve().parents[2] / "data" / "bible.de-en.tsv.xz"
# a fairseq-style vocabulary: its specials first, then pieces in an order of its own (not SentencePiece's ids)
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


@pytest.fixture(scope="module")
def sides(tmp_path_factory) -> dict[str, Path]:
    """Two tiny SentencePiece models (German and English) trained on the shipped corpus."""
    folder = tmp_path_factory.mktemp("spm")
    with lzma.open(DATA, "rt", encoding="utf-8") as lines:
        pairs = [line.rstrip("\n").split("\t") for _, line in zip(range(600), lines)]
    models = {}
    for index, side in enumerate(("de", "en")):
        sentencepiece.SentencePieceTrainer.Train(
            sentence_iterator=iter([pair[index] for pair in pairs]),
            model_prefix=str(folder / side),
            vocab_size=300,
            model_type="unigram",
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            unk_id=0,
        )
        models[side] = folder / f"{side}.model"
    return models


def _toolkit_vocab(model: Path, drop: int = 0) -> list[str]:
    """The pieces of `model` (but its unknown token), reversed so that no id equals SentencePiece's, minus the last
    `drop` ones, after the specials."""
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    pieces = [processor.IdToPiece(i) for i in range(processor.GetPieceSize()) if not processor.IsUnknown(i)]
    pieces = pieces[::-1]
    return SPECIALS + pieces[: len(pieces) - drop]


def _toolkit_ids(model: Path, vocab: list[str], text: str) -> list[int]:
    """What the toolkit does: SentencePiece pieces, looked up in its vocabulary (unknown -> <unk>), then </s>."""
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    ids = {piece: index for index, piece in enumerate(vocab)}
    return [ids.get(piece, ids["<unk>"]) for piece in processor.EncodeAsPieces(text)] + [ids["</s>"]]


TEXTS = ["Am Anfang schuf Gott Himmel und Erde.", "Und Gott sprach: Es werde Licht!", "Xylophon 42 ☃"]
TARGETS = ["In the beginning God created the heaven and the earth.", "And God said, Let there be light."]


def test_separate_vocabularies_give_the_toolkit_ids_on_both_sides(sides, tmp_path):
    source_vocab = _toolkit_vocab(sides["de"], drop=20)
    target_vocab = _toolkit_vocab(sides["en"])
    write_sentencepiece_tokenizer(
        tmp_path, sides["de"], source_vocab, sides["en"], target_vocab, unk_token="<unk>", pad_token="<pad>"
    )
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert isinstance(tokenizer, MarianTokenizer)
    encoded = tokenizer(TEXTS, text_target=TARGETS + ["Light."])
    assert encoded["input_ids"] == [_toolkit_ids(sides["de"], source_vocab, text) for text in TEXTS]
    assert encoded["labels"] == [_toolkit_ids(sides["en"], target_vocab, t) for t in TARGETS + ["Light."]]
    # pieces the source vocabulary lacks become <unk>, as in the toolkit
    assert source_vocab.index("<unk>") in sum(encoded["input_ids"], [])
    assert tokenizer.pad_token_id == 1 and tokenizer.eos_token_id == 2
    decoded = tokenizer.batch_decode(encoded["labels"], skip_special_tokens=True)
    assert decoded == TARGETS + ["Light."]
    assert json.loads((tmp_path / "target_vocab.json").read_text(encoding="utf-8"))["</s>"] == 2


def test_one_joint_vocabulary(sides, tmp_path):
    vocab = _toolkit_vocab(sides["de"])
    tokenizer = write_sentencepiece_tokenizer(tmp_path, sides["de"], vocab, sides["de"], list(vocab))
    assert not (tmp_path / "target_vocab.json").exists()
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(TEXTS)["input_ids"] == tokenizer(TEXTS)["input_ids"]
    assert loaded(TEXTS)["input_ids"] == [_toolkit_ids(sides["de"], vocab, text) for text in TEXTS]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda vocab: [piece for piece in vocab if piece != "<pad>"], "has no '<pad>'"),
        (lambda vocab: vocab + [vocab[-1]], "twice"),
    ],
)
def test_bad_vocabularies_are_refused(sides, tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        write_sentencepiece_tokenizer(tmp_path, sides["de"], change(_toolkit_vocab(sides["de"])))
    assert not any(tmp_path.iterdir())


def test_a_file_that_is_not_a_sentencepiece_model_is_refused(sides, tmp_path):
    fake = tmp_path / "fake.model"
    fake.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        write_sentencepiece_tokenizer(tmp_path / "out", fake, _toolkit_vocab(sides["de"]))
    assert not (tmp_path / "out").exists()
