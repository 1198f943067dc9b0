"""Token-budget batching (fairseq-style) and the collators of the training objectives.

A batch's *cost* is ``batch_size * longest`` where ``longest`` is the longest source or target sequence in
the batch (in tokens, </s> included): the number of positions of the larger padded tensor. Batches are built
like fairseq's ``batch_by_size``: every epoch the examples are shuffled with a generator seeded by
``(seed, epoch)``, stably sorted by length (so equal lengths come in a new random order), cut greedily into
batches whose cost stays within ``max_tokens``, and the batches are shuffled (again seeded by
``(seed, epoch)``). Batches thus hold sentences of similar length (little padding), and their order is random
but a pure function of ``seed`` and ``epoch``, which makes a run resumable mid-epoch from
``(epoch, position)`` alone. With BPE-dropout the lengths are those of the epoch's segmentation, itself a pure
function of ``seed`` and ``epoch`` (`training.data.EpochExamples`).

Collators, one per objective (each returns ``input_ids``, ``attention_mask``, ``labels`` with -100 where nothing is
scored, and ``ntokens``, the number of scored positions):

* `collate`: translation pairs (and any source/target pair the encoder-decoder reads and writes).
* `collate_span_corruption`: T5's denoising (Raffel et al., 2020, §3.1.4): `random_spans_noise_mask` chooses about
  ``noise_density`` of a text's tokens in spans of mean length ``mean_noise_span_length``; the encoder reads the
  text with each noise span replaced by one sentinel, the decoder writes each sentinel followed by its span.
* `collate_causal_lm`: decoder-only sequences ``prompt + answer`` with the loss on the answer only (plain text:
  the prompt is ``<s>``).
* `collate_masked_lm`: BERT's masking through transformers' `DataCollatorForLanguageModeling`.

Random choices (noise spans, masks) come from a generator the caller seeds per batch (`batch_generator`), so
the batches of a run are a pure function of its seed and the batch's place in it, which keeps resume exact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

from vanilla_transformer.modeling import IGNORE_INDEX, answer_only_example

logger = logging.getLogger(__name__)


def cut_by_budget(order: list[int], lengths: Sequence[int] | np.ndarray, max_tokens: int) -> list[list[int]]:
    """``order`` (example indices, shortest first) cut greedily into batches whose cost (batch size x the
    longest of ``lengths`` in it) stays within ``max_tokens``."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        new_longest = max(longest, int(lengths[i]))
        if current and new_longest * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, new_longest = [], int(lengths[i])
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Yields lists of example indices whose padded cost is at most ``max_tokens`` (module docstring).

    Args:
        src_lengths / tgt_lengths: token counts of each example's source and target.
        max_tokens: the budget per batch (cost = batch size x longest source-or-target length).
        seed: with the epoch, determines the order completely.
        shuffle: False gives length-sorted batches in a fixed order (for validation).
        skip_too_long: an example longer than ``max_tokens`` is an error (False, the default) or is skipped and
            counted in ``num_skipped`` (True).
        epoch_lengths: ``epoch_lengths(e)`` gives the (source, target) lengths of epoch ``e``'s examples when they
            change from epoch to epoch (BPE-dropout segments every epoch anew); the batches of epoch ``e`` are then
            cut by those lengths. ``src_lengths``/``tgt_lengths`` still decide which examples fit in ``max_tokens``
            (and are skipped or refused); an epoch's lengths must keep every fitting example within it.

    ``set_epoch(e)`` chooses the epoch; iteration starts at ``position`` (see `state_dict`) and advances it,
    so a sampler restored with `load_state_dict` continues the same epoch where it stopped.
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        max_tokens: int,
        seed: int = 0,
        shuffle: bool = True,
        skip_too_long: bool = False,
        epoch_lengths: Callable[[int], tuple[Sequence[int], Sequence[int]]] | None = None,
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
        self.epoch_lengths = epoch_lengths
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
        lengths = (
            self.lengths if self.epoch_lengths is None else self._lengths_of_epoch(self.epoch_lengths, epoch)
        )
        idx = self.valid
        if self.shuffle:
            rng = np.random.default_rng([self.seed, epoch])
            idx = idx[rng.permutation(len(idx))]
        idx = idx[np.argsort(lengths[idx], kind="stable")]
        batches = cut_by_budget(idx.tolist(), lengths, self.max_tokens)
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch, 1]).permutation(len(batches))
            batches = [batches[j] for j in order]
        self._cache = (epoch, batches)
        return batches

    def _lengths_of_epoch(
        self, epoch_lengths: Callable[[int], tuple[Sequence[int], Sequence[int]]], epoch: int
    ) -> np.ndarray:
        src, tgt = epoch_lengths(epoch)
        lengths = np.maximum(np.asarray(src, dtype=np.int64), np.asarray(tgt, dtype=np.int64))
        if len(lengths) != len(self.lengths) or (lengths[self.valid] > self.max_tokens).any():
            raise ValueError(
                f"epoch_lengths({epoch}) gave {len(lengths)} examples to a sampler of {len(self.lengths)}, or made an "
                f"example longer than max_tokens={self.max_tokens} that fits it in src_lengths/tgt_lengths; every "
                "epoch must have the same examples, those that fit within the budget."
            )
        return lengths

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
        if state.get("streaming"):
            raise ValueError(
                "Cannot resume: the checkpoint trained from a stream (--streaming); resume with --streaming."
            )
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
    same number of batches; each comes with its epoch, whose examples its indices refer to (they change from epoch
    to epoch with BPE-dropout). The state is the sampler's ``(epoch, position)``.
    """

    sharded = False  # every process takes the same batches and keeps its own share of them (training.loop)

    def __init__(self, sampler: TokenBudgetBatchSampler):
        self.sampler = sampler

    def take(self, n: int) -> list[tuple[int, list[int]]]:
        """The next ``n`` batches as ``(epoch, example indices)``."""
        out: list[tuple[int, list[int]]] = []
        while len(out) < n:
            batches = self.sampler.batches(self.sampler.epoch)
            if self.sampler.position >= len(batches):
                self.sampler.set_epoch(self.sampler.epoch + 1)
                continue
            out.append((self.sampler.epoch, batches[self.sampler.position]))
            self.sampler.position += 1
        return out

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def epochs_done(self) -> float:
        """Epochs done, fractional (the share of the current epoch's batches taken)."""
        return self.epoch + self.sampler.position / max(1, len(self.sampler.batches(self.epoch)))

    def batches_per_epoch(self) -> int:
        return len(self.sampler.batches(0))

    def probe(self, examples: Callable, count: int) -> list[tuple[list, list]]:
        """``count`` batches of epoch 0 spread over it, each as (sources, targets) of ``examples(0)``; for timing."""
        epoch = self.sampler.batches(0)
        sources, targets = examples(0)
        picks = [epoch[i * len(epoch) // count] for i in range(count)] if epoch else []
        return [([sources[i] for i in b], [targets[i] for i in b]) for b in picks]

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


def batch_generator(*key: int) -> np.random.Generator:
    """The generator of one batch's random choices, seeded by ``key`` (e.g. ``(seed, step, batch)``): the same
    key gives the same choices in any process and after a resume."""
    return np.random.default_rng(np.random.SeedSequence(list(key)))


def _random_segmentation(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """Lengths of a uniformly random split of ``num_items`` items into ``num_segments`` non-empty segments in
    order: the ``num_segments - 1`` segment starts are a random subset of the ``num_items - 1`` gaps."""
    starts = np.zeros(num_items, dtype=bool)
    starts[1 + rng.choice(num_items - 1, num_segments - 1, replace=False)] = True
    starts[0] = True
    segment = np.cumsum(starts) - 1  # the segment of every item
    return np.bincount(segment, minlength=num_segments)


def random_spans_noise_mask(
    length: int, rng: np.random.Generator, noise_density: float = 0.15, mean_noise_span_length: float = 3.0
) -> np.ndarray:
    """T5's noise mask (``random_spans_noise_mask`` of its preprocessors): a bool array of ``length``, True on the
    noise tokens.

    The counts are fixed by the length: ``round(length * noise_density)`` noise tokens (at least 1, at most
    ``length - 1``) in ``round(noise tokens / mean_noise_span_length)`` spans (at least 1). The noise tokens and
    the other tokens are each split into that many non-empty runs at random, and the runs alternate, starting with
    a run of kept tokens (so a text never starts with noise and always ends with it). Lengths below 2 are treated
    as 2 and cut back, so a one-token text has no noise.
    """
    if not 0.0 < noise_density < 1.0 or mean_noise_span_length < 1.0:
        raise ValueError(
            f"noise_density={noise_density} must be in (0, 1) and mean_noise_span_length={mean_noise_span_length} "
            ">= 1 (T5: 0.15 and 3)."
        )
    original, length = length, max(length, 2)
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_spans = max(round(num_noise / mean_noise_span_length), 1)
    noise_lengths = _random_segmentation(num_noise, num_spans, rng)
    kept_lengths = _random_segmentation(length - num_noise, num_spans, rng)
    interleaved = np.stack([kept_lengths, noise_lengths], axis=1).reshape(-1)  # kept, noise, kept, noise, ...
    is_noise = np.repeat(np.tile([False, True], num_spans), interleaved)
    return is_noise[:original]


def span_corruption(
    tokens: Sequence[int], noise_mask: np.ndarray, sentinel_ids: Sequence[int], eos_token_id: int
) -> tuple[list[int], list[int]]:
    """``(inputs, targets)`` of one text (``tokens`` without </s>) and its noise mask: the inputs keep the other
    tokens and put sentinel i where noise span i was; the targets are sentinel i followed by span i, for every
    span in order. Both end with ``eos_token_id``.

    Raises:
        ValueError: more noise spans than sentinels (a text too long for ``len(sentinel_ids)`` spans).
    """
    tokens = list(tokens)
    inputs, targets, span = [], [], -1
    for i, (token, noise) in enumerate(zip(tokens, noise_mask)):
        if noise:
            if i == 0 or not noise_mask[i - 1]:
                span += 1
                if span >= len(sentinel_ids):
                    raise ValueError(
                        f"A text of {len(tokens)} tokens has more noise spans than the {len(sentinel_ids)} sentinels; "
                        "lower --max_length (100 sentinels cover texts of about 2,000 tokens at T5's settings)."
                    )
                inputs.append(sentinel_ids[span])
                targets.append(sentinel_ids[span])
            targets.append(token)
        else:
            inputs.append(token)
    return inputs + [eos_token_id], targets + [eos_token_id]


def collate_span_corruption(
    texts: Sequence[Sequence[int]],
    sentinel_ids: Sequence[int],
    rng: np.random.Generator,
    *,
    eos_token_id: int,
    pad_token_id: int = 0,
    noise_density: float = 0.15,
    mean_noise_span_length: float = 3.0,
) -> dict[str, torch.Tensor]:
    """A span-corruption batch of ``texts`` (token ids, each ending with ``eos_token_id``, which is never noise):
    `span_corruption` of each text with a `random_spans_noise_mask` drawn from ``rng``, collated like a
    translation batch (`collate`): the corrupted texts are the sources, the sentinels and spans the targets."""
    sources, targets = [], []
    for text in texts:
        body = list(text[:-1]) if text and text[-1] == eos_token_id else list(text)
        mask = random_spans_noise_mask(len(body), rng, noise_density, mean_noise_span_length)
        source, target = span_corruption(body, mask, sentinel_ids, eos_token_id)
        sources.append(source)
        targets.append(target)
    return collate(sources, targets, pad_token_id)


def collate_causal_lm(
    prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], pad_token_id: int = 0
) -> dict[str, torch.Tensor]:
    """Decoder-only answer-only examples (`modeling.answer_only_example`: ``prompt + answer``, the prompt -100 in
    ``labels``; a prompt of ``<s>`` alone scores every token of the answer), right-padded: ``input_ids``,
    ``attention_mask`` and ``labels`` (B, T), -100 on padding (the model shifts the labels: position t predicts
    token t + 1); ``ntokens`` is the number of scored positions."""
    if len(prompts) == 0 or len(prompts) != len(answers):
        raise ValueError(
            f"collate_causal_lm needs a non-empty batch, got {len(prompts)} prompts, {len(answers)} answers"
        )
    examples = [answer_only_example(p, a) for p, a in zip(prompts, answers)]
    bsz, longest = len(examples), max(len(e["input_ids"]) for e in examples)
    batch = {
        "input_ids": torch.full((bsz, longest), pad_token_id, dtype=torch.long),
        "attention_mask": torch.zeros((bsz, longest), dtype=torch.long),
        "labels": torch.full((bsz, longest), IGNORE_INDEX, dtype=torch.long),
    }
    for i, example in enumerate(examples):
        for key, values in example.items():
            batch[key][i, : len(values)] = torch.as_tensor(values, dtype=torch.long)
    batch["ntokens"] = (batch["labels"][:, 1:] != IGNORE_INDEX).sum()
    return batch


def collate_masked_lm(
    texts: Sequence[Sequence[int]], masker, rng: np.random.Generator
) -> dict[str, torch.Tensor]:
    """A masked-LM batch of ``texts`` (token ids): ``masker`` (transformers' `DataCollatorForLanguageModeling`,
    e.g. 15 % of the non-special tokens chosen, 80 % of them replaced by the mask token, 10 % by a random token,
    10 % kept) masks the right-padded batch with a torch generator seeded from ``rng``; ``labels`` hold the
    chosen tokens (-100 elsewhere), ``attention_mask`` the real tokens, ``ntokens`` the number of chosen tokens."""
    if len(texts) == 0:
        raise ValueError("collate_masked_lm needs a non-empty batch of texts")
    lengths = torch.tensor([len(t) for t in texts])
    masker.generator = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
    batch = masker([list(t) for t in texts])
    attention_mask = (torch.arange(batch["input_ids"].shape[1])[None] < lengths[:, None]).long()
    return {
        "input_ids": batch["input_ids"],
        "attention_mask": attention_mask,
        "labels": batch["labels"],
        "ntokens": (batch["labels"] != IGNORE_INDEX).sum(),
    }
