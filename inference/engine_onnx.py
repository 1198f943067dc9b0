"""Translate with an ONNX export (`export.onnx.export_onnx`) on ONNX Runtime: greedy and beam search in numpy.

`OnnxTranslator(folder, dtype=...)` loads the encoder and the merged decoder of an exported folder (optimum's /
transformers.js' layout: onnx/encoder_model.onnx, onnx/decoder_model_merged.onnx, and their int8 variants
*_quantized.onnx for dtype "int8"), the model's config (inside config.json), the generation config and the
tokenizer. A folder in the three-file layout (encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx
at the top) is refused with the command that re-exports it. `generate_ids` decodes token ids; `translate` is
`inference.translate.translate` (THE batched loop: sorting by length, truncation to the model's limits,
``max_len_a``/``max_len_b``, empty lines) with this engine in place of `generate()`.

Decoding follows transformers' `generate()` for this model, so that the tokens are the same:
    * greedy: argmax of the processed logits; a finished row continues with pad until every row is done;
    * beam search: transformers' vectorised beam search (running beams from the top 2 * num_beams
      continuations of the accumulated log-probabilities, finished hypotheses scored
      sum(log p) / length ** length_penalty with the length counting generated tokens, `early_stopping`
      True / False / "never" with transformers' stopping heuristics);
    * logits processors from the generation config (`process_scores`): `suppress_tokens`,
      `begin_suppress_tokens`, `bad_words_ids`, `min_length`, `min_new_tokens`, `forced_bos_token_id`,
      `forced_eos_token_id`;
    * length: `max_new_tokens`, else the generation config's `max_new_tokens`, else its `max_length`.
The beam search is transformers' `GenerationMixin._beam_search` (Apache-2.0) written again in numpy.
Sampling and the other processors (repetition penalties, n-gram blocking, sequence bias, ...) are not
implemented (`ENGINES["onnx"].refused`, `inference.engines`): a generation config or argument that asks for
one raises `ValueError` naming it.

The settings of one call (`Decoding`, resolved from the generation config by `resolve_decoding`), the logits
processors and the numerics of the searches (`log_softmax`, `top_k`, `PENALTY`) come first, then the translator
that runs them on ONNX Runtime's outputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vanilla_transformer.modeling import position_limit

from .engines import (
    ONNX_CACHE_BRANCH,
    ONNX_MODEL_CONFIG_KEY,
    ONNX_OLD_LAYOUT_FILES,
    DecodingOptions,
    EngineTranslator,
    check_refused,
    onnx_graph_files,
)

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedTokenizerBase


PENALTY = np.float32(-1.0e9)  # transformers' "never choose this" offset in beam search


@dataclass(frozen=True)
class Decoding:
    """Resolved decoding settings of one call (see the module docstring)."""

    num_beams: int
    num_return_sequences: int
    length_penalty: float
    early_stopping: bool | str
    max_new_tokens: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int
    decoder_start_token_id: int
    suppress_tokens: tuple[int, ...]
    begin_suppress_tokens: tuple[int, ...]
    bad_words_ids: tuple[tuple[int, ...], ...]
    min_length: int
    min_new_tokens: int
    forced_bos_token_id: int | None
    forced_eos_token_id: int | None


def resolve_decoding(generation_config: GenerationConfig, **overrides: Any) -> Decoding:
    """The settings of `generation_config` updated with the non-None `overrides` (generate() keyword names).

    Raises `ValueError` for an unknown option, an out-of-range value (`modeling.check_generation_arguments`) or an
    option this engine does not implement."""
    from vanilla_transformer.modeling import check_generation_arguments

    overrides = {name: value for name, value in overrides.items() if value is not None}
    check_generation_arguments(overrides, generation_config)
    config = generation_config.__class__.from_dict(generation_config.to_dict())
    unknown = config.update(**overrides)
    if unknown:
        raise ValueError(f"unknown generation options {sorted(unknown)}: expected generate() keyword names")
    check_refused("onnx", config, "the generation config and options")

    def ids(value: Any) -> tuple[int, ...]:
        return tuple(value) if isinstance(value, (list, tuple)) else (() if value is None else (value,))

    eos = ids(config.eos_token_id)
    max_new = config.max_new_tokens if config.max_new_tokens is not None else config.max_length - 1
    bad_words = tuple(tuple(words) for words in config.bad_words_ids or ())
    return Decoding(
        num_beams=config.num_beams,
        num_return_sequences=config.num_return_sequences or 1,
        length_penalty=float(config.length_penalty),
        early_stopping=config.early_stopping,
        max_new_tokens=max_new,
        eos_token_ids=eos,
        pad_token_id=config.pad_token_id if config.pad_token_id is not None else eos[0],
        decoder_start_token_id=config.decoder_start_token_id,
        suppress_tokens=ids(config.suppress_tokens),
        begin_suppress_tokens=ids(config.begin_suppress_tokens),
        bad_words_ids=tuple(words for words in bad_words if list(words) not in [[token] for token in eos]),
        min_length=config.min_length or 0,
        min_new_tokens=config.min_new_tokens or 0,
        forced_bos_token_id=config.forced_bos_token_id,
        forced_eos_token_id=config.forced_eos_token_id,
    )


def process_scores(scores: np.ndarray, sequences: np.ndarray, decoding: Decoding) -> np.ndarray:
    """transformers' logits processors, in its order, on (N, V) scores of N sequences (N, L) that start with the
    decoder start token (L = the current length). Returns a new array; banned tokens get -inf."""
    scores = scores.copy()
    length = sequences.shape[1]
    for words in decoding.bad_words_ids:
        prefix = words[:-1]
        if not prefix:
            scores[:, words[-1]] = -np.inf
        elif length >= len(prefix):
            matches = (sequences[:, length - len(prefix) :] == np.asarray(prefix)).all(axis=1)
            scores[matches, words[-1]] = -np.inf
    eos = list(decoding.eos_token_ids)
    if eos and (length < decoding.min_length or length - 1 < decoding.min_new_tokens):
        scores[:, eos] = -np.inf
    if decoding.forced_bos_token_id is not None and length == 1:
        scores[:] = -np.inf
        scores[:, decoding.forced_bos_token_id] = 0.0
    if decoding.forced_eos_token_id is not None and length == decoding.max_new_tokens:  # max_length - 1
        forced = decoding.forced_eos_token_id
        scores[:] = -np.inf
        scores[:, list(forced) if isinstance(forced, (list, tuple)) else forced] = 0.0
    if decoding.suppress_tokens:
        scores[:, list(decoding.suppress_tokens)] = -np.inf
    begin = 2 if decoding.forced_bos_token_id is not None else 1
    if decoding.begin_suppress_tokens and length == begin:
        scores[:, list(decoding.begin_suppress_tokens)] = -np.inf
    return scores


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis, in float32."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def top_k(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) of the k largest entries of each row, largest first; equal values in index order (which
    of several equal values at the k-th place are kept is unspecified, as with torch.topk)."""
    if k < values.shape[-1]:
        indices = np.argpartition(-values, k - 1, axis=-1)[:, :k]  # the k largest, unordered
    else:
        indices = np.broadcast_to(np.arange(values.shape[-1]), values.shape)
    chosen = np.take_along_axis(values, indices, axis=-1)
    order = np.lexsort((indices, -chosen), axis=-1)  # by value, then by index
    return np.take_along_axis(chosen, order, axis=-1), np.take_along_axis(indices, order, axis=-1)


class OnnxTranslator(EngineTranslator):
    """An exported folder on ONNX Runtime (see the module docstring).

    Attributes: `tokenizer` (the folder's), `config` (the model config), `generation_config` (the decoding
    defaults of `translate`)."""

    engine = "onnx"

    def __init__(self, folder: str | Path, *, num_threads: int | None = None, dtype: str | None = None):
        """Load `folder` (written by `export.onnx.export_onnx`). `num_threads` sets ONNX Runtime's intra-op
        threads (None: its default, one per core); `dtype` picks the graphs: "float32" (None) or "int8". Raises
        `ValueError` for a missing, incomplete or three-file-layout folder and an unknown dtype."""
        import onnxruntime
        from transformers import GenerationConfig

        from vanilla_transformer.modeling import VanillaTransformerConfig
        from vanilla_transformer.modeling.pipeline_vanilla_transformer import check_vocabulary
        from vanilla_transformer.tokenizer.loading import load_tokenizer

        folder = Path(folder)
        hint = "export one with vanilla-transformer export --engine onnx MODEL OUT"
        if not folder.is_dir():
            raise ValueError(f"ONNX folder {str(folder)!r} does not exist or is not a folder: {hint}")
        graphs = onnx_graph_files(dtype or "float32")
        if not (folder / graphs[0]).parent.is_dir() and all(
            (folder / n).is_file() for n in ONNX_OLD_LAYOUT_FILES
        ):
            raise ValueError(
                f"{str(folder)!r} is an ONNX export in the three-file layout ({', '.join(ONNX_OLD_LAYOUT_FILES)} "
                "at the top); OnnxTranslator reads onnx/encoder_model.onnx and onnx/decoder_model_merged.onnx: "
                "re-export the model with vanilla-transformer export --engine onnx MODEL OUT"
            )
        needed = [*graphs, "config.json", "generation_config.json"]
        missing = [name for name in needed if not (folder / name).is_file()]
        if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
            missing.append("tokenizer.json")
        if missing:
            raise ValueError(
                f"{str(folder)!r} is not a complete ONNX export: missing {', '.join(missing)}; {hint}"
            )
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ValueError(f"num_threads={num_threads!r} is invalid: expected an integer >= 1 or None")
        try:
            config_dict = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            if not isinstance(config_dict, dict) or ONNX_MODEL_CONFIG_KEY not in config_dict:
                raise ValueError(f"config.json has no {ONNX_MODEL_CONFIG_KEY!r}")
            self.config = VanillaTransformerConfig.from_dict(config_dict[ONNX_MODEL_CONFIG_KEY])
            self.generation_config = GenerationConfig.from_pretrained(folder)
        except (ValueError, OSError) as err:
            raise ValueError(f"{str(folder)!r} has an unreadable config ({err}); {hint}") from err
        self.tokenizer: PreTrainedTokenizerBase = load_tokenizer(folder)
        check_vocabulary(self.config, self.tokenizer)
        options = onnxruntime.SessionOptions()
        if num_threads is not None:
            options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
        # no busy-waiting between runs: the numpy search and other processes get the cores back at once
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")

        def session(name: str) -> onnxruntime.InferenceSession:
            try:
                return onnxruntime.InferenceSession(
                    str(folder / name), options, providers=["CPUExecutionProvider"]
                )
            except Exception as err:  # onnxruntime raises its own exception types for an unreadable graph
                raise ValueError(
                    f"{str(folder / name)!r} is not a loadable ONNX graph ({err}); {hint}"
                ) from err

        self.dtype = dtype or "float32"
        self._encoder, self._decoder = session(graphs[0]), session(graphs[1])
        self._present = [output.name for output in self._decoder.get_outputs()[1:]]
        # the empty pasts of the first step: (N, heads, 0, head dim) for every past input
        self._past_shapes = {
            value.name: tuple(value.shape[1:2]) + (0,) + tuple(value.shape[3:])
            for value in self._decoder.get_inputs()
            if value.name.startswith("past_key_values.")
        }
        if any(not isinstance(size, int) for shape in self._past_shapes.values() for size in shape):
            raise ValueError(f"{str(folder / graphs[1])!r} has no fixed head sizes in its pasts; {hint}")

    # ------------------------------------------------------------------------------------------------------------
    # the public interface
    # ------------------------------------------------------------------------------------------------------------

    def generate_ids(self, input_ids: list[list[int]], **options: Any) -> list[list[list[int]]]:
        """For each source (token ids with </s>, no padding), its `num_return_sequences` hypotheses, best first:
        generated ids without the decoder start token and without padding, ending with </s> if produced.
        `options` are `DecodingOptions`' fields; other decoding settings come from the folder's generation config."""
        return self.generate_with_scores(input_ids, **options)[0]

    def generate_with_scores(
        self, input_ids: list[list[int]], **options: Any
    ) -> tuple[list[list[list[int]]], list[list[float]]]:
        """`generate_ids` and each hypothesis' score (`search`)."""
        decoding = resolve_decoding(self.generation_config, **vars(DecodingOptions(**options)))
        ids, mask = self.pad_sources(input_ids)
        return self.search(ids, mask, decoding)

    def score_ids(self, source_ids: list[list[int]], target_ids: list[list[int]]) -> list[list[float]]:
        """Per-token log-probabilities of each target (token ids, its `</s>` included) given its source (token
        ids with `</s>`): the decoder reads the start token and the target one token per call, with its cache, and
        each step's raw logits give the next target token's log-probability (no logits processor)."""
        if not source_ids:
            return []
        ids, mask = self.pad_sources(source_ids)
        # onnxruntime types an output as any ONNX value; the exported graphs output tensors only
        hidden = cast(list[np.ndarray], self._encoder.run(None, {"input_ids": ids, "attention_mask": mask}))[
            0
        ]
        width = max(len(target) for target in target_ids)
        start = self.config.decoder_start_token_id
        pad = self.config.pad_token_id
        # (B, T): the decoder's inputs (start token, then the target shifted right) and the tokens to score
        inputs = np.full((len(target_ids), width), pad, dtype=np.int64)
        labels = np.full((len(target_ids), width), pad, dtype=np.int64)
        for row, target in enumerate(target_ids):
            inputs[row, : len(target)] = [start, *target[:-1]]
            labels[row, : len(target)] = target
        log_probs = np.zeros((len(target_ids), width), dtype=np.float64)
        past: dict[str, np.ndarray] = {}
        for step in range(width):
            logits, past = self._step(inputs[:, step : step + 1], mask, hidden, past)
            log_probs[:, step] = np.take_along_axis(log_softmax(logits), labels[:, step : step + 1], -1)[:, 0]
        return [log_probs[row, : len(target)].tolist() for row, target in enumerate(target_ids)]

    # ------------------------------------------------------------------------------------------------------------
    # decoding
    # ------------------------------------------------------------------------------------------------------------

    def pad_sources(self, input_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Right-padded (B, S) int64 ids and 1/0 mask; `ValueError` for an empty batch or source, or one longer
        than the model's positions."""
        if not input_ids or any(len(ids) == 0 for ids in input_ids):
            raise ValueError("input_ids must hold at least one source, each with at least one token (</s>)")
        width = max(len(ids) for ids in input_ids)
        limit = position_limit(self.config)
        if limit is not None and width > limit:
            raise ValueError(
                f"a source has {width} tokens but the model accepts at most {limit} (max_position_embeddings); "
                "truncate it (translate() does)"
            )
        ids = np.full((len(input_ids), width), self.config.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(input_ids), width), dtype=np.int64)
        for row, tokens in enumerate(input_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        return ids, mask

    def search(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, decoding: Decoding
    ) -> tuple[list[list[list[int]]], list[list[float]]]:
        """Decode a padded (B, S) batch: per source, `decoding.num_return_sequences` hypotheses (generated ids,
        as `generate_ids`) and their scores (beam search: transformers' `sequences_scores`; greedy: the sum of
        the log-probabilities of the processed scores)."""
        vocab = self.config.decoder_vocab_size
        bad = [token for token in decoding.eos_token_ids + (decoding.pad_token_id,) if not 0 <= token < vocab]
        if bad:
            raise ValueError(
                f"token ids {bad} of the generation config are outside the vocabulary [0, {vocab})"
            )
        limit = position_limit(self.config)
        if limit is not None and decoding.max_new_tokens > limit:
            raise ValueError(
                f"max_new_tokens={decoding.max_new_tokens} exceeds the decoder's {limit} positions "
                f"(max_position_embeddings); use at most {limit}"
            )
        if decoding.num_beams == 1 and decoding.num_return_sequences != 1:
            raise ValueError("num_return_sequences > 1 needs beam search (num_beams >= num_return_sequences)")
        # onnxruntime types an output as any ONNX value; the exported graphs output tensors only
        outputs = cast(
            list[np.ndarray],
            self._encoder.run(None, {"input_ids": input_ids, "attention_mask": attention_mask}),
        )
        hidden = outputs[0]
        if decoding.num_beams == 1:
            return self._greedy(hidden, attention_mask, decoding)
        return self._beam_search(hidden, attention_mask, decoding)

    def _step(
        self, tokens: np.ndarray, mask: np.ndarray, hidden: np.ndarray, past: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One merged-decoder call on (N, 1) tokens over (N, S, C) encoder states: the first (`past` empty) with
        empty pasts and use_cache_branch false, later ones with the cache. Returns (N, V) float32 logits and the
        cache for the next call (the encoder keys/values of the first call are kept as they are)."""
        first = not past
        if first:
            past = {
                name: np.zeros((len(tokens), *shape), np.float32) for name, shape in self._past_shapes.items()
            }
        feeds = {"encoder_attention_mask": mask, "input_ids": tokens, "encoder_hidden_states": hidden, **past}
        feeds[ONNX_CACHE_BRANCH] = np.array([not first])
        # later steps fetch no encoder presents: they equal the pasts, and fetching copies them
        names = self._present if first else [name for name in self._present if ".decoder." in name]
        # onnxruntime types an output as any ONNX value; the exported graphs output tensors only
        outputs = cast(list[np.ndarray], self._decoder.run(["logits", *names], feeds))
        updated = dict(past)
        for name, value in zip(names, outputs[1:]):
            updated[name.replace("present.", "past_key_values.", 1)] = value
        return outputs[0][:, -1].astype(np.float32), updated

    def _greedy(
        self, hidden: np.ndarray, mask: np.ndarray, decoding: Decoding
    ) -> tuple[list[list[list[int]]], list[list[float]]]:
        """transformers' greedy search (`GenerationMixin._sample` without sampling), in numpy."""
        batch = hidden.shape[0]
        sequences = np.full((batch, 1), decoding.decoder_start_token_id, dtype=np.int64)
        unfinished = np.ones(batch, dtype=bool)
        lengths = np.full(batch, decoding.max_new_tokens)
        scores = np.zeros(batch, dtype=np.float32)
        eos = np.asarray(decoding.eos_token_ids, dtype=np.int64)
        past: dict[str, np.ndarray] = {}
        tokens = sequences
        for step in range(decoding.max_new_tokens):
            logits, past = self._step(tokens, mask, hidden, past)
            processed = process_scores(logits, sequences, decoding)
            chosen = processed.argmax(axis=-1)
            scores += np.where(
                unfinished, np.take_along_axis(log_softmax(processed), chosen[:, None], -1)[:, 0], 0
            )
            chosen = np.where(unfinished, chosen, decoding.pad_token_id)
            sequences = np.concatenate([sequences, chosen[:, None]], axis=1)
            done = unfinished & np.isin(chosen, eos)
            lengths[done] = step + 1
            unfinished &= ~done
            if not unfinished.any():
                break
            tokens = chosen[:, None]
        hypotheses = [[sequences[row, 1 : 1 + lengths[row]].tolist()] for row in range(batch)]
        return hypotheses, [[float(score)] for score in scores]

    def _beam_search(
        self, hidden: np.ndarray, mask: np.ndarray, decoding: Decoding
    ) -> tuple[list[list[list[int]]], list[list[float]]]:
        """transformers' `_beam_search` (vectorised, see `GenerationMixin._beam_search`), in numpy."""
        batch, beams = hidden.shape[0], decoding.num_beams
        max_length = 1 + decoding.max_new_tokens  # the decoder start token counts
        eos = np.asarray(decoding.eos_token_ids, dtype=np.int64)
        keep = max(2, 1 + len(eos)) * beams  # continuations considered per source
        top_beams = np.arange(keep) < beams
        hidden, mask = np.repeat(hidden, beams, axis=0), np.repeat(mask, beams, axis=0)  # (B * k, S, C)

        running = np.full((batch, beams, max_length), decoding.pad_token_id, dtype=np.int64)
        running[:, :, 0] = decoding.decoder_start_token_id
        finished = running.copy()
        running_scores = np.zeros((batch, beams), dtype=np.float32)
        running_scores[:, 1:] = PENALTY
        finished_scores = np.full((batch, beams), PENALTY, dtype=np.float32)
        finished_lengths = np.zeros((batch, beams), dtype=np.int64)
        is_finished = np.zeros((batch, beams), dtype=bool)
        may_improve = np.ones((batch, 1), dtype=bool)
        rows = np.arange(batch)[:, None]
        past: dict[str, np.ndarray] = {}
        tokens, length = running[:, :, 0].reshape(-1, 1), 1
        while True:
            logits, past = self._step(tokens, mask, hidden, past)
            flat = running[:, :, :length].reshape(batch * beams, length)
            log_probs = process_scores(log_softmax(logits), flat, decoding)
            vocab = log_probs.shape[-1]
            log_probs = (log_probs.reshape(batch, beams, vocab) + running_scores[:, :, None]).reshape(
                batch, -1
            )

            top_scores, top_indices = top_k(log_probs, keep)  # (B, 2k)
            parents, top_ids = top_indices // vocab, top_indices % vocab
            candidates = running[rows, parents]  # (B, 2k, max_length)
            candidates[:, :, length] = top_ids
            stops = np.isin(top_ids, eos) | (length + 1 >= max_length)

            # the best k candidates that did not stop keep running
            running_candidates = top_scores + stops.astype(np.float32) * PENALTY
            running_scores, chosen = top_k(running_candidates, beams)
            running = candidates[rows, chosen]
            beam_origin = (parents[rows, chosen] + rows * beams).reshape(-1)  # (B * k,) rows of the cache

            # candidates among the top k that stopped become finished hypotheses if they beat the worst ones
            just_finished = stops & top_beams[None, :]
            normalised = top_scores / np.float32((length + 1 - 1) ** decoding.length_penalty)
            full = is_finished.all(axis=-1, keepdims=True) & (decoding.early_stopping is True)
            normalised = normalised + full.astype(np.float32) * PENALTY
            normalised = normalised + (~may_improve).astype(np.float32) * PENALTY
            normalised = normalised + (~just_finished).astype(np.float32) * PENALTY
            merged_scores, merged = top_k(np.concatenate([finished_scores, normalised], axis=1), beams)
            finished = np.concatenate([finished, candidates], axis=1)[rows, merged]
            finished_scores = merged_scores
            new_lengths = np.full((batch, keep), length, dtype=np.int64)  # generated tokens, </s> included
            finished_lengths = np.concatenate([finished_lengths, new_lengths], axis=1)[rows, merged]
            is_finished = np.concatenate([is_finished, just_finished], axis=1)[rows, merged]

            past = {
                name: value if ".encoder." in name else value[beam_origin] for name, value in past.items()
            }
            length += 1
            may_improve = self._may_improve(
                may_improve, running_scores, finished_scores, is_finished, length, max_length, decoding
            )
            stop_all = is_finished.all() and decoding.early_stopping is True
            if not may_improve.any() or stop_all or stops.all():
                break
            tokens = running[:, :, length - 1].reshape(-1, 1)

        count = decoding.num_return_sequences
        hypotheses = [
            [finished[b, j, 1 : 1 + finished_lengths[b, j]].tolist() for j in range(count)]
            for b in range(batch)
        ]
        return hypotheses, [[float(finished_scores[b, j]) for j in range(count)] for b in range(batch)]

    @staticmethod
    def _may_improve(
        may_improve: np.ndarray,
        running_scores: np.ndarray,
        finished_scores: np.ndarray,
        is_finished: np.ndarray,
        length: int,
        max_length: int,
        decoding: Decoding,
    ) -> np.ndarray:
        """transformers' `_check_early_stop_heuristic`: (B, 1), whether a running beam could still beat the worst
        finished hypothesis."""
        if decoding.early_stopping == "never" and decoding.length_penalty > 0.0:
            best_length = max_length - 1
        else:
            best_length = length - 1
        best_running = running_scores[:, :1] / np.float32(best_length**decoding.length_penalty)
        worst = np.where(is_finished, finished_scores.min(axis=1, keepdims=True), PENALTY)
        return may_improve & (best_running > worst).any(axis=-1, keepdims=True)
