"""Streaming training data: token-budget batches built on the fly from a shuffled `datasets.IterableDataset`.

`StreamingBatches` streams the training split (memory-mapped Arrow, `corpus.arrow`) through
`datasets.Dataset.to_iterable_dataset` in ``shards`` shards, shuffled with `IterableDataset.shuffle` (the shard
order and a buffer of ``buffer_size`` pairs, seeded by ``seed``; ``set_epoch(e)`` gives epoch ``e`` its own order)
and tokenised as it is read (`IterableDataset.map`, batched). Pairs longer than ``max_length`` tokens on a side are
dropped, as in memory. Every ``pool_size`` kept pairs form a pool that is cut like the in-memory sampler
(`training.batching`): stably sorted by length, cut greedily into batches of at most ``max_tokens`` (cost = batch
size x longest side), and the pool's batches shuffled with a generator seeded by ``(seed, epoch, 1, pool)``. So every
epoch trains on every kept pair once, in an order that is a pure function of the seed and the epoch; memory holds
the shuffle buffer and one pool, not the corpus.

The stream's state is ``(epoch, position)``, the batches taken in the epoch (with the settings that fix the order);
a resumed run replays the epoch's stream up to ``position`` (reading and tokenising, not training), which restores
the shuffle buffer and the pool exactly.

In a run of ``num_processes`` > 1 processes each process streams only its contiguous shard of the split
(`datasets.Dataset.shard`), so it reads and tokenises about 1/``num_processes`` of the pairs, and all its batches
are its own (``sharded``): process ``r``'s batches are exactly those of a one-process stream over shard ``r``, so
in every epoch of the processes' streams the processes together train on every kept pair of the split once. The
shards differ in their number of batches, so the processes' epochs need not turn at the same update; each process's
``(epoch, position)`` is its own, and a checkpoint keeps them all (``{"processes": [state of process 0, ...]}``,
`load_state_dict` takes its own).
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from vanilla_transformer.corpus import SOURCE, TARGET, source_kind

from .batching import cut_by_budget

logger = logging.getLogger(__name__)

Pair = tuple[list[int], list[int]]


class _Side(Sequence):
    """One side (0 source, 1 target) of the pairs a stream handed out last, by their number in that hand-out."""

    def __init__(self, window: list[Pair], side: int):
        self.window, self.side = window, side

    def __len__(self) -> int:
        return len(self.window)

    def __getitem__(self, i: int) -> list[int]:
        return self.window[i][self.side]


class StreamingBatches:
    """An endless stream of token-budget batches over epochs of a streamed split (module docstring), with the
    interface of `training.batching.BatchStream`: `take(n)` gives ``(epoch, indices)``; the indices refer to
    `examples` (the pairs of the batches taken last). ``read_pairs``: the pairs of the current epoch read and
    tokenised so far (by this process)."""

    def __init__(
        self,
        split: datasets.Dataset,
        encode: Callable[[dict], dict],
        *,
        max_length: int,
        max_tokens: int,
        seed: int,
        skip_too_long: bool = False,
        buffer_size: int = 10_000,
        pool_size: int = 4_096,
        shards: int = 64,
        process: tuple[int, int] = (0, 1),
    ):
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens!r} must be a positive integer (e.g. 4096).")
        process_index, num_processes = process  # (this process's index, the number of processes)
        self.total, self.process_index, self.sharded = len(split), process_index, num_processes > 1
        if self.sharded:  # this process's shard only (module docstring)
            split = split.shard(num_shards=num_processes, index=process_index, contiguous=True)
        self.split, self.encode = split, encode
        self.max_length, self.max_tokens, self.seed = max_length, max_tokens, seed
        self.skip_too_long = skip_too_long
        self.buffer_size, self.pool_size = buffer_size, pool_size
        self.shards = max(1, min(shards, len(split)))
        self.epoch, self.position, self.taken_pairs, self.read_pairs = 0, 0, 0, 0
        self.num_skipped = 0
        self._batches: Iterator[list[Pair]] | None = None
        self._window: list[Pair] = []

    # ------------------------------------------------------------------------------------------ one epoch
    def stream(self, epoch: int) -> datasets.IterableDataset:
        """Epoch ``epoch``'s tokenised pairs in their shuffled order."""
        shuffled = self.split.to_iterable_dataset(num_shards=self.shards).shuffle(
            seed=self.seed, buffer_size=self.buffer_size
        )
        shuffled.set_epoch(epoch)
        return shuffled.map(self.encode, batched=True, batch_size=1000, remove_columns=[SOURCE, TARGET])

    def epoch_batches(self, epoch: int, counted: bool = False) -> Iterator[list[Pair]]:
        """Epoch ``epoch``'s batches in order, each a list of (source ids, target ids); ``counted``: the pairs read
        go to ``read_pairs``."""
        pool: list[Pair] = []
        number = 0
        if counted:
            self.read_pairs = 0
        for row in self.stream(epoch):
            if counted:
                self.read_pairs += 1
            src, tgt = row["input_ids"], row["labels"]
            if len(src) > self.max_length or len(tgt) > self.max_length:
                continue
            if max(len(src), len(tgt)) > self.max_tokens:
                if not self.skip_too_long:
                    raise ValueError(
                        f"max_tokens={self.max_tokens} is smaller than a training pair of {max(len(src), len(tgt))} "
                        "tokens. Raise --max_tokens, lower --max_length to drop long pairs, or pass --skip_too_long "
                        "to skip (and count) them."
                    )
                self.num_skipped += 1
                continue
            pool.append((src, tgt))
            if len(pool) == self.pool_size:
                yield from self._cut(pool, epoch, number)
                pool, number = [], number + 1
        if pool:
            yield from self._cut(pool, epoch, number)

    def _cut(self, pool: list[Pair], epoch: int, number: int) -> Iterator[list[Pair]]:
        lengths = [max(len(s), len(t)) for s, t in pool]
        batches = cut_by_budget(np.argsort(lengths, kind="stable").tolist(), lengths, self.max_tokens)
        order = np.random.default_rng([self.seed, epoch, 1, number]).permutation(len(batches))
        for j in order:
            yield [pool[i] for i in batches[j]]

    # ------------------------------------------------------------------------------------------ the stream
    def take(self, n: int) -> list[tuple[int, list[int]]]:
        """The next ``n`` batches as ``(epoch, indices into examples(epoch))``, crossing epoch boundaries."""
        out: list[tuple[int, list[int]]] = []
        self._window = []
        empty_epochs = 0
        while len(out) < n:
            if self._batches is None:
                self._batches = self._replayed(self.epoch, self.position)
            batch = next(self._batches, None)
            if batch is None:
                empty_epochs = empty_epochs + 1 if self.position == 0 else 0
                if empty_epochs > 1:
                    raise ValueError(
                        f"No training pair fits in --max_length={self.max_length} and --max_tokens={self.max_tokens}."
                    )
                self.epoch, self.position, self.taken_pairs, self._batches = self.epoch + 1, 0, 0, None
                continue
            out.append((self.epoch, list(range(len(self._window), len(self._window) + len(batch)))))
            self._window.extend(batch)
            self.position += 1
            self.taken_pairs += len(batch)
        return out

    def _replayed(self, epoch: int, position: int) -> Iterator[list[Pair]]:
        batches = self.epoch_batches(epoch, counted=True)
        if position:
            logger.info("Replaying %d batches of epoch %d of the training stream to resume", position, epoch)
            for _ in range(position):
                if next(batches, None) is None:
                    raise ValueError(
                        f"Cannot resume: epoch {epoch} of the training stream has fewer than {position} batches; "
                        "the data or its options changed since the checkpoint."
                    )
        return batches

    def examples(self, epoch: int) -> tuple[_Side, _Side]:
        """(sources, targets) of the pairs of the batches the last `take` returned."""
        return _Side(self._window, 0), _Side(self._window, 1)

    def epochs_done(self) -> float:
        """Epochs done, fractional (the share of the split's pairs taken in the current epoch)."""
        return self.epoch + min(1.0, self.taken_pairs / max(1, len(self.split)))

    def batches_per_epoch(self) -> int:
        """An estimate from the first pool of epoch 0 (of this process's shard): the pairs of the whole split over
        the mean pairs per batch."""
        first = self.probe(None, self.pool_size)
        sizes = [len(s) for s, _ in first]
        return max(1, round(self.total * len(sizes) / max(1, sum(sizes))))

    def probe(self, examples, count: int) -> list[tuple[list, list]]:
        """The first ``count`` batches of epoch 0 as (sources, targets), without moving the stream."""
        out = []
        for batch in self.epoch_batches(0):
            out.append(([s for s, _ in batch], [t for _, t in batch]))
            if len(out) == count:
                break
        return out

    def state_dict(self) -> dict:
        return {
            "streaming": True,
            "epoch": self.epoch,
            "position": self.position,
            "taken_pairs": self.taken_pairs,
            "read_pairs": self.read_pairs,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "order": [self.max_length, self.buffer_size, self.pool_size, self.shards],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict` (or this process's of a checkpoint's ``{"processes": [...]}``, module docstring)."""
        if "processes" in state:
            state = state["processes"][self.process_index]
        mine = self.state_dict()
        different = [k for k in ("streaming", "seed", "max_tokens", "order") if state.get(k) != mine[k]]
        if different:
            raise ValueError(
                f"Cannot resume: the checkpoint's batch order used {', '.join(f'{k}={state.get(k)}' for k in different)}, "
                f"this run has {', '.join(f'{k}={mine[k]}' for k in different)} (order: max_length, shuffle buffer, "
                "pool, shards). Resume with the same --seed, --max_tokens, --max_length and --streaming."
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.taken_pairs, self._batches = int(state["taken_pairs"]), None


STREAMING_FROM_BYTES = 2 << 30  # data files larger than this stream unless --streaming false


def data_bytes(data: Any) -> int:
    """The size in bytes of the data files a data source names, as stored (a compressed file counts at its
    compressed size; 0 for a dataset object or a Hub name)."""
    if not isinstance(data, (str, os.PathLike)):
        return 0
    kind, path = source_kind(data), Path(data)
    if kind == "file":
        return path.stat().st_size if path.is_file() else 0
    if kind in ("folder", "saved"):
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    if kind == "glob":
        return sum(Path(p).stat().st_size for p in glob.glob(str(data), recursive=True) if Path(p).is_file())
    return 0


def streaming_choice(cfg, can_stream: bool) -> tuple[bool, str]:
    """Whether the run streams its training split (`training.streaming`) and the sentence for the log that says
    why: ``--streaming`` true/false, or by default a Hub dataset and data files above `STREAMING_FROM_BYTES` as stored
    (`data_bytes`).

    Raises:
        ValueError: ``--streaming`` for an objective or option that needs its examples in memory.
    """
    if cfg.streaming and not can_stream:
        raise ValueError(
            f"--streaming trains translation pairs; --objective {cfg.objective} (or --bpe_dropout) needs its examples "
            "in memory: drop --streaming."
        )
    if cfg.streaming is not None:
        return bool(cfg.streaming), "Streaming the training split (--streaming)" if cfg.streaming else ""
    if can_stream and source_kind(cfg.data) == "hub":
        return True, (
            f"Streaming the training split: {cfg.data!r} is a Hub dataset (pass --streaming false to tokenise it all "
            "first)"
        )
    size = data_bytes(cfg.data)
    if size > STREAMING_FROM_BYTES and can_stream:
        return True, (
            f"Streaming the training split: its data files hold {size / 2**20:,.1f} MiB as stored (compressed files "
            f"at their compressed size), more than {STREAMING_FROM_BYTES / 2**20:,.1f} MiB (pass --streaming false "
            "to tokenise it all first)"
        )
    return False, ""
