"""Training's view of the parallel data: tokenisation with a cache, the length filter, and `TrainingData`
(everything a run reads from its corpus, built by `prepare_training_data`).

Reading and splitting corpora is `corpus`'s job; this module turns a split with ``source``/``target`` text
columns into token ids.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from corpus import SOURCE, TARGET
from tokenizer import load_or_train_tokenizer

from .batching import BatchStream, TokenBudgetBatchSampler


def content_hash(*parts: str | bytes) -> str:
    """A short sha256 hex digest of the given strings/bytes (used as a cache key)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def dataset_hash(dataset: datasets.Dataset) -> str:
    """A hash of the ``source``/``target`` texts of a dataset (its content, not its history)."""
    h = hashlib.sha256()
    for batch in dataset.iter(batch_size=4096):
        for src, tgt in zip(batch[SOURCE], batch[TARGET]):
            h.update(src.encode("utf-8") + b"\t" + tgt.encode("utf-8") + b"\n")
    return h.hexdigest()[:16]


def tokenizer_hash(tokenizer) -> str:
    """A hash of the tokenizer's full serialised pipeline (vocabulary, merges, normaliser, post-processor)."""
    return content_hash(tokenizer.backend_tokenizer.to_str())


def tokenize_dataset(
    dataset: datasets.Dataset,
    tokenizer,
    cache_dir: str | os.PathLike | None = None,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """Add ``input_ids`` (source ids + </s>) and ``labels`` (target ids + </s>) columns, no truncation.

    With ``cache_dir``, the result is cached in an Arrow file named by a hash of the tokenizer and the data, so
    a second run with the same tokenizer and data reads it back instead of tokenising again.
    """

    def encode(batch: dict) -> dict:
        enc = tokenizer(batch[SOURCE], text_target=batch[TARGET], truncation=False)
        return {"input_ids": enc["input_ids"], "labels": enc["labels"]}

    kwargs: dict[str, Any] = {}
    if cache_dir is not None:
        key = content_hash(tokenizer_hash(tokenizer), dataset_hash(dataset))
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        kwargs = dict(
            cache_file_name=str(Path(cache_dir) / f"tokenized-{key}.arrow"), load_from_cache_file=True
        )
    return dataset.map(encode, batched=True, batch_size=1000, desc="Tokenizing", num_proc=num_proc, **kwargs)


def filter_by_length(dataset: datasets.Dataset, max_length: int) -> tuple[datasets.Dataset, int]:
    """Drop pairs whose source or target has more than ``max_length`` tokens; return (kept, number dropped)."""
    src_len = np.array([len(x) for x in dataset["input_ids"]])
    tgt_len = np.array([len(x) for x in dataset["labels"]])
    keep = np.flatnonzero((src_len <= max_length) & (tgt_len <= max_length))
    dropped = len(dataset) - len(keep)
    if dropped == 0:
        return dataset, 0
    return dataset.select(keep.tolist()), dropped


@dataclass
class TrainingData:
    """The data of one run: the text splits, the tokenizer, the length-filtered token ids of the training and
    validation pairs, and the token-budget batch order over the training pairs (``stream``; its position is the
    data part of a checkpoint)."""

    splits: datasets.DatasetDict
    tokenizer: Any
    train_src: list[list[int]]
    train_tgt: list[list[int]]
    valid_src: list[list[int]]
    valid_tgt: list[list[int]]
    sampler: TokenBudgetBatchSampler
    stream: BatchStream
    summary: str  # what reading, splitting and filtering did, for the log and the model card
    split_origin: dict[str, str]  # where each split came from (corpus.DataReport.split_origin)


def prepare_training_data(cfg, recipe, run_dir, accelerator) -> TrainingData:
    """Read and split the corpus (``cfg``'s `corpus.DataOptions`), load or train the tokenizer (saved in the run
    folder), tokenise with a cache, drop pairs longer than ``--max_length`` and order the training batches by
    ``recipe.max_tokens``. The main process reads and tokenises first, the others then reuse its files."""
    with accelerator.main_process_first():
        splits, report = cfg.load_splits()
        tokenizer = load_or_train_tokenizer(cfg.tokenizer, run_dir.tokenizer, splits["train"], cfg.vocab_size)
        train = tokenize_dataset(splits["train"], tokenizer, run_dir.cache)
        valid = (
            tokenize_dataset(splits["validation"], tokenizer, run_dir.cache)
            if len(splits["validation"])
            else None
        )
    train, dropped_train = filter_by_length(train, cfg.max_length)
    dropped_valid = 0
    if valid is not None:
        valid, dropped_valid = filter_by_length(valid, cfg.max_length)
    train_src, train_tgt = [list(x) for x in train["input_ids"]], [list(x) for x in train["labels"]]
    valid_src = [list(x) for x in valid["input_ids"]] if valid is not None else []
    valid_tgt = [list(x) for x in valid["labels"]] if valid is not None else []
    sampler = TokenBudgetBatchSampler(
        [len(s) for s in train_src], [len(t) for t in train_tgt], recipe.max_tokens, seed=cfg.seed,
        skip_too_long=cfg.skip_too_long,
    )  # fmt: skip
    summary = (
        report.summary()
        + ". Splits: "
        + "; ".join(
            f"{len(splits[name])} {name} ({report.split_origin[name]})"
            for name in ("train", "validation", "test")
        )
    )
    if dropped_train or dropped_valid:
        summary += (
            f". Dropped pairs longer than --max_length={cfg.max_length} tokens: {dropped_train} train, "
            f"{dropped_valid} validation"
        )
    if sampler.num_skipped:
        summary += (
            f". Skipped {sampler.num_skipped} training pairs longer than --max_tokens={recipe.max_tokens}"
        )
    if isinstance(cfg.data, (str, Path)):
        summary = summary.replace(str(cfg.data), Path(cfg.data).name)
    return TrainingData(splits, tokenizer, train_src, train_tgt, valid_src, valid_tgt, sampler, BatchStream(sampler),
                        summary, report.split_origin)  # fmt: skip
