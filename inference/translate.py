"""Batched translation with a seq2seq model: the one path used by `vanilla-transformer translate`,
`vanilla-transformer evaluate`, validation and test scoring in training, and the quality benchmark (for
`MarianMTModel` too).

`translate_hypotheses` is the loop (each line's `Hypothesis` list: texts, sequence scores and, with
``token_scores``, each output's tokens and their log-probabilities); `translate_scored` (texts and sequence scores),
`translate_nbest`, `translate` (one hypothesis per text) and `translate_lines` (n-best joined by tabs, for the CLI)
are views of it, and `translation_record` is what the command line and the server report of one line. All return
outputs in input order. Empty (or whitespace-only) texts are not sent to the model and give empty outputs.
Non-empty texts are sorted by token length (longest first), translated in batches of `batch_size` (and, with
``max_tokens``, of at most that many padded source tokens), and put back in input order. Sources longer than the model accepts
(`modeling.max_source_length`: its position limit, none with RoPE, and the tokenizer's ``model_max_length``) are
truncated, with one warning that gives the count. ``max_new_tokens`` is lowered to the position limit
(`modeling.position_limit`). With ``max_len_a`` a batch generates at most ``min(max_new_tokens, max_len_a *
longest_source + max_len_b)`` tokens (fairseq's ``--max-len-a``/``--max-len-b``; lengths in tokens, ``</s>``
included), which bounds the time spent on an untrained model. Whitespace runs in outputs become one space, so
an output never contains a newline or a tab of its own. With a ``glossary`` (`inference.glossary.Glossary`), a
batch in which some source holds a glossary term is decoded by lexically constrained beam search
(`inference.constraints.constrained_beam_search`: each applying target term comes out, contiguous, not continued
into a longer word); a batch with none is decoded as without it.

Decoding options not given (or given as None) come from ``model.generation_config``; for this project's
models that is `modeling.default_generation_config` (the paper's beam 4, `modeling.DEFAULT_LENGTH_PENALTY`).
With one beam, the beam-only options ``length_penalty`` and ``early_stopping`` are not passed on (they change
nothing). Out-of-range options raise `ValueError` (`modeling.check_generation_arguments`) before anything is
translated, and so does a tokenizer that does not match the model
(`inference.loading.check_tokenizer_matches_model`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .loading import ModelStandIn, check_tokenizer_matches_model
from .sources import encode_sources

if TYPE_CHECKING:  # torch and transformers are imported where used, so that bad input fails in milliseconds
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .forced_decoding import PairScore
    from .glossary import Glossary
    from .shortlist import Shortlist


logger = logging.getLogger(__name__)

# The default output limit (fairseq's max_len_a / max_len_b, CTranslate2's and Marian's source-relative length): a
# batch generates at most 2 * its longest source + 10 tokens, enough for any real translation, and it bounds the
# time an untrained model, or a sentence that never ends, spends repeating itself. None for max_len_a: no limit.
LENGTH_CAP = {"max_len_a": 2.0, "max_len_b": 10}
MAX_LEN_A: float = LENGTH_CAP["max_len_a"]
MAX_LEN_B: int = int(LENGTH_CAP["max_len_b"])
# The default token budget of a batch: at most this many padded source tokens (lines x its longest line)
MAX_TOKENS = 4096

_BEAM_ONLY = ("length_penalty", "early_stopping")  # meaningless with one beam (transformers warns if given)


@dataclass(frozen=True)
class Hypothesis:
    """One translation of a line: its ``text``; its sequence ``score`` (`translate_scored`; None without scores and
    for an empty line); with token scores, ``tokens``: the output's token ids as decoded (its ``</s>`` included
    when decoding produced one) and the log-probability of each by forced decoding
    (`inference.forced_decoding.score_ids`, the numbers `vanilla-transformer score` gives; None for an empty
    line)."""

    text: str
    score: float | None = None
    tokens: PairScore | None = None


def translate_nbest(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    lines: Sequence[str],
    batch_size: int = 32,
    *,
    max_len_a: float | None = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
    max_tokens: int | None = MAX_TOKENS,
    progress: Callable[[int], None] | None = None,
    **generate_kwargs: Any,
) -> list[list[str]]:
    """For each line, its `num_return_sequences` hypotheses (best first); empty lines give empty strings.

    `generate_kwargs` go to `model.generate` (None values are dropped, so the model's generation config
    supplies the defaults). A batch holds at most `batch_size` lines and, with `max_tokens`, at most
    `max_tokens` source tokens counted with padding (lines x its longest line; a longer line is a batch of its
    own). `progress(n)` is called after each batch with its number of lines (and once for the empty lines, if
    any), so the calls add up to ``len(lines)``. The model is in eval mode while it translates and gets its
    training mode back afterwards."""
    nbest = translate_hypotheses(
        model,
        tokenizer,
        lines,
        batch_size,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        max_tokens=max_tokens,
        progress=progress,
        scores=False,
        **generate_kwargs,
    )
    return [[hypothesis.text for hypothesis in hypotheses] for hypotheses in nbest]


def translate_scored(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    lines: Sequence[str],
    batch_size: int = 32,
    **options: Any,
) -> tuple[list[list[str]], list[list[float | None]]]:
    """`translate_nbest` (`options` are its keywords) and each hypothesis' sequence score (None for empty lines):
    with beams, transformers' ``sequences_scores`` (``sum(log p) / length ** length_penalty``); greedy or
    sampling, the sum of the log-probabilities of the chosen tokens under the processed distribution (temperature,
    top-k and top-p applied), up to the first ``</s>``. The exported engines give the same two definitions
    (`inference.engines.EngineModel`)."""
    nbest = translate_hypotheses(model, tokenizer, lines, batch_size, **options)
    return (
        [[hypothesis.text for hypothesis in hypotheses] for hypotheses in nbest],
        [[hypothesis.score for hypothesis in hypotheses] for hypotheses in nbest],
    )


def translate_hypotheses(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    lines: Sequence[str],
    batch_size: int = 32,
    *,
    max_len_a: float | None = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
    max_tokens: int | None = MAX_TOKENS,
    progress: Callable[[int], None] | None = None,
    scores: bool = True,
    token_scores: bool = False,
    glossary: Glossary | None = None,
    decoder: str | None = None,
    shortlist: Shortlist | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    **generate_kwargs: Any,
) -> list[list[Hypothesis]]:
    """For each line, its `num_return_sequences` `Hypothesis` (best first; see `translate_nbest` for the options):
    with `scores`, each one's sequence score (`translate_scored`); with `token_scores`, also its output tokens and
    their log-probabilities by forced decoding of the output (`inference.forced_decoding.score_ids`: PyTorch's
    forward pass, CTranslate2's ``score_batch``, the ONNX decoder step by step), one scoring call per batch. With
    beams and a generation config that alters no logits, a finished hypothesis' score equals
    ``tokens.score(length_penalty)``; greedy, ``tokens.log_prob``. With `glossary`, the terms that apply to a line
    come out in its translations (module docstring); sampling raises `ValueError`, and so does an exported engine,
    which cannot honour them, at its first batch with a term. `decoder`: "loop" (`inference.decoding.decode`, the
    torch engine's own decoding loop, where `inference.decoding.unsupported` allows it, else `generate()`) or
    "generate" (always `model.generate()`); None reads the environment variable VANILLA_TRANSFORMER_DECODER,
    "loop" by default (`inference.decoding.chosen_decoder`). With `shortlist` (`inference.shortlist`), each batch
    decodes over its shortlist vocabulary (`Shortlist.for_batch`): PyTorch through the decoding loop's
    ``vocabulary`` (or `generate()` of a `shortlisted` view), CTranslate2 with its export's vocabulary map
    (``use_vmap``); ONNX Runtime and a glossary raise `ValueError`."""
    import torch

    from vanilla_transformer.modeling import position_limit

    from .constraints import constrained_beam_search
    from .decoding import chosen_decoder, unsupported
    from .forced_decoding import pair_languages
    from .glossary import term_ids, word_pieces
    from .languages import target_options, without_target_token

    scores = scores or token_scores
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} is invalid: expected an integer >= 1; e.g. 32")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens!r} is invalid: expected an integer >= 1; e.g. 4096")
    if max_len_a is not None and (max_len_a < 0 or max_len_b < 0):
        raise ValueError(
            f"max_len_a={max_len_a!r}, max_len_b={max_len_b!r} are invalid: expected numbers >= 0; "
            "e.g. max_len_a=2, max_len_b=10 (at most 2 * source length + 10 new tokens)"
        )
    generate_kwargs, n = decoding_options(model, tokenizer, generate_kwargs, glossary, shortlist)
    src_lang, tgt_lang, forced_token_id = pair_languages(model, tokenizer, src_lang, tgt_lang)
    language_options = target_options(tokenizer, model.generation_config, tgt_lang)
    generate_kwargs.update(language_options)
    forced_token_id = generate_kwargs.get("forced_bos_token_id", forced_token_id)
    results: list[list[Hypothesis]] = [[Hypothesis("")] * n for _ in lines]
    todo = [i for i, line in enumerate(lines) if line.strip()]
    if progress is not None and len(lines) > len(todo):
        progress(len(lines) - len(todo))
    if not todo:
        return results

    encoded = encode_sources(model, tokenizer, [lines[i] for i in todo], src_lang, tgt_lang)
    # each source's target phrases (token ids) that the glossary puts in its translation
    phrases = [term_ids(tokenizer, glossary.terms_for(lines[i])) if glossary else [] for i in todo]
    max_new_tokens = capped_max_new_tokens(model, generate_kwargs)
    positions = position_limit(model.config)

    # one id (transformers types a special token's id as one id or a list)
    pad_id = cast(
        int, tokenizer.pad_token_id if tokenizer.pad_token_id is not None else model.config.pad_token_id
    )
    order = sorted(range(len(todo)), key=lambda k: len(encoded[k]), reverse=True)
    was_training = model.training
    model.eval()
    try:
        loop = chosen_decoder(decoder) == "loop" and unsupported(model, generate_kwargs) is None
        for batch in _batches(order, [len(ids) for ids in encoded], batch_size, max_tokens):
            width = max(len(encoded[k]) for k in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, S)
            attention_mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, S), 1 = real token
            for row, k in enumerate(batch):
                input_ids[row, : len(encoded[k])] = torch.tensor(encoded[k])
                attention_mask[row, : len(encoded[k])] = 1
            batch_kwargs = dict(generate_kwargs)
            if any(phrases[k] for k in batch):
                batch_kwargs.update(
                    custom_generate=constrained_beam_search,
                    constraints=[phrases[k] for k in batch],
                    word_pieces=word_pieces(tokenizer),
                )
            cap = batch_max_new_tokens(max_new_tokens, width, positions, max_len_a, max_len_b)
            if cap is not None:
                batch_kwargs["max_new_tokens"] = cap
            output_ids, batch_scores = _decode_batch(
                model, input_ids, attention_mask, batch_kwargs, scores, loop, shortlist
            )
            sources = [encoded[k] for k in batch for _ in range(n)]
            hypotheses = output_hypotheses(
                model,
                tokenizer,
                output_ids,
                batch_scores,
                sources if token_scores else None,
                pad_id,
                text_ids=without_target_token(output_ids, language_options, pad_id),
                forced_token_id=forced_token_id,
            )
            for row, k in enumerate(batch):
                results[todo[k]] = hypotheses[row * n : (row + 1) * n]
            if progress is not None:
                progress(len(batch))
    finally:
        model.train(was_training)
    return results


def decoding_options(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    generate_kwargs: dict[str, Any],
    glossary: Glossary | None = None,
    shortlist: Shortlist | None = None,
) -> tuple[dict[str, Any], int]:
    """The `generate()` options `translate_hypotheses` decodes with (None values dropped; with one beam, the
    beam-only ones too) and the hypotheses per line; `ValueError` for out-of-range options, a tokenizer that does
    not match the model, or a glossary or shortlist that cannot apply."""
    from vanilla_transformer.modeling import check_generation_arguments

    from .constraints import check_glossary_decoding

    generate_kwargs = {k: v for k, v in generate_kwargs.items() if v is not None}
    check_generation_arguments(generate_kwargs, model.generation_config)
    check_tokenizer_matches_model(model, tokenizer)
    if glossary is not None:
        check_glossary_decoding(
            generate_kwargs.get("do_sample", getattr(model.generation_config, "do_sample", False))
        )
    if shortlist is not None:
        _check_shortlist(model, shortlist, glossary)
    if generate_kwargs.get("num_beams", model.generation_config.num_beams) == 1:
        generate_kwargs = {k: v for k, v in generate_kwargs.items() if k not in _BEAM_ONLY}
    n = generate_kwargs.get(
        "num_return_sequences", getattr(model.generation_config, "num_return_sequences", 1)
    )
    return generate_kwargs, n or 1


def batch_max_new_tokens(
    max_new_tokens: int | None,
    width: int,
    positions: int | None,
    max_len_a: float | None = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
) -> int | None:
    """The ``max_new_tokens`` of a batch whose longest source has `width` tokens (module docstring): the given
    one (`max_new_tokens`, already within the positions), lowered with `max_len_a` to ``max_len_a * width +
    max_len_b`` and the decoder's `positions`; None: the generation config's."""
    if max_len_a is None:
        return max_new_tokens
    length_cap = max(1, int(max_len_a * width + max_len_b))
    if positions is not None:
        length_cap = min(length_cap, positions)
    return length_cap if max_new_tokens is None else min(max_new_tokens, length_cap)


def source_widths(lengths: Sequence[int], batch_size: int, max_tokens: int | None = MAX_TOKENS) -> list[int]:
    """The longest source of the batch each of the sources of `lengths` (tokens) is translated in by
    `translate_hypotheses` with `batch_size` and `max_tokens`: what its length cap is computed from."""
    order = sorted(range(len(lengths)), key=lambda k: lengths[k], reverse=True)
    widths = [0] * len(lengths)
    for batch in _batches(order, list(lengths), batch_size, max_tokens):
        for k in batch:
            widths[k] = max(lengths[j] for j in batch)
    return widths


def output_hypotheses(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    output_ids: Any,
    scores: Sequence[float | None],
    sources: list[list[int]] | None,
    pad_id: int,
    text_ids: Any = None,
    forced_token_id: int | None = None,
) -> list[Hypothesis]:
    """The `Hypothesis` of each decoded row of `output_ids` (R, T) (decoder start token first) with its sequence
    score; with `sources` (each row's source ids), its tokens' log-probabilities by forced decoding (the first token
    log-probability 0 where it is `forced_token_id`, the token decoding forced: `inference.forced_decoding`). The text
    is that of ``text_ids`` where given (the rows without a forced target-language token,
    `inference.languages.without_target_token`), else of `output_ids`."""
    texts = tokenizer.batch_decode(
        output_ids if text_ids is None else text_ids,
        skip_special_tokens=True,
        clean_up_tokenization_spaces=False,
    )
    scored: list[PairScore | None] = [None] * len(texts)
    if sources is not None:
        scored = list(_output_scores(model, sources, output_ids, pad_id, forced_token_id))
    return [
        Hypothesis(" ".join(text.split()), score, tokens)
        for text, score, tokens in zip(texts, scores, scored)
    ]


def _check_shortlist(
    model: PreTrainedModel | ModelStandIn, shortlist: Shortlist, glossary: Glossary | None
) -> None:
    """`ValueError` for a shortlist that cannot restrict this decoding: with a glossary (its terms may lie
    outside the shortlist), an exported engine other than CTranslate2, or a model of other vocabularies."""
    if glossary is not None:
        raise ValueError(
            "--shortlist and --glossary do not combine (a term's tokens may lie outside the shortlist): leave one out"
        )
    engine = getattr(model, "engine", None)  # an exported engine's EngineModel; None for a PyTorch model
    if engine not in (None, "ct2"):
        raise ValueError(
            f"--engine {engine} computes the whole output layer and cannot take --shortlist: use --engine torch "
            "or ct2, or leave out --shortlist"
        )
    shortlist.check_model(model.config)


def hypothesis_record(hypothesis: Hypothesis, tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """What the command line (`translate --output_format jsonl`) and the server (POST /translate with
    ``scores``) report of one hypothesis with token scores: ``translation``, ``score`` (its sequence score: what
    decoding ranked it by), and `inference.forced_decoding.score_record`'s ``log_prob``, ``length``, ``tokens``
    and ``token_log_probs`` (six decimals); an empty line gives null scores and no tokens."""
    from .forced_decoding import score_record

    if hypothesis.tokens is None:
        return {
            "translation": hypothesis.text,
            "score": hypothesis.score,
            "log_prob": None,
            "length": 0,
            "tokens": [],
            "token_log_probs": [],
        }
    record = score_record(hypothesis.tokens, tokenizer, length_penalty=0.0)
    score = None if hypothesis.score is None else round(hypothesis.score, 6)
    return {"translation": hypothesis.text, **record, "score": score}


def translation_record(
    hypotheses: Sequence[Hypothesis], tokenizer: PreTrainedTokenizerBase
) -> dict[str, Any]:
    """The record of one line's n-best list (`translate_hypotheses` with token scores): the best hypothesis'
    `hypothesis_record` and, with more than one hypothesis, ``nbest``: every hypothesis' record, best first."""
    record = hypothesis_record(hypotheses[0], tokenizer)
    if len(hypotheses) > 1:
        record["nbest"] = [hypothesis_record(hypothesis, tokenizer) for hypothesis in hypotheses]
    return record


def _output_scores(
    model: PreTrainedModel | ModelStandIn,
    sources: list[list[int]],
    output_ids: Any,
    pad_id: int,
    forced_token_id: int | None = None,
) -> list[PairScore]:
    """The forced-decoding `PairScore` of each generated row of ``output_ids`` (B * n, T) (the decoder start
    token first) given its source ids: its tokens up to and including the first ``</s>``, or all of them for a
    row that decoding cut at its length limit (scored without a ``</s>``)."""
    from .forced_decoding import score_ids

    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    rows = []
    for row in output_ids[:, 1:].tolist():
        end = next((t + 1 for t, token in enumerate(row) if token in eos_ids), None)
        rows.append(row[:end] if end is not None else row)
    return score_ids(
        model,
        sources,
        rows,
        batch_size=len(rows),
        pad_token_id=pad_id,
        append_eos=False,
        forced_token_id=forced_token_id,
    )


def _batches(
    order: list[int], lengths: list[int], batch_size: int, max_tokens: int | None
) -> Iterator[list[int]]:
    """``order`` (indices sorted by length, longest first) cut into batches of at most ``batch_size`` indices and,
    with ``max_tokens``, at most ``max_tokens`` padded tokens (the first index is the batch's longest)."""
    batch: list[int] = []
    for k in order:
        if batch and (
            len(batch) == batch_size
            or (max_tokens is not None and (len(batch) + 1) * lengths[batch[0]] > max_tokens)
        ):
            yield batch
            batch = []
        batch.append(k)
    if batch:
        yield batch


def _decode_batch(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    batch_kwargs: dict[str, Any],
    scores: bool,
    loop: bool,
    shortlist: Shortlist | None,
) -> tuple[torch.Tensor, list[float | None]]:
    """One batch's output ids (B * n, T), in the model's vocabulary, and their sequence scores (None each without
    ``scores``): through the decoding loop (`inference.decoding.decode`) where ``loop`` and no constrained search
    is asked for, else `generate()`; with ``shortlist``, over the batch's shortlist vocabulary (the loop, or
    `generate()` of a shortlisted view of a PyTorch model) or an exported engine's vocabulary map."""
    import torch

    from .decoding import decode
    from .shortlist import shortlisted

    input_ids, attention_mask = input_ids.to(model.device), attention_mask.to(model.device)
    vocabulary = None
    if shortlist is not None and getattr(model, "engine", None) is not None:
        # an exported engine (EngineModel) restricts by the vocabulary map of its folder
        batch_kwargs = {**batch_kwargs, "use_vmap": True}
    elif shortlist is not None:
        vocabulary = shortlist.for_batch(input_ids, attention_mask)
    if loop and "custom_generate" not in batch_kwargs:
        # unsupported() has made sure that this is this project's PyTorch encoder-decoder; the loop takes the
        # shortlist itself and gives full-vocabulary ids
        decoded = decode(model, input_ids, attention_mask, vocabulary=vocabulary, **batch_kwargs)
        if not scores:
            return decoded.sequences, [None] * len(decoded.sequences)
        return decoded.sequences, [float(score) for score in decoded.sequences_scores]
    decoder = model if vocabulary is None else shortlisted(model, vocabulary)
    with torch.no_grad():
        # transformers declares generate on GenerationMixin, which the models here mix in and PreTrainedModel
        # does not
        output = decoder.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            **batch_kwargs,
            **({"return_dict_in_generate": True, "output_scores": True} if scores else {}),
        )
    output_ids = output.sequences if scores else output  # (B * n, T)
    batch_scores: list[float | None] = (
        _sequence_scores(decoder, output) if scores else [None] * len(output_ids)
    )
    if vocabulary is not None:
        output_ids = vocabulary[output_ids]  # the shortlist's ids -> the model's
    return output_ids, batch_scores


def _sequence_scores(model: PreTrainedModel | ModelStandIn, output: Any) -> list[float | None]:
    """Each returned sequence's score (`translate_scored`) from `generate()`'s output with ``output_scores``."""
    import torch

    if getattr(output, "sequences_scores", None) is not None:
        return [float(score) for score in output.sequences_scores]
    eos = model.generation_config.eos_token_id
    eos_ids = torch.tensor(eos if isinstance(eos, list) else [] if eos is None else [eos], dtype=torch.long)
    # (B * n, T') the generated tokens, one per step of output.scores
    tokens = output.sequences[:, -len(output.scores) :].cpu()
    # (B * n, T') log p of each chosen token under the processed distribution
    log_probs = torch.stack(
        [
            step.float().log_softmax(-1).gather(-1, tokens[:, t, None].to(step.device)).squeeze(-1).cpu()
            for t, step in enumerate(output.scores)
        ],
        dim=1,
    )
    is_eos = torch.isin(tokens, eos_ids)
    # steps after a sequence's first </s> (padding) do not count
    after_eos = (is_eos.long().cumsum(1) - is_eos.long()) > 0
    return [float(score) for score in log_probs.masked_fill(after_eos, 0.0).sum(1)]


def translate(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    max_len_a: float | None = MAX_LEN_A,
    max_len_b: int = MAX_LEN_B,
    progress: Callable[[int], None] | None = None,
    **generate_kwargs: Any,
) -> list[str]:
    """One translation per text, in input order (see the module docstring); `translate_nbest` with one
    hypothesis. ``translate(model, tokenizer, texts, num_beams=1)`` decodes greedily; options left out come
    from ``model.generation_config``."""
    if generate_kwargs.get("num_return_sequences") not in (None, 1):
        raise ValueError(
            f"num_return_sequences={generate_kwargs['num_return_sequences']!r} is invalid for translate(), "
            "which returns one translation per text: use translate_nbest for n-best lists"
        )
    nbest = translate_nbest(
        model,
        tokenizer,
        texts,
        batch_size,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        progress=progress,
        **generate_kwargs,
    )
    return [hyps[0] for hyps in nbest]


def translate_lines(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    lines: Sequence[str],
    batch_size: int = 32,
    **generate_kwargs: Any,
) -> list[str]:
    """One output per line, in input order: its n-best hypotheses joined by tabs (see the module docstring)."""
    return [
        "\t".join(hyps) for hyps in translate_nbest(model, tokenizer, lines, batch_size, **generate_kwargs)
    ]


def capped_max_new_tokens(
    model: PreTrainedModel | ModelStandIn, generate_kwargs: dict[str, Any]
) -> int | None:
    """The max_new_tokens to use: the given one, else the generation config's, lowered to the decoder's
    position limit (a longer output would fail mid-generation); None when neither sets one."""
    from vanilla_transformer.modeling import position_limit

    wanted = generate_kwargs.get("max_new_tokens", model.generation_config.max_new_tokens)
    limit = position_limit(model.config)
    if limit is None:
        return wanted
    if wanted is None:
        # generate()'s max_length counts the decoder start token: max_length - 1 new tokens (a converted Marian
        # model's config may allow more than its positions hold)
        max_length = generate_kwargs.get("max_length", getattr(model.generation_config, "max_length", None))
        return limit if max_length is not None and max_length - 1 > limit else None
    if wanted > limit:
        logger.warning("max_new_tokens=%d exceeds max_position_embeddings=%d; using %d", wanted, limit, limit)
        return limit
    return wanted
