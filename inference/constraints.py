"""Terminology constraints: glossaries, and lexically constrained beam search as a `generate()` strategy.

Candidate and stopping rules after transformers' beam search (`GenerationMixin._beam_search`, Apache-2.0).

A `Glossary` maps source terms to target terms; a term whose target is empty or equal to it is do-not-translate
(it must come out as written). `Glossary.terms_for(text)` are the target terms that apply to one source text: those
whose source term occurs in it (case-sensitive; a term that starts or ends with a letter or digit of a script
written with spaces must start or end at a word boundary, a Han or kana term matches anywhere; where two
occurrences overlap, the longer term wins). `read_glossary` reads a TSV file (source term<TAB>target term).

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
may not continue its last word (``word_pieces``, from `word_pieces`: a term "Zimri" does not come out as the start of
"Zimrias"). A row without constraints is searched exactly as
transformers' beam search does (the same candidates, length penalty, ``early_stopping`` and stopping criteria).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

# Han ideographs (with extensions and compatibility forms) and kana: scripts written without spaces, where a term
# matches inside a longer run of letters
_NO_SPACE_SCRIPTS = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)
# a beam's score that no real hypothesis reaches (transformers' beam search uses the same value)
_DEAD = -1.0e9


def _word_edge(char: str) -> bool:
    """Whether a term's first or last character ``char`` must sit at a word boundary."""
    return char.isalnum() and not any(low <= ord(char) <= high for low, high in _NO_SPACE_SCRIPTS)


@dataclass(frozen=True)
class Glossary:
    """Source term -> target term pairs (a do-not-translate term maps to itself), in file order."""

    entries: tuple[tuple[str, str], ...]

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> Glossary:
        """A glossary of (source term, target term) pairs (a mapping's ``items()``); an empty target (or the source
        term) keeps the term as is. `ValueError` for an empty source term or a term given two targets."""
        entries: dict[str, str] = {}
        for source, target in pairs:
            source, target = source.strip(), target.strip()
            if not source:
                raise ValueError(
                    f"glossary entry with target {target!r} has an empty source term: give the source term"
                )
            target = target or source
            if entries.get(source, target) != target:
                raise ValueError(
                    f"glossary term {source!r} has two targets, {entries[source]!r} and {target!r}: keep one"
                )
            entries[source] = target
        return cls(tuple(entries.items()))

    def __len__(self) -> int:
        return len(self.entries)

    def terms_for(self, text: str) -> list[str]:
        """The target terms that apply to the source ``text`` (module docstring), each once, in the order of
        their first occurrence."""
        found: list[tuple[int, int, str]] = []
        for source, target in self.entries:
            pattern = re.escape(source)
            if _word_edge(source[0]):
                pattern = r"(?<!\w)" + pattern
            if _word_edge(source[-1]):
                pattern += r"(?!\w)"
            found += [(m.start(), m.end(), target) for m in re.finditer(pattern, text)]
        # the longer of two overlapping occurrences wins
        kept: list[tuple[int, int, str]] = []
        for start, end, target in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
            if all(end <= s or start >= e for s, e, _ in kept):
                kept.append((start, end, target))
        terms: list[str] = []
        for _, _, target in sorted(kept):
            if target not in terms:
                terms.append(target)
        return terms


def read_glossary(path: str | Path) -> Glossary:
    """The glossary in the UTF-8 TSV file ``path``: one ``source term<TAB>target term`` per line (an empty target,
    or no tab at all, keeps the term as is: do-not-translate); blank lines and lines starting with ``#`` are
    skipped. `ValueError` naming the file and line for a line with more than two columns, an empty source term or
    a term given two targets, and for a file that cannot be read or holds no term."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"--glossary {str(path)!r} cannot be read ({err}): give a UTF-8 TSV file") from None
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) > 2:
            raise ValueError(
                f"--glossary {str(path)!r} line {number} has {len(columns)} tab-separated columns: expected "
                "source term<TAB>target term"
            )
        try:
            pairs.append(
                Glossary.from_pairs([(columns[0], columns[-1] if len(columns) == 2 else "")]).entries[0]
            )
        except ValueError as err:
            raise ValueError(f"--glossary {str(path)!r} line {number}: {err}") from None
    if not pairs:
        raise ValueError(f"--glossary {str(path)!r} holds no term: one source term<TAB>target term per line")
    try:
        return Glossary.from_pairs(pairs)
    except ValueError as err:
        raise ValueError(f"--glossary {str(path)!r}: {err}") from None


def check_glossary_decoding(do_sample: bool | None) -> None:
    """`ValueError` when a glossary cannot be honoured because the decoding samples (constrained decoding is a
    beam search). An exported engine refuses a glossary by name (`inference.engines.check_engine_options`)."""
    if do_sample:
        raise ValueError(
            "--glossary needs beam search (lexically constrained decoding): leave out --do_sample or the glossary"
        )


def term_ids(tokenizer: Any, terms: Sequence[str]) -> list[list[int]]:
    """The target-side token ids of each term as it reads inside a sentence (no special tokens)."""
    if not terms:
        return []
    encoded = tokenizer(text_target=list(terms), add_special_tokens=False)["input_ids"]
    return [list(ids) for ids in encoded if len(ids)]


_WORD_PIECES: weakref.WeakKeyDictionary[Any, frozenset[int]] = weakref.WeakKeyDictionary()


def word_pieces(tokenizer: Any) -> frozenset[int]:
    """The target-side token ids that continue the word before them: decoded after a whole word, they join it
    with a letter or digit of a script written with spaces (a sentencepiece or byte-level piece without its
    word-start mark, a WordPiece ``##`` piece; none with ``@@``-suffix BPE, where the piece before says it goes
    on). Found by decoding each token after the token of "a", once per tokenizer."""
    if tokenizer in _WORD_PIECES:
        return _WORD_PIECES[tokenizer]
    word = tokenizer(text_target=["a"], add_special_tokens=False)["input_ids"][0]
    if not word:
        # nothing to decode after: no token is known to continue a word
        _WORD_PIECES[tokenizer] = frozenset()
        return frozenset()
    base = tokenizer.decode(word)
    special = set(tokenizer.all_special_ids)
    ids = [i for i in range(len(tokenizer)) if i not in special]
    texts = tokenizer.batch_decode([[*word, i] for i in ids])
    pieces = frozenset(
        i
        for i, text in zip(ids, texts)
        if text.startswith(base) and len(text) > len(base) and _word_edge(text[len(base)])
    )
    _WORD_PIECES[tokenizer] = pieces
    return pieces


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
    ``word_pieces`` (`word_pieces`) may follow a completed phrase. Returns what
    transformers' beam search returns: the (B * num_return_sequences, T) sequences, decoder start first, padded,
    best first; with ``return_dict_in_generate`` a ``GenerateBeamEncoderDecoderOutput`` with
    ``sequences_scores`` (``sum(log p) / length ** length_penalty``) when ``output_scores``."""
    import torch
    from transformers.generation.utils import GenerateBeamEncoderDecoderOutput

    beams = generation_config.num_beams or 1
    returned = generation_config.num_return_sequences or 1
    if generation_config.do_sample:
        raise ValueError("terminology constraints need beam search: leave out do_sample")
    rows, prompt_length = input_ids.shape
    batch = rows // beams
    phrases = [[list(ids) for ids in row if len(ids)] for row in (constraints or [[]] * batch)]
    if len(phrases) != batch:
        raise ValueError(
            f"constraints holds {len(phrases)} rows for {batch} sources: give one list per source"
        )
    eos = generation_config.eos_token_id
    eos_ids = eos if isinstance(eos, list) else [] if eos is None else [eos]
    pad = generation_config.pad_token_id
    pad = pad if pad is not None else (eos_ids[0] if eos_ids else 0)
    max_length = generation_config.max_length
    length_penalty = generation_config.length_penalty
    early_stopping = generation_config.early_stopping
    keep = max(2, 1 + len(eos_ids)) * beams
    cache_key = next((key for key in ("cache", "past_key_values") if model_kwargs.get(key) is not None), None)
    cache = model_kwargs.get(cache_key) if cache_key else None
    encoder_outputs = model_kwargs.get("encoder_outputs")
    attention_mask = model_kwargs.get("attention_mask")
    scores_out = generation_config.return_dict_in_generate and generation_config.output_scores
    all_scores: tuple[torch.Tensor, ...] = ()

    sequences = input_ids  # (B * beams, t)
    running = torch.full((batch, beams), _DEAD)
    running[:, 0] = 0.0
    states: list[list[_State]] = [[((False,) * len(p), None, False)] * beams for p in phrases]
    pieces = torch.tensor(sorted(word_pieces), dtype=torch.long)
    # per source: (all phrases met, score / length ** length_penalty, token ids)
    finished: list[list[tuple[bool, float, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch
    length = prompt_length
    while length < max_length and not all(done):
        step_ids = sequences[:, -1:] if cache is not None and length > prompt_length else sequences
        outputs = model(
            encoder_outputs=encoder_outputs,
            attention_mask=attention_mask,
            decoder_input_ids=step_ids,
            use_cache=cache is not None,
            return_dict=True,
            **({cache_key: cache} if cache_key else {}),
        )
        # (B * beams, V)
        log_probs = torch.log_softmax(outputs.logits[:, -1, :].float(), dim=-1)
        del outputs
        log_probs = logits_processor(sequences, log_probs)
        unmet = [b * beams + i for b in range(batch) for i in range(beams) if not all(states[b][i][0])]
        if unmet and eos_ids:
            # a hypothesis ends only when it holds all its phrases
            log_probs[torch.tensor(unmet)[:, None], torch.tensor(eos_ids)[None, :]] = float("-inf")
        closed = [b * beams + i for b in range(batch) for i in range(beams) if states[b][i][2]]
        if closed and len(pieces):
            # a completed phrase ends its word
            log_probs[torch.tensor(closed)[:, None], pieces[None, :]] = float("-inf")
        if scores_out:
            all_scores += (log_probs.clone(),)
        vocab = log_probs.shape[-1]
        # (B, beams, V) each continuation's score
        totals = log_probs.cpu().view(batch, beams, vocab) + running[:, :, None]
        top_scores, top_index = totals.view(batch, -1).topk(min(keep, beams * vocab))
        # a source whose search is over keeps dead beams until the others end
        candidates = [
            []
            if done[b]
            else _candidates(phrases[b], states[b], totals[b], top_scores[b], top_index[b], beams, eos_ids)
            for b in range(batch)
        ]
        flat = [c for row in candidates for c in row]
        # (N, t + 1) every candidate's sequence, for the stopping criteria
        extended = torch.cat(
            [
                sequences[[b * beams + c.beam for b, row in enumerate(candidates) for c in row]],
                torch.tensor([c.token for c in flat], device=sequences.device)[:, None],
            ],
            dim=1,
        )
        hits = stopping_criteria(extended, all_scores or None).tolist()
        chosen: list[int] = []
        next_tokens: list[int] = []
        start = 0
        for b, row in enumerate(candidates):
            row_hits, start = hits[start : start + len(row)], start + len(row)
            if not done[b]:
                ends = [
                    (c, sequences[b * beams + c.beam].tolist() + [c.token])
                    for c, hit in zip(row, row_hits)
                    if hit
                ]
                finished[b] = _finish(
                    finished[b], ends, beams, (length + 1 - prompt_length) ** length_penalty
                )
            alive = [c for c, hit in zip(row, row_hits) if not hit and c.score > float("-inf")]
            selected = _select(alive, beams, phrases[b])
            states[b] = [c.state for c in selected] + [states[b][0]] * (beams - len(selected))
            chosen += [b * beams + c.beam for c in selected] + [b * beams] * (beams - len(selected))
            next_tokens += [c.token for c in selected] + [pad] * (beams - len(selected))
            running[b] = torch.tensor([c.score for c in selected] + [_DEAD] * (beams - len(selected)))
        beam_index = torch.tensor(chosen, device=sequences.device)
        sequences = torch.cat(
            [sequences[beam_index], torch.tensor(next_tokens, device=sequences.device)[:, None]], dim=1
        )
        if cache is not None:
            if hasattr(model, "_reorder_cache"):
                cache = model._reorder_cache(cache, beam_index)
            else:
                cache.reorder_cache(beam_index)
        length += 1
        for b in range(batch):
            # with phrases, the running beams that hold them all (any, when none does) bound what may still come
            holding = [i for i in range(beams) if all(states[b][i][0])] if phrases[b] else []
            bound = running[b, holding] if holding else running[b]
            generated, most = length - prompt_length, max_length - prompt_length
            done[b] = done[b] or _search_done(
                finished[b], bound, beams, early_stopping, length_penalty, generated, most
            )

    best: list[tuple[float, list[int]]] = []
    for b in range(batch):
        hypotheses = sorted(finished[b], key=lambda f: (f[0], f[1]), reverse=True)
        if not hypotheses:
            top = int(running[b].argmax())
            hypotheses = [(False, float(running[b, top]), sequences[b * beams + top].tolist())]
        hypotheses += [hypotheses[-1]] * (returned - len(hypotheses))
        best += [(score, ids) for _, score, ids in hypotheses[:returned]]
    width = max(len(ids) for _, ids in best)
    output = torch.full((len(best), width), pad, dtype=torch.long, device=input_ids.device)
    for row, (_, ids) in enumerate(best):
        output[row, : len(ids)] = torch.tensor(ids)
    if not generation_config.return_dict_in_generate:
        return output
    # transformers annotates the fields with the legacy LongTensor / FloatTensor classes and one-tuples
    fields: dict[str, Any] = {
        "sequences": output,
        "sequences_scores": torch.tensor([s for s, _ in best], device=output.device) if scores_out else None,
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
    eos_ids: list[int],
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
    finished: list[tuple[bool, float, list[int]]],
    ends: list[tuple[_Candidate, list[int]]],
    beams: int,
    divisor: float,
) -> list[tuple[bool, float, list[int]]]:
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
    finished: list[tuple[bool, float, list[int]]],
    running: torch.Tensor,
    beams: int,
    early_stopping: bool | str | None,
    length_penalty: float,
    generated: int,
    most: int,
) -> bool:
    """Whether a source's search is over (transformers' rule): ``beams`` hypotheses finished and either
    ``early_stopping`` is True or no running beam can beat the worst of them (its score divided by the length
    it has, or with ``early_stopping="never"`` and a positive length penalty the longest it may reach)."""
    if len(finished) < beams:
        return False
    if early_stopping is True:
        return True
    length = most if early_stopping == "never" and length_penalty > 0.0 else generated
    return float(running.max()) / length**length_penalty <= min(score for _, score, _ in finished)
