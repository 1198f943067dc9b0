"""Iteration-level batching's step machinery (`inference.decoding.ContinuousBatch`): sentences of different source
lengths join a running batch at different steps and leave when done, and each gets what `decode` gives it alone
(same tokens, scores within float rounding), greedy and beam search with n-best lists, on random tiny models whose
sentences end at different steps. The decoder state keeps what the rows hold and no more: after every step the
self-attention positions each row holds are its own sentence's, and the source positions the cross-attention reads
are those of the longest source still decoding (a long sentence that left widens no later step)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from conftest import random_batch
from test_decoding import random_model

from vanilla_transformer.inference.decoding import ContinuousBatch, _runs, decode


def alone(model, ids: list[int], options: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """`decode` of one source alone: its sequences and scores."""
    output = decode(model, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), **options)
    return output.sequences, output.sequences_scores


@pytest.mark.parametrize(
    "seed, options",
    [
        (5, dict(num_beams=1, max_new_tokens=20)),
        (7, dict(num_beams=3, num_return_sequences=2, max_new_tokens=20, length_penalty=0.8)),
        (11, dict(num_beams=4, max_new_tokens=16)),
    ],
)
def test_sentences_joining_at_different_steps_get_what_they_get_alone(seed, options):
    model = random_model(seed)
    batch_ids, mask = random_batch(model.config.vocab_size, batch=9, length=19, seed=seed)
    sources = [row[: int(m.sum())].tolist() for row, m in zip(batch_ids, mask)]
    draw = random.Random(seed)
    # the step at which each sentence joins: two at the start, the others while the batch runs
    joins = sorted([0, 0, *(draw.randrange(1, 14) for _ in sources[2:])])
    batch = ContinuousBatch(model, options)
    beams = options["num_beams"]
    results: dict[int, Any] = {}
    source_lengths: dict[int, int] = {}
    waiting = list(enumerate(joins))
    step = 0
    while waiting or len(batch):
        joining = [i for i, at in waiting if at <= step]
        waiting = [(i, at) for i, at in waiting if at > step]
        batch.add([(i, sources[i], None, None) for i in joining])
        source_lengths.update((i, len(sources[i])) for i in joining)
        stepped = batch.step()
        for finished in stepped.finished:
            results[finished.key] = finished
            source_lengths.pop(finished.key)
        step += 1
        if not len(batch):
            continue
        state = batch.state
        assert state is not None and state.lengths is not None
        # each row holds its own sentence's positions (those decoded so far), the buffer length the longest's
        held = state.lengths.view(-1, beams)
        expected = batch.rows["length"] - 1
        assert torch.equal(held, expected[:, None].expand_as(held)), (held, expected)
        assert state.length == int(state.lengths.max())
        # the source positions read are the longest source's still decoding
        assert state.width == max(source_lengths.values())
    assert sorted(results) == list(range(len(sources)))
    for i, ids in enumerate(sources):
        sequences, scores = alone(model, ids, options)
        got = results[i]
        assert torch.equal(got.sequences, sequences), (i, got.sequences, sequences)
        torch.testing.assert_close(got.sequences_scores, scores, rtol=0, atol=1e-4)
    # the sentences did not all end at one step
    assert len({int(r.sequences.shape[-1]) for r in results.values()}) > 1


def test_rows_are_copied_in_runs_of_close_lengths():
    assert _runs([], 8) == []
    assert _runs([5], 8) == [(0, 1, 5)]
    # descending lengths (the oldest rows first): runs within 8 positions of their longest
    assert _runs([40, 40, 36, 33, 31, 20, 20, 1], 8) == [(0, 4, 40), (4, 5, 31), (5, 7, 20), (7, 8, 1)]
    # a longer row after a shorter one starts a run (a run is copied up to its longest row)
    assert _runs([3, 3, 9, 9], 8) == [(0, 2, 3), (2, 4, 9)]
