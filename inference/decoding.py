"""The torch engine's own decoding loop: what `generate()` computes for this project's encoder-decoder, without
`generate()`'s per-step machinery.

`decode(model, input_ids, attention_mask, **options)` takes `generate()`'s keyword options (resolved against
``model.generation_config`` exactly as `generate()` resolves them) and returns `DecodeOutput`: the same
``sequences`` as ``generate()`` (decoder start token first, the same padding and length) and, per returned
sequence, the score `inference.translate` reports: with beams transformers' ``sequences_scores``
(``sum(log p) / generated_length ** length_penalty``), greedy the sum of the log-probabilities of the chosen
tokens under the processed distribution, up to the first ``</s>``.

How it differs from `generate()` (the numbers do not): the encoder runs once and each decoder layer's
cross-attention keys and values are computed once per sentence, its K beams reading one copy (K queries over its
source); the self-attention keys and values are written into preallocated buffers, one position per step; nothing
per step checks inputs or builds masks; the output projection runs on the last position only; beam search reorders
the buffers once per step (one `index_select`); and a sentence whose result can no longer change leaves the batch
(its rows are dropped from every buffer, and the source positions read shrink to the longest source left), so a
sentence that runs to the length limit does not keep a whole batch decoding. Beam search follows transformers'
`_beam_search` step for step: the top ``2 * num_beams`` candidates, finished hypotheses scored with the length
penalty over the generated tokens (``</s>`` included, the decoder start token not), ``early_stopping`` True /
False / "never" with transformers' heuristics, hypotheses cut at ``max_length`` kept as finished ones.

`unsupported(model, options)` is the one rule for what the loop does not do, where the caller uses `generate()`:
a model that is not this project's encoder-decoder, sampling (``do_sample``: `generate()` draws from torch's
global generator in an order the loop's shrinking batch would not reproduce), and generation settings outside
the logits processors implemented here (``suppress_tokens``, ``begin_suppress_tokens``, single-token
``bad_words_ids``, ``min_length``/``min_new_tokens``, ``forced_bos_token_id``, ``forced_eos_token_id``).

`ContinuousBatch` is the step machinery of continuous batching (`serving.continuous`): greedy or beam search for
sentences that join and leave between steps, each at its own step count and decoder positions (its self-attention
keys past its own position masked), with its own length limit, its own forced first token (a multilingual model's
target language) and, with beams, its own stopping rules, so that each sentence's result is what `decode` gives for
it alone. `decode` and `ContinuousBatch` share one greedy step and one beam search step; the decoder's buffers keep
room for more rows and source positions than are used, so that sentences join and leave without copying them, and
a reorder copies each row's self-attention positions only up to its own (rows that joined late hold far fewer than
the oldest: copying every row up to the longest made the copy most of a step's time under a steady stream of joins).

``vocabulary`` (sorted target token ids) restricts the output projection to those rows: the softmax is over the
shortlist only (CTranslate2's vocabulary map), ``</s>`` and forced tokens are always in it, and the output ids
are full-vocabulary ids.

Shape legend: B sentences, N rows decoded now (active sentences x beams), K beams, V vocabulary (or shortlist),
L decoder layers, H heads, T generated positions, S source length, D head dimension, C d_model.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel

# generate() settings that change nothing when they hold these values (or None): the ones the loop does not
# implement must hold them
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "repetition_penalty": (1.0,),
    "encoder_repetition_penalty": (1.0,),
    "no_repeat_ngram_size": (0,),
    "encoder_no_repeat_ngram_size": (0,),
    "guidance_scale": (1.0,),
    "sequence_bias": (),
    "exponential_decay_length_penalty": (),
    "remove_invalid_values": (False,),
    "renormalize_logits": (False,),
    "watermarking_config": (),
    "stop_strings": (),
    "max_time": (),
    "num_beam_groups": (1,),
    "diversity_penalty": (0.0,),
    "constraints": (),
    "force_words_ids": (),
    "penalty_alpha": (),
    "dola_layers": (),
    "output_attentions": (False,),
    "output_hidden_states": (False,),
}
# keyword options of generate() that the loop reads itself (the rest must be generation-config fields)
_CALL_OPTIONS = ("return_dict_in_generate", "output_scores", "use_cache")


DECODER_ENV = "VANILLA_TRANSFORMER_DECODER"
DECODERS = ("loop", "generate")


def chosen_decoder(decoder: str | None = None) -> str:
    """What decodes a PyTorch model in `inference.translate`: `decoder` if given, else the environment variable
    VANILLA_TRANSFORMER_DECODER, else "loop" (`decode` where `unsupported` allows it); "generate" always calls
    `model.generate()`. Raises `ValueError` for another value."""
    import os

    chosen = decoder if decoder is not None else os.environ.get(DECODER_ENV, "").strip().lower() or "loop"
    if chosen not in DECODERS:
        source = "decoder" if decoder is not None else DECODER_ENV
        raise ValueError(f"{source}={chosen!r} is invalid: expected one of {', '.join(DECODERS)}")
    return chosen


@dataclass(frozen=True)
class DecodeOutput:
    """What `decode` returns: ``sequences`` (B * n, 1 + T) token ids, decoder start token first, as `generate()`
    returns them (n = ``num_return_sequences``, best first per sentence); ``sequences_scores`` (B * n,) float32,
    each sequence's score (module docstring)."""

    sequences: torch.Tensor
    sequences_scores: torch.Tensor


def resolved_generation_config(
    model: PreTrainedModel, options: dict[str, Any], generation_config: GenerationConfig | None = None
) -> GenerationConfig:
    """The generation config `generate()` decodes with for `options` (None values dropped) and its
    `generation_config` argument: the model's, updated with them, ``max_length`` / ``min_length`` counted with the
    decoder start token. Raises `ValueError` for options that are not generation settings (`unsupported` names
    them first)."""
    options = {k: v for k, v in options.items() if v is not None and k not in _CALL_OPTIONS}
    has_default_max_length = (
        options.get("max_length") is None
        and (generation_config is None or generation_config.max_length is None)
        and model.generation_config.max_length is None
    )
    # generate()'s own resolution of the options against the model's generation config (the one home of its
    # defaults); the loop must not drift from it
    config, unused = cast(Any, model)._prepare_generation_config(generation_config, **options)
    if unused:
        raise ValueError(f"{sorted(unused)} are not generation options: pass generate() keyword names")
    if config.max_new_tokens is not None:
        config.max_length = config.max_new_tokens + 1
    elif has_default_max_length:
        config.max_length = config.max_length + 1
        limit = getattr(model.config, "max_position_embeddings", None)
        if limit is not None:
            config.max_length = min(config.max_length, limit)
    if config.min_new_tokens is not None:
        config.min_length = config.min_new_tokens + 1
    return config


def unsupported(
    model: Any, options: dict[str, Any], generation_config: GenerationConfig | None = None
) -> str | None:
    """Why `decode` cannot decode `model` with `generate()`'s keyword `options` and `generation_config` (the
    caller then uses `generate()`), or None when it can: the one rule (module docstring)."""
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

    if not isinstance(model, VanillaTransformerForConditionalGeneration):
        return f"{type(model).__name__} is not this project's encoder-decoder"
    if model.training:
        return "the model is in training mode"
    options = {k: v for k, v in options.items() if v is not None}
    if options.get("use_cache") is False:
        return "use_cache=False"
    if options.get("custom_generate") is not None:
        return "a custom decoding strategy (custom_generate)"
    if options.get("output_scores") is False and options.get("return_dict_in_generate"):
        return "generate()'s output objects without scores"
    fields = {k: v for k, v in options.items() if k not in _CALL_OPTIONS}
    try:
        config = resolved_generation_config(model, fields, generation_config)
    except ValueError as error:
        return str(error)
    if config.do_sample:
        return "sampling (do_sample)"
    if not config.use_cache:
        return "use_cache=False"
    for name, neutral in _NEUTRAL.items():
        value = getattr(config, name, None)
        if value is not None and value not in neutral:
            return f"{name}={value!r}"
    if config.bad_words_ids is not None and any(len(word) != 1 for word in config.bad_words_ids):
        return "bad_words_ids with words of several tokens"
    if config.eos_token_id is None:
        return "no eos_token_id"
    return None


def decode(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    generation_config: GenerationConfig | None = None,
    vocabulary: torch.Tensor | None = None,
    **options: Any,
) -> DecodeOutput:
    """Decode the (B, S) sources `input_ids` (`attention_mask` (B, S), 1 = token) with `generate()`'s
    `generation_config` and keyword `options` (None values dropped; the rest of the settings from
    ``model.generation_config``), greedy or beam search, as `generate()` would (module docstring). `vocabulary`: a 1-D tensor of sorted target token ids, the
    shortlist the output projection is restricted to. Raises `ValueError` for what `unsupported` names."""
    import torch

    reason = unsupported(model, options, generation_config)
    if reason is not None:
        raise ValueError(f"the decoding loop cannot decode this: {reason}; use model.generate()")
    config = resolved_generation_config(model, options, generation_config)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    with torch.inference_mode():
        state = _DecoderState(model, input_ids, attention_mask, config, vocabulary)
        if config.num_beams > 1:
            return _beam_search(state, config)
        return _greedy(state, config)


def _eos_ids(config: GenerationConfig) -> list[int]:
    eos = config.eos_token_id
    return list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]


class _Processors:
    """generate()'s logits processors that the loop implements, in generate()'s order, on (N, V) scores in place:
    single-token bad words and ``min_length`` (``</s>`` to -inf while the sequence is shorter), the forced first
    and last tokens (every other token -inf, the forced one 0), ``suppress_tokens`` and
    ``begin_suppress_tokens``. Ids are positions in the shortlist when there is one."""

    def __init__(self, config: GenerationConfig, position: Any):
        eos = _eos_ids(config)
        bad = [word[0] for word in config.bad_words_ids or [] if word[0] not in eos]
        suppress = list(config.suppress_tokens or [])
        self.banned = _positions(position, sorted(set(bad)))
        self.eos = _positions(position, eos)
        self.min_length = max(config.min_length or 0, 0)
        self.forced_bos = _positions(position, [config.forced_bos_token_id])
        self.forced_eos = _positions(position, eos if config.forced_eos_token_id is not None else [])
        if config.forced_eos_token_id is not None:
            forced = config.forced_eos_token_id
            self.forced_eos = _positions(position, list(forced) if isinstance(forced, list) else [forced])
        self.has_forced_bos = config.forced_bos_token_id is not None
        self.has_forced_eos = config.forced_eos_token_id is not None
        self.max_length = config.max_length
        self.suppress = _positions(position, sorted(set(suppress)))
        self.begin_suppress = _positions(position, list(config.begin_suppress_tokens or []))
        # generate()'s index of the step whose scores begin_suppress_tokens applies to
        self.begin_index = 1 if config.forced_bos_token_id is None else 2

    def __call__(self, scores: torch.Tensor, length: int) -> torch.Tensor:
        """`scores` (N, V) of the next token after `length` tokens (the decoder start token counted)."""
        inf = -math.inf
        if self.banned is not None:
            scores.index_fill_(1, self.banned, inf)
        if length < self.min_length and self.eos is not None:
            scores.index_fill_(1, self.eos, inf)
        if self.has_forced_bos and length == 1:
            scores.fill_(inf)
            if self.forced_bos is not None:
                scores.index_fill_(1, self.forced_bos, 0.0)
        if self.has_forced_eos and length == self.max_length - 1:
            scores.fill_(inf)
            if self.forced_eos is not None:
                scores.index_fill_(1, self.forced_eos, 0.0)
        if self.suppress is not None:
            scores.index_fill_(1, self.suppress, inf)
        if self.begin_suppress is not None and length == self.begin_index:
            scores.index_fill_(1, self.begin_suppress, inf)
        return scores

    def rows(
        self, scores: torch.Tensor, lengths: torch.Tensor, max_lengths: torch.Tensor, forced: torch.Tensor
    ) -> torch.Tensor:
        """`__call__` for rows at different steps: `scores` (N, V) of each row's next token after `lengths` (N,)
        tokens, `max_lengths` (N,) each row's own ``max_length``, `forced` (N,) long the score column of each row's
        own ``forced_bos_token_id`` (-1: none)."""
        inf = -math.inf
        if self.banned is not None:
            scores.index_fill_(1, self.banned, inf)
        if self.eos is not None:
            _fill_rows(scores, lengths < self.min_length, self.eos, inf)
        has_forced = forced >= 0
        first = (lengths == 1) & has_forced
        if bool(first.any()):
            chosen = first.nonzero().squeeze(-1)
            scores[chosen] = inf
            scores[chosen, forced[chosen]] = 0.0
        if self.has_forced_eos:
            _fill_rows(scores, lengths == max_lengths - 1, None, inf)
            if self.forced_eos is not None:
                _fill_rows(scores, lengths == max_lengths - 1, self.forced_eos, 0.0)
        if self.suppress is not None:
            scores.index_fill_(1, self.suppress, inf)
        if self.begin_suppress is not None:
            # generate()'s index of the step begin_suppress_tokens applies to: one later after a forced token
            _fill_rows(scores, lengths == 1 + has_forced.long(), self.begin_suppress, inf)
        return scores


def _fill_rows(scores: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor | None, value: float) -> None:
    """Set the (N, V) `scores` of the rows where `rows` (N,) bool holds to `value`: in `columns` (every column
    when None), in place."""
    if not bool(rows.any()):
        return
    chosen = rows.nonzero().squeeze(-1)
    if columns is None:
        scores[chosen] = value
    else:
        scores[chosen[:, None], columns[None, :]] = value


def _positions(position: Any, ids: Sequence[int | None]) -> torch.Tensor | None:
    """The columns of the score matrix holding these token ids (those outside a shortlist left out), or None."""
    columns = [
        column for column in (position(token) for token in ids if token is not None) if column is not None
    ]
    if not columns:
        return None
    import torch

    return torch.tensor(columns, dtype=torch.long)


class _DecoderState:
    """The model's decoder run one position at a time over preallocated buffers, for N rows that can be reordered
    (beams), dropped (finished sentences) and added (`add`: sentences that join): the decoding loop's model side.
    The buffers hold room for more rows and source positions than are used (the first ``rows`` rows and ``width``
    source positions are); a row's unused positions hold finite numbers and are masked."""

    def __init__(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        config: GenerationConfig,
        vocabulary: torch.Tensor | None,
    ):
        import torch

        self.model = model
        self.decoder = model.model.decoder
        self.layers = list(self.decoder.layers)
        device = input_ids.device
        self.device = device
        self.beams = config.num_beams
        # each layer's linear layers as functions resolved once (kernels' inference_linear)
        self.projections = [
            {
                name: _projection(module)
                for name, module in (
                    ("q", layer.self_attn.q_proj),
                    ("k", layer.self_attn.k_proj),
                    ("v", layer.self_attn.v_proj),
                    ("out", layer.self_attn.out_proj),
                    ("cross_q", layer.encoder_attn.q_proj),
                    ("cross_out", layer.encoder_attn.out_proj),
                    ("fc1", layer.ffn.fc1),
                    ("fc2", layer.ffn.fc2),
                )
            }
            for layer in self.layers
        ]
        from vanilla_transformer.modeling.modeling_vanilla_transformer import attention_backend

        self.implementation = attention_backend(model.config, False)
        first = self.layers[0].self_attn
        heads, head_dim = first.num_heads, first.head_dim
        states = self._encode(input_ids, attention_mask)  # (B, S, C)
        self.dtype = states.dtype
        probe = torch.empty(1, 1, 1, 1, dtype=self.dtype, device=device)
        key_dtype = torch.float32 if first.fp32_keys(probe) else self.dtype
        sentences = states.shape[0]
        rows = sentences * self.beams
        # the rows decoded now (N) and the source positions the cross-attention reads (S)
        self.rows, self.width = 0, 0
        # (2L, N, H, T, D): the self-attention keys (even) and values (odd) of every layer, in one tensor so that one
        # index_select reorders them all; T grows by doubling up to max_length
        self.max_length = config.max_length
        # zeros, not empty: a row's positions past its own are masked, and must hold finite numbers
        self.cache = torch.zeros(
            (2 * len(self.layers), rows, heads, min(self.max_length, 32), head_dim),
            dtype=key_dtype,
            device=device,
        )
        self.spare: torch.Tensor | None = None
        # (2L, N / K, H, S, D): each layer's cross-attention keys (even) and values (odd), computed once per sentence
        # and read by its K rows (beams)
        self.cross = torch.zeros(
            (2 * len(self.layers), sentences, heads, states.shape[1], head_dim),
            dtype=self.dtype,
            device=device,
        )
        self.cross_spare: torch.Tensor | None = None
        # (N / K, S) 1 = source token: each sentence's
        self.source_mask = torch.zeros((sentences, states.shape[1]), dtype=torch.long, device=device)
        # (N / K, 1, 1, S) or None
        self.cross_mask: torch.Tensor | None = None
        # (T, 1, 1) the decoder position of each step
        self.positions = torch.arange(self.max_length, device=device).view(-1, 1, 1)
        head = model.lm_head.weight
        bias = model.final_logits_bias
        self.vocabulary_size = head.shape[0]
        self.vocabulary = None
        if vocabulary is not None:
            eos = _eos_ids(config)
            forced = [config.forced_bos_token_id, config.forced_eos_token_id]
            extra = [t for t in [*eos, *(f for f in forced if isinstance(f, int))]]
            vocabulary = torch.unique(
                torch.cat([vocabulary.to(device).long(), torch.tensor(extra, device=device)])
            )
            self.vocabulary = vocabulary
            head = head.index_select(0, vocabulary)
            bias = bias.index_select(0, vocabulary) if bias is not None else None
        from vanilla_transformer.modeling.kernels_vanilla_transformer import inference_linear

        self.output = inference_linear(head, bias)
        # the positions the self-attention buffer holds for the longest row (T used), and for each row ((N,) long;
        # None while every row holds `length`, as in `decode`): rows that joined later hold fewer
        self.length = 0
        self.lengths: torch.Tensor | None = None
        self._append(states, attention_mask)

    def add(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        """Encode the (B, S) sources `input_ids` (`attention_mask` (B, S), 1 = token) and add their B * K rows
        after the current ones, with no position decoded yet."""
        self._append(self._encode(input_ids, attention_mask), attention_mask)

    def _encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The (B, S, C) encoder states of the (B, S) sources."""
        encoder = self.model.model.encoder(
            input_ids=input_ids, attention_mask=attention_mask, return_dict=True
        )
        return encoder.last_hidden_state

    def _append(self, states: torch.Tensor, attention_mask: torch.Tensor) -> None:
        """Add the K rows of each sentence of the (B, S, C) encoder `states` of sources with `attention_mask`
        (B, S)."""
        start, count, width = self.rows, states.shape[0] * self.beams, states.shape[1]
        self._reserve(start + count, width)
        end = start + count
        first, last = start // self.beams, end // self.beams
        for i, layer in enumerate(self.layers):
            attention = layer.encoder_attn
            # (B, H, S, D)
            self.cross[2 * i, first:last, :, :width] = attention._heads(attention.k_proj(states))
            self.cross[2 * i + 1, first:last, :, :width] = attention._heads(attention.v_proj(states))
        self.source_mask[first:last] = 0
        self.source_mask[first:last, :width] = attention_mask
        if start and (self.lengths is not None or self.length):
            import torch

            # the rows there hold their own positions (or all `length`), the rows added none yet
            held = self.lengths
            if held is None:
                held = torch.full((start,), self.length, dtype=torch.long, device=self.device)
            self.lengths = torch.cat((held, held.new_zeros(count)))
        self.rows, self.width = end, max(self.width, width)
        self._masks()

    def _masks(self) -> None:
        from vanilla_transformer.modeling import build_attention_mask
        from vanilla_transformer.modeling.masks_vanilla_transformer import without_padding

        used = self.source_mask[: self.rows // self.beams, : self.width]
        self.cross_mask = build_attention_mask(without_padding(used), self.dtype)

    def _reserve(self, rows: int, width: int) -> None:
        """Room in the buffers for `rows` rows and `width` source positions (at least double the rows or positions
        when they grow, so that sentences joining one by one do not copy the buffers each time)."""
        import torch

        cache, cross = self.cache, self.cross
        if rows <= cache.shape[1] and width <= cross.shape[3]:
            return
        capacity = rows if rows <= cache.shape[1] else max(rows, 2 * cache.shape[1])
        positions = cross.shape[3] if width <= cross.shape[3] else max(width, 2 * cross.shape[3])
        n, t, s = self.rows, self.length, self.width
        shape = list(cache.shape)
        shape[1] = capacity
        self.cache = torch.zeros(shape, dtype=cache.dtype, device=self.device)
        self.cache[:, :n, :, :t] = cache[:, :n, :, :t]
        # the sentences' buffers
        capacity, n = -(-capacity // self.beams), n // self.beams
        shape = list(cross.shape)
        shape[1], shape[3] = capacity, positions
        self.cross = torch.zeros(shape, dtype=cross.dtype, device=self.device)
        self.cross[:, :n, :, :s] = cross[:, :n, :, :s]
        source_mask = torch.zeros((capacity, positions), dtype=torch.long, device=self.device)
        source_mask[:n, :s] = self.source_mask[:n, :s]
        self.source_mask, self.spare, self.cross_spare = source_mask, None, None

    def position(self, token: int) -> int | None:
        """The score column of `token`: itself, or its index in the shortlist (None outside it)."""
        if self.vocabulary is None:
            return int(token) if 0 <= token < self.vocabulary_size else None
        import torch

        index = int(torch.searchsorted(self.vocabulary, token))
        return index if index < len(self.vocabulary) and int(self.vocabulary[index]) == token else None

    def token_ids(self, columns: torch.Tensor) -> torch.Tensor:
        """Token ids of score columns."""
        return columns if self.vocabulary is None else self.vocabulary[columns]

    def select(self, rows: torch.Tensor) -> None:
        """Keep the rows `rows` (M,) of every buffer, in that order (a beam reorder, finished sentences dropped):
        copied into the spare buffer, which becomes the cache."""
        import torch

        t, n, m = self.length, self.rows, len(rows)
        if self.spare is None:
            self.spare = torch.zeros_like(self.cache)
        if self.lengths is None:
            torch.index_select(self.cache[:, :n, :, :t], 1, rows, out=self.spare[:, :m, :, :t])
        else:
            # each run of rows up to the positions its rows hold (the copy is most of a step's memory traffic, and
            # rows that joined late hold far fewer positions than the oldest)
            self.lengths = self.lengths.index_select(0, rows)
            for start, end, held in _runs(self.lengths.tolist(), RUN_SLACK):
                if held:
                    torch.index_select(
                        self.cache[:, :n, :, :held],
                        1,
                        rows[start:end],
                        out=self.spare[:, start:end, :, :held],
                    )
            self.length = int(self.lengths.max()) if m else 0
        self.cache, self.spare = self.spare, self.cache
        self.rows = m
        if m == n:
            # a beam reorder: the rows of one sentence share its source
            return
        # the sentences kept (a sentence's K rows come from one sentence); those before the first that moved stay,
        # the others are gathered into the spare buffer and copied back (no new buffer: allocating one costs more)
        kept = rows.view(-1, self.beams)[:, 0] // self.beams
        count = len(kept)
        moved = (kept != torch.arange(count, device=rows.device)).nonzero()
        first = int(moved[0]) if len(moved) else count
        s = self.width
        if self.cross_spare is None:
            self.cross_spare = torch.empty_like(self.cross)
        gathered = self.cross_spare[:, first:count, :, :s]
        torch.index_select(self.cross[:, :, :, :s], 1, kept[first:], out=gathered)
        self.cross[:, first:count, :, :s] = gathered
        self.source_mask[first:count] = self.source_mask.index_select(0, kept[first:])
        # the source positions of the sentences left (a long sentence that left no longer widens every step)
        used = self.source_mask[:count, :s].any(0).nonzero()
        self.width = int(used[-1]) + 1 if len(used) else 0
        self._masks()

    def _grow(self) -> None:
        """Double the positions the self-attention buffer holds (at most max_length)."""
        import torch

        shape = list(self.cache.shape)
        shape[3] = min(2 * shape[3], self.max_length)
        if shape[3] == self.cache.shape[3]:
            raise ValueError(f"max_length={self.max_length} positions are all used")
        cache = torch.zeros(shape, dtype=self.cache.dtype, device=self.device)
        n = self.rows
        cache[:, :n, :, : self.length] = self.cache[:, :n, :, : self.length]
        self.cache, self.spare = cache, None

    def step(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The (N, V) float32 logits of the next token after the (N,) `tokens` at the next position: the decoder
        layers' sub-layers as the model's forward computes them (`VanillaTransformerDecoderLayer`), in eval mode.
        `positions` (N,) long: each row's own position (rows that joined at different steps, `ContinuousBatch`),
        its keys past it masked; None: every row at the same next position."""
        t, n, s = self.length, self.rows, self.width
        sentences = n // self.beams
        end = t + 1 if positions is None else int(positions.max()) + 1
        while end > self.cache.shape[3]:
            self._grow()
        decoder = self.decoder
        implementation = self.implementation
        self_mask = None
        if positions is None:
            position_ids = self.positions[t]  # (1, 1)
        else:
            import torch

            from vanilla_transformer.modeling import build_attention_mask

            position_ids = positions[:, None]  # (N, 1)
            self.lengths = positions + 1
            # (N, 1, 1, end): a row attends to its own positions 0 .. p
            self_mask = build_attention_mask(None, self.dtype, position_ids, end)
            rows = torch.arange(n, device=self.device)
        # (N, 1, C)
        hidden, rotary = decoder.embed(tokens[:, None], None, position_ids)
        for i, (layer, linear) in enumerate(zip(self.layers, self.projections)):
            attention = layer.self_attn
            x = layer.residual.pre(hidden, layer.self_attn_layer_norm)
            query = attention._heads(linear["q"](x))  # (N, H, 1, D)
            key = attention._heads(linear["k"](x))  # (N, H, 1, D)
            value = attention._heads(linear["v"](x))  # (N, H, 1, D)
            if rotary is not None:
                query, key = _apply_rotary(query, *rotary), _apply_rotary(key, *rotary)
            if positions is None:
                self.cache[2 * i, :n, :, t] = key[:, :, 0]
                self.cache[2 * i + 1, :n, :, t] = value[:, :, 0]
            else:
                self.cache[2 * i][rows, :, positions] = key[:, :, 0]
                self.cache[2 * i + 1][rows, :, positions] = value[:, :, 0]
            keys = self.cache[2 * i, :n, :, :end]  # (N, H, end, D)
            values = self.cache[2 * i + 1, :n, :, :end]
            x, _ = attention.attend(query, keys, values, self_mask, implementation=implementation)
            hidden = layer.residual.post(hidden, linear["out"](x), layer.self_attn_layer_norm)
            x = layer.residual.pre(hidden, layer.encoder_attn_layer_norm)
            attention = layer.encoder_attn
            # a sentence's K rows are K queries over its source: (N / K, H, K, D)
            query = attention._heads(linear["cross_q"](x).view(sentences, self.beams, -1))
            keys = self.cross[2 * i, :sentences, :, :s]  # (N / K, H, S, D)
            values = self.cross[2 * i + 1, :sentences, :, :s]
            x, _ = attention.attend(query, keys, values, self.cross_mask, implementation=implementation)
            x = x.view(n, 1, -1)  # (N, 1, C)
            hidden = layer.residual.post(hidden, linear["cross_out"](x), layer.encoder_attn_layer_norm)
            x = layer.residual.pre(hidden, layer.final_layer_norm)
            x = linear["fc2"](layer.ffn.activation_fn(linear["fc1"](x)))
            hidden = layer.residual.post(hidden, x, layer.final_layer_norm)
        if decoder.layer_norm is not None:
            hidden = decoder.layer_norm(hidden)
        self.length = end
        # (N, V): the output projection of the last position only
        return self.output(hidden[:, 0]).float()


# rows whose held positions differ by at most this many are copied in one run (`_DecoderState.select`)
RUN_SLACK = 8


def _runs(lengths: list[int], slack: int) -> list[tuple[int, int, int]]:
    """(start, end, most) runs of consecutive `lengths` within `slack` of the run's most: each run's rows are
    copied up to its most (fewer calls than one per length, at most `slack` positions per row copied needlessly)."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for i, length in enumerate(lengths):
        if i == 0:
            most = length
        elif length > most or length < most - slack:
            runs.append((start, i, most))
            start, most = i, length
    if lengths:
        runs.append((start, len(lengths), most))
    return runs


def _projection(module: Any) -> Any:
    """A linear layer as a function of its input: the model's own `Linear` (and `nn.Linear`) through
    `inference_linear`, any other module (int8, adapters) called as it is."""
    from torch import nn

    from vanilla_transformer.modeling.kernels_vanilla_transformer import Linear, inference_linear

    if type(module) in (Linear, nn.Linear):
        return inference_linear(module.weight, module.bias)
    return module


def _apply_rotary(x: Any, cos: Any, sin: Any) -> Any:
    from vanilla_transformer.modeling.positions_vanilla_transformer import apply_rotary

    return apply_rotary(x, cos, sin)


def _greedy(state: _DecoderState, config: GenerationConfig) -> DecodeOutput:
    """generate()'s greedy search (`_sample` without sampling), finished sentences leaving the batch."""
    import torch

    device = state.device
    batch = state.rows
    eos = torch.tensor(_eos_ids(config), device=device)
    pad = config.pad_token_id if config.pad_token_id is not None else _eos_ids(config)[0]
    process = _Processors(config, state.position)
    sequences = torch.full((batch, config.max_length), int(pad), dtype=torch.long, device=device)
    sequences[:, 0] = config.decoder_start_token_id
    scores = torch.zeros(batch, dtype=torch.float32, device=device)
    active = torch.arange(batch, device=device)  # the sentences still decoding (rows of the state)
    length = 1
    tokens = sequences[:, 0]
    while True:
        tokens, log_prob = _greedy_step(state, process, tokens, length)
        scores[active] += log_prob
        sequences[active, length] = tokens
        length += 1
        if length >= config.max_length:
            break
        done = torch.isin(tokens, eos)
        if bool(done.all()):
            break
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(-1)
            active, tokens = active[keep], tokens[keep]
            state.select(keep)
    return DecodeOutput(sequences[:, :length], scores)


def _greedy_step(
    state: _DecoderState,
    process: _Processors,
    tokens: torch.Tensor,
    length: int | torch.Tensor,
    max_length: torch.Tensor | None = None,
    forced: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of greedy search after the (N,) `tokens`, every row after `length` tokens (an int) or each after
    its own (`length` (N,), with its own `max_length` (N,) and forced first token `forced` (N,), as
    `_Processors.rows` takes them): the (N,) chosen token ids and their (N,) log-probabilities under the processed
    distribution."""
    if isinstance(length, int):
        logits = process(state.step(tokens), length)  # (N, V)
    else:
        assert max_length is not None and forced is not None
        logits = process.rows(state.step(tokens, length - 1), length, max_length, forced)
    columns = logits.argmax(-1)  # (N,)
    log_prob = logits.log_softmax(-1).gather(-1, columns[:, None]).squeeze(-1)
    return state.token_ids(columns), log_prob


def _beam_start(
    count: int, beams: int, width: int, fill: int, start: int, device: Any
) -> dict[str, torch.Tensor]:
    """The beam search state (`_beam_step`) of `count` sentences before their first step, sequences of `width`
    positions (the decoder start token, then `fill`)."""
    import torch

    running = torch.full((count, beams, width), int(fill), dtype=torch.long, device=device)
    running[:, :, 0] = start
    running_scores = torch.zeros((count, beams), dtype=torch.float32, device=device)
    running_scores[:, 1:] = -1e9
    return {
        "running": running,
        "running_scores": running_scores,
        "sequences": running.clone(),
        "beam_scores": torch.full((count, beams), -1e9, dtype=torch.float32, device=device),
        "lengths": torch.zeros((count, beams), dtype=torch.long, device=device),
        "finished": torch.zeros((count, beams), dtype=torch.bool, device=device),
        "improvable": torch.ones((count, 1), dtype=torch.bool, device=device),
    }


def _beam_step(
    state: _DecoderState,
    process: _Processors,
    config: GenerationConfig,
    beam: dict[str, torch.Tensor],
    same_length: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of transformers' `_beam_search` (its helpers' arithmetic step for step) for the b sentences of
    `beam` (`_beam_start`'s tensors, and ``length`` (b,) each sentence's tokens so far, with ``max_length`` (b,)
    its own limit and ``forced`` (b,) its forced first token's column when each is at its own length), updated in
    place; `same_length`: the length every sentence is at (None: each at its own).
    Returns which sentences are done (b,) bool (their finished hypotheses can no longer change: no running beam
    can beat them, ``early_stopping=True`` and all K are done, or the length limit) and the beams (b, K) the next
    step's rows continue (the caller reorders the state)."""
    import torch

    beams, device = config.num_beams, state.device
    length_penalty, early_stopping = config.length_penalty, config.early_stopping
    eos_ids = _eos_ids(config)
    eos = torch.tensor(eos_ids, device=device)
    keep_k = max(2, 1 + len(eos_ids)) * beams
    top_mask = torch.zeros(keep_k, dtype=torch.bool, device=device)
    top_mask[:beams] = True
    cur_len, max_length = beam["length"], beam["max_length"]
    running, running_scores = beam["running"], beam["running_scores"]
    b, width = len(cur_len), running.shape[-1]
    sentence = torch.arange(b, device=device)

    tokens = running[sentence, :, cur_len - 1].reshape(-1)  # (b * K,)
    if same_length is not None:
        log_probs = process(state.step(tokens).log_softmax(-1), same_length)  # (b * K, V)
    else:
        row_lengths = cur_len.repeat_interleave(beams)  # (b * K,)
        logits = state.step(tokens, row_lengths - 1)
        log_probs = process.rows(
            logits.log_softmax(-1),
            row_lengths,
            max_length.repeat_interleave(beams),
            beam["forced"].repeat_interleave(beams),
        )
    vocab = log_probs.shape[-1]
    log_probs = log_probs.view(b, beams, vocab) + running_scores[:, :, None]
    log_probs = log_probs.view(b, beams * vocab)

    # top 2K continuations of all beams (_get_top_k_continuations)
    topk_scores, topk_indices = torch.topk(log_probs, k=keep_k)
    topk_beams = topk_indices // vocab  # (b, 2K)
    topk_tokens = state.token_ids(topk_indices % vocab)
    topk_running = running.gather(1, topk_beams[:, :, None].expand(-1, -1, width)).clone()
    topk_running[sentence, :, cur_len] = topk_tokens
    hits = torch.isin(topk_tokens, eos) | (cur_len + 1 >= max_length)[:, None]

    # the K best unfinished continuations run on (_get_running_beams_for_next_iteration)
    topk_running_scores = topk_scores + hits.to(torch.float32) * -1.0e9
    next_indices = torch.topk(topk_running_scores, k=beams)[1]  # (b, K)
    running = topk_running.gather(1, next_indices[:, :, None].expand(-1, -1, width))
    running_scores = topk_running_scores.gather(1, next_indices)
    source_beams = topk_beams.gather(1, next_indices)  # (b, K)

    # finished hypotheses among the top K enter the kept ones if they score higher (_update_finished_beams)
    finished, improvable = beam["finished"], beam["improvable"]
    just_finished = hits & top_mask[None, :]
    # the per-sentence divisors, each the Python float (cur_len ** length_penalty) `_beam_search` divides by
    penalties = torch.tensor(
        [float(n) ** length_penalty for n in cur_len.tolist()], dtype=torch.float32, device=device
    )
    candidates = topk_scores / penalties[:, None]
    full = torch.all(finished, dim=-1, keepdim=True) & (early_stopping is True)
    candidates = candidates + full.to(torch.float32) * -1.0e9
    candidates = candidates + (~improvable).to(torch.float32) * -1.0e9
    candidates = candidates + (~just_finished) * -1.0e9
    merged_scores = torch.cat((beam["beam_scores"], candidates), dim=1)
    best = torch.topk(merged_scores, k=beams)[1]  # (b, K)
    merged_sequences = torch.cat((beam["sequences"], topk_running), dim=1)
    sequences = merged_sequences.gather(1, best[:, :, None].expand(-1, -1, width))
    beam_scores = merged_scores.gather(1, best)
    lengths = torch.cat((beam["lengths"], cur_len[:, None].expand_as(topk_beams)), dim=1).gather(1, best)
    finished = torch.cat((finished, just_finished), dim=1).gather(1, best)

    cur_len = cur_len + 1
    # _check_early_stop_heuristic
    if early_stopping == "never" and length_penalty > 0.0:
        hypothetical = (max_length - 1).tolist()
    else:
        hypothetical = (cur_len - 1).tolist()
    divisors = torch.tensor(
        [float(n) ** length_penalty for n in hypothetical], dtype=torch.float32, device=device
    )
    best_running = running_scores[:, :1] / divisors[:, None]
    worst_finished = torch.where(finished, torch.min(beam_scores, dim=1, keepdim=True)[0], -1.0e9)
    improvable = improvable & torch.any(best_running > worst_finished, dim=-1, keepdim=True)
    done = ~improvable[:, 0] | (cur_len >= max_length) | hits.all(-1)
    if early_stopping is True:
        done = done | finished.all(-1)
    beam.update(
        length=cur_len,
        running=running,
        running_scores=running_scores,
        sequences=sequences,
        beam_scores=beam_scores,
        lengths=lengths,
        finished=finished,
        improvable=improvable,
    )
    return done, source_beams


def _beam_search(state: _DecoderState, config: GenerationConfig) -> DecodeOutput:
    """transformers' `_beam_search` (`_beam_step`) for the sentences still decoding; a sentence that is done
    leaves the batch."""
    import torch

    device = state.device
    beams = config.num_beams
    batch = state.rows // beams
    max_length = config.max_length
    returned = config.num_return_sequences or 1
    eos_ids = _eos_ids(config)
    pad = config.pad_token_id
    fill = (pad if pad else eos_ids[0]) if config.eos_token_id is not None else -1
    process = _Processors(config, state.position)
    beam = _beam_start(batch, beams, max_length, fill, config.decoder_start_token_id, device)
    beam.update(
        length=torch.ones(batch, dtype=torch.long, device=device),
        max_length=torch.full((batch,), max_length, dtype=torch.long, device=device),
    )
    # results per sentence: (B, K, max_length) finished sequences, their scores and generated lengths
    out_sequences = beam["sequences"].clone()
    out_scores = beam["beam_scores"].clone()
    out_lengths = beam["lengths"].clone()
    active = torch.arange(batch, device=device)
    cur_len = 1
    while True:
        done, source_beams = _beam_step(state, process, config, beam, cur_len)
        cur_len += 1
        gone = done.nonzero().squeeze(-1)
        if len(gone):
            out_sequences[active[gone]] = beam["sequences"][gone]
            out_scores[active[gone]] = beam["beam_scores"][gone]
            out_lengths[active[gone]] = beam["lengths"][gone]
        if len(gone) == len(active):
            break
        keep = (~done).nonzero().squeeze(-1)
        if len(gone):
            active = active[keep]
            beam = {name: tensor[keep] for name, tensor in beam.items()}
            source_beams = source_beams[keep]
        # the buffers' rows for the next step: beam k of sentence i continues beam source_beams[i, k]
        state.select((keep[:, None] * beams + source_beams).reshape(-1))

    out_sequences = out_sequences[:, :returned].reshape(batch * returned, max_length)
    out_scores = out_scores[:, :returned].reshape(-1)
    generated = int(out_lengths[:, :returned].max())
    return DecodeOutput(out_sequences[:, : 1 + generated], out_scores)


@dataclass(frozen=True)
class Finished:
    """A sentence of a `ContinuousBatch` that is done: the caller's ``key`` for it, its ``sequences`` (n, 1 + T)
    (decoder start token first, best first: what `decode` returns for that sentence alone, up to padding) and
    their ``sequences_scores`` (n,) float32."""

    key: Any
    sequences: torch.Tensor
    sequences_scores: torch.Tensor


@dataclass(frozen=True)
class Stepped:
    """What one `ContinuousBatch.step` produced: with one beam, each sentence's new token id (``tokens``, (key,
    id) pairs, its ``</s>`` included); the sentences that are done (``finished``), which have left the batch."""

    tokens: list[tuple[Any, int]]
    finished: list[Finished]


class ContinuousBatch:
    """Sentences decoded together one step at a time, which join (`add`) and leave (done, or `remove`) between
    steps: the step machinery of iteration-level (continuous) batching. All decode with one set of `generate()`
    options, greedy or beam search (`unsupported` rules as for `decode`; no shortlist); each sentence has its
    own source, its own step counter and decoder positions (its self-attention keys past its own position
    masked), its own ``max_new_tokens`` and its own forced first token (``forced_bos_token_id``: a multilingual
    model's target language), and beam search's stopping rules and length penalties are applied
    per sentence, so each sentence is decoded as `decode` decodes it alone: the same tokens and scores, up to
    the float rounding that masked padding brings to any batch."""

    def __init__(
        self, model: Any, options: dict[str, Any], generation_config: GenerationConfig | None = None
    ):
        reason = unsupported(model, options, generation_config)
        if reason is not None:
            raise ValueError(f"the decoding loop cannot decode this: {reason}; use model.generate()")
        self.model = model
        self.config = resolved_generation_config(model, options, generation_config)
        self.beams = self.config.num_beams
        eos = _eos_ids(self.config)
        pad = self.config.pad_token_id
        # what fills a sequence past its end: generate()'s choice for greedy search and for beams
        self.fill = (pad if pad is not None else eos[0]) if self.beams == 1 else (pad if pad else eos[0])
        self.state: _DecoderState | None = None
        self.process: _Processors | None = None
        self.keys: list[Any] = []
        # per sentence (first dimension): its tensors of the decoding state (greedy or beam search)
        self.rows: dict[str, torch.Tensor] = {}

    def __len__(self) -> int:
        """The sentences decoding."""
        return len(self.keys)

    @property
    def row_count(self) -> int:
        """The rows the decoder computes at each step (sentences x beams)."""
        return len(self.keys) * self.beams

    def add(self, sentences: Sequence[tuple[Any, Sequence[int], int | None, int | None]]) -> None:
        """Encode and join (key, source token ids, max_new_tokens, forced first token id) sentences (None: the
        options'; the forced token is a multilingual model's target language, ``forced_bos_token_id``); they take
        their first step at the next `step`."""
        import torch

        if not sentences:
            return
        model, config = self.model, self.config
        device = model.device
        pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
        width = max(len(ids) for _, ids, _, _ in sentences)
        input_ids = torch.full((len(sentences), width), int(pad_id), dtype=torch.long)  # (B, S)
        attention_mask = torch.zeros((len(sentences), width), dtype=torch.long)
        for row, (_, ids, _, _) in enumerate(sentences):
            input_ids[row, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
        max_lengths = torch.tensor(
            [config.max_length if new is None else new + 1 for _, _, new, _ in sentences], device=device
        )
        forced = [config.forced_bos_token_id if token is None else token for _, _, _, token in sentences]
        capacity = int(max_lengths.max())
        if self.state is not None:
            capacity = max(capacity, self.state.max_length)
        with torch.inference_mode():
            if self.state is None:
                state_config = copy.deepcopy(config)
                state_config.max_length = capacity
                self.state = _DecoderState(
                    model, input_ids.to(device), attention_mask.to(device), state_config, None
                )
            else:
                self.state.add(input_ids.to(device), attention_mask.to(device))
            self.state.max_length = capacity
            if self.process is None:
                self.process = _Processors(config, self.state.position)
            columns = [-1 if token is None else self.state.position(token) for token in forced]
            if None in columns:
                raise ValueError(f"forced first tokens {forced} are not all token ids of the model")
            new = self._initial(len(sentences), max_lengths, capacity)
            new["forced"] = torch.tensor(columns, dtype=torch.long, device=device)
            self._join(new)
        self.keys.extend(key for key, _, _, _ in sentences)

    def _initial(self, count: int, max_lengths: torch.Tensor, width: int) -> dict[str, torch.Tensor]:
        """The decoding state of `count` sentences before their first step."""
        import torch

        device, config, beams = self.model.device, self.config, self.beams
        rows = {"length": torch.ones(count, dtype=torch.long, device=device), "max_length": max_lengths}
        if beams > 1:
            start = config.decoder_start_token_id
            return {**_beam_start(count, beams, width, int(self.fill), start, device), **rows}
        sequences = torch.full((count, width), int(self.fill), dtype=torch.long, device=device)
        sequences[:, 0] = config.decoder_start_token_id
        rows.update(sequences=sequences, scores=torch.zeros(count, dtype=torch.float32, device=device))
        return rows

    def _join(self, new: dict[str, torch.Tensor]) -> None:
        """Append sentences' decoding state after the current ones' (sequences padded to the longer width)."""
        import torch
        from torch.nn import functional as F

        if not self.rows:
            self.rows = new
            return
        for name, tensor in new.items():
            old = self.rows[name]
            if name in ("sequences", "running"):
                width = max(old.shape[-1], tensor.shape[-1])
                old = F.pad(old, (0, width - old.shape[-1]), value=int(self.fill))
                tensor = F.pad(tensor, (0, width - tensor.shape[-1]), value=int(self.fill))
            self.rows[name] = torch.cat((old, tensor))

    def remove(self, keys: Sequence[Any]) -> None:
        """Drop the sentences of `keys` (their callers gave up) from the batch."""
        import torch

        gone = set(keys)
        keep = [i for i, key in enumerate(self.keys) if key not in gone]
        if len(keep) < len(self.keys):
            with torch.inference_mode():
                self._keep(torch.tensor(keep, dtype=torch.long, device=self.model.device), None)

    def _keep(self, keep: torch.Tensor, source_beams: torch.Tensor | None) -> None:
        """Keep the sentences `keep` (M,) in that order; their decoder rows continue the beams `source_beams`
        (M, K) (None: each beam its own row)."""
        import torch

        beams = self.beams
        self.keys = [self.keys[i] for i in keep.tolist()]
        self.rows = {name: tensor[keep] for name, tensor in self.rows.items()}
        if not self.keys:
            self.state, self.rows = None, {}
            return
        if source_beams is None:
            source_beams = torch.arange(beams, device=keep.device).expand(len(keep), beams)
        assert self.state is not None
        self.state.select((keep[:, None] * beams + source_beams).reshape(-1))

    def step(self) -> Stepped:
        """One decoding step of every sentence; those that are done leave the batch."""
        import torch

        if not self.keys:
            return Stepped([], [])
        with torch.inference_mode():
            return self._greedy_step() if self.beams == 1 else self._beam_step()

    def _greedy_step(self) -> Stepped:
        """`_greedy_step` of every sentence at its own length."""
        import torch

        state, rows, process = self.state, self.rows, self.process
        assert state is not None and process is not None
        length, sequences = rows["length"], rows["sequences"]
        tokens = sequences.gather(1, (length - 1)[:, None]).squeeze(-1)  # (N,)
        tokens, log_prob = _greedy_step(state, process, tokens, length, rows["max_length"], rows["forced"])
        rows["scores"] += log_prob
        sequences[torch.arange(len(tokens), device=tokens.device), length] = tokens
        length += 1
        eos = torch.tensor(_eos_ids(self.config), device=tokens.device)
        done = torch.isin(tokens, eos) | (length >= rows["max_length"])
        emitted = list(zip(self.keys, tokens.tolist()))
        finished = [
            Finished(
                self.keys[i],
                sequences[i : i + 1, : int(length[i])].clone(),
                rows["scores"][i : i + 1].clone(),
            )
            for i in done.nonzero().squeeze(-1).tolist()
        ]
        if finished:
            self._keep((~done).nonzero().squeeze(-1), None)
        return Stepped(emitted, finished)

    def _beam_step(self) -> Stepped:
        """`_beam_step` of every sentence at its own length with its own ``max_length``: a sentence is done where
        `_beam_search` of that sentence alone stops."""
        state, rows, process = self.state, self.rows, self.process
        assert state is not None and process is not None
        done, source_beams = _beam_step(state, process, self.config, rows, None)
        returned = self.config.num_return_sequences or 1
        ended = []
        for i in done.nonzero().squeeze(-1).tolist():
            generated = int(rows["lengths"][i, :returned].max())
            ended.append(
                Finished(
                    self.keys[i],
                    rows["sequences"][i, :returned, : 1 + generated].clone(),
                    rows["beam_scores"][i, :returned].clone(),
                )
            )
        keep = (~done).nonzero().squeeze(-1)
        self._keep(keep, source_beams[keep])
        return Stepped([], ended)
