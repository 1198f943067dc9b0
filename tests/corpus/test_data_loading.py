"""Reading parallel data: formats, compression, CRLF, bad input (clear errors or counted skips), the split,
and the tokenisation cache."""

from __future__ import annotations

import gzip
import json
import lzma
import random
import subprocess
import sys
from typing import Any

import datasets
import pytest

from vanilla_transformer.corpus import (
    DEFAULT_DATA,
    DataOptions,
    language_pair,
    load_parallel_corpus,
    load_split,
    read_lines,
    split_corpus,
)
from vanilla_transformer.training.data import tokenize_dataset


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


def test_a_utf16_corpus_without_a_bom_is_refused_naming_the_line(tmp_path):
    """Windows' 'Unicode' text (UTF-16LE, no BOM): ASCII in it is valid UTF-8 with a NUL after every byte."""
    tsv = write(tmp_path / "a.tsv", "Hallo\tHello\nWelt\tWorld\n".encode("utf-16-le"))
    for read in (load_parallel_corpus, lambda path: list(read_lines(path))):
        with pytest.raises(ValueError, match=r"a.tsv' line 1 holds NUL bytes.*UTF-16.*iconv -f UTF-16LE"):
            read(tsv)
    command = ["train", "--data", str(tsv), "--output_dir", str(tmp_path / "run"), "--max_steps", "1"]
    done = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", *command], capture_output=True, text=True, timeout=120
    )
    err = done.stderr
    assert done.returncode == 2, err
    assert "a.tsv' line 1 holds NUL bytes" in err and "UTF-16" in err and "Traceback" not in err


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
    from vanilla_transformer.tokenizer.bpe import train_bpe_tokenizer

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
    assert len(problems) == 4 and "--on_bad_line must be one of skip, error, got 'drop'" in problems
    with pytest.raises(ValueError, match="line 41: no tab"):
        DataOptions(data=str(tsv), on_bad_line="error").load_splits()


def test_tokenizer_reads_files_like_the_corpus(tmp_path):
    from vanilla_transformer.tokenizer.corpus import iter_file_texts

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
    header = write(tmp_path / "d.tsv", 'source\ttarget\na\tA\n"q"\tQ\n')
    assert list(iter_file_texts(header)) == ["a", "A", '"q"', "Q"]  # the header row is not text


# ------------------------------------------------------------------------------------------- whole-group split


def grouped_corpus(tmp_path, sizes: dict[str, int], name: str = "book.de-en.tsv"):
    """A TSV whose pairs name their group (`g3 7` = line 7 of group g3), and its refs file next to it."""
    lines, refs = [], []
    for group, size in sizes.items():
        for verse in range(size):
            lines.append(f"{group} {verse}\t{group.upper()} {verse}\n")
            refs.append(f"{group}.1.{verse + 1}\n")
    write(tmp_path / name, "".join(lines))
    write(tmp_path / name.replace(".tsv", ".refs"), "".join(refs))
    return tmp_path / name


def group_of(text: str) -> str:
    return text.split()[0]


def test_group_split_holds_out_whole_groups_within_a_quarter_of_the_target():
    from vanilla_transformer.corpus.split import split_by_groups

    rng = random.Random(0)
    sizes = {f"b{i}": rng.randint(5, 60) for i in range(60)}
    groups = [g for g, n in sizes.items() for _ in range(n)]
    ds = datasets.Dataset.from_dict({"source": [f"{g} {i}" for i, g in enumerate(groups)], "target": groups})
    for seed in range(5):
        splits, names = split_by_groups(ds, groups, valid_size=100, test_size=200, seed=seed)
        seen = {k: {group_of(s) for s in splits[k]["source"]} for k in splits}
        assert seen["test"] == set(names["test"]) and seen["validation"] == set(names["validation"])
        assert not (seen["train"] & seen["test"]) and not (seen["train"] & seen["validation"])
        assert not (seen["test"] & seen["validation"])
        assert 200 <= len(splits["test"]) <= 250 and 100 <= len(splits["validation"]) <= 125
        # every line of a held-out group is held out; training keeps the rest in corpus order
        assert len(splits["test"]) == sum(sizes[g] for g in names["test"])
        assert sum(len(v) for v in splits.values()) == len(ds)
        assert splits["train"]["source"] == [s for s in ds["source"] if group_of(s) in seen["train"]]
    again, _ = split_by_groups(ds, groups, 100, 200, seed=4)
    assert again["test"]["source"] == splits["test"]["source"]
    assert split_by_groups(ds, groups, 100, 200, seed=3)[0]["test"]["source"] != splits["test"]["source"]
    # lines of one group that are not adjacent still go together
    scattered = groups[::-1][:50] + groups
    both = datasets.Dataset.from_dict({"source": scattered, "target": scattered})
    split, _ = split_by_groups(both, scattered, 20, 40, seed=1)
    assert not set(split["train"]["source"]) & set(split["test"]["source"])
    with pytest.raises(ValueError, match="no group is small enough.*--split_by blocks"):
        split_by_groups(ds, groups, valid_size=0, test_size=3)
    with pytest.raises(ValueError, match="leaves no training data"):
        split_by_groups(ds, groups, valid_size=len(ds), test_size=len(ds))
    with pytest.raises(ValueError, match="one label per pair"):
        split_by_groups(ds, groups[:-1])


def test_split_by_groups_and_auto_through_data_options(tmp_path):
    tsv = grouped_corpus(tmp_path, {f"b{i}": 10 + i for i in range(12)})
    options: dict[str, Any] = dict(data=str(tsv), valid_size=20, test_size=30, split_seed=3)
    splits, report = DataOptions(**options, split_by="auto").load_splits()
    seen = {k: {group_of(s) for s in splits[k]["source"]} for k in splits}
    assert not (seen["train"] & (seen["test"] | seen["validation"]))
    assert "whole groups of book.de-en.refs" in report.split_origin["test"]
    assert all(g in report.split_origin["test"] for g in seen["test"])
    grouped, _ = DataOptions(
        **options, split_by="groups", split_groups=str(tmp_path / "book.de-en.refs")
    ).load_splits()
    assert grouped["test"]["source"] == splits["test"]["source"]
    blocks, report = DataOptions(**options, split_by="blocks").load_splits()
    assert "random blocks" in report.split_origin["test"] and "in-domain" in report.split_origin["test"]
    assert {group_of(s) for s in blocks["train"]["source"]} & {group_of(s) for s in blocks["test"]["source"]}
    test, _ = load_split(tsv, "test", valid_size=20, test_size=30, seed=3, split_by="groups")
    assert test["source"] == splits["test"]["source"]
    # without a group file 'auto' falls back to blocks and 'groups' says what to pass
    (tmp_path / "book.de-en.refs").unlink()
    _, report = DataOptions(**options, split_by="auto").load_splits()
    assert "random blocks" in report.split_origin["test"]
    with pytest.raises(ValueError, match="no group file next to.*--split_groups FILE"):
        DataOptions(**options, split_by="groups").load_splits()
    assert DataOptions(split_by="books").check() == [
        "--split_by must be one of auto, groups, blocks, got 'books'"
    ]


def test_group_labels_must_line_up_with_the_corpus_lines(tmp_path):
    tsv = grouped_corpus(tmp_path, {f"b{i}": 10 for i in range(10)})
    refs = tmp_path / "book.de-en.refs"
    refs.write_text("".join(refs.read_text().splitlines(keepends=True)[:-1]))
    options: dict[str, Any] = dict(data=str(tsv), valid_size=10, test_size=20, split_by="groups")
    with pytest.raises(ValueError, match="99 labels for 100 pairs"):
        DataOptions(**options).load_splits()
    splits, _ = DataOptions(**options, max_lines=60).load_splits()  # the first 60 lines have their labels
    assert sum(len(v) for v in splits.values()) == 60
    tsv.write_text(tsv.read_text() + "no tab\n")
    with pytest.raises(ValueError, match="1 corpus line.s. were skipped.*--split_by blocks"):
        DataOptions(**options).load_splits()


@pytest.mark.parametrize("corpus", ["bible.zh-en", "bible.de-en"])
def test_shipped_corpora_have_one_reference_per_line_and_contiguous_books(corpus):
    from vanilla_transformer.corpus.split import group_file_for, read_groups

    data = DEFAULT_DATA.with_name(f"{corpus}.tsv.xz")
    refs = data.with_name(f"{corpus}.refs.xz")
    assert group_file_for(data) == refs
    groups = read_groups(refs)
    assert len(groups) == sum(1 for _ in read_lines(data))
    runs = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert len(runs) == len(set(runs)) >= 50  # each book is one contiguous run
