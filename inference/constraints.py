"""Lexically constrained beam search as a `generate()` strategy: the search that makes a glossary's terms
(`inference.glossary`) come out.

Candidate and stopping rules after transformers' beam search (`GenerationMixin._beam_search`, Apache-2.0).

`constrained_beam_search` is beam search with dynamic beam allocation (Post and Vilar 2018, "Fast Lexically
Constrained Decoding with Dynamic Beam Allocation for Neural Machine Translation", NAACL), passed to `generate()`
as its ``custom_generate`` with ``constraints`` (one list of token-id phrases per source row): generate() encodes,
expands the beams, builds the KV cache and the logits processors and stopping criteria, and this loop decodes with
them. Each step, a hypothesis' candidates are the beam's usual best continuations, the next token of every phrase
it can still start (or of the phrase it is inside), and its own best token; candidates are grouped in banks by the
number of constraint tokens they hold, and the beam's slots are shared out among the banks (the remainder to the
highest, slots a bank cannot fill to the next banks with candidates, highest first), the best by score in each. A
phrase counts only when its tokens come out contiguous (leaving one half way starts it over), each phrase at least
once, and a hypothesis may end (``</s>``) only when it holds them all. When no hypothesis meets them within the
length limit, the hypotheses that meet the most come first. A completed phrase is a whole word: the token after it
may not continue its last word (``word_pieces``, from `inference.glossary.word_pieces`: a term "Zimri" does not
come out as the start of "Zimrias"). A row without constraints is searched exactly as transformers' beam search
does (the same candidates, length penalty, ``early_stopping`` and stopping criteria).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

# a beam's score that no real hypothesis reaches (transformers' beam search uses the same value)
_DEAD = -1.0e9


def check_glossary_decoding(do_sample: bool | None) -> None:
    """`ValueError` when a glossary cannot be honoured because the decoding samples (constrained decoding is a
    beam search). An exported engine refuses a glossary by name (`inference.engines.check_engine_options`)."""
    if do_sample:
        raise ValueError(
            "--glossary needs beam search (lexically constrained decoding): leave out --do_sample or the glossary"
        )


# ---- the search -------------------------------------------------------------------------------------------------
# A hypothesis' progress through its phrases: (met, (phrase, position) or None, closed), met a tuple of bools per
# phrase, closed whether its last token completed a phrase.
_State = tuple[tuple[bool, ...], "tuple[int, int] | None", bool]


def _advance(state: _State, token: int, phrases: Sequence[Sequence[int]]) -> _State:
    """The state after ``token``: the phrase being spelt goes on (or is left and starts over), or the token
    starts the first phrase not yet met that begins with it."""
    met, inside, _ = state
    if inside is not None:
        phrase, position = inside
        if phrases[phrase][position] == token:
            if position + 1 < len(phrases[phrase]):
                return met, (phrase, position + 1), False
            return met[:phrase] + (True,) + met[phrase + 1 :], None, True
    for phrase, ids in enumerate(phrases):
        if not met[phrase] and ids[0] == token:
            if len(ids) == 1:
                return met[:phrase] + (True,) + met[phrase + 1 :], None, True
            return met, (phrase, 1), False
    return met, None, False


def _next_tokens(state: _State, phrases: Sequence[Sequence[int]]) -> set[int]:
    """The tokens that bring ``state`` closer to meeting its phrases."""
    met, inside, _ = state
    if inside is not None:
        return {phrases[inside[0]][inside[1]]}
    return {ids[0] for phrase, ids in enumerate(phrases) if not met[phrase]}


def _tokens_met(state: _State, phrases: Sequence[Sequence[int]]) -> int:
    """The bank of ``state``: the constraint tokens it holds (phrases met, and the part of the one being spelt)."""
    met, inside, _ = state
    return sum(len(ids) for ids, done in zip(phrases, met) if done) + (inside[1] if inside else 0)


def _bank_sizes(beams: int, available: list[int]) -> list[int]:
    """Slots per bank (index = constraint tokens held): ``beams // banks`` each, the remainder to the highest
    bank, then slots a bank cannot fill (``available[i]`` candidates) to the banks with candidates left,
    highest first, one at a time."""
    banks = len(available)
    sizes = [beams // banks] * banks
    sizes[-1] += beams - sum(sizes)
    sizes = [min(size, count) for size, count in zip(sizes, available)]
    while sum(sizes) < beams and any(size < count for size, count in zip(sizes, available)):
        for bank in reversed(range(banks)):
            if sum(sizes) < beams and sizes[bank] < available[bank]:
                sizes[bank] += 1
    return sizes


@dataclass
class _Candidate:
    score: float
    beam: int
    token: int
    state: _State
    # may end the hypothesis now if it hits a stopping criterion: one of the top num_beams candidates
    # (transformers' rule), or of those that hold all their phrases
    may_finish: bool


# a finished hypothesis: (all its phrases met, score / length ** length_penalty, token ids)
_Finished = tuple[bool, float, list[int]]


@dataclass(frozen=True)
class _Settings:
    """What the search reads of the generation config: ``keep`` continuations are taken per source each step
    (transformers' rule: enough that ``beams`` of them do not end); ``return_dict`` whether a
    ``GenerateBeamEncoderDecoderOutput`` is returned, ``scores_out`` whether it holds the step and sequence scores."""

    beams: int
    returned: int
    eos_ids: list[int]
    pad: int
    max_length: int
    length_penalty: float
    early_stopping: bool | str | None
    keep: int
    return_dict: bool
    scores_out: bool

    @classmethod
    def of(cls, generation_config: GenerationConfig) -> _Settings:
        """The settings of ``generation_config``; `ValueError` when it samples."""
        if generation_config.do_sample:
            raise ValueError("terminology constraints need beam search: leave out do_sample")
        beams = generation_config.num_beams or 1
        eos = generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [] if eos is None else [eos]
        pad = generation_config.pad_token_id
        return cls(
            beams=beams,
            returned=generation_config.num_return_sequences or 1,
            eos_ids=eos_ids,
            pad=pad if pad is not None else (eos_ids[0] if eos_ids else 0),
            max_length=generation_config.max_length,
            length_penalty=generation_config.length_penalty,
            early_stopping=generation_config.early_stopping,
            keep=max(2, 1 + len(eos_ids)) * beams,
            return_dict=bool(generation_config.return_dict_in_generate),
            scores_out=bool(generation_config.return_dict_in_generate and generation_config.output_scores),
        )


def constrained_beam_search(
    model: Any,
    input_ids: torch.Tensor,
    logits_processor: LogitsProcessorList,
    stopping_criteria: StoppingCriteriaList,
    generation_config: GenerationConfig,
    constraints: Sequence[Sequence[Sequence[int]]] | None = None,
    word_pieces: Collection[int] = (),
    **model_kwargs: Any,
) -> Any:
    """Beam search in which every hypothesis that ends holds each of its row's phrases (module docstring): the
    ``custom_generate`` of ``model.generate(..., custom_generate=constrained_beam_search, constraints=...)``.

    ``constraints[b]`` are the token-id phrases of source row ``b`` (empty: plain beam search); no token of
    ``word_pieces`` (`inference.glossary.word_pieces`) may follow a completed phrase. Returns what
    transformers' beam search returns: the (B * num_return_sequences, T) sequences, decoder start first, padded,
    best first; with ``return_dict_in_generate`` a ``GenerateBeamEncoderDecoderOutput`` with
    ``sequences_scores`` (``sum(log p) / length ** length_penalty``) when ``output_scores``."""
    import torch

    settings = _Settings.of(generation_config)
    beams = settings.beams
    rows, prompt_length = input_ids.shape
    batch = rows // beams
    phrases = [[list(ids) for ids in row if len(ids)] for row in (constraints or [[]] * batch)]
    if len(phrases) != batch:
        raise ValueError(
            f"constraints holds {len(phrases)} rows for {batch} sources: give one list per source"
        )
    cache_key = next((key for key in ("cache", "past_key_values") if model_kwargs.get(key) is not None), None)
    cache = model_kwargs.get(cache_key) if cache_key else None
    all_scores: tuple[torch.Tensor, ...] = ()

    sequences = input_ids  # (B * beams, t)
    running = torch.full((batch, beams), _DEAD)
    running[:, 0] = 0.0
    states: list[list[_State]] = [[((False,) * len(p), None, False)] * beams for p in phrases]
    pieces = torch.tensor(sorted(word_pieces), dtype=torch.long)
    finished: list[list[_Finished]] = [[] for _ in range(batch)]
    done = [False] * batch
    length = prompt_length
    while length < settings.max_length and not all(done):
        step_ids = sequences[:, -1:] if cache is not None and length > prompt_length else sequences
        log_probs = _next_log_probs(model, step_ids, cache_key, cache, model_kwargs)
        log_probs = _forbid_ends(logits_processor(sequences, log_probs), states, settings.eos_ids, pieces)
        if settings.scores_out:
            all_scores += (log_probs.clone(),)
        candidates = _step_candidates(log_probs, running, phrases, states, done, settings)
        hits = _stopping_hits(stopping_criteria, sequences, candidates, beams, all_scores)
        divisor = (length + 1 - prompt_length) ** settings.length_penalty
        finished = [
            finished[b]
            if done[b]
            else _finish(finished[b], _ends(sequences, b, beams, row, hits[b]), beams, divisor)
            for b, row in enumerate(candidates)
        ]
        chosen, next_tokens, states, running = _next_beams(candidates, hits, states, phrases, settings)
        beam_index = torch.tensor(chosen, device=sequences.device)
        sequences = torch.cat(
            [sequences[beam_index], torch.tensor(next_tokens, device=sequences.device)[:, None]], dim=1
        )
        cache = _reorder_cache(model, cache, beam_index)
        length += 1
        generated, most = length - prompt_length, settings.max_length - prompt_length
        done = [
            done[b]
            or _search_done(finished[b], running[b], states[b], bool(phrases[b]), settings, generated, most)
            for b in range(batch)
        ]
    return _output(finished, running, sequences, settings, input_ids.device, all_scores)


def _next_log_probs(
    model: Any, step_ids: torch.Tensor, cache_key: str | None, cache: Any, model_kwargs: dict[str, Any]
) -> torch.Tensor:
    """(B * beams, V) the log-probabilities of each beam's next token, from the decoder run on ``step_ids`` (the
    last token with a cache, else the whole sequence) with the encoder outputs ``generate()`` computed."""
    import torch

    outputs = model(
        encoder_outputs=model_kwargs.get("encoder_outputs"),
        attention_mask=model_kwargs.get("attention_mask"),
        decoder_input_ids=step_ids,
        use_cache=cache is not None,
        return_dict=True,
        **({cache_key: cache} if cache_key else {}),
    )
    return torch.log_softmax(outputs.logits[:, -1, :].float(), dim=-1)


def _forbid_ends(
    log_probs: torch.Tensor, states: list[list[_State]], eos_ids: list[int], pieces: torch.Tensor
) -> torch.Tensor:
    """``log_probs`` (B * beams, V) with the tokens a hypothesis may not take next at -inf: ``</s>`` before it
    holds all its phrases, a word piece (``pieces``) right after it completed one."""
    import torch

    rows = [(b * len(row) + i, state) for b, row in enumerate(states) for i, state in enumerate(row)]
    unmet = [row for row, state in rows if not all(state[0])]
    if unmet and eos_ids:
        # a hypothesis ends only when it holds all its phrases
        log_probs[torch.tensor(unmet)[:, None], torch.tensor(eos_ids)[None, :]] = float("-inf")
    closed = [row for row, state in rows if state[2]]
    if closed and len(pieces):
        # a completed phrase ends its word
        log_probs[torch.tensor(closed)[:, None], pieces[None, :]] = float("-inf")
    return log_probs


def _step_candidates(
    log_probs: torch.Tensor,
    running: torch.Tensor,
    phrases: list[list[list[int]]],
    states: list[list[_State]],
    done: list[bool],
    settings: _Settings,
) -> list[list[_Candidate]]:
    """Each source's candidates for the next token (`_candidates`), from the (B * beams, V) ``log_probs`` and the
    (B, beams) ``running`` scores; none for a source whose search is over (it keeps dead beams until the others
    end)."""
    batch, beams = running.shape
    vocab = log_probs.shape[-1]
    # (B, beams, V) each continuation's score
    totals = log_probs.cpu().view(batch, beams, vocab) + running[:, :, None]
    top_scores, top_index = totals.view(batch, -1).topk(min(settings.keep, beams * vocab))
    return [
        [] if done[b] else _candidates(phrases[b], states[b], totals[b], top_scores[b], top_index[b], beams)
        for b in range(batch)
    ]


def _stopping_hits(
    stopping_criteria: StoppingCriteriaList,
    sequences: torch.Tensor,
    candidates: list[list[_Candidate]],
    beams: int,
    all_scores: tuple[torch.Tensor, ...],
) -> list[list[bool]]:
    """Per source, whether each candidate's sequence (its beam's, then its token) meets a stopping criterion."""
    import torch

    flat = [c for row in candidates for c in row]
    # (N, t + 1) every candidate's sequence
    extended = torch.cat(
        [
            sequences[[b * beams + c.beam for b, row in enumerate(candidates) for c in row]],
            torch.tensor([c.token for c in flat], device=sequences.device)[:, None],
        ],
        dim=1,
    )
    # transformers annotates the arguments with the legacy LongTensor class and one-tuples
    hits = stopping_criteria(extended, all_scores or None).tolist()  # pyright: ignore[reportArgumentType]
    starts = [0]
    for row in candidates:
        starts.append(starts[-1] + len(row))
    return [hits[start:end] for start, end in zip(starts, starts[1:])]


def _ends(
    sequences: torch.Tensor, b: int, beams: int, row: list[_Candidate], hits: list[bool]
) -> list[tuple[_Candidate, list[int]]]:
    """The candidates of source ``b`` that meet a stopping criterion, each with its token ids."""
    return [(c, sequences[b * beams + c.beam].tolist() + [c.token]) for c, hit in zip(row, hits) if hit]


def _next_beams(
    candidates: list[list[_Candidate]],
    hits: list[list[bool]],
    states: list[list[_State]],
    phrases: list[list[list[int]]],
    settings: _Settings,
) -> tuple[list[int], list[int], list[list[_State]], torch.Tensor]:
    """The beams that go on (`_select` of the candidates that meet no stopping criterion), a source with fewer
    than ``beams`` of them filled with dead beams: the (B * beams) rows they continue, their tokens, their states
    and the (B, beams) running scores."""
    import torch

    beams = settings.beams
    chosen: list[int] = []
    next_tokens: list[int] = []
    next_states: list[list[_State]] = []
    running: list[list[float]] = []
    for b, (row, row_hits) in enumerate(zip(candidates, hits)):
        alive = [c for c, hit in zip(row, row_hits) if not hit and c.score > float("-inf")]
        selected = _select(alive, beams, phrases[b])
        missing = beams - len(selected)
        next_states.append([c.state for c in selected] + [states[b][0]] * missing)
        chosen += [b * beams + c.beam for c in selected] + [b * beams] * missing
        next_tokens += [c.token for c in selected] + [settings.pad] * missing
        running.append([c.score for c in selected] + [_DEAD] * missing)
    return chosen, next_tokens, next_states, torch.tensor(running)


def _reorder_cache(model: Any, cache: Any, beam_index: torch.Tensor) -> Any:
    """The KV cache with its rows in the order of ``beam_index`` (the beams that go on); None without a cache."""
    if cache is None:
        return None
    if hasattr(model, "_reorder_cache"):
        return model._reorder_cache(cache, beam_index)
    cache.reorder_cache(beam_index)
    return cache


def _output(
    finished: list[list[_Finished]],
    running: torch.Tensor,
    sequences: torch.Tensor,
    settings: _Settings,
    device: torch.device,
    all_scores: tuple[torch.Tensor, ...],
) -> Any:
    """What transformers' beam search returns (`constrained_beam_search`): each source's ``returned`` best finished
    hypotheses (its best running beam when none finished; the last repeated when too few), padded."""
    import torch
    from transformers.generation.utils import GenerateBeamEncoderDecoderOutput

    best: list[tuple[float, list[int]]] = []
    for b, hypotheses in enumerate(finished):
        hypotheses = sorted(hypotheses, key=lambda f: (f[0], f[1]), reverse=True)
        if not hypotheses:
            top = int(running[b].argmax())
            hypotheses = [(False, float(running[b, top]), sequences[b * settings.beams + top].tolist())]
        hypotheses += [hypotheses[-1]] * (settings.returned - len(hypotheses))
        best += [(score, ids) for _, score, ids in hypotheses[: settings.returned]]
    width = max(len(ids) for _, ids in best)
    output = torch.full((len(best), width), settings.pad, dtype=torch.long, device=device)
    for row, (_, ids) in enumerate(best):
        output[row, : len(ids)] = torch.tensor(ids)
    if not settings.return_dict:
        return output
    # transformers annotates the fields with the legacy LongTensor / FloatTensor classes and one-tuples
    fields: dict[str, Any] = {
        "sequences": output,
        "sequences_scores": torch.tensor([s for s, _ in best], device=output.device)
        if settings.scores_out
        else None,
        "scores": all_scores or None,
    }
    return GenerateBeamEncoderDecoderOutput(**fields)


def _candidates(
    phrases: list[list[int]],
    states: list[_State],
    totals: torch.Tensor,
    top_scores: torch.Tensor,
    top_index: torch.Tensor,
    beams: int,
) -> list[_Candidate]:
    """One source's candidates: transformers' top ``keep`` continuations over all beams (the first ``beams`` of
    them may finish), then, with phrases, each live beam's constraint tokens and best token, and the ``beams``
    best tokens of a beam that holds all its phrases; the best ``beams`` candidates that hold all their phrases
    may finish too. ``totals`` (beams, V) are the continuations' scores."""
    vocab = totals.shape[-1]
    candidates: list[_Candidate] = []
    seen: set[tuple[int, int]] = set()
    for position, (score, index) in enumerate(zip(top_scores.tolist(), top_index.tolist())):
        beam, token = divmod(index, vocab)
        seen.add((beam, token))
        state = _advance(states[beam], token, phrases) if phrases else states[beam]
        candidates.append(_Candidate(score, beam, token, state, position < beams))
    if not phrases:
        return candidates
    for beam in range(beams):
        if float(totals[beam].max()) <= _DEAD / 2:
            continue
        wanted = _next_tokens(states[beam], phrases) | {int(totals[beam].argmax())}
        if all(states[beam][0]):
            # the hypotheses that hold all their phrases search on as a beam of their own
            wanted |= set(totals[beam].topk(beams).indices.tolist())
        for token in sorted(wanted - {t for bm, t in seen if bm == beam}):
            score = float(totals[beam, token])
            if score > float("-inf"):
                candidates.append(
                    _Candidate(score, beam, token, _advance(states[beam], token, phrases), False)
                )
    holding = sorted((c for c in candidates if all(c.state[0])), key=lambda c: c.score, reverse=True)
    for candidate in holding[:beams]:
        candidate.may_finish = True
    return candidates


def _finish(
    finished: list[_Finished], ends: list[tuple[_Candidate, list[int]]], beams: int, divisor: float
) -> list[_Finished]:
    """The best ``beams`` finished hypotheses once the candidates in ``ends`` (each with its token ids), which hit
    a stopping criterion, are added where they may finish: those holding all their phrases first, then by
    ``score / divisor`` (``divisor``: the generated length ** length_penalty); earlier ones first among equals."""
    added = [
        (all(c.state[0]), c.score / divisor, ids)
        for c, ids in ends
        if c.may_finish and c.score > float("-inf")
    ]
    return sorted(finished + added, key=lambda f: (f[0], f[1]), reverse=True)[:beams]


def _select(alive: list[_Candidate], beams: int, phrases: list[list[int]]) -> list[_Candidate]:
    """The ``beams`` candidates that go on: the best by score, shared out among the banks when there are phrases
    (`_bank_sizes`)."""
    if not phrases:
        return alive[:beams]
    banks: list[list[_Candidate]] = [[] for _ in range(sum(len(p) for p in phrases) + 1)]
    for candidate in sorted(alive, key=lambda c: c.score, reverse=True):
        banks[_tokens_met(candidate.state, phrases)].append(candidate)
    sizes = _bank_sizes(beams, [len(bank) for bank in banks])
    selected = [c for bank, size in zip(banks, sizes) for c in bank[:size]]
    return sorted(selected, key=lambda c: c.score, reverse=True)


def _search_done(
    finished: list[_Finished],
    running: torch.Tensor,
    states: list[_State],
    has_phrases: bool,
    settings: _Settings,
    generated: int,
    most: int,
) -> bool:
    """Whether a source's search is over (transformers' rule): ``beams`` hypotheses finished and either
    ``early_stopping`` is True or no running beam can beat the worst of them (its score divided by the length
    it has, or with ``early_stopping="never"`` and a positive length penalty the longest it may reach). With
    phrases, the running beams that hold them all (any, when none does) bound what may still come."""
    if len(finished) < settings.beams:
        return False
    if settings.early_stopping is True:
        return True
    holding = [i for i, state in enumerate(states) if all(state[0])] if has_phrases else []
    bound = running[holding] if holding else running
    length_penalty = settings.length_penalty
    length = most if settings.early_stopping == "never" and length_penalty > 0.0 else generated
    return float(bound.max()) / length**length_penalty <= min(score for _, score, _ in finished)
