"""BPE-dropout (Provilkov et al., 2020): a random segmentation of texts with the tokenizer's own vocabulary, for
subword regularisation in training.

The paper's Algorithm 1, for every word (pre-tokeniser piece) independently: start from its characters; at each
merge step, drop each applicable merge (adjacent pair in the merge table) with probability ``p``; apply the
remaining one of highest priority (leftmost on a tie); stop when none remains. ``p = 0`` is plain BPE (the
tokenizer's own segmentation, tested), ``p = 1`` leaves every word in characters. The pieces are the tokenizer's,
so a dropout segmentation uses only vocabulary ids and decodes to the same text.

`tokenizers`' BPE model has a ``dropout`` of its own, but draws from an unseeded thread-local generator: a run could
not be reproduced from its ``--seed``, nor resumed exactly. Here the random numbers come from a numpy generator the
caller seeds, and the merges run vectorised over every word of every text at once (numpy): one segmentation of
the whole shipped corpus takes under two seconds, less than encoding it once (docs/training.md).

`BPEDropout` splits its texts into unmerged symbols once (with the tokenizer itself at ``dropout=1``, which
applies no merge: normaliser, pre-tokeniser, characters or byte-fallback bytes, post-processor) and merges them
again in every call of `BPEDropout.segment`.

Shapes: N the symbols of the words still merging, W those words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain

import numpy as np
from tokenizers import Tokenizer, models

_NO_MERGE = np.iinfo(np.int64).max
_POSITION_BITS = 32  # a candidate's score is rank << 32 | position, so the smallest is the best, leftmost


def _merge_table(backend: Tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The BPE merges of ``backend`` as sorted pair keys ``left * V + right`` with their ranks and merged ids."""
    model = json.loads(backend.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    prefix = model.get("continuing_subword_prefix") or ""
    size = max(vocab.values()) + 1
    keys, ranks, merged = [], [], []
    for rank, merge in enumerate(model["merges"]):
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        keys.append(vocab[left] * size + vocab[right])
        ranks.append(rank)
        merged.append(
            vocab[left + right[len(prefix) :] if prefix and right.startswith(prefix) else left + right]
        )
    keys_a = np.asarray(keys, dtype=np.int64)
    order = np.argsort(keys_a, kind="stable")
    return (
        keys_a[order],
        np.asarray(ranks, dtype=np.int64)[order],
        np.asarray(merged, dtype=np.int64)[order],
        size,
    )


class BPEDropout:
    """BPE-dropout segmentations of a fixed list of ``texts`` with ``tokenizer`` (a transformers fast tokenizer over
    a `tokenizers` BPE model, such as `train_bpe_tokenizer`'s; module docstring).

    ``segment(p, rng)`` returns the token ids of every text, special tokens included exactly as ``tokenizer(text)``
    adds them (``</s>``): with ``p = 0`` exactly ``tokenizer(text).input_ids``.

    Raises:
        ValueError: the tokenizer's model is not BPE, or it matches whole words before merging (``ignore_merges``),
            which BPE-dropout cannot express.
    """

    def __init__(self, tokenizer, texts: Sequence[str]):
        backend: Tokenizer = tokenizer.backend_tokenizer
        model = backend.model
        if not isinstance(model, models.BPE) or model.ignore_merges:
            raise ValueError(
                f"BPE-dropout needs a BPE tokenizer that applies its merges to every word; this one has a "
                f"{type(model).__name__} model{' with ignore_merges' if isinstance(model, models.BPE) else ''}. "
                "Use a tokenizer trained by tokenizer.train_bpe_tokenizer (leave --tokenizer unset), or --bpe_dropout 0."
            )
        self.keys, self.ranks, self.merged, self.vocab_size = _merge_table(backend)
        unmerged = Tokenizer.from_str(backend.to_str())
        unmerged.encode_special_tokens = backend.encode_special_tokens
        unmerged.no_truncation()
        unmerged.no_padding()
        unmerged.model.dropout = 1.0  # every merge dropped: the characters (or bytes) every word starts from
        encodings = unmerged.encode_batch(list(texts))
        # all texts' symbols
        self.ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64)
        pieces = np.array(list(chain.from_iterable(e.word_ids for e in encodings)), dtype=object)
        special = pieces == None  # noqa: E711 (elementwise)
        pieces = np.where(special, -1, pieces).astype(np.int64)
        sizes = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        # the first symbol of a word; a special token is a word alone
        first = np.zeros(len(self.ids), dtype=bool)
        first[(np.cumsum(sizes) - sizes)[sizes > 0]] = True  # each text's first symbol
        first[1:] |= (pieces[1:] != pieces[:-1]) | special[1:]
        self.words = np.cumsum(first) - 1  # the word of each symbol, increasing
        text_of_symbol = np.repeat(np.arange(len(sizes)), sizes)
        self.text_of_word = text_of_symbol[first]  # (number of words,)
        self.num_texts = len(sizes)

    def segment(self, p: float, rng: np.random.Generator) -> list[list[int]]:
        """The token ids of every text, each applicable merge dropped with probability ``p`` at every merge step;
        the random numbers come from ``rng`` only (the same generator state gives the same segmentation)."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"BPE-dropout probability {p} must be in [0, 1].")
        if self.num_texts == 0:
            return []
        ids, words = self.ids.copy(), self.words.copy()  # (N,) the symbols of the words still merging
        done_ids, done_words = [ids[:0]], [words[:0]]
        while len(ids):
            pair_keys = ids[:-1] * self.vocab_size + ids[1:]  # (N - 1,) the pair starting at each symbol
            found = np.minimum(np.searchsorted(self.keys, pair_keys), max(len(self.keys) - 1, 0))
            applicable = words[:-1] == words[1:]
            applicable &= self.keys[found] == pair_keys if len(self.keys) else False
            if p > 0:
                dropped = rng.random(int(applicable.sum())) < p
                applicable[np.flatnonzero(applicable)[dropped]] = False
            at = np.flatnonzero(applicable)
            # (N,) the last symbol of a word starts no pair
            score = np.full(len(ids), _NO_MERGE, dtype=np.int64)
            score[at] = (self.ranks[found[at]] << _POSITION_BITS) | at
            # (W,) the first symbol of each word
            starts = np.flatnonzero(np.r_[True, words[1:] != words[:-1]])
            best = np.minimum.reduceat(score, starts)  # (W,) the merge each word applies now, if any
            finished = np.repeat(best == _NO_MERGE, np.diff(np.r_[starts, len(ids)]))  # (N,)
            done_ids.append(ids[finished])
            done_words.append(words[finished])
            chosen = best[best != _NO_MERGE] & ((1 << _POSITION_BITS) - 1)  # the left symbol of each merge
            ids[chosen] = self.merged[found[chosen]]
            keep = ~finished
            keep[chosen + 1] = False  # the right symbol is merged into the left one
            ids, words = ids[keep], words[keep]
        all_words = np.concatenate(done_words)
        order = np.argsort(all_words, kind="stable")  # words in text order; a word's symbols stay in order
        all_ids, all_words = np.concatenate(done_ids)[order], all_words[order]
        counts = np.bincount(self.text_of_word[all_words], minlength=self.num_texts)  # tokens per text
        return [chunk.tolist() for chunk in np.split(all_ids, np.cumsum(counts)[:-1])]
