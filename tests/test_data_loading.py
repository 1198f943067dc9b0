"""Reading parallel data: formats, compression, CRLF, bad input (clear errors or counted skips), the split,
and the tokenisation cache."""

from __future__ import annotations

import gzip
import json
import lzma

import pytest

from corpus import (
    DEFAULT_DATA,
    DataOptions,
    language_pair,
    load_parallel_corpus,
    load_split,
    read_lines,
    split_corpus,
)
from training.data import tokenize_dataset


def write(path, text: str | bytes):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_tsv_crlf_and_compression(tmp_path):
    text = "你好\tHello\r\n世界\tWorld\r\n"
    for name, data in (
        ("a.tsv", text.encode()),
        ("a.tsv.gz", gzip.compress(text.encode())),
        ("a.tsv.xz", lzma.compress(text.encode())),
    ):
        ds, report = load_parallel_corpus(write(tmp_path / name, data))
        assert ds["source"] == ["你好", "世界"] and ds["target"] == ["Hello", "World"]
        assert report.crlf_lines == 2 and report.pairs == 2 and report.skipped_bad_lines == 0


def test_csv_and_jsonl_columns(tmp_path):
    csv_file = write(tmp_path / "a.csv", "zh,en\n你好,Hello\n")
    ds, _ = load_parallel_corpus(csv_file, source_column="zh", target_column="en")
    assert ds[0] == {"source": "你好", "target": "Hello"}
    rows = [{"translation": {"de": "Hallo", "en": "Hello"}}, {"translation": {"de": "Welt", "en": "World"}}]
    jl = write(tmp_path / "a.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    ds, _ = load_parallel_corpus(jl, source_lang="de", target_lang="en")
    assert ds["target"] == ["Hello", "World"]


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist.*--data"):
        load_parallel_corpus(tmp_path / "nope.tsv")
    with pytest.raises(ValueError, match="is empty"):
        load_parallel_corpus(write(tmp_path / "empty.tsv", ""))
    with pytest.raises(ValueError, match="only empty lines"):
        load_parallel_corpus(write(tmp_path / "blank.tsv", "\n\n"))


def test_wrong_columns_name_the_bad_value(tmp_path):
    tsv = write(tmp_path / "a.tsv", "a\tb\n")
    with pytest.raises(ValueError, match=r"source_column=5 does not exist.*2 tab-separated columns"):
        load_parallel_corpus(tsv, source_column=5)
    with pytest.raises(ValueError, match="TSV files have no header"):
        load_parallel_corpus(tsv, source_column="zh")
    # three columns, none named source/target (two would be read as source, target)
    csv_file = write(tmp_path / "a.csv", "zh,en,fr\n你好,Hello,Bonjour\n")
    with pytest.raises(
        ValueError, match=r"no column\(s\) \['source', 'target'\]; its columns are \['zh', 'en', 'fr'\]"
    ):
        load_parallel_corpus(csv_file)


def test_line_without_tab_is_counted_or_an_error(tmp_path):
    tsv = write(tmp_path / "a.tsv", "a\tA\nno tab here\nb\tB\nc\tC\td\n\n")
    ds, report = load_parallel_corpus(tsv)
    assert ds["source"] == ["a", "b"]
    assert report.skipped_bad_lines == 2 and report.skipped_empty == 1
    assert "line 2: no tab" in report.summary() and "line 4: 3 tab-separated columns" in report.summary()
    with pytest.raises(ValueError, match=r"line 2: no tab.*--on_bad_line skip"):
        load_parallel_corpus(tsv, on_bad_line="error")


def test_invalid_utf8_names_the_line(tmp_path):
    tsv = write(tmp_path / "a.tsv", b"a\tA\n" + "你好\tHello\n".encode("gb18030"))
    with pytest.raises(ValueError, match=r"line 2 is not valid UTF-8.*iconv"):
        load_parallel_corpus(tsv)


def test_split_is_deterministic_disjoint_and_sized():
    ds, report = load_parallel_corpus(DEFAULT_DATA, max_lines=3000)
    assert report.pairs == 3000
    a = split_corpus(ds, valid_size=100, test_size=200)
    b = split_corpus(ds, valid_size=100, test_size=200)
    assert [len(a[k]) for k in ("train", "validation", "test")] == [2700, 100, 200]
    assert a["test"]["source"] == b["test"]["source"]
    assert a["validation"]["source"] == b["validation"]["source"]
    pairs = {k: set(zip(a[k]["source"], a[k]["target"])) for k in a}
    assert not (pairs["train"] & pairs["test"]) and not (pairs["train"] & pairs["validation"])
    assert split_corpus(ds, 100, 200, seed=7)["test"]["source"] != a["test"]["source"]
    test, _ = load_split(DEFAULT_DATA, "test", valid_size=100, test_size=200, max_lines=3000)
    assert test["source"] == a["test"]["source"]
    with pytest.raises(ValueError, match="leaves no training data"):
        split_corpus(ds, valid_size=1000, test_size=2000)


def test_tokenization_is_cached(tmp_path):
    from tokenizer.bpe import train_bpe_tokenizer

    ds, _ = load_parallel_corpus(
        write(tmp_path / "a.tsv", "Hallo Welt\tHello world\nGuten Tag\tGood day\n" * 5)
    )
    tok = train_bpe_tokenizer(list(ds["source"]) + list(ds["target"]), vocab_size=300)
    first = tokenize_dataset(ds, tok, cache_dir=tmp_path / "cache")
    files = sorted((tmp_path / "cache").glob("tokenized-*.arrow"))
    assert len(files) == 1
    again = tokenize_dataset(ds, tok, cache_dir=tmp_path / "cache")
    assert again.cache_files[0]["filename"] == str(files[0])
    assert first["labels"][0][-1] == tok.eos_token_id == 3 and first["input_ids"] == again["input_ids"]


def test_language_pair_reads_the_file_name():
    assert language_pair(str(DEFAULT_DATA)) == ("zh", "en")
    assert language_pair("corpora/wmt_de-en.jsonl") == ("de", "en")
    assert language_pair("data/de-en/train.tsv") == (None, None)  # only the file name counts
    assert language_pair("wmt14") == (None, None)


def test_data_options_are_the_flags_of_the_corpus(tmp_path):
    tsv = write(tmp_path / "pairs.de-en.tsv", "".join(f"s{i}\tt{i}\n" for i in range(40)) + "no tab\n")
    options = DataOptions(data=str(tsv), valid_size=4, test_size=6, split_block_size=3, split_seed=5)
    assert options.languages() == ("de", "en") and options.check() == []
    assert DataOptions(data=str(tsv), target_lang="fr").languages() == ("de", "fr")
    splits, report = options.load_splits()
    corpus, _ = load_parallel_corpus(tsv)
    expected = split_corpus(corpus, 4, 6, block_size=3, seed=5)
    assert {k: splits[k]["source"] for k in splits} == {k: expected[k]["source"] for k in expected}
    assert report.skipped_bad_lines == 1
    problems = DataOptions(on_bad_line="drop", valid_size=-1, split_block_size=0, max_lines=0).check()
    assert len(problems) == 4 and "--on_bad_line must be 'skip' or 'error', got 'drop'" in problems
    with pytest.raises(ValueError, match="line 41: no tab"):
        DataOptions(data=str(tsv), on_bad_line="error").load_splits()


def test_tokenizer_reads_files_like_the_corpus(tmp_path):
    from tokenizer.corpus import iter_file_texts

    lines = list(read_lines(write(tmp_path / "a.txt.gz", gzip.compress("\ufeffa\r\nb\n\n".encode()))))
    assert lines == [("a", True), ("b", False), ("", False)]
    assert list(iter_file_texts(tmp_path / "a.txt.gz")) == ["a", "b"]
    bad = write(tmp_path / "b.tsv", b"a\tA\n\xff\tB\n")
    for read in (load_parallel_corpus, lambda p: list(iter_file_texts(p))):
        with pytest.raises(ValueError, match=r"b.tsv' line 2 is not valid UTF-8.*iconv"):
            read(bad)
    # a parallel file is read whole, as training reads it, even when only its first pairs are kept
    with pytest.raises(ValueError, match=r"b.tsv' line 2 is not valid UTF-8"):
        list(iter_file_texts(bad, max_lines=1))
    plain = write(tmp_path / "c.txt", b"a\n\xff\n")
    assert list(iter_file_texts(plain, max_lines=1)) == ["a"]  # a plain text file stops reading at max_lines
    header = write(tmp_path / "d.tsv", "source\ttarget\na\tA\n\"q\"\tQ\n")
    assert list(iter_file_texts(header)) == ["a", "A", '"q"', "Q"]  # the header row is not text
