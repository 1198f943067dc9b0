"""One corpus reader for every common format: the same pairs written as TSV (with and without a header), CSV,
JSON Lines (flat and `translation`), a JSON array, Parquet, xz, a folder of shards and an in-memory `DatasetDict`
give identical splits, identical tokenizers and identical token ids; a source's own validation/test splits are
used; bad data in the new formats is a one-line error or a counted skip."""

from __future__ import annotations

import csv
import json
import lzma
from pathlib import Path

import datasets
import pytest
from transformers import PreTrainedTokenizerFast

from vanilla_transformer.corpus import DEFAULT_DATA, DataOptions, load_parallel_corpus, read_parallel_splits
from vanilla_transformer.tokenizer import train_bpe_tokenizer
from vanilla_transformer.tokenizer.prepare import load_or_train_tokenizer
from vanilla_transformer.training.data import tokenize_dataset

N = 200


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    """200 real verse pairs, some with commas and quotes (CSV quoting is exercised)."""
    ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=N)
    result = list(zip(ds["source"], ds["target"]))
    assert any("," in t for _, t in result) and any('"' in t or "'" in t for _, t in result)
    return result


def write_all_formats(folder, pairs) -> dict[str, object]:
    """The same pairs in every accepted form; keys name the form."""
    folder.mkdir(exist_ok=True)
    tsv = "".join(f"{s}\t{t}\n" for s, t in pairs)
    forms: dict[str, object] = {}
    (folder / "plain.tsv").write_text(tsv, encoding="utf-8")
    forms["tsv"] = folder / "plain.tsv"
    (folder / "header.zh-en.tsv").write_text("zh\ten\n" + tsv, encoding="utf-8")
    forms["tsv with header (detected)"] = folder / "header.zh-en.tsv"
    with open(folder / "pairs.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["source", "target"])
        writer.writerows(pairs)
    forms["csv"] = folder / "pairs.csv"
    flat = [{"source": s, "target": t} for s, t in pairs]
    (folder / "flat.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in flat), "utf-8"
    )
    forms["jsonl"] = folder / "flat.jsonl"
    nested = [{"translation": {"zh": s, "en": t}} for s, t in pairs]
    (folder / "wmt.zh-en.jsonl").write_text("".join(json.dumps(r) + "\n" for r in nested), encoding="utf-8")
    forms["jsonl translation (languages from the name)"] = folder / "wmt.zh-en.jsonl"
    (folder / "array.json").write_text(json.dumps(flat, ensure_ascii=False, indent=1), encoding="utf-8")
    forms["json array"] = folder / "array.json"
    datasets.Dataset.from_list(flat).to_parquet(str(folder / "pairs.parquet"))
    forms["parquet"] = folder / "pairs.parquet"
    (folder / "pairs.tsv.xz").write_bytes(lzma.compress(tsv.encode("utf-8")))
    forms["tsv.xz"] = folder / "pairs.tsv.xz"
    shards = folder / "shards"
    shards.mkdir(exist_ok=True)
    half = len(pairs) // 2
    for i, part in enumerate((pairs[:half], pairs[half:])):
        (shards / f"part-{i}.jsonl").write_text(
            "".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in part), encoding="utf-8"
        )
    forms["folder of two shards"] = shards
    forms["glob of the shards"] = str(shards / "part-*.jsonl")
    forms["DatasetDict"] = datasets.DatasetDict({"train": datasets.Dataset.from_list(flat)})
    forms["Dataset (other column names, unused column)"] = datasets.Dataset.from_dict(
        {"id": list(range(len(pairs))), "zh": [s for s, _ in pairs], "en": [t for _, t in pairs]}
    )
    return forms


def test_every_format_gives_identical_splits_tokenizers_and_token_ids(tmp_path, pairs):
    forms = write_all_formats(tmp_path / "data", pairs)
    results = {}
    for name, data in forms.items():
        options = DataOptions(
            data=data, valid_size=20, test_size=20, split_block_size=5, source_lang="zh", target_lang="en"
        )
        splits, report = options.load_splits()
        assert report.pairs == N and report.skipped_bad_lines == 0, (name, report.summary())
        texts = {
            k: (list(splits[k]["source"]), list(splits[k]["target"])) for k in ("train", "validation", "test")
        }
        tokenizer = load_or_train_tokenizer(
            None, tmp_path / "tok" / name.replace(" ", "_"), splits["train"], 500
        )
        assert isinstance(tokenizer, PreTrainedTokenizerFast)
        ids = tokenize_dataset(splits["train"], tokenizer, cache_dir=None)
        results[name] = (
            texts,
            tokenizer.backend_tokenizer.to_str(),
            list(ids["input_ids"]),
            list(ids["labels"]),
        )
    reference = results["tsv"]
    assert reference[0]["train"][0] == [s for s, _ in pairs if s in set(reference[0]["train"][0])]
    assert sorted(
        reference[0]["train"][0] + reference[0]["validation"][0] + reference[0]["test"][0]
    ) == sorted(s for s, _ in pairs)
    for name, result in results.items():
        assert result[0] == reference[0], f"{name}: different text splits"
        assert result[1] == reference[1], f"{name}: different tokenizer"
        assert result[2:] == reference[2:], f"{name}: different token ids"


def test_tokenizer_training_reads_parallel_files_like_training(tmp_path, pairs):
    """`train_bpe_tokenizer(path)` (vanilla-transformer train-tokenizer) reads a parallel file through the corpus reader:
    a header row is not text, a CSV's quotes are not text, every format gives the same vocabulary."""
    forms = write_all_formats(tmp_path / "data", pairs)
    vocabularies = {
        name: train_bpe_tokenizer(data, vocab_size=500).get_vocab()
        for name, data in forms.items()
        if not isinstance(data, (datasets.Dataset, datasets.DatasetDict)) and "translation" not in name
    }
    expected = train_bpe_tokenizer([x for pair in pairs for x in pair], vocab_size=500).get_vocab()
    for name, vocab in vocabularies.items():
        assert vocab == expected, name


def test_header_detection_and_explicit_choice(tmp_path):
    path = tmp_path / "a.tsv"
    path.write_text("source\ttarget\nHallo\tHello\nWelt\tWorld\n", encoding="utf-8")
    ds, report = load_parallel_corpus(path)
    assert ds["source"] == ["Hallo", "Welt"] and "header row detected" in report.summary()
    ds, _ = load_parallel_corpus(path, has_header=False)
    assert ds["source"] == ["source", "Hallo", "Welt"]  # the user said there is no header: the row is data
    data = tmp_path / "b.tsv"
    data.write_text("Hallo\tHello\nWelt\tWorld\n", encoding="utf-8")
    ds, report = load_parallel_corpus(data)
    assert ds["source"] == ["Hallo", "Welt"] and report.header is None
    ds, _ = load_parallel_corpus(data, has_header=True)
    assert ds["source"] == ["Welt"]  # first line read as column names: 'Hallo' -> 'Hello'
    named = tmp_path / "c.tsv"
    named.write_text("id\tGerman\tEnglish\n1\tHallo\tHello\n", encoding="utf-8")
    ds, _ = load_parallel_corpus(named, source_column="German", target_column="English")
    assert ds[0] == {"source": "Hallo", "target": "Hello"}
    headerless_csv = tmp_path / "d.csv"
    headerless_csv.write_text('Hallo,"Hello, you"\nWelt,World\n', encoding="utf-8")
    ds, _ = load_parallel_corpus(headerless_csv, has_header=False)
    assert ds["target"] == ["Hello, you", "World"]


def test_a_source_with_its_own_splits_keeps_them(tmp_path, pairs):
    folder = tmp_path / "hub_style"
    (folder / "data").mkdir(parents=True)
    parts = {"train": pairs[:150], "validation": pairs[150:170], "test": pairs[170:]}
    for split, part in parts.items():
        datasets.Dataset.from_list([{"translation": {"zh": s, "en": t}} for s, t in part]).to_parquet(
            str(folder / "data" / f"{split}-00000-of-00001.parquet")
        )
    # default sizes 500/1000 unused
    options = DataOptions(data=str(folder), source_lang="zh", target_lang="en")
    splits, report = options.load_splits()
    assert {k: list(zip(splits[k]["source"], splits[k]["target"])) for k in splits} == parts
    assert report.split_origin["test"] == "'test' split of the data"
    dd = datasets.DatasetDict(
        {
            k: datasets.Dataset.from_list([{"de": s, "en": t} for s, t in v])
            for k, v in (("train", parts["train"]), ("dev", parts["test"]))
        }
    )
    splits, report = DataOptions(data=dd, source_lang="de", target_lang="en", test_size=10).load_splits()
    assert splits["validation"]["source"] == [s for s, _ in parts["test"]]  # 'dev' is the validation split
    assert len(splits["test"]) == 10 and len(splits["train"]) == 140
    assert report.split_origin["test"].startswith("held out from 'train'")
    splits, _ = DataOptions(
        data=dd, valid_split="none", valid_size=5, test_split="none", test_size=5
    ).load_splits()
    assert [len(splits[k]) for k in ("train", "validation", "test")] == [140, 5, 5]
    with pytest.raises(
        ValueError, match=r"--test_split 'newstest'.*its splits are \['train', 'validation'\]"
    ):
        DataOptions(data=dd, test_split="newstest").load_splits()
    saved = tmp_path / "saved"
    dd.save_to_disk(str(saved))
    splits, _ = DataOptions(data=str(saved), test_size=10).load_splits()
    assert splits["validation"]["target"] == [t for _, t in parts["test"]]


def test_training_on_a_dataset_dict_reports_its_own_test_split(tmp_path, pairs, tokenizer_dir):
    from conftest import small_run_options

    from vanilla_transformer.training import TrainConfig, train

    parts = {"train": pairs[:170], "validation": pairs[170:185], "test": pairs[185:]}
    dd = datasets.DatasetDict(
        {k: datasets.Dataset.from_list([{"source": s, "target": t} for s, t in v]) for k, v in parts.items()}
    )
    options = small_run_options(
        output_dir=str(tmp_path / "run"),
        data=dd,
        max_lines=None,
        max_steps=2,
        tokenizer=tokenizer_dir,
        export=True,
        test_beams=1,
    )
    result = train(TrainConfig(**options))
    assert result.split_sizes["test"] == len(parts["test"]) and result.test_metrics is not None
    assert "15 validation ('validation' split of the data)" in result.data_summary
    assert "15 test ('test' split of the data)" in result.data_summary
    assert result.split_origin["test"] == "'test' split of the data"
    card = (tmp_path / "run" / "README.md").read_text(encoding="utf-8")
    assert "pairs of the test split ('test' split of the data)" in card
    saved = json.loads((tmp_path / "run" / "checkpoints" / "train_config.json").read_text(encoding="utf-8"))
    # the options name the source; its content is the checkpoint's data fingerprint, by `datasets` fingerprint
    assert saved["data"] == "DatasetDict(train, validation, test)"
    state = json.loads((tmp_path / "run" / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    assert {k: v["fingerprint"] for k, v in state["data"].items()} == {
        f"dataset split {k!r}": ds._fingerprint for k, ds in dd.items()
    }


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("empty.parquet", None, r"No usable source/target pairs"),
        ("bad.parquet", b"not parquet", r"Could not read .*bad.parquet' as Parquet"),
        ("obj.json", '{"source": "a", "target": "A"}', r"holds a JSON dict, not an array of objects"),
        ("broken.json", '[{"source": "a"', r"line 1: invalid JSON"),
        ("header_only.tsv", "source\ttarget\n", r"No usable source/target pairs"),
        ("header_only.csv", "source,target\n", r"No usable source/target pairs"),
        ("mixed", None, r"mixes data formats \(jsonl, tsv\)"),
        ("empty_folder", None, r"holds no data files"),
        ("nothing-*.tsv", None, r"No file matches"),
    ],
)
def test_bad_data_in_new_formats_is_one_clear_error(tmp_path, name, content, match):
    path = tmp_path / name
    if name == "empty.parquet":
        datasets.Dataset.from_dict({"source": [], "target": []}).to_parquet(str(path))
    elif name == "mixed":
        path.mkdir()
        (path / "a.tsv").write_text("a\tA\n", encoding="utf-8")
        (path / "b.jsonl").write_text('{"source": "b", "target": "B"}\n', encoding="utf-8")
    elif name == "empty_folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        read_parallel_splits(path)


def test_bad_rows_in_new_formats_are_counted_or_an_error(tmp_path):
    array = tmp_path / "a.json"
    array.write_text(
        json.dumps([{"source": "a", "target": "A"}, ["not", "an object"], {"source": "b"}]), "utf-8"
    )
    ds, report = load_parallel_corpus(array)
    assert ds["source"] == ["a"] and report.skipped_bad_lines == 2 and report.lines_read == 3
    with pytest.raises(ValueError, match=r"line 2: array item 2 is not a JSON object"):
        load_parallel_corpus(array, on_bad_line="error")
    table = tmp_path / "a.parquet"
    datasets.Dataset.from_dict({"source": ["a", None, "c"], "target": ["A", "B", ""]}).to_parquet(str(table))
    ds, report = load_parallel_corpus(table)
    assert ds["source"] == ["a"] and report.skipped_bad_lines == 1 and report.skipped_empty == 1


def test_a_hub_dataset_stays_in_arrow_and_its_bad_rows_are_counted_or_named(tmp_path, pairs):
    """The Hub reader (here `load_dataset` of a local folder of Parquet splits, as a Hub repository is laid out)
    gives the splits' pairs as memory-mapped Arrow files in the pairs cache, not in memory; a bad row is skipped and
    counted, or an error that names it."""
    from vanilla_transformer.corpus.read import _read_hub
    from vanilla_transformer.corpus.rows import Columns, DataReport

    folder = tmp_path / "hub_repo"
    (folder / "data").mkdir(parents=True)
    parts = {"train": pairs[:150], "validation": pairs[150:170], "test": pairs[170:]}
    for split, part in parts.items():
        rows = [{"translation": {"zh": s, "en": t}} for s, t in part]
        if split == "train":
            rows.insert(2, {"translation": {"zh": None, "en": "no source"}})
        datasets.Dataset.from_list(rows).to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    report = DataReport(path=str(folder))
    columns = Columns(None, None, "zh", "en", None, "skip")
    splits, report = _read_hub(str(folder), None, columns, report, None, tmp_path / "pairs")
    assert {k: list(zip(splits[k]["source"], splits[k]["target"])) for k in splits} == parts
    assert all(Path(f["filename"]).parent == tmp_path / "pairs" for f in splits["train"].cache_files)
    assert splits["train"].cache_files and report.skipped_bad_lines == 1
    with pytest.raises(ValueError, match=r"split 'train'.*line 3: source or target is missing"):
        strict = Columns(None, None, "zh", "en", None, "error")
        _read_hub(str(folder), None, strict, DataReport(path=str(folder)), None, tmp_path / "p2")
