"""Tests for the joint BPE tokenizer. Small vocabularies on corpus slices: runs in seconds."""

from __future__ import annotations

import json
import lzma
import os
import sys
from pathlib import Path

import pytest
from conftest import han_characters_per_token
from helpers.shared import run_checked
from transformers import AutoTokenizer, DataCollatorForSeq2Seq, PreTrainedTokenizerFast

from vanilla_transformer.modeling import IGNORE_INDEX
from vanilla_transformer.tokenizer import (
    BOS_ID,
    BOS_TOKEN,
    EOS_ID,
    EOS_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    UNK_ID,
    UNK_TOKEN,
    load_or_train_tokenizer,
    load_parallel_texts,
    normalize_text,
    train_bpe_tokenizer,
)

ROOT = Path(__file__).resolve().parents[2]
ZH_EN = ROOT / "data" / "bible.zh-en.tsv.xz"
DE_EN = ROOT / "data" / "bible.de-en.tsv.xz"
TRAIN_LINES = 2000
VOCAB = 2000

EDGE_CASES = [
    "我爱机器翻译",
    "I love machine translation.",
    "Ich liebe maschinelle Übersetzung – wirklich!",
    "In 1611, 40 000 copies cost £3.50 (or 12% more); see §4.2-7.",
    'He said: "Stop!" — she asked, «why?» [sic] {ok} a/b\\c @#$^&*_+=|~`',
    "我爱 machine translation，真的！Mixed 中文and English 123个。",
    "emoji 😀🎉👍🏽 and flags 🇩🇪 ok",
    "unseen: 한국어 العربية ελληνικά кириллица ᚠᛇᚻ 𠀀𪚥 ♞",
    "fullwidth ＡＢＣ１２３ and ligature ﬁ and ① and ㎏",
    "  leading, trailing,\ttabs\nnewlines  and   runs\u3000of\u00a0spaces  ",
    "the marker ▁ itself, and literal <s> </s> <pad> <unk> <0x41>",
    "x",
    "。",
    "",
]


@pytest.fixture(scope="module")
def corpora() -> dict[str, list[str]]:
    zh, en = load_parallel_texts(ZH_EN, max_lines=TRAIN_LINES + 300)
    de, _ = load_parallel_texts(DE_EN, max_lines=TRAIN_LINES + 300)
    return {"zh": zh, "en": en, "de": de}


@pytest.fixture(scope="module")
def tok(corpora):
    n = TRAIN_LINES
    texts = corpora["zh"][:n] + corpora["en"][:n] + corpora["de"][:n]
    return train_bpe_tokenizer(texts, vocab_size=VOCAB, min_frequency=2)


@pytest.fixture(scope="module")
def saved(tok, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(folder)
    return folder


# ---- 1. round trip ----------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["zh", "en", "de"])
@pytest.mark.parametrize("where", ["held_in", "unseen_lines"])
def test_round_trip_corpus(tok, corpora, lang, where):
    lines = corpora[lang][:300] if where == "held_in" else corpora[lang][TRAIN_LINES:]
    ids = tok(lines)["input_ids"]
    decoded = tok.batch_decode(ids, skip_special_tokens=True)
    bad = [(x, d) for x, d in zip(lines, decoded) if d != normalize_text(x)]
    assert not bad, bad[:3]
    assert all(UNK_ID not in seq for seq in ids)


@pytest.mark.parametrize("text", EDGE_CASES)
def test_round_trip_edge_cases(tok, text):
    ids = tok(text)["input_ids"]
    assert ids[-1] == EOS_ID
    assert UNK_ID not in ids  # byte fallback: nothing is silently lost
    assert tok.decode(ids, skip_special_tokens=True) == normalize_text(text)


def test_unseen_characters_use_byte_fallback(tok):
    # the leading "▁" is the space marker every text starts with; the character is spelled as its UTF-8 bytes
    assert "𪚥".encode() == bytes([0xF0, 0xAA, 0x9A, 0xA5])
    assert tok.tokenize("𪚥") == ["▁", "<0xF0>", "<0xAA>", "<0x9A>", "<0xA5>"]


def test_normalizer_contract():
    assert normalize_text("ＡＢＣ，１２３") == "ABC,123"  # NFKC
    assert normalize_text("  a \t\n b\u3000c  ") == "a b c"  # whitespace collapsed and stripped
    assert normalize_text("a▁b") == "a b"


def test_decoding_spaces(tok):
    def rt(s: str) -> str:
        return tok.decode(tok(s)["input_ids"], skip_special_tokens=True)

    assert rt("起初，神创造天地。") == "起初,神创造天地。"  # no spaces between Chinese characters
    assert rt('God said, "Let there be light," and there was light.') == (
        'God said, "Let there be light," and there was light.'
    )
    assert rt("Und Gott sprach: Es werde Licht!") == "Und Gott sprach: Es werde Licht!"
    chinese_tokens = tok.tokenize("神说要有光")
    assert not any(t.startswith("▁") for t in chinese_tokens[1:])


def test_skip_special_tokens(tok):
    batch = tok(["我爱机器翻译", "I love machine translation, really, very much."], padding=True)
    first = batch["input_ids"][0]
    assert PAD_ID in first and EOS_ID in first
    assert tok.decode(first, skip_special_tokens=True) == "我爱机器翻译"
    assert tok.decode(first, skip_special_tokens=False).startswith("我爱机器翻译</s><pad>")
    assert tok.decode([BOS_ID, *tok("I love it")["input_ids"]], skip_special_tokens=True) == "I love it"


# ---- 2. special tokens, transformers wrapper, save/load ----------------------------------------------


def test_special_token_ids(tok):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    for token, idx in [(PAD_TOKEN, 0), (UNK_TOKEN, 1), (BOS_TOKEN, 2), (EOS_TOKEN, 3)]:
        assert tok.convert_tokens_to_ids(token) == idx
    assert (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2, 3)
    assert (tok.pad_token, tok.unk_token, tok.bos_token, tok.eos_token) == ("<pad>", "<unk>", "<s>", "</s>")
    assert len(tok) == VOCAB
    assert tok.model_input_names == ["input_ids", "attention_mask"]


def test_eos_appended_no_bos_and_literal_specials_are_text(tok):
    ids = tok("hello world")["input_ids"]
    assert ids[-1] == EOS_ID and ids.count(EOS_ID) == 1 and BOS_ID not in ids
    assert tok("hello world", add_special_tokens=False)["input_ids"] == ids[:-1]
    assert tok("</s>")["input_ids"].count(EOS_ID) == 1  # literal "</s>" in user text is not the eos token


def test_text_target_padding_truncation(tok):
    """Sources and targets are each right-padded with <pad> to the longest row and cut at max_length keeping a
    final </s>; targets come back as `labels`."""
    src = ["我爱机器翻译", "神说：要有光，就有了光。" * 20]
    tgt = ["I love machine translation.", "God said, let there be light. " * 10]
    batch = tok(src, text_target=tgt, padding=True, truncation=True, max_length=16)
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    short_src, long_src = (tok(text)["input_ids"] for text in src)
    short_tgt, long_tgt = (tok(text)["input_ids"] for text in tgt)
    assert len(short_src) < 16 < len(long_src) and len(short_tgt) < 16 < len(long_tgt)
    assert batch["input_ids"] == [short_src + [PAD_ID] * (16 - len(short_src)), long_src[:15] + [EOS_ID]]
    assert batch["attention_mask"] == [[1] * len(short_src) + [0] * (16 - len(short_src)), [1] * 16]
    assert batch["labels"] == [short_tgt + [PAD_ID] * (16 - len(short_tgt)), long_tgt[:15] + [EOS_ID]]
    assert tok.decode(batch["labels"][0], skip_special_tokens=True) == tgt[0]


def test_label_padding_is_ignored_in_loss(tok):
    """transformers' `DataCollatorForSeq2Seq` with the project's tokenizer: label padding is the ignored id."""
    src, tgt = ["我爱机器翻译", "神"], ["I love machine translation.", "God"]
    batch = tok(src, text_target=tgt, padding=True, truncation=True, max_length=32, return_tensors="pt")
    features = [{k: v for k, v in tok(s, text_target=t).items()} for s, t in zip(src, tgt)]
    collated = DataCollatorForSeq2Seq(tok, label_pad_token_id=IGNORE_INDEX)(features)
    labels = collated["labels"]
    assert labels.shape[0] == 2 and (labels[1] == IGNORE_INDEX).any() and not (labels == PAD_ID).any()
    assert labels[0, -1].item() == EOS_ID
    assert (labels == batch["labels"].masked_fill(batch["labels"] == PAD_ID, IGNORE_INDEX)).all()
    assert (collated["input_ids"] == batch["input_ids"]).all()


def test_empty_and_long_inputs(tok):
    assert tok("")["input_ids"] == [EOS_ID]
    assert tok.decode(tok("")["input_ids"], skip_special_tokens=True) == ""
    long_text = "起初，神创造天地。In the beginning God created the heavens. " * 2000
    full = tok(long_text)["input_ids"]
    assert len(full) > 10_000
    cut = tok(long_text, truncation=True, max_length=64)["input_ids"]
    assert len(cut) == 64 and cut[-1] == EOS_ID and cut[:-1] == full[:63]
    assert len(tok(long_text, truncation=True)["input_ids"]) == tok.model_max_length


def test_save_load_identical(tok, saved, corpora):
    loaded = AutoTokenizer.from_pretrained(saved)
    texts = EDGE_CASES + corpora["zh"][:50] + corpora["en"][:50]
    assert loaded(texts)["input_ids"] == tok(texts)["input_ids"]
    assert loaded.batch_decode(tok(texts)["input_ids"], skip_special_tokens=True) == [
        normalize_text(t) for t in texts
    ]
    assert (loaded.pad_token_id, loaded.unk_token_id, loaded.bos_token_id, loaded.eos_token_id) == (
        0,
        1,
        2,
        3,
    )
    assert loaded.model_input_names == ["input_ids", "attention_mask"]


def test_saved_folder_needs_no_project_code(tok, saved, tmp_path):
    assert not list(saved.rglob("*.py"))
    config = json.loads((saved / "tokenizer_config.json").read_text())
    import transformers

    assert hasattr(transformers, config["tokenizer_class"])
    assert "auto_map" not in config
    texts = ["我爱机器翻译", "I love machine translation.", "emoji 😀 𪚥"]
    code = (
        "import json, sys\n"
        "for name in ('modeling', 'corpus', 'tokenizer', 'inference', 'export', 'training', 'benchmarks'):\n"
        "    sys.modules[name] = None  # importing any package of this project now raises ImportError\n"
        "from transformers import AutoTokenizer\n"
        f"t = AutoTokenizer.from_pretrained({str(saved)!r})\n"
        f"texts = {texts!r}\n"
        "b = t(texts, text_target=texts, padding=True)\n"
        "print(json.dumps({'ids': t(texts)['input_ids'], 'labels': b['labels'], "
        "'dec': t.batch_decode(t(texts)['input_ids'], skip_special_tokens=True)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    out = run_checked([sys.executable, "-I", "-c", code], tmp_path, env, timeout=60)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ids"] == tok(texts)["input_ids"]
    assert result["labels"] == tok(texts, text_target=texts, padding=True)["labels"]
    assert result["dec"] == [normalize_text(t) for t in texts]


# ---- inputs: files, TSV columns, datasets, byte-level variant ---------------------------------------


def test_train_from_tsv_file_columns_and_dataset(tmp_path: Path):
    tsv = tmp_path / "pairs.tsv.xz"
    rows = ["我爱机器翻译\tI love machine translation.", "神说要有光\tGod said let there be light."] * 30
    with lzma.open(tsv, "wt", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    both = train_bpe_tokenizer(tsv, vocab_size=400)
    zh_only = train_bpe_tokenizer(str(tsv), columns=[0], vocab_size=400)
    assert "翻" in both.get_vocab() and "▁love" in both.get_vocab()
    assert "翻" in zh_only.get_vocab() and "▁love" not in zh_only.get_vocab()
    plain = tmp_path / "en.txt"
    plain.write_text("I love machine translation.\n\n" * 20, encoding="utf-8")
    from_files = train_bpe_tokenizer(files=[plain, tsv], vocab_size=400)
    assert "▁love" in from_files.get_vocab()

    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {"translation": [{"zh": "我爱机器翻译", "en": "I love machine translation."}] * 20, "id": ["a"] * 20}
    )
    from_ds = train_bpe_tokenizer(ds, columns=["translation"], vocab_size=400)
    assert "▁love" in from_ds.get_vocab() and "翻" in from_ds.get_vocab()
    with pytest.raises(ValueError, match="no column"):
        train_bpe_tokenizer(ds, columns=["nope"], vocab_size=400)


def test_byte_level_variant_round_trip(corpora):
    texts = corpora["zh"][:300] + corpora["en"][:300]
    tok = train_bpe_tokenizer(texts, vocab_size=600, kind="byte")
    assert tok.convert_tokens_to_ids([PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN]) == [0, 1, 2, 3]
    for text in texts[:50] + EDGE_CASES:
        ids = tok(text)["input_ids"]
        assert ids[-1] == EOS_ID
        assert tok.decode(ids, skip_special_tokens=True) == normalize_text(text)


@pytest.mark.parametrize("kind", ["char", "byte"])
def test_han_characters_gives_one_piece_per_han_character(corpora, kind, tmp_path):
    texts = corpora["zh"][:TRAIN_LINES] + corpora["en"][:TRAIN_LINES]
    words = train_bpe_tokenizer(texts, vocab_size=VOCAB, kind=kind)
    chars = train_bpe_tokenizer(texts, vocab_size=VOCAB, kind=kind, han_characters=True)
    sentence = "耶和华对摩西说：你去告诉以色列人。And Moses said unto the LORD."
    pieces = chars.tokenize(sentence)
    if kind == "char":  # byte-level tokens spell Han characters as byte symbols; counted only for char BPE
        assert max(han_characters_per_token(words)) > 1  # runs: BPE learns Chinese words (耶和华, 以色列)
        assert max(han_characters_per_token(chars)) == 1
        han = [p for p in pieces if any("\u4e00" <= ch <= "\u9fff" for ch in p)]
        assert han and all(len(p.lstrip("\u2581")) == 1 for p in han), pieces
    assert len(chars.tokenize("耶和华对摩西说")) > len(words.tokenize("耶和华对摩西说"))
    # English still merges, and the freed vocabulary goes to it: no more English tokens than before
    assert len(chars.tokenize("And Moses said unto the LORD.")) <= len(
        words.tokenize("And Moses said unto the LORD.")
    )
    for text in corpora["zh"][TRAIN_LINES : TRAIN_LINES + 50] + EDGE_CASES:  # decoding is unchanged
        ids = chars(text)["input_ids"]
        assert chars.decode(ids, skip_special_tokens=True) == normalize_text(text)
    chars.save_pretrained(tmp_path)  # the split is in tokenizer.json: a plain AutoTokenizer keeps it
    assert AutoTokenizer.from_pretrained(tmp_path).tokenize(sentence) == pieces


# ---- 3. bad input ------------------------------------------------------------------------------------


def test_empty_corpus(tmp_path):
    with pytest.raises(ValueError, match="corpus is empty"):
        train_bpe_tokenizer(["", "   ", "\n"], vocab_size=400)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"corpus is empty.*empty\.txt"):
        train_bpe_tokenizer(files=[empty], vocab_size=400)
    with pytest.raises(ValueError, match="No corpus given"):
        train_bpe_tokenizer(vocab_size=400)


def test_vocab_too_small():
    with pytest.raises(ValueError, match=r"vocab_size=100 .*at least 261"):
        train_bpe_tokenizer(["hello world"], vocab_size=100)
    many_chars = ["".join(chr(0x4E00 + i + j) for j in range(10)) for i in range(0, 300, 10)]
    with pytest.raises(
        ValueError, match=r"vocab_size=300 is smaller than the corpus alphabet.*limit_alphabet"
    ):
        train_bpe_tokenizer(many_chars, vocab_size=300, limit_alphabet=None)
    # with the default limit the rare characters fall back to bytes instead
    tok = train_bpe_tokenizer(many_chars, vocab_size=300)
    assert tok.decode(tok(many_chars[0])["input_ids"], skip_special_tokens=True) == many_chars[0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_frequency": 0}, "min_frequency=0"),
        ({"kind": "wordpiece"}, "kind='wordpiece'"),
        ({"kind": "byte", "limit_alphabet": 10}, "limit_alphabet=10"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_bpe_tokenizer(["hello world"], **{"vocab_size": 400, **kwargs})


def test_bad_files(tmp_path):
    missing = tmp_path / "nope.tsv"
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        train_bpe_tokenizer(missing, vocab_size=400)
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        train_bpe_tokenizer(files=[str(missing)], vocab_size=400)
    with pytest.raises(ValueError, match="holds no data files"):
        train_bpe_tokenizer(tmp_path, vocab_size=400)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Übersetzung\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt.*not valid UTF-8"):
        train_bpe_tokenizer(latin1, vocab_size=400)
    fake_xz = tmp_path / "fake.txt.xz"
    fake_xz.write_text("not compressed\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"fake\.txt\.xz"):
        train_bpe_tokenizer(fake_xz, vocab_size=400)
    tsv = tmp_path / "one.tsv"
    tsv.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"columns=\[5\]"):
        train_bpe_tokenizer(tsv, columns=[5], vocab_size=400)
    with pytest.raises(ValueError, match="not a str"):
        train_bpe_tokenizer(["ok", 3], vocab_size=400)


def test_training_is_reproducible_across_processes():
    """`tokenizers` breaks ties among equally frequent characters at the limit_alphabet cut-off in hash-map order,
    which changes from process to process (3 trainings on 2,000 verse pairs gave 3 different tokenizers); the
    alphabet is now chosen by frequency then code point, so separate processes train identical tokenizers."""
    code = (
        "import hashlib\n"
        "from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus\n"
        "from vanilla_transformer.tokenizer.bpe import train_bpe_tokenizer\n"
        "ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=1000)\n"
        "tok = train_bpe_tokenizer(list(ds['source']) + list(ds['target']), vocab_size=1500)\n"
        "print(hashlib.sha1(tok.backend_tokenizer.to_str().encode()).hexdigest())\n"
    )
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    digests = {
        run_checked([sys.executable, "-c", code], ROOT, env, timeout=120).stdout.split()[-1] for _ in range(3)
    }
    assert len(digests) == 1, digests


def test_frequent_characters_ranks_by_count_then_code_point():
    from vanilla_transformer.tokenizer.bpe import frequent_characters

    assert frequent_characters(["b a", "cab"], 3) == ["a", "b", "c"]  # a:2 b:2, then c:1 and ▁:1, c < ▁
    assert frequent_characters(["ｂ"], 5) == ["b"]  # NFKC-normalised like the tokenizer's input


def test_load_or_train_tokenizer_trains_once_then_reuses_the_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    pairs = datasets.Dataset.from_dict(
        {
            "source": ["我爱机器翻译", "神说要有光"] * 20,
            "target": ["I love machine translation.", "Let there be light."] * 20,
        }
    )
    folder = tmp_path / "tok"
    trained = load_or_train_tokenizer(None, folder, pairs, vocab_size=400)
    vocab = trained.get_vocab()
    assert (folder / "tokenizer.json").exists() and "翻" in vocab and "▁love" in vocab
    reused = load_or_train_tokenizer(None, folder, pairs.select(range(2)), vocab_size=300)
    assert reused.get_vocab() == vocab  # not trained again on other pairs and another size
    per_character = load_or_train_tokenizer(
        None, tmp_path / "han", pairs, vocab_size=400, han_characters=True
    )
    assert "翻" in per_character.get_vocab() and max(han_characters_per_token(per_character)) == 1
    assert max(han_characters_per_token(trained)) > 1
    given = load_or_train_tokenizer(str(folder), tmp_path / "unused", pairs, 400)
    assert given.get_vocab() == vocab and not (tmp_path / "unused").exists()


def test_load_or_train_tokenizer_refuses_other_special_ids_and_folders_without_tokenizer_json(tmp_path):
    pairs = pytest.importorskip("datasets").Dataset.from_dict({"source": ["a b"] * 5, "target": ["c d"] * 5})
    tok = train_bpe_tokenizer(["hello world", "abc def"] * 10, vocab_size=300)
    tok.pad_token = tok.unk_token  # pad id 1 instead of 0
    tok.save_pretrained(tmp_path / "other")
    with pytest.raises(ValueError, match=r"special ids .*'pad': 1.*expects pad 0, <s> 2, </s> 3"):
        load_or_train_tokenizer(str(tmp_path / "other"), tmp_path / "tok", pairs, 300)
    with pytest.raises(ValueError, match=r"special ids .*'pad': 1.*delete"):
        load_or_train_tokenizer(None, tmp_path / "other", pairs, 300)
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        ValueError, match=r"'.*empty' has no tokenizer \(tokenizer.json or tokenizer_config.json\)"
    ):
        load_or_train_tokenizer(str(tmp_path / "empty"), tmp_path / "tok", pairs, 300)
    with pytest.raises(ValueError, match=r"'.*missing/tokenizer' is neither a folder nor a Hub name"):
        load_or_train_tokenizer(str(tmp_path / "missing" / "tokenizer"), tmp_path / "tok", pairs, 300)


def test_the_run_tokenizer_trains_on_batches_of_the_arrow_columns_as_on_the_lists(tmp_path):
    """A run's own tokenizer is trained from the Arrow split read in batches (`ColumnTexts`, all sources then all
    targets, one batch in memory) and is the tokenizer trained on the two columns as Python lists."""
    from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus
    from vanilla_transformer.tokenizer.corpus import ColumnTexts

    split, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=300)
    batched = ColumnTexts(split, ("source", "target"), batch_size=7)
    assert list(batched) == list(split["source"]) + list(split["target"]) == list(batched)  # re-iterable
    trained = load_or_train_tokenizer(None, tmp_path / "tok", split, vocab_size=600)
    assert isinstance(trained, PreTrainedTokenizerFast)
    from_lists = train_bpe_tokenizer(list(split["source"]) + list(split["target"]), vocab_size=600)
    # same vocab and merges
    assert trained.backend_tokenizer.to_str() == from_lists.backend_tokenizer.to_str()
