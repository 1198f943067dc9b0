"""Score given translations without decoding: forced decoding of (source, target) pairs, the one scoring path of
`vanilla-transformer score`, for PyTorch and the exported engines (CTranslate2's `score_batch`, the ONNX decoder).

The decoder reads the decoder start token and the target's tokens, and each target token (its `</s>` included)
gets its log-probability under the model: `log_softmax` of the raw logits, with no logits processor and no
sampling settings (CTranslate2's and fairseq's scoring do the same), so that a translation that `generate()`
produced scores the sum of the per-token log-probabilities that `generate()` gave it when its generation config
alters no logits. A config that suppresses tokens (this project's suppresses `<pad>` and `<s>`, which no
translation contains) makes `generate()` renormalise over the other tokens: its log-probabilities are then higher
by the log of one minus the suppressed tokens' probability, next to nothing for a trained model. `PairScore` holds them;
its `score(length_penalty)` is that sum divided by ``length ** length_penalty``, the length counting the target's
tokens and its `</s>`, which is how beam search ranks finished hypotheses (transformers' `sequences_scores`).

Sources are tokenized as `inference.translate` does (the tokenizer's special tokens, truncated to the model's
limit with one warning that gives the count); targets as labels (``text_target``). A target longer than the
decoder's positions cannot be scored and raises `ValueError` naming the rows.

A multilingual model's pairs are scored in the languages ``src_lang`` / ``tgt_lang`` (as `inference.translate`
takes them, `inference.languages`): the source carries the source language's token (or an OPUS-MT model's
``>>xxx<<`` target token), and the target starts with the target language's token, the token that decoding forces
first. A forced first token (the target language's, or the generation config's ``forced_bos_token_id``) is a
condition, not a choice of the model: it is listed with log-probability 0, as decoding gives it, so that a
translation scores what decoding scored it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .loading import ModelStandIn, check_tokenizer_matches_model
from .sources import encode_sources

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PairScore:
    """The target's token ids (its `</s>` included) and the log-probability of each under the model."""

    token_ids: list[int]
    token_log_probs: list[float]

    @property
    def log_prob(self) -> float:
        """The log-probability of the whole target: the sum of its tokens'."""
        return float(sum(self.token_log_probs))

    def score(self, length_penalty: float = 1.0) -> float:
        """`log_prob` / length ** `length_penalty`: beam search's score of this target as a finished hypothesis."""
        return self.log_prob / max(len(self.token_ids), 1) ** length_penalty


def pair_languages(
    model: Any, tokenizer: PreTrainedTokenizerBase, src_lang: str | None, tgt_lang: str | None
) -> tuple[str | None, str | None, int | None]:
    """``src_lang`` and ``tgt_lang`` as the model's codes (`inference.languages.resolve_languages`) and the id of the
    token decoding forces first for them (None: none); `ValueError` as `inference.translate` raises it for a language
    the model does not have, or a multilingual model without a target language."""
    from .languages import resolve_languages, target_options

    src_lang, tgt_lang = resolve_languages(tokenizer, src_lang, tgt_lang)
    options = target_options(tokenizer, model.generation_config, tgt_lang)
    forced = options.get("forced_bos_token_id", getattr(model.generation_config, "forced_bos_token_id", None))
    return src_lang, tgt_lang, forced


def _encode_pairs(
    model: Any,
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    targets: Sequence[str],
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> tuple[list[list[int]], list[list[int]]]:
    """Source ids (as `inference.translate` makes them, truncated to the model's limit) and target ids (labels), in
    the languages ``src_lang`` / ``tgt_lang`` (codes `pair_languages` returned)."""
    from .languages import target_side

    if len(sources) != len(targets):
        raise ValueError(f"got {len(sources)} sources but {len(targets)} targets: one target per source")
    source_ids = encode_sources(model, tokenizer, sources, src_lang, tgt_lang)
    with target_side(tokenizer, tgt_lang):
        labels = tokenizer(text_target=list(targets), add_special_tokens=True)["input_ids"]
    return source_ids, [list(ids) for ids in labels]


def padded_ids(rows: list[list[int]], value: int, device: Any) -> tuple[Any, Any]:
    """Rows of token ids as one (B, L) tensor padded with ``value`` and its (B, L) mask (1 = real token), on
    ``device``."""
    import torch

    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)  # (B, L)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, L), 1 = real token
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[index, : len(row)] = 1
    return ids.to(device), mask.to(device)


def forced_inputs(
    model: PreTrainedModel, source_ids: list[list[int]], target_ids: list[list[int]], pad_id: int
) -> dict[str, Any]:
    """The inputs of a PyTorch seq2seq model that reads one batch of targets by forced decoding: the padded
    sources, and each target shifted right behind the decoder start token, with their masks."""
    start = model.config.decoder_start_token_id
    input_ids, attention_mask = padded_ids(source_ids, pad_id, model.device)
    decoder_input_ids, decoder_mask = padded_ids(
        [[start, *row[:-1]] for row in target_ids], pad_id, model.device
    )
    return dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        decoder_input_ids=decoder_input_ids,
        decoder_attention_mask=decoder_mask,
    )


def _torch_log_probs(
    model: PreTrainedModel, source_ids: list[list[int]], target_ids: list[list[int]], pad_id: int
) -> list[list[float]]:
    """Per-token log-probabilities of the targets of one batch under a PyTorch seq2seq model."""
    import torch

    labels, label_mask = padded_ids(target_ids, pad_id, model.device)
    with torch.no_grad():
        inputs = forced_inputs(model, source_ids, target_ids, pad_id)
        # (B, T, V)
        logits = model(**inputs, use_cache=False).logits
    # (B, T): each target token's log-probability
    log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return [row[: int(length)].tolist() for row, length in zip(log_probs, label_mask.sum(dim=1))]


def finished_targets(
    model: PreTrainedModel | ModelStandIn,
    target_ids: Sequence[Sequence[int]],
    purpose: str = "score them",
    *,
    append_eos: bool = True,
) -> list[list[int]]:
    """The targets as finished translations (a `</s>` appended where one does not end with it; without
    `append_eos`, as they are: a hypothesis that decoding cut at its length limit); `ValueError` for an empty
    target without `append_eos`, and naming the rows with more tokens than the decoder's positions, which forced
    decoding cannot read (to `purpose`)."""
    from vanilla_transformer.modeling import position_limit

    eos = model.config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    targets = [list(ids) if not append_eos or (ids and ids[-1] == eos) else [*ids, eos] for ids in target_ids]
    if any(not ids for ids in targets):
        raise ValueError("every target needs at least one token: pass append_eos=True to score an empty one")
    decoder_limit = position_limit(model.config)
    too_long = [
        row for row, ids in enumerate(targets) if decoder_limit is not None and len(ids) > decoder_limit
    ]
    if too_long:
        raise ValueError(
            f"{len(too_long)} target(s) (rows {', '.join(map(str, too_long[:5]))}) have more tokens than the "
            f"decoder's {decoder_limit} positions (max_position_embeddings): shorten them to {purpose}"
        )
    return targets


def score_ids(
    model: PreTrainedModel | ModelStandIn,
    source_ids: Sequence[Sequence[int]],
    target_ids: Sequence[Sequence[int]],
    batch_size: int = 32,
    pad_token_id: int | None = None,
    *,
    append_eos: bool = True,
    forced_token_id: int | None = None,
) -> list[PairScore]:
    """For each (source, target) pair of token ids, in input order, its `PairScore` under `model`: a PyTorch
    seq2seq model or an exported engine loaded by `inference.engines.load_engine` (whose runtime scores with its
    `score_ids`). Sources are read as given (their `</s>` included); a target is scored as a finished translation:
    a `</s>` is appended where it does not end with one; without `append_eos`, as it is (a hypothesis that decoding
    cut at its length limit: its tokens only). A target whose first token is `forced_token_id` (the token decoding
    forces first, `pair_languages`) lists it with log-probability 0. Pairs are sorted by source length into batches
    of `batch_size`. The model is in eval mode while it scores and gets its training mode back afterwards."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is invalid: expected an integer >= 1; e.g. 32")
    if len(source_ids) != len(target_ids):
        raise ValueError(
            f"got {len(source_ids)} sources but {len(target_ids)} targets: one target per source"
        )
    if any(len(ids) == 0 for ids in source_ids):
        raise ValueError("every source needs at least one token (its </s>)")
    targets = finished_targets(model, target_ids, append_eos=append_eos)
    translator = getattr(model, "translator", None)
    pad_id = pad_token_id if pad_token_id is not None else model.config.pad_token_id

    def step(sources_batch: list[list[int]], targets_batch: list[list[int]]) -> Sequence[Sequence[float]]:
        if translator is not None:
            return translator.score_ids(sources_batch, targets_batch)
        return _torch_log_probs(cast("PreTrainedModel", model), sources_batch, targets_batch, pad_id)

    log_probs = forced_batches(model, [list(ids) for ids in source_ids], targets, batch_size, step)
    return [
        PairScore(
            token_ids=target,
            token_log_probs=[
                0.0 if t == 0 and token == forced_token_id else float(v)
                for t, (token, v) in enumerate(zip(target, values))
            ],
        )
        for target, values in zip(targets, log_probs)
    ]


def forced_batches(
    model: PreTrainedModel | ModelStandIn,
    sources: list[list[int]],
    targets: list[list[int]],
    batch_size: int,
    step: Callable[[list[list[int]], list[list[int]]], Sequence[Any]],
) -> list[Any]:
    """``step(sources, targets)`` (one result per pair) over batches of `batch_size` pairs sorted by source length,
    the results in input order: the batching of forced decoding (scores, alignments). The model is in eval mode
    while it runs and gets its training mode back afterwards."""
    results: list[Any] = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda row: len(sources[row]), reverse=True)
    was_training = model.training
    model.eval()
    try:
        for begin in range(0, len(order), batch_size):
            batch = order[begin : begin + batch_size]
            outputs = step([sources[row] for row in batch], [targets[row] for row in batch])
            for row, output in zip(batch, outputs):
                results[row] = output
    finally:
        model.train(was_training)
    return results


def score_pairs(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    targets: Sequence[str],
    batch_size: int = 32,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> list[PairScore]:
    """For each (source, target) text pair, in input order, its `PairScore` under `model` (see `score_ids`):
    sources tokenized as `inference.translate` does, targets as labels, a multilingual model's in the languages
    ``src_lang`` / ``tgt_lang`` (module docstring)."""
    check_tokenizer_matches_model(model, tokenizer)
    src_lang, tgt_lang, forced = pair_languages(model, tokenizer, src_lang, tgt_lang)
    source_ids, target_ids = _encode_pairs(model, tokenizer, sources, targets, src_lang, tgt_lang)
    pad_id = cast(int, tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else None
    return score_ids(
        model, source_ids, target_ids, batch_size=batch_size, pad_token_id=pad_id, forced_token_id=forced
    )


def score_tokens(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    target_tokens: Sequence[Sequence[str | int]],
    batch_size: int = 32,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> list[PairScore]:
    """`score_pairs` for targets given as tokens (the tokenizer's pieces, or their ids), scored as they are rather
    than re-tokenized from their text: a decoded output's ``tokens`` (a multilingual model's target language token
    first) give its ``token_log_probs`` back even where the tokenizer would split its text otherwise. `ValueError` naming the row of a piece the vocabulary lacks or an
    id outside it."""
    from .languages import target_language_tokens

    check_tokenizer_matches_model(model, tokenizer)
    src_lang, tgt_lang, forced = pair_languages(model, tokenizer, src_lang, tgt_lang)
    if len(sources) != len(target_tokens):
        raise ValueError(
            f"got {len(sources)} sources but {len(target_tokens)} targets: one target per source"
        )
    # the target side's tokens: a Marian tokenizer with separate vocabularies has its own
    separate = getattr(tokenizer, "separate_vocabs", False) and getattr(tokenizer, "target_encoder", None)
    vocabulary = {
        **(dict(separate) if separate else tokenizer.get_vocab()),
        **target_language_tokens(tokenizer),
    }
    known = set(vocabulary.values())
    target_ids = []
    for row, tokens in enumerate(target_tokens, start=1):
        ids = [token if isinstance(token, int) else vocabulary.get(token, -1) for token in tokens]
        unknown = [t for t, i in zip(tokens, ids) if i not in known]
        if unknown:
            raise ValueError(
                f"row {row}: {len(unknown)} token(s) not in the tokenizer's vocabulary ({unknown[0]!r}): pass the "
                "tokens the model's tokenizer produced"
            )
        target_ids.append(ids)
    pad_id = cast(int, tokenizer.pad_token_id) if tokenizer.pad_token_id is not None else None
    source_ids = encode_sources(model, tokenizer, sources, src_lang, tgt_lang)
    return score_ids(
        model, source_ids, target_ids, batch_size=batch_size, pad_token_id=pad_id, forced_token_id=forced
    )


def score_record(
    scored: PairScore, tokenizer: PreTrainedTokenizerBase, length_penalty: float
) -> dict[str, Any]:
    """What `vanilla-transformer score` and the server's POST /score report of one pair: ``score`` (normalised
    with `length_penalty`), ``log_prob``, ``length``, ``tokens`` and ``token_log_probs`` (six decimals)."""
    return {
        "score": round(scored.score(length_penalty), 6),
        "log_prob": round(scored.log_prob, 6),
        "length": len(scored.token_ids),
        "tokens": tokenizer.convert_ids_to_tokens(scored.token_ids),
        "token_log_probs": [round(value, 6) for value in scored.token_log_probs],
    }


def default_length_penalty(generation_config: Any) -> float:
    """The length penalty scores are normalised with when none is given: the generation config's, else
    `modeling.DEFAULT_LENGTH_PENALTY`."""
    from vanilla_transformer.modeling import DEFAULT_LENGTH_PENALTY

    value = getattr(generation_config, "length_penalty", None)
    return DEFAULT_LENGTH_PENALTY if value is None else float(value)
