"""The data of a run stays in Arrow: data files are read once into a memory-mapped cache keyed by their content,
token ids are cached by the tokenizer and the data, and the training examples are read from those files. A second
start with the same inputs reads nothing again and builds the same batches; a changed file or tokenizer is read
and tokenised again."""

from __future__ import annotations

import logging
import lzma
import os
from pathlib import Path

import torch
from conftest import small_run

from vanilla_transformer.corpus import DEFAULT_DATA
from vanilla_transformer.training.planning import plan_run

LINES = 300


def corpus_file(folder: Path, lines: int = LINES) -> Path:
    """The first ``lines`` lines of the shipped zh-en corpus as a plain TSV file."""
    with lzma.open(DEFAULT_DATA, "rt", encoding="utf-8") as f:
        text = "".join(next(f) for _ in range(lines))
    path = folder / "corpus.zh-en.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def plan(tmp_path: Path, data: Path, tokenizer: str, out: str):
    cfg = small_run(
        tmp_path / out,
        data=str(data),
        max_lines=None,
        tokenizer=tokenizer,
        cache_dir=str(tmp_path / "tokens"),
        data_cache_dir=str(tmp_path / "pairs"),
        max_steps=1,
    )
    return plan_run(cfg).data


def messages(caplog) -> str:
    text = "\n".join(r.getMessage() for r in caplog.records)
    caplog.clear()
    return text


def first_batches(data, n: int = 4) -> list[dict]:
    out = []
    for indices in data.sampler.batches(0)[:n]:
        batch = data.objective.batch(indices, *data.train_examples(0), _Config(), torch.device("cpu"))
        out.append(batch)
    return out


class _Config:
    pad_token_id, decoder_start_token_id = 0, 2


def test_second_start_reads_the_caches_and_builds_the_same_batches(tmp_path, tokenizer_dir, caplog):
    caplog.set_level(logging.INFO, logger="vanilla_transformer")
    data_file = corpus_file(tmp_path)
    first = plan(tmp_path, data_file, tokenizer_dir, "a")
    log = messages(caplog)
    assert "into the Arrow cache" in log and "Tokenised" in log and "no tokenisation" not in log

    # the training examples are the tokenizer's ids of the pairs that the length filter keeps, read from Arrow
    tok = first.tokenizer
    train = first.splits["train"]
    sources, targets = first.train_examples(0)
    assert len(sources) == len(train) > 200  # no pair of this slice is longer than max_length
    for i in (0, 7, len(train) - 1):
        assert sources[i] == tok(train[i]["source"])["input_ids"]
        assert targets[i] == tok(text_target=train[i]["target"])["input_ids"]
    lengths = first.sampler.lengths
    assert lengths.tolist() == [max(len(sources[i]), len(targets[i])) for i in range(len(sources))]

    second = plan(tmp_path, data_file, tokenizer_dir, "b")
    log = messages(caplog)
    assert "from the Arrow cache" in log and "no tokenisation" in log and "Tokenised" not in log
    assert second.sampler.batches(0) == first.sampler.batches(0)
    assert second.sampler.batches(1) == first.sampler.batches(1)
    for a, b in zip(first_batches(first), first_batches(second)):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    # a changed file (new content, new modification time) is read and tokenised again
    text = data_file.read_text(encoding="utf-8").splitlines(keepends=True)
    data_file.write_text("".join(text[:-1]), encoding="utf-8")
    os.utime(data_file, ns=(1, 1))
    changed = plan(tmp_path, data_file, tokenizer_dir, "c")
    log = messages(caplog)
    assert "into the Arrow cache" in log and "Tokenised" in log
    assert sum(len(s) for s in changed.splits.values()) == sum(len(s) for s in first.splits.values()) - 1


def test_a_changed_tokenizer_tokenises_again(tmp_path, bpe_tokenizer_dir, caplog):
    caplog.set_level(logging.INFO, logger="vanilla_transformer")
    data_file = corpus_file(tmp_path)
    plan(tmp_path, data_file, bpe_tokenizer_dir(1200), "a")
    messages(caplog)
    other = plan(tmp_path, data_file, bpe_tokenizer_dir(900), "b")
    log = messages(caplog)
    assert "from the Arrow cache" in log and "Tokenised" in log and "no tokenisation" not in log
    sources, _ = other.train_examples(0)
    assert sources[0] == other.tokenizer(other.splits["train"][0]["source"])["input_ids"]
