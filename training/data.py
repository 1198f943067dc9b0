"""Training's view of the parallel data: tokenisation with a cache, the length filter, the training examples of
each epoch (`EpochExamples`: the same every epoch, or re-segmented with ``--bpe_dropout``), and `TrainingData`
(everything a run reads from its corpus, built by `prepare_training_data`).

Reading and splitting corpora is `corpus`'s job; this module turns a split with ``source``/``target`` text
columns into token ids.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from vanilla_transformer.corpus import SOURCE, TARGET
from vanilla_transformer.tokenizer import BPEDropout, load_or_train_tokenizer

from .batching import BatchStream, TokenBudgetBatchSampler
from .objectives import Objective, objective_for
from .options import given_tokenizer


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


# the key that, after (seed, epoch), seeds an epoch's BPE-dropout draws (the batch order uses (seed, epoch) and
# (seed, epoch, 1): training.batching)
BPE_DROPOUT_STREAM = 2


@dataclass
class EpochExamples:
    """The training examples of every epoch, ``(sources, targets)`` token-id lists arranged by `Objective.examples`.

    With ``dropout`` 0 they are ``sources``/``targets`` in every epoch. With ``dropout`` P > 0 (``--bpe_dropout``,
    translation pairs) epoch ``e`` gets a BPE-dropout segmentation of the same pairs (`tokenizer.BPEDropout` over
    ``segmenter``'s texts: the sources, then the targets), drawn from ``(seed, e, BPE_DROPOUT_STREAM)``: a pure
    function of the seed and the epoch, so that every process computes the same one and a resumed run trains on
    the one the interrupted run had. A side whose segmentation has more than ``limit`` tokens keeps its
    deterministic ids, so that the length filter and the token budget hold in every epoch. Calling the object for
    an epoch memoises the two newest epochs (a batch stream asks for the next one before it leaves the current).
    """

    sources: list[list[int]]
    targets: list[list[int]]
    dropout: float = 0.0
    segmenter: BPEDropout | None = None
    seed: int = 0
    limit: int = 0
    _memo: dict = field(default_factory=dict, repr=False)

    def __call__(self, epoch: int) -> tuple[list[list[int]], list[list[int]]]:
        if self.dropout == 0 or self.segmenter is None:
            return self.sources, self.targets
        if epoch not in self._memo:
            rng = np.random.default_rng([self.seed, epoch, BPE_DROPOUT_STREAM])
            texts = self.segmenter.segment(self.dropout, rng)
            n = len(self.sources)
            sources = [s if len(s) <= self.limit else d for s, d in zip(texts[:n], self.sources)]
            targets = [t if len(t) <= self.limit else d for t, d in zip(texts[n:], self.targets)]
            self._memo = {e: v for e, v in self._memo.items() if e == epoch - 1}
            self._memo[epoch] = (sources, targets)
        return self._memo[epoch]


@dataclass
class TrainingData:
    """The data of one run: the text splits, the tokenizer, the objective, the length-filtered token ids of its
    training examples in each epoch (``train_examples(epoch)``, `EpochExamples`) and of its validation examples
    (`Objective.examples`), and the token-budget batch order over the training examples (``stream``; its position
    is the data part of a checkpoint). ``test_src``/``test_tgt`` are the test examples of the language-model
    objectives (scored by loss; translation scores the test texts by BLEU)."""

    splits: datasets.DatasetDict
    tokenizer: Any
    train_examples: EpochExamples
    valid_src: list[list[int]]
    valid_tgt: list[list[int]]
    sampler: TokenBudgetBatchSampler
    stream: BatchStream
    summary: str  # what reading, splitting and filtering did, for the log and the model card
    split_origin: dict[str, str]  # where each split came from (corpus.DataReport.split_origin)
    objective: Objective
    test_src: list[list[int]]
    test_tgt: list[list[int]]


def _token_ids(split: datasets.Dataset, tokenizer, cache) -> tuple[list[list[int]], list[list[int]]]:
    if not len(split):
        return [], []
    tokenized = tokenize_dataset(split, tokenizer, cache)
    return [list(x) for x in tokenized["input_ids"]], [list(x) for x in tokenized["labels"]]


def prepare_training_data(cfg, recipe, run_dir, accelerator) -> TrainingData:
    """Read and split the corpus (``cfg``'s `corpus.DataOptions`), load or train the tokenizer (saved in the run
    folder; ``--init_from``'s unless ``--tokenizer`` is given; with the denoising tokens when a masked-LM or
    span-corruption run trains one), tokenise with a cache, arrange the examples of ``--objective``, drop those
    longer than ``--max_length`` and order the training batches by ``recipe.max_tokens``. The main process reads
    and tokenises first, the others then reuse its files. With ``--bpe_dropout`` the training pairs kept by the
    length filter are re-segmented in every epoch (`EpochExamples`; validation and test keep the tokenizer's own
    segmentation)."""
    given, objective = given_tokenizer(cfg), objective_for(cfg)
    with accelerator.main_process_first():
        splits, report = cfg.load_splits()
        tokenizer = load_or_train_tokenizer(
            given,
            run_dir.tokenizer,
            splits["train"],
            cfg.vocab_size,
            denoising_tokens=objective.denoising_tokens,
            han_characters=cfg.han_characters,
        )
        train_ids = _token_ids(splits["train"], tokenizer, run_dir.cache)
        valid_ids = _token_ids(splits["validation"], tokenizer, run_dir.cache)
        test_ids = (
            _token_ids(splits["test"], tokenizer, run_dir.cache) if not objective.translates else ([], [])
        )
    objective = objective.for_tokenizer(tokenizer)
    train_src, train_tgt, dropped_train = objective.examples(*train_ids, cfg.max_length)
    valid_src, valid_tgt, dropped_valid = objective.examples(*valid_ids, cfg.max_length)
    test_src, test_tgt, _ = objective.examples(*test_ids, cfg.max_length)
    train_examples = EpochExamples(train_src, train_tgt)
    if cfg.bpe_dropout > 0:  # objectives that translate only (training.options.check_options)
        kept = [
            i
            for i, (s, t) in enumerate(zip(*train_ids))
            if len(s) <= cfg.max_length and len(t) <= cfg.max_length
        ]
        sources, targets = list(splits["train"][SOURCE]), list(splits["train"][TARGET])
        texts = [sources[i] for i in kept] + [targets[i] for i in kept]
        train_examples = EpochExamples(
            train_src,
            train_tgt,
            cfg.bpe_dropout,
            BPEDropout(tokenizer, texts),
            cfg.seed,
            limit=min(cfg.max_length, recipe.max_tokens),
        )
    sampler = TokenBudgetBatchSampler(
        *objective.lengths(train_src, train_tgt),
        recipe.max_tokens,
        seed=cfg.seed,
        skip_too_long=cfg.skip_too_long,
        epoch_lengths=(lambda epoch: objective.lengths(*train_examples(epoch)))
        if cfg.bpe_dropout > 0
        else None,
    )
    summary = (
        report.summary()
        + ". Splits: "
        + "; ".join(
            f"{len(splits[name])} {name} ({report.split_origin[name]})"
            for name in ("train", "validation", "test")
        )
    )
    what = "pairs" if objective.pairs else "texts"
    if not objective.translates:
        summary += (
            f". Objective {cfg.objective}: {len(train_src)} training and {len(valid_src)} validation {what}"
        )
    if dropped_train or dropped_valid:
        summary += (
            f". Dropped {what} longer than --max_length={cfg.max_length} tokens: {dropped_train} train, "
            f"{dropped_valid} validation"
        )
    if cfg.bpe_dropout > 0:
        summary += f". BPE-dropout {cfg.bpe_dropout}: the training pairs are re-segmented in every epoch"
    if sampler.num_skipped:
        summary += (
            f". Skipped {sampler.num_skipped} training pairs longer than --max_tokens={recipe.max_tokens}"
        )
    if isinstance(cfg.data, (str, Path)):
        summary = summary.replace(str(cfg.data), Path(cfg.data).name)
    return TrainingData(
        splits,
        tokenizer,
        train_examples,
        valid_src,
        valid_tgt,
        sampler,
        BatchStream(sampler),
        summary,
        report.split_origin,
        objective,
        test_src,
        test_tgt,
    )
