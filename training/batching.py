"""Token-budget batching (fairseq-style) and the seq2seq collator.

A batch's *cost* is ``batch_size * longest`` where ``longest`` is the longest source or target sequence in
the batch (in tokens, </s> included): the number of positions of the larger padded tensor. Batches are built
like fairseq's ``batch_by_size``: every epoch the examples are shuffled with a generator seeded by
``(seed, epoch)``, stably sorted by length (so equal lengths come in a new random order), cut greedily into
batches whose cost stays within ``max_tokens``, and the batches are shuffled (again seeded by
``(seed, epoch)``). Batches thus hold sentences of similar length (little padding), and their order is random
but a pure function of ``seed`` and ``epoch``, which makes a run resumable mid-epoch from
``(epoch, position)`` alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

from modeling import IGNORE_INDEX

logger = logging.getLogger(__name__)



class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded cost is at most ``max_tokens`` (module docstring).

    Args:
        src_lengths / tgt_lengths: token counts of each example's source and target.
        max_tokens: the budget per batch (cost = batch size x longest source-or-target length).
        seed: with the epoch, determines the order completely.
        shuffle: False gives length-sorted batches in a fixed order (for validation).
        skip_too_long: an example longer than ``max_tokens`` is an error (False, the default) or is skipped and
            counted in ``num_skipped`` (True).

    ``set_epoch(e)`` chooses the epoch; iteration starts at ``position`` (see `state_dict`) and advances it,
    so a sampler restored with `load_state_dict` continues the same epoch where it stopped.
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int,
        seed: int = 0,
        shuffle: bool = True,
        skip_too_long: bool = False,
    ):
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens!r} must be a positive integer (e.g. 4096).")
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths.")
        self.lengths = np.maximum(
            np.asarray(src_lengths, dtype=np.int64), np.asarray(tgt_lengths, dtype=np.int64)
        )
        self.max_tokens = max_tokens
        self.seed = seed
        self.shuffle = shuffle
        too_long = np.flatnonzero(self.lengths > max_tokens)
        self.num_skipped = len(too_long)
        if self.num_skipped and not skip_too_long:
            worst = int(too_long[np.argmax(self.lengths[too_long])])
            raise ValueError(
                f"max_tokens={max_tokens} is smaller than {self.num_skipped} example(s); the longest (index {worst}) "
                f"has {int(self.lengths[worst])} tokens. Raise --max_tokens to at least "
                f"{int(self.lengths.max())}, lower --max_length to drop long pairs, or pass --skip_too_long to skip "
                "(and count) them."
            )
        if self.num_skipped:
            logger.warning(
                "Skipping %d example(s) longer than max_tokens=%d tokens", self.num_skipped, max_tokens
            )
        self.valid = np.flatnonzero(self.lengths <= max_tokens)
        if len(self.valid) == 0:
            raise ValueError(f"No example fits in max_tokens={max_tokens}; raise --max_tokens.")
        self.epoch = 0
        self.position = 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def batches(self, epoch: int) -> list[list[int]]:
        """All batches of ``epoch`` in iteration order (deterministic given seed and epoch)."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        idx = self.valid
        if self.shuffle:
            rng = np.random.default_rng([self.seed, epoch])
            idx = idx[rng.permutation(len(idx))]
        idx = idx[np.argsort(self.lengths[idx], kind="stable")]
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in idx.tolist():
            new_longest = max(longest, int(self.lengths[i]))
            if current and new_longest * (len(current) + 1) > self.max_tokens:
                batches.append(current)
                current, new_longest = [], int(self.lengths[i])
            current.append(i)
            longest = new_longest
        if current:
            batches.append(current)
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch, 1]).permutation(len(batches))
            batches = [batches[j] for j in order]
        self._cache = (epoch, batches)
        return batches

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches(self.epoch)
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield batch

    def __len__(self) -> int:
        return len(self.batches(self.epoch))

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }

    def load_state_dict(self, state: dict) -> None:
        if (
            state.get("seed", self.seed) != self.seed
            or state.get("max_tokens", self.max_tokens) != self.max_tokens
        ):
            raise ValueError(
                f"Cannot resume: the checkpoint's batches used seed={state.get('seed')} and "
                f"max_tokens={state.get('max_tokens')}, this run has seed={self.seed} and max_tokens={self.max_tokens}. "
                "Resume with the same --seed and --max_tokens."
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


class BatchStream:
    """An endless stream of batches over epochs: epoch 0's batches, then epoch 1's, ...

    `take(n)` returns the next ``n`` batches (crossing epoch boundaries), so every optimizer update gets the
    same number of batches. The state is the sampler's ``(epoch, position)``.
    """

    def __init__(self, sampler: TokenBudgetBatchSampler):
        self.sampler = sampler

    def take(self, n: int) -> list[list[int]]:
        out: list[list[int]] = []
        while len(out) < n:
            batches = self.sampler.batches(self.sampler.epoch)
            if self.sampler.position >= len(batches):
                self.sampler.set_epoch(self.sampler.epoch + 1)
                continue
            out.append(batches[self.sampler.position])
            self.sampler.position += 1
        return out

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state)


def collate(
    sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], pad_token_id: int = 0
) -> dict[str, torch.Tensor]:
    """Right-pad a batch: ``input_ids`` (B, S) with ``pad_token_id``, ``attention_mask`` (B, S) 1 = token,
    ``labels`` (B, T) with -100 on padding. Every label position that holds a token (including </s>) counts
    in the loss; ``ntokens`` is their number."""
    if len(sources) == 0 or len(sources) != len(targets):
        raise ValueError(
            f"collate needs a non-empty batch of pairs, got {len(sources)} sources, {len(targets)} targets"
        )
    bsz = len(sources)
    s_len = max(len(s) for s in sources)
    t_len = max(len(t) for t in targets)
    input_ids = torch.full((bsz, s_len), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((bsz, s_len), dtype=torch.long)
    labels = torch.full((bsz, t_len), IGNORE_INDEX, dtype=torch.long)
    for i, (s, t) in enumerate(zip(sources, targets)):
        input_ids[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        attention_mask[i, : len(s)] = 1
        labels[i, : len(t)] = torch.as_tensor(t, dtype=torch.long)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "ntokens": torch.tensor(sum(len(t) for t in targets), dtype=torch.long),
    }
