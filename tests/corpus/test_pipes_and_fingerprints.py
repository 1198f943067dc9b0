"""Data read from a pipe (read once, through a copy), and the fingerprint of what was read: the content of the
pairs, not the file's name or modification time, so that a resumed run can tell whether its data changed."""

from __future__ import annotations

import gzip
import os
import threading

import datasets
import pytest

from vanilla_transformer.corpus import data_changes, read_parallel_splits

PAIRS = "".join(f"source {i}\ttarget {i}\n" for i in range(40))


def fifo_of(path, data: bytes):
    """A FIFO at ``path`` and a thread that writes ``data`` into it once a reader opens it."""
    os.mkfifo(path)

    def write():
        with open(path, "wb") as fifo:
            fifo.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_a_fifo_is_read_once_through_a_copy_and_fingerprinted_by_its_content(tmp_path):
    regular = tmp_path / "pairs.tsv"
    regular.write_text(PAIRS, encoding="utf-8")
    expected, file_report = read_parallel_splits(regular, cache_dir=tmp_path / "pairs")

    writer = fifo_of(tmp_path / "fifo", PAIRS.encode())
    splits, report = read_parallel_splits(tmp_path / "fifo", cache_dir=tmp_path / "pairs")
    writer.join(timeout=10)
    assert splits["train"]["source"] == expected["train"]["source"]
    assert splits["train"]["target"] == expected["train"]["target"] and len(splits["train"]) == 40
    copies = list((tmp_path / "pairs").glob("spooled-*-fifo"))
    assert len(copies) == 1 and copies[0].read_bytes() == PAIRS.encode()
    assert "is a pipe" in report.summary() and str(copies[0]) in report.summary()
    # the pipe is fingerprinted under its own name, by the content of its pairs: that of the regular file
    assert list(report.fingerprint) == [str(tmp_path / "fifo")]
    assert list(report.fingerprint.values()) == list(file_report.fingerprint.values())


def test_a_compressed_fifo_keeps_its_format_and_an_empty_one_is_a_clear_error(tmp_path):
    writer = fifo_of(tmp_path / "pairs.tsv.gz", gzip.compress(PAIRS.encode()))
    splits, _ = read_parallel_splits(tmp_path / "pairs.tsv.gz", cache_dir=tmp_path / "pairs")
    writer.join(timeout=10)
    assert len(splits["train"]) == 40

    writer = fifo_of(tmp_path / "empty", b"")
    with pytest.raises(ValueError, match=r"'.*empty' is a pipe that gave no data \(0 bytes\)"):
        read_parallel_splits(tmp_path / "empty", cache_dir=tmp_path / "pairs")
    writer.join(timeout=10)


def test_the_fingerprint_follows_the_pairs_not_the_file_time(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(PAIRS, encoding="utf-8")
    _, first = read_parallel_splits(path, cache_dir=tmp_path / "pairs")
    os.utime(path, ns=(1, 1))  # same content, another modification time: read again, same fingerprint
    _, touched = read_parallel_splits(path, cache_dir=tmp_path / "pairs")
    assert (
        touched.fingerprint == first.fingerprint
        and data_changes(first.fingerprint, touched.fingerprint) == []
    )

    path.write_text(PAIRS.replace("target 7\n", "target seven\n"), encoding="utf-8")
    _, edited = read_parallel_splits(path, cache_dir=tmp_path / "pairs")
    (change,) = data_changes(first.fingerprint, edited.fingerprint)
    assert change.startswith(f"{path} changed (40 pairs, sha256 ") and ", now 40 pairs, sha256 " in change


def test_a_datasets_dataset_is_fingerprinted_by_its_datasets_fingerprint(tmp_path):
    rows = {"source": ["a", "b", "c"], "target": ["x", "y", "z"]}
    _, first = read_parallel_splits(datasets.Dataset.from_dict(rows))
    _, same = read_parallel_splits(datasets.Dataset.from_dict(rows))
    _, other = read_parallel_splits(datasets.Dataset.from_dict({**rows, "target": ["x", "y", "w"]}))
    assert data_changes(first.fingerprint, same.fingerprint) == []
    (change,) = data_changes(first.fingerprint, other.fingerprint)
    assert change.startswith("dataset split 'train' changed (3 rows, fingerprint ")


def test_dev_stdin_is_read_through_a_copy(tmp_path):
    """``/dev/stdin`` when the standard input is a pipe (this process's file descriptor 0, put back after)."""
    read_end, write_end = os.pipe()
    saved = os.dup(0)

    def write():
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(PAIRS.encode())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        os.dup2(read_end, 0)
        os.close(read_end)
        splits, report = read_parallel_splits("/dev/stdin", cache_dir=tmp_path / "pairs")
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    writer.join(timeout=10)
    assert len(splits["train"]) == 40 and report.spooled.startswith("'/dev/stdin' is a pipe: its ")
