"""Word alignments from the model's cross-attention, in Pharaoh format, and their alignment error rate.

A **word** is a run of non-space characters, except that every Han character is a word of its own (Chinese has no
spaces; character-level Chinese needs no segmenter and is what the reference aligner reads, docs/control.md).
Words are numbered from 0 on each side, and an alignment is written in Pharaoh format: ``i-j`` pairs (source word
``i``, target word ``j``), space-separated, sorted (``"0-0 1-2 2-1"``).

`align_pairs` aligns given (source, target) texts by forced decoding: the decoder reads the target, and the
alignment attention (`inference.attention.alignment_attention`: the config's `alignment_layer`, the average of its
first `alignment_heads` heads) of the position that predicts each target token is a distribution over the source
tokens. As in fairseq (``extract_hard_alignment``), each target token is linked to the source token it attends to
most, `</s>` excluded on both sides; the tokens' links become word links (subwords merged to the words they
spell: a token that spells several Han characters links each of them). `translate --alignments` and the server's
``alignments`` flag align each translation with its source this way. Engines: PyTorch, and CTranslate2 (its
``return_attention``, from the `alignment_layer`/`alignment_heads` written into the export).

`joined_alignment` (`joined_alignments` for many) is the alignment of a text translated sentence by sentence
(`inference.sentences`), from the alignments of its sentences. `alignment_error_rate` is Och & Ney's AER against reference alignments with sure (``i-j``) and possible
(``i?j``) links.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import regex

from .loading import ModelStandIn, check_tokenizer_matches_model

if TYPE_CHECKING:
    import numpy as np
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# a word: one Han character, or a run of other non-space characters
WORD = regex.compile(r"\p{Han}|[^\s\p{Han}]+")

Link = tuple[int, int]
# what a token of spaces alone is made of: SentencePiece's and Metaspace's "▁", GPT-2's byte-level "Ġ", a space
SPACE_MARKERS = "\u2581\u0120 "


def word_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) character offsets of the words of ``text``, in order (module docstring)."""
    return [match.span() for match in WORD.finditer(text)]


def token_words(offsets: Sequence[tuple[int, int]], text: str, tokens: Sequence[str]) -> list[list[int]]:
    """For each token (its string in ``tokens`` and its character ``offsets`` in ``text``, as a fast tokenizer
    reports them), the indices of the words it spells part of; none for special tokens (empty offsets) and for
    tokens of the space marker alone (a Metaspace tokenizer gives the one it prepends the first character's
    offsets)."""
    spans = word_spans(text)
    return [
        []
        if not token.strip(SPACE_MARKERS)
        else [w for w, (begin, end) in enumerate(spans) if start < end and begin < stop]
        for (start, stop), token in zip(offsets, tokens)
    ]


@dataclass(frozen=True)
class WordAlignment:
    """The alignment of one (source, target) pair at the level of words: its ``links`` (sorted, `hard_alignment`)
    and ``weights``, a (target words, source words) array whose ``[j, i]`` is the largest attention a token of
    target word ``j`` gives a token of source word ``i`` (where to look for a source word no link reaches)."""

    links: list[Link]
    weights: np.ndarray


def word_weights(
    attention: np.ndarray, source_words: Sequence[Sequence[int]], target_words: Sequence[Sequence[int]]
) -> np.ndarray:
    """The (target words, source words) weights of `WordAlignment` from the token attention (T, S) and the words
    each token spells (`token_words`)."""
    import numpy as np

    count_source = 1 + max((w for words in source_words for w in words), default=-1)
    count_target = 1 + max((w for words in target_words for w in words), default=-1)
    weights = np.zeros((count_target, count_source), dtype=np.float32)
    for t, target in enumerate(target_words[: len(attention)]):
        for s, source in enumerate(source_words[: attention.shape[1]]):
            if source:
                for j in target:
                    weights[j, source] = np.maximum(weights[j, source], attention[t, s])
    return weights


def hard_alignment(
    attention: np.ndarray, source_words: Sequence[Sequence[int]], target_words: Sequence[Sequence[int]]
) -> list[Link]:
    """Word links of one pair from its attention (T, S): row ``t`` is target token ``t``'s distribution over the
    source tokens. Each target token that spells a word is linked to the source token with the highest weight
    among those that spell a word; the word links are those tokens' words, sorted and without repeats."""
    import numpy as np

    usable = [s for s, words in enumerate(source_words) if words]
    if not usable:
        return []
    links = set()
    for t, words in enumerate(target_words[: len(attention)]):
        if not words:
            continue
        best = usable[int(np.argmax(attention[t, usable]))]
        links.update((i, j) for i in source_words[best] for j in words)
    return sorted(links)


def joined_alignment(
    source: str, target: str, parts: Sequence[tuple[str, str, WordAlignment]]
) -> WordAlignment:
    """The alignment of a (``source``, ``target``) pair translated in parts (sentence by sentence,
    `inference.sentences`): ``parts`` are each part's (source text, translation, alignment), found in order in
    ``source`` and ``target``; each part's words are renumbered as the words of the whole they lie in, and no link
    crosses from one part to another. A single part that is the whole pair is its own alignment."""
    import numpy as np

    if len(parts) == 1 and parts[0][:2] == (source, target):
        return parts[0][2]

    source_spans, target_spans = word_spans(source), word_spans(target)
    weights = np.zeros((len(target_spans), len(source_spans)), dtype=np.float32)
    links: set[Link] = set()
    source_at = target_at = 0
    for part_source, part_target, found in parts:
        source_at = max(source.find(part_source, source_at), source_at)
        target_at = max(target.find(part_target, target_at), target_at)
        source_words = _renumbered(word_spans(part_source), source_at, source_spans)
        target_words = _renumbered(word_spans(part_target), target_at, target_spans)
        for j, i in np.argwhere(found.weights > 0):
            if j < len(target_words) and i < len(source_words):
                row, column = target_words[j], source_words[i]
                weights[row, column] = max(weights[row, column], found.weights[j, i])
        links.update(
            (source_words[i], target_words[j])
            for i, j in found.links
            if i < len(source_words) and j < len(target_words)
        )
        source_at += len(part_source)
        target_at += len(part_target)
    return WordAlignment(sorted(links), weights)


def joined_alignments(
    wholes: Sequence[tuple[str, str, Sequence[tuple[str, str]]]], alignments: Iterable[WordAlignment]
) -> list[WordAlignment]:
    """`joined_alignment` of each (source, target, its parts' (source, translation) pairs) of ``wholes``, the
    parts' alignments taken in order from ``alignments`` (those of all the pairs, aligned at once)."""
    found = iter(alignments)
    return [
        joined_alignment(source, target, [(part, translation, next(found)) for part, translation in pairs])
        for source, target, pairs in wholes
    ]


def _renumbered(spans: Sequence[tuple[int, int]], offset: int, whole: Sequence[tuple[int, int]]) -> list[int]:
    """For each word span of a part that starts at ``offset`` in the whole text, the index of the whole's word
    it lies in (its first character's)."""
    starts = [start for start, _ in whole]
    found = []
    for start, _ in spans:
        index = bisect.bisect_right(starts, start + offset) - 1
        found.append(max(index, 0))
    return found


def pharaoh(links: Iterable[Link]) -> str:
    """``links`` in Pharaoh format: ``"i-j i-j ..."``, sorted."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_pharaoh(line: str) -> tuple[set[Link], set[Link]]:
    """(sure, possible) links of a Pharaoh line: ``i-j`` is sure, ``i?j`` possible; the possible links include the
    sure ones (Och & Ney). `ValueError` naming the item that is neither."""
    sure, possible = set(), set()
    for item in line.split():
        match = regex.fullmatch(r"(\d+)([-?])(\d+)", item)
        if match is None:
            raise ValueError(
                f"{item!r} is not a Pharaoh link: expected i-j (sure) or i?j (possible), i the source word and j "
                "the target word, counted from 0"
            )
        link = (int(match[1]), int(match[3]))
        possible.add(link)
        if match[2] == "-":
            sure.add(link)
    return sure, possible


def alignment_error_rate(predicted: Sequence[Iterable[Link]], references: Sequence[str]) -> float:
    """Och & Ney's alignment error rate over a corpus: ``1 - (|A & S| + |A & P|) / (|A| + |S|)``, with A the
    ``predicted`` links, S and P the sure and possible links of the ``references`` (Pharaoh lines, `parse_pharaoh`),
    each summed over the pairs. 0 is perfect; with sure links only it is 1 - F1."""
    if len(predicted) != len(references):
        raise ValueError(f"got {len(predicted)} predicted alignments but {len(references)} references")
    matched = total = 0
    for links, reference in zip(predicted, references):
        found = set(links)
        sure, possible = parse_pharaoh(reference)
        matched += len(found & sure) + len(found & possible)
        total += len(found) + len(sure)
    return 1.0 - matched / total if total else 0.0


def _attention_torch(
    model: PreTrainedModel, source_ids: list[list[int]], target_ids: list[list[int]], pad_id: int
) -> list[np.ndarray]:
    """The alignment attention (T, S) of each pair of one batch in a PyTorch model (targets end with </s>)."""
    import torch

    from .attention import alignment_attention
    from .forced_decoding import forced_inputs

    with torch.no_grad():
        out = model(
            **forced_inputs(model, source_ids, target_ids, pad_id), output_attentions=True, use_cache=False
        )
    weights = alignment_attention(out.cross_attentions, model.config).float().cpu()  # (B, T, S)
    return [
        weights[row, : len(target), : len(source)].numpy()
        for row, (source, target) in enumerate(zip(source_ids, target_ids))
    ]


def check_alignable(model: PreTrainedModel | ModelStandIn) -> None:
    """`ValueError` for an engine whose runtime cannot return attention weights (ONNX Runtime's graphs output
    logits only)."""
    translator = getattr(model, "translator", None)
    if translator is not None and not hasattr(translator, "alignment_attention_ids"):
        raise ValueError(
            f"--engine {getattr(model, 'engine', '?')} cannot return attention weights for word alignments: use "
            "--engine torch or ct2"
        )


def alignment_attentions(
    model: PreTrainedModel | ModelStandIn,
    source_ids: Sequence[Sequence[int]],
    target_ids: Sequence[Sequence[int]],
    batch_size: int = 32,
    pad_token_id: int | None = None,
) -> list[np.ndarray]:
    """For each (source, target) pair of token ids, in input order, its alignment attention (T, S): one row per
    target token (a `</s>` is appended where the target does not end with one; a target longer than the decoder's
    positions raises `ValueError`), one column per source token.
    ``model`` is a PyTorch seq2seq model or an engine from `inference.engines.load_engine` whose runtime has
    ``alignment_attention_ids`` (CTranslate2); another engine raises `ValueError`."""
    from .forced_decoding import finished_targets, forced_batches

    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is invalid: expected an integer >= 1; e.g. 32")
    check_alignable(model)
    translator = getattr(model, "translator", None)
    targets = finished_targets(model, target_ids, "align them")
    pad_id = pad_token_id if pad_token_id is not None else model.config.pad_token_id

    def step(sources_batch: list[list[int]], targets_batch: list[list[int]]) -> Sequence[np.ndarray]:
        if translator is not None:
            return translator.alignment_attention_ids(sources_batch, targets_batch)
        return _attention_torch(cast("PreTrainedModel", model), sources_batch, targets_batch, pad_id)

    return forced_batches(model, [list(ids) for ids in source_ids], targets, batch_size, step)


def _offsets(tokenizer: PreTrainedTokenizerBase, texts: list[str], ids: list[list[int]], target: bool):
    """The character offsets of each text's tokens ``ids`` (a truncated source keeps its first tokens and its
    `</s>`, which spells no word)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"word alignments need the token offsets of a fast tokenizer; {type(tokenizer).__name__} has none "
            "(load the model's tokenizer.json with PreTrainedTokenizerFast)"
        )
    if target:
        encoded = tokenizer(text_target=texts, add_special_tokens=True, return_offsets_mapping=True)
    else:
        encoded = tokenizer(texts, add_special_tokens=True, return_offsets_mapping=True)
    rows = []
    for offsets, row in zip(encoded["offset_mapping"], ids):
        offsets = [tuple(span) for span in offsets]
        rows.append(offsets if len(offsets) <= len(row) else [*offsets[: len(row) - 1], (0, 0)])
    return rows


def align_pairs(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    targets: Sequence[str],
    batch_size: int = 32,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> list[list[Link]]:
    """The word alignment of each (source, target) text pair, in input order (module docstring): sources tokenized
    as `inference.translate` does, targets as labels, a multilingual model's in the languages ``src_lang`` /
    ``tgt_lang``. An empty source or target gives no links."""
    found = align_words(model, tokenizer, sources, targets, batch_size, src_lang, tgt_lang)
    return [alignment.links for alignment in found]


def align_words(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    targets: Sequence[str],
    batch_size: int = 32,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> list[WordAlignment]:
    """`align_pairs` with each pair's word weights beside its links (`WordAlignment`); an empty source or target
    gives no links and empty weights. A multilingual model reads the pairs in the languages ``src_lang`` /
    ``tgt_lang`` (as `inference.forced_decoding.score_pairs` does)."""
    import numpy as np

    from .forced_decoding import _encode_pairs, pair_languages

    check_tokenizer_matches_model(model, tokenizer)
    if len(sources) != len(targets):
        raise ValueError(f"got {len(sources)} sources but {len(targets)} targets: one target per source")
    rows = [k for k, (s, t) in enumerate(zip(sources, targets)) if s.strip() and t.strip()]
    found = [
        WordAlignment([], np.zeros((len(word_spans(t)), len(word_spans(s))), dtype=np.float32))
        for s, t in zip(sources, targets)
    ]
    if not rows:
        return found
    texts = [sources[k] for k in rows], [targets[k] for k in rows]
    src_lang, tgt_lang, _ = pair_languages(model, tokenizer, src_lang, tgt_lang)
    source_ids, target_ids = _encode_pairs(model, tokenizer, *texts, src_lang, tgt_lang)
    pad_id = cast(int, tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else None
    matrices = alignment_attentions(model, source_ids, target_ids, batch_size=batch_size, pad_token_id=pad_id)
    source_offsets = _offsets(tokenizer, texts[0], source_ids, target=False)
    target_offsets = _offsets(tokenizer, texts[1], target_ids, target=True)
    for n, k in enumerate(rows):
        source_words = token_words(
            source_offsets[n], texts[0][n], tokenizer.convert_ids_to_tokens(source_ids[n])
        )
        target_words = token_words(
            target_offsets[n], texts[1][n], tokenizer.convert_ids_to_tokens(target_ids[n])
        )
        weights = found[k].weights
        spelled = word_weights(matrices[n], source_words, target_words)
        height, width = min(len(weights), len(spelled)), min(weights.shape[1], spelled.shape[1])
        weights[:height, :width] = spelled[:height, :width]
        found[k] = WordAlignment(hard_alignment(matrices[n], source_words, target_words), weights)
    return found


def with_alignments(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    outputs: Sequence[str],
    batch_size: int = 32,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> list[str]:
    """``outputs`` (one line per source, its hypotheses separated by tabs, as `inference.translate_lines` returns
    them) with each hypothesis followed by `` ||| `` and its Pharaoh alignment with the source (Marian's
    ``--alignment`` output; a multilingual model's in the languages ``src_lang`` / ``tgt_lang``)."""
    nbest = [line.split("\t") for line in outputs]
    pairs = [(row, source, hyp) for row, (source, hyps) in enumerate(zip(sources, nbest)) for hyp in hyps]
    links = align_pairs(
        model,
        tokenizer,
        [source for _, source, _ in pairs],
        [hyp for _, _, hyp in pairs],
        batch_size,
        src_lang,
        tgt_lang,
    )
    lines: list[list[str]] = [[] for _ in outputs]
    for (row, _, hyp), found in zip(pairs, links):
        lines[row].append(f"{hyp} ||| {pharaoh(found)}")
    return ["\t".join(line) for line in lines]
