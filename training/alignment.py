"""Guided-alignment training (Garg et al., 2019; fairseq's ``label_smoothed_cross_entropy_with_alignment``): the
alignment attention of the decoder (`inference.attention.alignment_attention`: the config's `alignment_layer`,
the average of its first `alignment_heads` heads, one head for a run with ``--alignment_data``) learns to put
its weight where a reference word alignment says.

``--alignment_data`` holds one Pharaoh line per pair of the training split of ``--data`` as read (line k aligns
row k, before pairs are held out for validation and test; held-out pairs' lines are unused), with words as
`inference.alignment` counts them (space-separated, each Han character one word). `attach_alignments` maps the
word links of each training pair to its tokens (a token is linked to a token when the words they spell are
linked) and gives each target the links as `AlignedTarget`, a list of token ids that carries them through the
length filter and the batch sampler to `reference_alignment`. The reference of target token ``t`` is the uniform
distribution over the source tokens it is linked to; `guided_alignment_loss` is the cross-entropy between that
distribution and the attention row of the position that predicts ``t`` (tokens without links, `</s>` and padding
add nothing), summed over the batch and weighted by ``--alignment_loss_weight``.
"""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import torch

from vanilla_transformer.corpus import SOURCE, TARGET
from vanilla_transformer.corpus.files import read_lines
from vanilla_transformer.inference.alignment import parse_pharaoh, token_words

# the floor of the attention weights whose log the loss takes (a weight of 0 would give an infinite loss)
ATTENTION_FLOOR = 1e-9


class AlignedTarget(list[int]):
    """A target's token ids with ``links``: (source token, target token) index pairs of the reference alignment."""

    links: list[tuple[int, int]]

    def __init__(self, ids: Sequence[int], links: list[tuple[int, int]]):
        super().__init__(ids)
        self.links = links


def read_alignment_lines(path: str, rows: datasets.Dataset) -> dict[tuple[str, str], str]:
    """The Pharaoh line of each (source, target) text pair of ``rows`` (the training split as read, line k of
    ``path`` for row k); `ValueError` when the counts differ, a line is not Pharaoh or not UTF-8 (naming the file
    and the line)."""
    try:
        lines = [line for line, _ in read_lines(path)]
    except ValueError as err:
        raise ValueError(f"--alignment_data: {err}") from None
    if len(lines) != len(rows):
        raise ValueError(
            f"--alignment_data {path} has {len(lines)} lines but the training split of --data has {len(rows)} pairs: "
            "give one Pharaoh line per pair, in the data's order"
        )
    found: dict[tuple[str, str], str] = {}
    for number, (line, source, target) in enumerate(zip(lines, rows[SOURCE], rows[TARGET]), start=1):
        try:
            parse_pharaoh(line)
        except ValueError as err:
            raise ValueError(f"--alignment_data {path} line {number}: {err}") from err
        found.setdefault((source, target), line)
    return found


def token_links(
    word_links: set[tuple[int, int]], source_words: list[list[int]], target_words: list[list[int]]
) -> list[tuple[int, int]]:
    """The (source token, target token) links of word links: tokens are linked when words they spell are."""

    def spelled_by(token_words: list[list[int]]) -> dict[int, list[int]]:
        tokens: dict[int, list[int]] = {}
        for token, words in enumerate(token_words):
            for word in words:
                tokens.setdefault(word, []).append(token)
        return tokens

    source_tokens, target_tokens = spelled_by(source_words), spelled_by(target_words)
    return sorted(
        {(s, t) for i, j in word_links for s in source_tokens.get(i, ()) for t in target_tokens.get(j, ())}
    )


def attach_alignments(
    path: str,
    rows: datasets.Dataset,
    split: datasets.Dataset,
    targets: list[list[int]],
    tokenizer,
) -> tuple[list[AlignedTarget], int]:
    """``targets`` (the token ids of ``split``'s targets, in its order) as `AlignedTarget` with the token links of
    their pair's line of ``path`` (`read_alignment_lines` over ``rows``), and how many pairs got links."""
    lines = read_alignment_lines(path, rows)
    sources_text, targets_text = list(split[SOURCE]), list(split[TARGET])
    source_enc = tokenizer(sources_text, return_offsets_mapping=True)
    target_enc = tokenizer(text_target=targets_text, return_offsets_mapping=True)
    aligned, count = [], 0
    for k, ids in enumerate(targets):
        line = lines.get((sources_text[k], targets_text[k]))
        links: list[tuple[int, int]] = []
        if line is not None and len(target_enc["input_ids"][k]) in (len(ids), len(ids) - 1):
            source_words = token_words(
                source_enc["offset_mapping"][k],
                sources_text[k],
                tokenizer.convert_ids_to_tokens(source_enc["input_ids"][k]),
            )
            target_words = token_words(
                target_enc["offset_mapping"][k],
                targets_text[k],
                tokenizer.convert_ids_to_tokens(target_enc["input_ids"][k]),
            )
            _, possible = parse_pharaoh(line)
            links = token_links(possible, source_words, target_words)
        count += bool(links)
        aligned.append(AlignedTarget(ids, links))
    return aligned, count


def reference_alignment(targets: Sequence[Sequence[int]], shape: tuple[int, int, int]) -> torch.Tensor | None:
    """The reference attention (B, T, S) of a batch's targets: row ``t`` of pair ``b`` the uniform distribution over
    the source tokens linked to target token ``t``, zeros where it has none; None when no target carries links."""
    if not any(getattr(target, "links", None) for target in targets):
        return None
    reference = torch.zeros(shape)  # (B, T, S)
    for b, target in enumerate(targets):
        for s, t in getattr(target, "links", []):
            if t < shape[1] and s < shape[2]:
                reference[b, t, s] = 1.0
    counts = reference.sum(dim=-1, keepdim=True)  # (B, T, 1)
    return reference / counts.clamp(min=1.0)


def guided_alignment_loss(attention: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The summed cross-entropy ``-sum reference * log(attention)`` between the reference alignment (B, T, S) and
    the alignment attention (B, T, S) (module docstring)."""
    return -(reference * attention.float().clamp(min=ATTENTION_FLOOR).log()).sum()
