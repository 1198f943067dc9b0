"""Translation with a CTranslate2 export (`export.ct2.export_ct2`): the same contract as `inference.translate`,
run by `ctranslate2.Translator`.

Decoding settings map to CTranslate2 one for one, so that tokens equal our `generate()` for the same settings:
`num_beams` -> `beam_size`, `length_penalty` (transformers' `sum(log p) / length ** alpha`, `</s>` counted) ->
`length_penalty`, `early_stopping=True` -> `patience=1` (stop once `num_beams` hypotheses are finished),
`max_new_tokens` (or `max_length - 1`) -> `max_decoding_length`, `min_new_tokens` -> `min_decoding_length`,
`suppress_tokens` and `bad_words_ids` -> `suppress_sequences`, `no_repeat_ngram_size` -> the option of the
same name, `num_return_sequences` -> `num_hypotheses`; a multilingual model's target-language token (the per-call
`forced_bos_token_id` of `inference.languages`) -> `target_prefix`. Settings CTranslate2 cannot
reproduce raise `ValueError` naming them: sampling, `early_stopping` other than True with beams,
`forced_bos_token_id` / `forced_eos_token_id` in the generation config, `repetition_penalty` (CTranslate2 penalises other scores than
transformers does), diverse beam groups, constraints and the other processors in the registry's
`ENGINES["ct2"].refused` (`inference.engines`).

One difference is in the scores, not the search: CTranslate2 removes suppressed tokens before the softmax,
transformers after it, so a hypothesis' score differs by the log of the probability mass the model gives
suppressed tokens (`<pad>`, `<s>`), which is ~0 for a trained model (neither is ever a training target).

The length limits are `inference.translate`'s: sources are truncated to the model's position table and the
tokenizer's `model_max_length`, `max_new_tokens` is lowered to the position table.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vanilla_transformer.modeling import position_limit

from .engines import CT2_MODEL_CONFIG_FILE, DecodingOptions, EngineTranslator, check_refused
from .shortlist import VMAP_FILE

if TYPE_CHECKING:
    import numpy as np
    from transformers import GenerationConfig, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


class CT2Translator(EngineTranslator):
    """An exported CTranslate2 folder, ready to translate on CPU.

    `num_threads`: CTranslate2's `intra_threads` (None: its default). The folder's tokenizer is `tokenizer`;
    its generation_config.json gives the decoding defaults."""

    engine = "ct2"

    def __init__(self, folder: str | Path, *, num_threads: int | None = None):
        folder = Path(folder)
        if not (folder / "model.bin").is_file() or not (folder / CT2_MODEL_CONFIG_FILE).is_file():
            raise ValueError(
                f"{str(folder)!r} is not a CTranslate2 export (no model.bin or {CT2_MODEL_CONFIG_FILE}): create one "
                "with vanilla-transformer export --engine ct2 MODEL OUT"
            )
        import ctranslate2
        from transformers import GenerationConfig

        from vanilla_transformer.modeling import VanillaTransformerConfig
        from vanilla_transformer.tokenizer.loading import load_tokenizer

        self.folder = folder
        self.config = VanillaTransformerConfig.from_json_file(str(folder / CT2_MODEL_CONFIG_FILE))
        self.tokenizer: PreTrainedTokenizerBase = load_tokenizer(folder)
        self.generation_config: GenerationConfig = GenerationConfig.from_pretrained(str(folder))
        try:
            self.translator = ctranslate2.Translator(
                str(folder), device="cpu", intra_threads=num_threads or 0, inter_threads=1
            )
        except RuntimeError as err:  # e.g. a truncated model.bin: "Variable ... has an invalid payload size"
            raise ValueError(
                f"{folder / 'model.bin'} does not load in CTranslate2 ({str(err).splitlines()[0]}): export the "
                "model again with vanilla-transformer export --engine ct2 MODEL OUT"
            ) from err
        self.source_tokens, self.target_tokens = _vocabularies(folder)
        self.target_ids = {token: i for i, token in enumerate(self.target_tokens)}

    def generate_ids(self, input_ids: list[list[int]], **options: Any) -> list[list[list[int]]]:
        """For each source (token ids with `</s>`, no padding), its `num_return_sequences` hypotheses, best
        first: the generated ids without the decoder start token, up to and including `</s>` if produced.
        `options` are `generate_with_scores`'s."""
        return self.generate_with_scores(input_ids, **options)[0]

    def generate_with_scores(
        self, input_ids: list[list[int]], use_vmap: bool = False, **options: Any
    ) -> tuple[list[list[list[int]]], list[list[float]]]:
        """`generate_ids` and each hypothesis' score: with beams, `sum(log p) / length ** length_penalty`
        (transformers' `sequences_scores`); greedy, `sum(log p)`. `options` are `DecodingOptions`' fields;
        `use_vmap`: decode over the shortlist of each batch (the folder's `VMAP_FILE`, which `export_ct2` writes
        from the model's shortlist; `ValueError` for a folder without one)."""
        settings = self.decoding_options(DecodingOptions(**options))
        problem = self.vmap_problem() if use_vmap else None
        if problem is not None:
            raise ValueError(problem)
        if not input_ids:
            return [], []
        source = [[self.source_tokens[i] for i in ids] for ids in input_ids]
        forced = options.get("forced_bos_token_id")
        # a multilingual model's target-language token starts every hypothesis (CTranslate2 returns the prefix)
        prefix = None if forced is None else [[self.target_tokens[forced]]] * len(source)
        results = self.translator.translate_batch(
            source,
            target_prefix=prefix,
            return_scores=True,
            return_end_token=True,
            use_vmap=use_vmap,
            **settings,
        )
        ids = [[[self.target_ids[t] for t in hyp] for hyp in result.hypotheses] for result in results]
        return ids, [list(result.scores) for result in results]

    def vmap_problem(self) -> str | None:
        """Why this folder cannot decode with its vocabulary map (``use_vmap``), or None when it can.

        CTranslate2 (4.x, `Decoder::update_output_layer`) maps the decoder start, end and suppressed token ids into
        a batch's candidate list with the positions they had in the first candidate list it built (it never clears
        its id -> position map), which holds only for ids that are at the same position in every list: ids k with
        0 .. k all among the map's always-candidates (the first line of `VMAP_FILE`). This project's tokenizers
        put ``<pad>``, ``<unk>``, ``<s>`` and ``</s>`` at ids 0-3, which every shortlist keeps; other ids are
        refused here rather than decoded wrongly."""
        path = self.folder / VMAP_FILE
        if not path.is_file():
            return (
                f"{str(self.folder)!r} has no vocabulary map ({VMAP_FILE}): build a shortlist for the model with "
                "vanilla-transformer shortlist --model MODEL and export it again, or leave out --shortlist"
            )
        with path.open(encoding="utf-8") as lines:
            first = lines.readline().rstrip("\n")
        key, _, tokens = first.partition("\t")
        always = {self.target_ids[t] for t in tokens.split() if t in self.target_ids} if not key else set()
        config = self.generation_config
        eos = config.eos_token_id
        needed = {
            config.decoder_start_token_id,
            config.pad_token_id,
            *(eos if isinstance(eos, list) else [eos]),
        }
        needed |= {*(config.suppress_tokens or []), *(i for word in config.bad_words_ids or [] for i in word)}
        unstable = sorted(i for i in needed if i is not None and not set(range(i + 1)) <= always)
        if unstable:
            return (
                f"CTranslate2 cannot decode {str(self.folder)!r} with its vocabulary map: it maps the decoder start, "
                f"end and suppressed tokens to the positions of its first batch, right only for ids whose lower ids "
                f"are all always-candidates, and {unstable} are not; translate it with --engine torch --shortlist"
            )
        return None

    def score_ids(self, source_ids: list[list[int]], target_ids: list[list[int]]) -> list[list[float]]:
        """Per-token log-probabilities of each target (token ids, ending with `</s>` or, for a hypothesis cut at
        its length limit, not) given its source (token ids with `</s>`): CTranslate2's `score_batch`, which adds
        the decoder start token and scores the `</s>` it appends itself (a target is passed without its own). A
        target without `</s>` is scored without its last token (the `</s>` appended in its place is dropped, and
        a target as long as the decoder's positions fits), and its last token's log-probability is the
        log-softmax of the logits `translate_batch` gives after the other tokens as a forced prefix."""
        if not source_ids:
            return []
        end = self.config.eos_token_id
        finished = [bool(ids) and ids[-1] == end for ids in target_ids]
        source = [[self.source_tokens[i] for i in ids] for ids in source_ids]
        target = [[self.target_tokens[i] for i in ids[:-1]] for ids in target_ids]
        results = self.translator.score_batch(source, target, max_input_length=0)
        log_probs = [
            list(r.log_probs) if done else list(r.log_probs)[:-1] for r, done in zip(results, finished)
        ]
        cut = [row for row, done in enumerate(finished) if not done]
        if cut:
            steps = self.translator.translate_batch(
                [source[row] for row in cut],
                [target[row] for row in cut],
                beam_size=1,
                max_decoding_length=max(len(target_ids[row]) for row in cut),
                min_decoding_length=0,
                max_input_length=0,
                return_logits_vocab=True,
            )
            for row, result in zip(cut, steps):
                logits = np.asarray(result.logits[0][len(target_ids[row]) - 1], dtype=np.float32)
                shifted = logits - logits.max()
                log_softmax = shifted - np.log(np.exp(shifted).sum())
                log_probs[row].append(float(log_softmax[target_ids[row][-1]]))
        return log_probs

    def alignment_attention_ids(
        self, source_ids: list[list[int]], target_ids: list[list[int]]
    ) -> list[np.ndarray]:
        """The alignment attention (T, S) of each (source, target) pair of token ids (targets ending with `</s>`):
        ``translate_batch`` with the target as a prefix and ``return_attention=True``, whose rows are the attention
        of the export's `alignment_layer`/`alignment_heads` at each target position (the row after the prefix is
        the position that predicts `</s>`)."""
        import numpy as np

        end = self.config.eos_token_id
        source = [[self.source_tokens[i] for i in ids] for ids in source_ids]
        prefixes = [
            [self.target_tokens[i] for i in (ids[:-1] if ids and ids[-1] == end else ids)]
            for ids in target_ids
        ]
        results = self.translator.translate_batch(
            source,
            target_prefix=prefixes,
            return_attention=True,
            beam_size=1,
            max_input_length=0,
            max_decoding_length=max(len(prefix) for prefix in prefixes) + 1,
        )
        return [
            np.asarray(result.attention[0], dtype=np.float32)[: len(prefix) + 1]
            for result, prefix in zip(results, prefixes)
        ]

    def decoding_options(self, options: DecodingOptions) -> dict[str, Any]:
        """The `translate_batch` options of these settings and the folder's generation config; `ValueError` for
        settings CTranslate2 cannot reproduce (see the module docstring)."""
        config = self.generation_config
        num_beams, num_return_sequences = options.num_beams, options.num_return_sequences
        max_new_tokens = options.max_new_tokens
        check_refused("ct2", config, str(self.folder / "generation_config.json"))
        if not isinstance(num_beams, int) or num_beams < 1:
            raise ValueError(f"num_beams={num_beams!r} is invalid: expected an integer >= 1")
        if not isinstance(num_return_sequences, int) or not 1 <= num_return_sequences <= num_beams:
            raise ValueError(
                f"num_return_sequences={num_return_sequences!r} is invalid: expected 1 .. num_beams={num_beams}"
            )
        if num_beams > 1 and config.early_stopping is not True:
            raise ValueError(
                f"early_stopping={config.early_stopping!r} cannot be reproduced by CTranslate2, whose beam search "
                "stops once num_beams hypotheses are finished (early_stopping=True): set it in "
                "generation_config.json or translate with the PyTorch engine"
            )
        if max_new_tokens is None:
            max_new_tokens = config.max_new_tokens
            if max_new_tokens is None:
                max_new_tokens = config.max_length - 1  # the decoder input starts with one token
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens!r} is invalid: expected an integer >= 1")
        limit = position_limit(self.config)
        if limit is not None and max_new_tokens > limit:
            logger.warning(
                "max_new_tokens=%d exceeds max_position_embeddings=%d; using %d", max_new_tokens, limit, limit
            )
            max_new_tokens = limit
        suppress = [[i] for i in config.suppress_tokens or []] + [list(s) for s in config.bad_words_ids or []]
        length_penalty = config.length_penalty if options.length_penalty is None else options.length_penalty
        return dict(
            beam_size=num_beams,
            patience=1,
            num_hypotheses=num_return_sequences,
            # greedy: the plain sum of log-probs
            length_penalty=length_penalty if num_beams > 1 else 0.0,
            max_decoding_length=max_new_tokens,
            min_decoding_length=config.min_new_tokens or 0,
            max_input_length=0,  # sources are truncated by translate(), like inference.translate
            no_repeat_ngram_size=config.no_repeat_ngram_size or 0,
            suppress_sequences=[[self.target_tokens[i] for i in s] for s in suppress] or None,
        )


def _vocabularies(folder: Path) -> tuple[list[str], list[str]]:
    """The source and target token lists CTranslate2 saved (one shared file, or one per side)."""
    shared = folder / "shared_vocabulary.json"
    if shared.is_file():
        tokens = json.loads(shared.read_text(encoding="utf-8"))
        return tokens, tokens
    return tuple(
        json.loads((folder / f"{side}_vocabulary.json").read_text(encoding="utf-8"))
        for side in ("source", "target")
    )
