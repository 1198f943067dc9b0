"""Training's view of the parallel data: tokenisation with a cache, the length filter, the training examples of
each epoch (`EpochExamples`: the same every epoch, or re-segmented with ``--bpe_dropout``), and `TrainingData`
(everything a run reads from its corpus, built by `prepare_training_data`).

Reading and splitting corpora is `corpus`'s job; this module turns a split with ``source``/``target`` text
columns into token ids.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import datasets
import numpy as np

from vanilla_transformer.corpus import SOURCE, TARGET
from vanilla_transformer.inference.languages import set_pair
from vanilla_transformer.tokenizer import BPEDropout, load_or_train_tokenizer

from .alignment import attach_alignments
from .batching import BatchStream, TokenBudgetBatchSampler
from .distillation import distill_training_split
from .objectives import Objective, objective_for
from .options import given_tokenizer
from .streaming import StreamingBatches, streaming_choice

logger = logging.getLogger(__name__)


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
    # datasets leaves iter() unannotated; a dataset without a format yields {column: values} batches
    for batch in cast(Iterator[dict[str, list[str]]], dataset.iter(batch_size=4096)):
        for src, tgt in zip(batch[SOURCE], batch[TARGET]):
            h.update(src.encode("utf-8") + b"\t" + tgt.encode("utf-8") + b"\n")
    return h.hexdigest()[:16]


def data_key(dataset: datasets.Dataset) -> str:
    """The data part of the tokenisation cache key: for a split of memory-mapped files (`corpus.arrow`, named by
    their content) `datasets`' fingerprint, which follows the files and every selection made from them; for an
    in-memory dataset the hash of its texts (`dataset_hash`)."""
    if dataset.cache_files:
        return "fingerprint-" + dataset._fingerprint
    return dataset_hash(dataset)


def tokenizer_hash(tokenizer) -> str:
    """A hash of the tokenizer's full serialised pipeline: a fast tokenizer's ``tokenizer.json`` (vocabulary, merges,
    normaliser, post-processor); any other's saved files (a Marian tokenizer's SentencePiece models, vocabulary and
    configuration), by name and content."""
    if getattr(tokenizer, "is_fast", False):
        return content_hash(tokenizer.backend_tokenizer.to_str())
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        files = sorted(Path(folder).iterdir())
        return content_hash(
            type(tokenizer).__name__, *(part for f in files for part in (f.name, f.read_bytes()))
        )


LENGTHS = ("input_length", "labels_length")  # the token counts that `tokenize_dataset` adds
PARALLEL_FROM = 50_000  # pairs from which tokenisation runs in several processes (when there are cores)


def encoder(tokenizer) -> Callable[[dict], dict]:
    """The batched function that tokenises ``source``/``target`` texts (`tokenize_dataset`'s columns)."""

    eos = tokenizer.eos_token_id

    def encode(batch: dict) -> dict:
        enc = tokenizer(batch[SOURCE], text_target=batch[TARGET], truncation=False)
        # the decoder learns to stop only from labels that end with </s>: a tokenizer that adds none to targets
        # (an imported eole model's, which adds none to sources either) gets it here
        labels = [ids if eos is None or (ids and ids[-1] == eos) else [*ids, eos] for ids in enc["labels"]]
        return {
            "input_ids": enc["input_ids"],
            "labels": labels,
            LENGTHS[0]: [len(x) for x in enc["input_ids"]],
            LENGTHS[1]: [len(x) for x in labels],
        }

    return encode


def tokenize_dataset(
    dataset: datasets.Dataset,
    tokenizer,
    cache_dir: str | os.PathLike | None = None,
    num_proc: int | None = None,
    process_index: int = 0,
) -> datasets.Dataset:
    """Add ``input_ids`` (source ids + </s>) and ``labels`` (target ids + </s>) columns, no truncation, and their
    lengths ``input_length``/``labels_length`` (`LENGTHS`: what the token-budget sampler reads).

    With ``cache_dir``, the result is cached in Arrow files named by a hash of the tokenizer and the data
    (`data_key`), so a second run with the same tokenizer and data reads them back instead of tokenising again
    (the log says which; the cache's manifest records ``process_index``, the process that tokenised).
    ``num_proc`` None: several processes for a large dataset when the machine has the cores.
    """

    encode = encoder(tokenizer)
    if num_proc is None and len(dataset) >= PARALLEL_FROM:
        num_proc = min(len(os.sched_getaffinity(0)), 8)
    num_proc = num_proc if num_proc and num_proc > 1 else None
    kwargs: dict[str, Any] = {}
    if cache_dir is not None:
        key = content_hash(TOKENIZED_VERSION, tokenizer_hash(tokenizer), data_key(dataset))
        folder = Path(cache_dir)
        folder.mkdir(parents=True, exist_ok=True)
        manifest = folder / f"tokenized-{key}.json"
        cached = _from_cache(manifest)
        if cached is not None:
            logger.info(
                "Read %d tokenised pairs from the tokenisation cache %s (no tokenisation)",
                len(cached),
                manifest,
            )
            return cached
        kwargs = dict(cache_file_name=str(folder / f"tokenized-{key}.arrow"), load_from_cache_file=True)
    tokenized = dataset.map(
        encode, batched=True, batch_size=1000, desc="Tokenizing", num_proc=num_proc, **kwargs
    )
    logger.info("Tokenised %d pairs%s", len(dataset), f" ({num_proc} processes)" if num_proc else "")
    if cache_dir is not None:
        files = [Path(f["filename"]).name for f in tokenized.cache_files]
        manifest.write_text(
            json.dumps({"files": files, "rows": len(tokenized), "process": process_index}), encoding="utf-8"
        )
    return tokenized


TOKENIZED_VERSION = "tokenized-2"  # changes when the columns `tokenize_dataset` writes change


def _from_cache(manifest: Path) -> datasets.Dataset | None:
    """The tokenised dataset a manifest lists (its Arrow files, in order), or None when any is missing."""
    if not manifest.is_file():
        return None
    listed = json.loads(manifest.read_text(encoding="utf-8"))
    paths = [manifest.parent / name for name in listed["files"]]
    if not paths or not all(p.is_file() for p in paths):
        return None
    parts = [datasets.Dataset.from_file(str(p)) for p in paths]
    found = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    return found if len(found) == listed["rows"] else None


def filter_by_length(dataset: datasets.Dataset, max_length: int) -> tuple[datasets.Dataset, int]:
    """Drop pairs whose source or target has more than ``max_length`` tokens; return (kept, number dropped)."""
    if all(name in dataset.column_names for name in LENGTHS):
        src_len, tgt_len = (column_array(dataset, name) for name in LENGTHS)
    else:
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

    sources: Sequence[Sequence[int]]
    targets: Sequence[Sequence[int]]
    dropout: float = 0.0
    segmenter: BPEDropout | None = None
    seed: int = 0
    limit: int = 0
    _memo: dict = field(default_factory=dict, repr=False)

    def __call__(self, epoch: int) -> tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]]:
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
    train_examples: Callable[[int], tuple[Sequence, Sequence]]  # EpochExamples, or StreamingBatches.examples
    valid_src: list[list[int]]
    valid_tgt: list[list[int]]
    sampler: TokenBudgetBatchSampler | None  # None when streaming
    stream: BatchStream | StreamingBatches
    summary: str  # what reading, splitting and filtering did, for the log and the model card
    split_origin: dict[str, str]  # where each split came from (corpus.DataReport.split_origin)
    objective: Objective
    test_src: list[list[int]]
    test_tgt: list[list[int]]
    # what was read, for a resumed run to compare with its checkpoint's (corpus.DataReport.fingerprint)
    fingerprint: dict = field(default_factory=dict)
    # --mix_data's test split: the general-domain pairs the run's BLEU before and after is also measured on
    general_test: datasets.Dataset | None = None


class TokenRows(Sequence):
    """Rows ``rows`` of a token-id column of a tokenised, memory-mapped dataset; item ``i`` is the list of ids of
    row ``rows[i]``, read from the Arrow file when asked for (nothing is held as Python objects)."""

    def __init__(self, dataset: datasets.Dataset, column: str, rows: np.ndarray):
        if dataset._indices is not None:
            dataset = dataset.flatten_indices()
        self.chunks = dataset.data.column(column).chunks
        self.starts = np.cumsum([0] + [len(c) for c in self.chunks])
        self.rows = np.asarray(rows, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = int(self.rows[i])
        k = int(np.searchsorted(self.starts, row, side="right")) - 1
        return self.chunks[k][row - int(self.starts[k])].as_py()

    def __eq__(self, other) -> bool:  # equal to any sequence of the same rows, as a list of lists is
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __add__(self, other) -> list[list[int]]:
        return [*self, *other]


def column_array(dataset: datasets.Dataset, column: str) -> np.ndarray:
    """A numeric column of a dataset (in its row order) as a numpy array."""
    if dataset._indices is not None:
        return np.asarray(dataset[column])
    return dataset.data.column(column).to_numpy()


def _token_ids(split: datasets.Dataset, tokenizer, cache) -> tuple[list[list[int]], list[list[int]]]:
    if not len(split):
        return [], []
    tokenized = tokenize_dataset(split, tokenizer, cache)
    return [list(x) for x in tokenized["input_ids"]], [list(x) for x in tokenized["labels"]]


def tokenize_shared(split: datasets.Dataset, tokenizer, cache, accelerator) -> datasets.Dataset:
    """`tokenize_dataset` of ``split`` by all processes together: each tokenises its contiguous shard into the
    cache, then every process reads all shards from it (memory-mapped, in order: the same rows as one process)."""
    world, rank = accelerator.num_processes, accelerator.process_index
    if world == 1:
        return tokenize_dataset(split, tokenizer, cache)
    shards = [split.shard(num_shards=world, index=r, contiguous=True) for r in range(world)]
    tokenize_dataset(shards[rank], tokenizer, cache, process_index=rank)
    accelerator.wait_for_everyone()
    return datasets.concatenate_datasets(
        [tokenize_dataset(p, tokenizer, cache, process_index=rank) for p in shards]
    )


def _arrow_pairs(
    tokenized: datasets.Dataset, max_length: int
) -> tuple[tuple[TokenRows, TokenRows], tuple[np.ndarray, np.ndarray], int]:
    """The translation pairs of a tokenised split with at most ``max_length`` tokens a side, as `TokenRows` over
    the tokenisation cache, their (source, target) lengths, and the number dropped."""
    src_len, tgt_len = (column_array(tokenized, name) for name in LENGTHS)
    keep = np.flatnonzero((src_len <= max_length) & (tgt_len <= max_length))
    rows = TokenRows(tokenized, "input_ids", keep), TokenRows(tokenized, "labels", keep)
    return rows, (src_len[keep], tgt_len[keep]), len(tokenized) - len(keep)


# the key that, after the seed, draws the general-domain pairs of --mix_data (training.batching and
# BPE_DROPOUT_STREAM use the others)
MIX_STREAM = 3


def mix_general_pairs(
    cfg, splits: datasets.DatasetDict
) -> tuple[datasets.DatasetDict, datasets.Dataset, str]:
    """``--mix_data``: the general corpus read and split as ``--data`` is (`corpus.DataOptions.load_splits`), a seeded
    sample of its training pairs appended to ``splits``' training split so that they make up ``--mix_ratio`` of it
    (all of them when it has fewer); returns the mixed splits, the general corpus's test split (for the general
    BLEU) and a sentence for the log."""
    general, _ = dataclasses.replace(cfg, data=cfg.mix_data).load_splits()
    mine, pool = splits["train"], general["train"]
    wanted = round(len(mine) * cfg.mix_ratio / (1 - cfg.mix_ratio))
    rng = np.random.default_rng([cfg.seed, MIX_STREAM])
    rows = np.sort(rng.choice(len(pool), size=min(wanted, len(pool)), replace=False))
    mixed = datasets.DatasetDict(splits)
    mixed["train"] = datasets.concatenate_datasets([mine, pool.select(rows.tolist())])
    note = (
        f"Mixed {len(rows)} general-domain training pairs from {Path(str(cfg.mix_data)).name} into the "
        f"{len(mine)} training pairs ({len(rows) / max(len(mixed['train']), 1):.0%} of them"
        + (
            f"; --mix_ratio {cfg.mix_ratio} asked for {wanted}, the corpus has {len(pool)}"
            if wanted > len(pool)
            else ""
        )
        + f"); its {len(general['test'])} test pairs give the general BLEU"
    )
    return mixed, general["test"], note


def init_config(cfg) -> Any:
    """The configuration of ``--init_from``'s model (the one its tokenizer must fit), or None for a new model."""
    if cfg.init_from is None:
        return None
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(cfg.init_from, trust_remote_code=False)


def prepare_training_data(cfg, recipe, run_dir, accelerator, event=None) -> TrainingData:
    """Read and split the corpus (``cfg``'s `corpus.DataOptions`), load or train the tokenizer (saved in the run
    folder; ``--init_from``'s unless ``--tokenizer`` is given; with the denoising tokens when a masked-LM or
    span-corruption run trains one), tokenise with a cache, arrange the examples of ``--objective``, drop those
    longer than ``--max_length`` and order the training batches by ``recipe.max_tokens``. The main process reads
    and tokenises first, the others then reuse its files. With ``--bpe_dropout`` the training pairs kept by the
    length filter are re-segmented in every epoch (`EpochExamples`; validation and test keep the tokenizer's own
    segmentation). With ``--distill_from`` the teacher first translates the training sources
    (`training.distillation`; ``event(name, info)`` receives its progress events)."""
    given, objective = given_tokenizer(cfg), objective_for(cfg)
    with accelerator.main_process_first():
        splits, report = cfg.load_splits()
    run_dir.check_resumed_data(cfg, report.fingerprint)
    mix_note = ""
    if cfg.distill_from is not None:
        splits, mix_note = distill_training_split(cfg, splits, run_dir.distill, accelerator, event)
    with accelerator.main_process_first():
        general_test = None
        if cfg.mix_data is not None:
            splits, general_test, mix_note = mix_general_pairs(cfg, splits)
        tokenizer = load_or_train_tokenizer(
            given,
            run_dir.tokenizer,
            splits["train"],
            cfg.vocab_size,
            denoising_tokens=objective.denoising_tokens,
            han_characters=cfg.han_characters,
            model_config=init_config(cfg),
        )
        # a multilingual tokenizer (NLLB, M2M100) marks sources and labels with the data's languages
        set_pair(tokenizer, *cfg.languages())
        arrow = objective.name == "translation" and cfg.bpe_dropout == 0 and cfg.alignment_data is None
        streaming, why = streaming_choice(cfg, arrow)
        train_ids = _token_ids(splits["train"], tokenizer, run_dir.cache) if not arrow else ([], [])
        valid_ids = _token_ids(splits["validation"], tokenizer, run_dir.cache)
        test_ids = (
            _token_ids(splits["test"], tokenizer, run_dir.cache) if not objective.translates else ([], [])
        )
    objective = objective.for_tokenizer(tokenizer)
    aligned_note = ""
    if cfg.alignment_data is not None:
        aligned, count = attach_alignments(
            cfg.alignment_data, cfg.read_training_rows(), splits["train"], train_ids[1], tokenizer
        )
        # AlignedTarget is a list of ids that carries its links
        train_ids = (train_ids[0], cast(list[list[int]], aligned))
        aligned_note = f"Guided alignment: {count} of {len(aligned)} training pairs have reference links"
    if streaming:
        stream = StreamingBatches(
            splits["train"],
            encoder(tokenizer),
            max_length=cfg.max_length,
            max_tokens=recipe.max_tokens,
            seed=cfg.seed,
            skip_too_long=cfg.skip_too_long,
            process=(accelerator.process_index, accelerator.num_processes),
        )
        train_src, train_tgt, dropped_train, lengths = [], [], 0, ([], [])
    elif arrow:  # the training pairs stay in the memory-mapped cache, batches read their rows
        tokenized = tokenize_shared(splits["train"], tokenizer, run_dir.cache, accelerator)
        (train_src, train_tgt), lengths, dropped_train = _arrow_pairs(tokenized, cfg.max_length)
    else:
        train_src, train_tgt, dropped_train = objective.examples(*train_ids, cfg.max_length)
        lengths = objective.lengths(train_src, train_tgt)
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
    if streaming:
        sampler, train_examples = None, stream.examples
    else:
        sampler = TokenBudgetBatchSampler(
            *lengths,
            recipe.max_tokens,
            seed=cfg.seed,
            skip_too_long=cfg.skip_too_long,
            epoch_lengths=(lambda epoch: objective.lengths(*train_examples(epoch)))
            if cfg.bpe_dropout > 0
            else None,
        )
        stream = BatchStream(sampler)
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
    if mix_note:
        summary += f". {mix_note}"
    if aligned_note:
        summary += f". {aligned_note}"
    if cfg.bpe_dropout > 0:
        summary += f". BPE-dropout {cfg.bpe_dropout}: the training pairs are re-segmented in every epoch"
    if why:
        summary += f". {why}"
    if sampler is not None and sampler.num_skipped:
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
        stream,
        summary,
        report.split_origin,
        objective,
        test_src,
        test_tgt,
        fingerprint=report.fingerprint,
        general_test=general_test,
    )
