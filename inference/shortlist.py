"""The lexical vocabulary shortlist (Marian's ``--shortlist``, CTranslate2's vocabulary map ``use_vmap``): the
target tokens a batch may produce, so that decoding computes the output projection over a few thousand rows
instead of the whole target vocabulary.

A `Shortlist` holds, for every source token id, its `top_k` most probable target tokens by the lexical
translation probability p(t | s) of IBM Model 1 (`build_shortlist`: expectation-maximisation over the training
pairs, a NULL source token absorbing what no source token explains), and the ids that every batch keeps
(``always``: the `frequent` most frequent target tokens of the corpus and the special tokens). `Shortlist.for_batch`
gives a batch's vocabulary: the sorted union of ``always`` and the candidates of each source token in it.

Saved beside the model as `SHORTLIST_FILE` (safetensors: the candidates in CSR form, ``always``, the settings
in its metadata), read by `load_shortlist` from a model folder, an exported CTranslate2 folder (the export copies
it and writes the same candidates as CTranslate2's ``vmap.txt``, `vmap_lines`) or a Hub repo.

`shortlisted(model, vocabulary)` is the decoding side for ``generate()``: a view of the model whose decoder
reads and writes the ids of ``vocabulary`` only (id k of the view is ``vocabulary[k]``): its output projection
and output bias are those rows, its decoder's embedding too, its generation config's token ids mapped. Its
outputs map back by ``vocabulary[ids]``. With every target id in ``vocabulary`` it computes exactly what the model
computes; with fewer, it is the model with its softmax taken over ``vocabulary`` (what CTranslate2 and Marian
compute with a shortlist).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import torch
    from transformers import GenerationConfig

SHORTLIST_FILE = "shortlist.safetensors"  # in a model folder and in its CTranslate2 export
VMAP_FILE = "vmap.txt"  # CTranslate2's name for the vocabulary map in a converted folder
FORMAT = "vanilla-transformer-shortlist-1"
# defaults of `build_shortlist`: Marian's common `--shortlist lex.s2t 100 100` settings
DEFAULT_TOP_K = 100
DEFAULT_FREQUENT = 100
DEFAULT_ITERATIONS = 5
# the generation-config fields that hold token ids: mapped into the shortlist's ids by `shortlisted`
_SINGLE_IDS = ("decoder_start_token_id", "pad_token_id", "bos_token_id", "forced_bos_token_id")
_ID_LISTS = ("eos_token_id", "forced_eos_token_id")
_OPTIONAL_IDS = ("suppress_tokens", "begin_suppress_tokens")
# settings a shortlist cannot map (phrases of ids the decoder must produce or weigh): refused by name
_UNMAPPED = ("force_words_ids", "sequence_bias", "constraints")


@dataclass(eq=False)
class Shortlist:
    """Target candidates per source token: the candidates of source id ``s`` are
    ``targets[offsets[s]:offsets[s + 1]]`` (most probable first); ``always`` are in every batch's vocabulary.
    ``source_vocab_size`` / ``target_vocab_size``: the model's vocabularies it was built for; ``settings``: how
    it was built (top_k, frequent, iterations, pairs)."""

    offsets: torch.Tensor  # (V_src + 1,) int64
    targets: torch.Tensor  # (offsets[-1],) int64
    always: torch.Tensor  # (A,) int64, sorted
    source_vocab_size: int
    target_vocab_size: int
    settings: dict[str, Any]

    def candidates(self, source_id: int) -> list[int]:
        """The target ids listed for ``source_id``, most probable first (without ``always``)."""
        return self.targets[self.offsets[source_id] : self.offsets[source_id + 1]].tolist()

    def for_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The vocabulary of a batch of sources (B, S) (``attention_mask`` 1 = token, padding left out): the
        sorted unique target ids of ``always`` and of every source token's candidates, int64 on the ids' device."""
        import torch

        ids = input_ids if attention_mask is None else input_ids[attention_mask.bool()]
        ids = ids.reshape(-1).unique().cpu()
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= self.source_vocab_size):
            raise ValueError(
                f"source token ids {ids.min().item()}..{ids.max().item()} are outside the shortlist's source "
                f"vocabulary [0, {self.source_vocab_size}): the shortlist belongs to another model; build one for "
                "this model with vanilla-transformer shortlist --model MODEL"
            )
        starts, ends = self.offsets[ids], self.offsets[ids + 1]
        counts = ends - starts
        # positions starts[i] .. ends[i] - 1 of every source token, concatenated
        first = torch.repeat_interleave(starts - (counts.cumsum(0) - counts), counts)
        picked = self.targets[first + torch.arange(int(counts.sum()))]
        return torch.cat([self.always, picked]).unique(sorted=True).to(input_ids.device)

    def save(self, folder: str | Path) -> Path:
        """Write `SHORTLIST_FILE` into ``folder``; returns its path."""
        from safetensors.torch import save_file

        path = Path(folder) / SHORTLIST_FILE
        metadata = {
            "format": FORMAT,
            "source_vocab_size": str(self.source_vocab_size),
            "target_vocab_size": str(self.target_vocab_size),
            "settings": json.dumps(self.settings),
        }
        tensors = {"offsets": self.offsets, "targets": self.targets, "always": self.always}
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
        return path

    @classmethod
    def from_file(cls, path: str | Path) -> Shortlist:
        """Read a `SHORTLIST_FILE`; `ValueError` for a file that is not one."""
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="pt") as handle:
                metadata = handle.metadata() or {}
                if metadata.get("format") != FORMAT:
                    raise ValueError(f"format {metadata.get('format')!r}, expected {FORMAT!r}")
                tensors = {name: handle.get_tensor(name) for name in ("offsets", "targets", "always")}
        except (OSError, ValueError, KeyError, SafetensorError) as error:
            raise ValueError(
                f"{str(path)!r} is not a shortlist ({error}): build one with vanilla-transformer shortlist --model "
                "MODEL"
            ) from error
        return cls(
            **tensors,
            source_vocab_size=int(metadata["source_vocab_size"]),
            target_vocab_size=int(metadata["target_vocab_size"]),
            settings=json.loads(metadata.get("settings", "{}")),
        )

    def check_model(self, config: Any) -> None:
        """`ValueError` unless the model of ``config`` has the vocabularies this shortlist was built for."""
        sizes = (config.vocab_size, getattr(config, "decoder_vocab_size", None) or config.vocab_size)
        if sizes != (self.source_vocab_size, self.target_vocab_size):
            raise ValueError(
                f"the shortlist was built for vocabularies of {self.source_vocab_size} source and "
                f"{self.target_vocab_size} target tokens, the model has {sizes[0]} and {sizes[1]}: build one for "
                "this model with vanilla-transformer shortlist --model MODEL"
            )


def build_shortlist(
    pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
    source_vocab_size: int,
    target_vocab_size: int,
    *,
    top_k: int = DEFAULT_TOP_K,
    frequent: int = DEFAULT_FREQUENT,
    always: Iterable[int] = (),
    iterations: int = DEFAULT_ITERATIONS,
    chunk_links: int = 1 << 22,
) -> Shortlist:
    """The shortlist of a corpus of (source ids, target ids) pairs: for each source id, its ``top_k`` target ids by
    IBM Model 1's p(t | s) after ``iterations`` EM iterations (the first E-step from uniform probabilities: the
    co-occurrence counts), ids with p > 0 only; ``always``: the ``frequent`` most frequent target ids and the ids
    given (special tokens). Computed with numpy over chunks of about ``chunk_links`` (source, target) links."""
    import numpy as np
    import torch

    for name, value in (("top_k", top_k), ("frequent", frequent), ("iterations", iterations)):
        if value < 0:
            raise ValueError(f"{name}={value} is invalid: expected an integer >= 0")
    null = source_vocab_size  # the NULL source token of IBM Model 1, one per source sentence
    counted, total_pairs = np.zeros(target_vocab_size, dtype=np.int64), 0
    # the pairs in chunks of about chunk_links links; the links themselves are rebuilt per chunk when needed
    chunks: list[list[tuple[np.ndarray, np.ndarray]]] = [[]]
    links = 0
    for source, target in pairs:
        s = np.asarray([*source, null], dtype=np.int64)
        t = np.asarray(target, dtype=np.int64)
        if not len(t):
            continue
        _check_ids(s[:-1], source_vocab_size, "source")
        _check_ids(t, target_vocab_size, "target")
        counted += np.bincount(t, minlength=target_vocab_size)
        chunks[-1].append((s, t))
        links += len(s) * len(t)
        total_pairs += 1
        if links >= chunk_links:
            chunks.append([])
            links = 0
    found = [np.unique(_links(chunk, target_vocab_size)[0]) for chunk in chunks if chunk]
    keys = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    prob = np.ones(len(keys))
    for _ in range(max(iterations, 1)):
        counts = np.zeros(len(keys))
        for chunk in chunks:
            if not chunk:
                continue
            chunk_keys, groups, n_groups = _links(chunk, target_vocab_size)
            entry = np.searchsorted(keys, chunk_keys)  # each link's entry in `keys`
            p = prob[entry]
            # each target token's alignment posterior over the source tokens of its sentence (and NULL)
            norm = np.bincount(groups, weights=p, minlength=n_groups)
            counts += np.bincount(entry, weights=p / norm[groups], minlength=len(keys))
        per_source = np.bincount(keys // target_vocab_size, weights=counts, minlength=null + 1)
        prob = counts / per_source[keys // target_vocab_size]
    source_of, target_of = keys // target_vocab_size, keys % target_vocab_size
    keep = (source_of != null) & (prob > 0)
    source_of, target_of, prob = source_of[keep], target_of[keep], prob[keep]
    order = np.lexsort((target_of, -prob, source_of))  # by source, most probable first (ties: lower id)
    source_of, target_of = source_of[order], target_of[order]
    starts = np.searchsorted(source_of, np.arange(source_vocab_size + 1))
    rank = np.arange(len(source_of)) - starts[source_of]
    kept = rank < top_k
    offsets = np.searchsorted(source_of[kept], np.arange(source_vocab_size + 1))
    by_frequency = np.lexsort((np.arange(target_vocab_size), -counted))
    seen = by_frequency[: min(frequent, int((counted > 0).sum()))]
    fixed = np.unique(np.concatenate([seen, np.asarray(list(always), dtype=np.int64)]))
    _check_ids(fixed, target_vocab_size, "always")
    return Shortlist(
        offsets=torch.from_numpy(offsets.astype(np.int64)),
        targets=torch.from_numpy(target_of[kept].astype(np.int64)),
        always=torch.from_numpy(fixed.astype(np.int64)),
        source_vocab_size=source_vocab_size,
        target_vocab_size=target_vocab_size,
        settings=dict(top_k=top_k, frequent=frequent, iterations=iterations, pairs=total_pairs),
    )


def _links(
    pairs: list[tuple[np.ndarray, np.ndarray]], target_vocab_size: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Every (source token, target token) link of the (source, target) pairs as ``s * V_tgt + t`` keys, each
    link's group (the target token occurrence it belongs to, numbered within ``pairs``) and the number of
    groups."""
    import numpy as np

    keys, groups, offset = [], [], 0
    for s, t in pairs:
        keys.append((s[None, :] * target_vocab_size + t[:, None]).reshape(-1))  # (T * S,)
        groups.append(np.repeat(np.arange(offset, offset + len(t), dtype=np.int32), len(s)))
        offset += len(t)
    return np.concatenate(keys), np.concatenate(groups), offset


def _check_ids(ids: np.ndarray, size: int, side: str) -> None:
    if len(ids) and (ids.min() < 0 or ids.max() >= size):
        raise ValueError(
            f"{side} token id {int(ids.max() if ids.max() >= size else ids.min())} is outside the vocabulary "
            f"[0, {size}): tokenize the corpus with the model's tokenizer"
        )


def shortlist_path(model: str | Path) -> Path | None:
    """The shortlist file of a local folder or a Hub repo (downloaded), or None when it has none."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        path = folder / SHORTLIST_FILE
        return path if path.is_file() else None
    from transformers.utils.hub import cached_file

    try:
        found = cached_file(str(model), SHORTLIST_FILE, _raise_exceptions_for_missing_entries=False)
    except OSError:
        return None
    return Path(found) if found else None


def load_shortlist(model: str | Path) -> Shortlist:
    """The shortlist saved with a model (a folder, its CTranslate2 export or a Hub repo); `ValueError` saying how
    to build one when there is none."""
    path = shortlist_path(model)
    if path is None:
        raise ValueError(
            f"{str(model)!r} has no {SHORTLIST_FILE}: build one from the training corpus with vanilla-transformer "
            f"shortlist --model {model} (and export again for --engine ct2), or leave out --shortlist"
        )
    return Shortlist.from_file(path)


def vmap_lines(shortlist: Shortlist, source_tokens: Sequence[str], target_tokens: Sequence[str]) -> list[str]:
    """The shortlist as CTranslate2's vocabulary map: a first line ``<TAB>`` + the ``always`` tokens (an empty
    source n-gram: always candidates), then one ``source token<TAB>target tokens`` line per source token with
    candidates. Tokens with whitespace, which the format cannot hold, are left out."""

    def usable(token: str) -> bool:
        return bool(token) and not any(c.isspace() for c in token)

    def joined(ids: Iterable[int]) -> str:
        return " ".join(target_tokens[i] for i in ids if usable(target_tokens[i]))

    lines = ["\t" + joined(shortlist.always.tolist())]
    for source_id, token in enumerate(source_tokens[: shortlist.source_vocab_size]):
        candidates = shortlist.candidates(source_id)
        if candidates and usable(token):
            lines.append(f"{token}\t{joined(candidates)}")
    return lines


def shortlisted(model: Any, vocabulary: torch.Tensor) -> Any:
    """A view of the encoder-decoder ``model`` whose decoder vocabulary is ``vocabulary`` (sorted unique target
    ids, e.g. `Shortlist.for_batch`): id k of the view is ``vocabulary[k]`` (module docstring). The view shares
    every other weight with ``model`` and changes nothing in it; ``vocabulary[output]`` maps its output ids back.
    `ValueError` when ``vocabulary`` lacks a token the generation config needs (decoder start, pad, eos, forced
    tokens) or the config holds settings that name phrases of ids (`_UNMAPPED`)."""
    import torch
    from torch import nn

    size = model.config.decoder_vocab_size
    vocabulary = vocabulary.to(model.device)
    position = torch.full((size,), -1, dtype=torch.long)
    position[vocabulary.cpu()] = torch.arange(len(vocabulary))
    decoder = model.get_decoder()
    embedding = nn.Embedding.from_pretrained(
        decoder.embed_tokens.weight.detach().index_select(0, vocabulary), freeze=True
    )
    head = nn.Linear(model.config.d_model, len(vocabulary), bias=False, device="meta")
    head.weight = nn.Parameter(model.lm_head.weight.detach().index_select(0, vocabulary), requires_grad=False)
    bias = model.final_logits_bias
    view = _module_view(
        model,
        {"model": _module_view(model.model, {"decoder": _module_view(decoder, {"embed_tokens": embedding})})},
    )
    view._modules["lm_head"] = head
    if bias is not None:
        view._parameters = {
            **model._parameters,
            "final_logits_bias": nn.Parameter(bias.detach().index_select(0, vocabulary), requires_grad=False),
        }
    view.generation_config = restricted_generation_config(model.generation_config, position)
    return view


def _module_view(module: Any, children: dict[str, Any]) -> Any:
    """A shallow copy of ``module`` with some of its child modules replaced (``module`` itself unchanged)."""
    view = copy.copy(module)
    view._modules = {**module._modules, **children}
    return view


def restricted_generation_config(config: GenerationConfig, position: torch.Tensor) -> GenerationConfig:
    """``config`` with its token ids mapped to shortlist ids (``position[id]``, -1 for an id outside it): the
    decoder start, pad, bos, eos and forced tokens must be inside; suppressed tokens and bad words outside it are
    dropped (they cannot be produced anyway)."""
    restricted = copy.deepcopy(config)
    size = len(position)

    def mapped(token: int, name: str) -> int:
        found = int(position[token]) if 0 <= token < size else -1
        if found < 0:
            raise ValueError(
                f"{name}={token} is not in the shortlist's vocabulary: a shortlist keeps the special tokens; "
                "rebuild it with vanilla-transformer shortlist, or leave out --shortlist"
            )
        return found

    for name in _UNMAPPED:
        if getattr(config, name, None) is not None:
            raise ValueError(
                f"{name} in the generation config cannot be combined with a shortlist: leave one out"
            )
    for name in _SINGLE_IDS:
        value = getattr(config, name, None)
        if value is not None:
            setattr(restricted, name, mapped(value, name))
    for name in _ID_LISTS:
        value = getattr(config, name, None)
        if value is not None:
            setattr(
                restricted,
                name,
                [mapped(v, name) for v in value] if isinstance(value, list) else mapped(value, name),
            )
    for name in _OPTIONAL_IDS:
        value = getattr(config, name, None)
        if value is not None:
            setattr(restricted, name, [int(position[v]) for v in value if 0 <= v < size and position[v] >= 0])
    if config.bad_words_ids is not None:
        words = [[int(position[v]) for v in word] for word in config.bad_words_ids]
        restricted.bad_words_ids = [word for word in words if min(word) >= 0] or None
    return restricted
