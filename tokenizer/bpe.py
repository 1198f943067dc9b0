"""Joint source-target BPE tokenizer (one vocabulary, so that embeddings can be tied), wrapped for transformers.

Pipeline (see docs/tokenizer.md for the measurements behind the choices):

* **Normaliser** (`normalize_text`): Unicode NFKC, then U+2581 "▁" to a space, then every run of
  whitespace (including tabs, newlines and U+3000) to one space, then leading/trailing spaces stripped.
  Decoding returns exactly this normal form: ``decode(encode(x)) == normalize_text(x)``.
* **Pre-tokeniser**: spaces become "▁" and one "▁" is prepended to the text (SentencePiece's Metaspace),
  then the text is cut into pieces that BPE never merges across: a run of Han characters, a run of other
  letters (with combining marks), a run of digits, or a single other character (punctuation, symbol,
  emoji); each piece keeps the "▁" that preceded it. Chinese has no spaces, so its pieces carry no "▁"
  and decoding inserts no space between Chinese characters; a space in the input is restored exactly
  where it was. With ``han_characters=True`` every Han character is a piece of its own (no
  multi-character Chinese tokens).
* **Model** (``kind="char"``, the default): character-level BPE with byte fallback. The 256 byte tokens
  ``<0x00>`` ... ``<0xFF>`` are in the vocabulary, so a character never seen in training is spelled as its
  UTF-8 bytes instead of `<unk>`; decoding re-assembles the bytes. ``kind="byte"`` gives GPT-2-style
  byte-level BPE over the same pieces, kept for comparison.
* **Post-processor**: ``</s>`` appended to every sequence (``$A </s>``; pairs ``$A </s> $B </s>``).
  No ``<s>`` is added: it is the decoder start token of the seq2seq model.

Special tokens have fixed ids: ``<pad>``=0, ``<unk>``=1, ``<s>``=2, ``</s>``=3; the byte tokens follow at
4..259, then the learned pieces.

**Denoising tokens** (``denoising_tokens=True``, for the pretraining objectives): BERT's ``<mask>`` and T5's 100
sentinels ``<extra_id_0>`` ... ``<extra_id_99>`` are reserved right after the fixed part (the special tokens and,
for ``kind="char"``, the byte tokens): ``<mask>``=260 and ``<extra_id_i>``=261+i for ``kind="char"`` (4 and 5+i
for ``kind="byte"``), counted in ``vocab_size``; the learned pieces follow them. A tokenizer with them sets
``mask_token`` and lists the sentinels as extra special tokens (decoding with ``skip_special_tokens`` drops
them), and recognises special tokens written in the text (``"Paris is the <mask> of France."``), as BERT's and
T5's tokenizers do. Without them (the default, and every tokenizer trained before they existed) the layout is
the one above and special tokens in the text are split like any other text. Unlike T5, whose ``<extra_id_0>`` is
the last id of the vocabulary, the ids do not depend on ``vocab_size``; code finds them by name
(`sentinel_token_ids`, ``tokenizer.mask_token_id``).
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

logger = logging.getLogger(__name__)

PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN)  # index == id
MASK_TOKEN = "<mask>"
NUM_SENTINELS = 100  # T5's extra_ids
SENTINEL_TOKENS = tuple(f"<extra_id_{i}>" for i in range(NUM_SENTINELS))
DENOISING_TOKENS = (MASK_TOKEN, *SENTINEL_TOKENS)  # in id order, after the fixed part (module docstring)

SPACE_MARKER = "\u2581"  # "▁"
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))
# the joint BPE a training run trains for itself; 4,000 and 16,000 both scored lower on unseen books (docs/quality.md)
DEFAULT_VOCAB_SIZE = 8000
DEFAULT_MIN_FREQUENCY = 2
DEFAULT_MODEL_MAX_LENGTH = 512

TokenizerKind = Literal["char", "byte"]

# A Han piece: a run of Han characters (BPE learns Chinese words inside it), or with han_characters one character.
_HAN_RUN, _HAN_CHARACTER = r"\p{Han}+", r"\p{Han}"


def _piece_pattern(han: str) -> str:
    """A piece is a Han piece (``han``), a run of letters/marks/other non-space characters, a run of digits, or
    one punctuation or symbol character (emoji included); each may start with the space marker. With
    behavior="isolated", text between matches (only runs of markers or whitespace can be) is kept as pieces
    too, so splitting never drops or adds characters. The order of the alternatives is tuned for speed."""
    return (
        rf"{SPACE_MARKER}?{han}"
        rf"|{SPACE_MARKER}?[^\s{SPACE_MARKER}\p{{Han}}\p{{P}}\p{{S}}\p{{N}}]+"
        rf"|{SPACE_MARKER}?\p{{N}}+"
        rf"|{SPACE_MARKER}?[\p{{P}}\p{{S}}]"
    )


# Whitespace to collapse into one space: runs of two or more, and every single non-space whitespace
# character that NFKC leaves alone (NFKC already maps U+00A0, U+2000-U+200A, U+3000 ... to a space).
_WHITESPACE_PATTERN = r"\s{2,}|[\t\n\v\f\r\x{85}\x{1680}\x{2028}\x{2029}]"


def build_normalizer() -> normalizers.Normalizer:
    """NFKC, "▁" -> " ", whitespace runs -> " ", strip. See the module docstring."""
    return normalizers.Sequence(
        [
            normalizers.NFKC(),
            normalizers.Replace(SPACE_MARKER, " "),
            normalizers.Replace(Regex(_WHITESPACE_PATTERN), " "),
            normalizers.Strip(),
        ]
    )


_NORMALIZER = build_normalizer()


def normalize_text(text: str) -> str:
    """The normal form that decoding reproduces: ``tokenizer.decode(tokenizer(text).input_ids,
    skip_special_tokens=True) == normalize_text(text)``."""
    return _NORMALIZER.normalize_str(text)


def _build_pipeline(kind: TokenizerKind, model: models.Model, han_characters: bool = False) -> Tokenizer:
    tok = Tokenizer(model)
    tok.normalizer = build_normalizer()
    han = _HAN_CHARACTER if han_characters else _HAN_RUN
    if kind == "char":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Metaspace(replacement=SPACE_MARKER, prepend_scheme="first", split=False),
                pre_tokenizers.Split(Regex(_piece_pattern(han)), behavior="isolated"),
            ]
        )
        tok.decoder = decoders.Sequence(
            [
                decoders.ByteFallback(),
                decoders.Metaspace(replacement=SPACE_MARKER, prepend_scheme="first", split=False),
            ]
        )
    elif kind == "byte":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                # only Han pieces are cut here; ByteLevel's GPT-2 regex does the rest
                pre_tokenizers.Split(Regex(han), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
    else:
        raise ValueError(f"kind={kind!r} is not supported; use 'char' (BPE with byte fallback) or 'byte'.")
    return tok


def _check_vocab_size(vocab_size: int, kind: TokenizerKind, denoising_tokens: bool = False) -> None:
    n_special = len(SPECIAL_TOKENS) + (len(DENOISING_TOKENS) if denoising_tokens else 0)
    minimum = n_special + 256 + 1
    if not isinstance(vocab_size, int) or vocab_size < minimum:
        what = "256 byte-fallback tokens" if kind == "char" else "the 256-byte alphabet"
        raise ValueError(
            f"vocab_size={vocab_size!r} is too small: the {n_special} special tokens and {what} "
            f"alone take {minimum - 1} ids. Use vocab_size of at least {minimum} (in practice a few thousand, "
            f"e.g. {DEFAULT_VOCAB_SIZE})."
        )


def _counting(texts: Iterator[str], counter: list[int]) -> Iterator[str]:
    for text in texts:
        counter[0] += 1
        yield text


def frequent_characters(texts: Iterable[str], limit: int) -> list[str]:
    """The ``limit`` most frequent characters of the normalised texts (spaces counted as the space marker, as
    the pre-tokeniser sees them), ties broken by code point: the alphabet of a ``kind="char"`` tokenizer."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_NORMALIZER.normalize_str(text).replace(" ", SPACE_MARKER))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [char for char, _ in ranked[:limit]]


def train_bpe_tokenizer(
    corpus: Any = None,
    *,
    files: Sequence[str | os.PathLike] = (),
    columns: Sequence[int | str] | None = None,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    min_frequency: int = DEFAULT_MIN_FREQUENCY,
    kind: TokenizerKind = "char",
    limit_alphabet: int | Literal["auto"] | None = "auto",
    max_lines: int | None = None,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    show_progress: bool = False,
    denoising_tokens: bool = False,
    han_characters: bool = False,
) -> PreTrainedTokenizerFast:
    """Train one joint BPE vocabulary on all given texts and return it as a transformers fast tokenizer.

    Args:
        corpus: the training text: a file path (``str`` or ``os.PathLike``), a list of ``pathlib.Path``,
            a `datasets.Dataset`, or any iterable of strings. Files: one text per line; ``.tsv`` files
            contribute every (selected) tab-separated column, so both sides of a parallel corpus land in
            the same vocabulary; ``.xz``/``.gz``/``.bz2`` are decompressed.
        files: more file paths (strings allowed), read before ``corpus`` texts.
        columns: TSV column indices (ints) and/or dataset column names (strs) to read; default all.
        vocab_size: total vocabulary size, including the 4 special tokens and (``kind="char"``) the 256
            byte tokens. The learned vocabulary may be smaller if the corpus runs out of merges.
        min_frequency: a merge must occur at least this often to be learned.
        kind: ``"char"`` (character BPE with byte fallback; default) or ``"byte"`` (byte-level BPE).
        limit_alphabet: ``kind="char"`` only: keep at most this many distinct characters (the most
            frequent) as base tokens; rarer characters are spelled with byte tokens. ``"auto"`` (default):
            a quarter of ``vocab_size`` (less if the vocabulary is tiny), which leaves most of the vocabulary for merges even for Chinese's
            thousands of characters (docs/tokenizer.md). ``None`` keeps every character.
        max_lines: read at most this many lines of each file.
        model_max_length: saved as the tokenizer's default truncation length.
        show_progress: show the `tokenizers` trainer's progress bars (for scripts; off in library use).
        denoising_tokens: also reserve ``<mask>`` and the sentinels ``<extra_id_0>`` ... ``<extra_id_99>`` at
            fixed ids (module docstring), for masked-LM and span-corruption training; they count in ``vocab_size``.
        han_characters: every Han character is a piece of its own, so BPE learns no multi-character Chinese
            tokens (Chinese is read character by character; the merges go to the other languages). Default:
            runs of Han characters are pieces, inside which BPE learns words and set phrases.

    Returns:
        A `PreTrainedTokenizerFast` with ``pad/unk/bos/eos`` tokens at ids 0/1/2/3, ``</s>`` appended by
        the post-processor, and ``model_input_names == ["input_ids", "attention_mask"]``.

    Raises:
        FileNotFoundError: a corpus file does not exist.
        ValueError: bad ``vocab_size``/``min_frequency``/``kind``, an unreadable file, an empty corpus, or a
            vocabulary too small for the corpus's alphabet.
    """
    # the corpus readers import `datasets` (the train extra); loading a saved tokenizer does not need them
    from .corpus import iter_corpus_texts

    if kind not in ("char", "byte"):
        raise ValueError(f"kind={kind!r} is not supported; use 'char' (BPE with byte fallback) or 'byte'.")
    _check_vocab_size(vocab_size, kind, denoising_tokens)
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency!r} must be an integer >= 1 (e.g. 2).")
    specials = SPECIAL_TOKENS + (DENOISING_TOKENS if denoising_tokens else ())
    n_special = len(specials)
    if limit_alphabet == "auto":
        limit_alphabet = (
            min(vocab_size // 4, vocab_size - n_special - len(BYTE_TOKENS)) if kind == "char" else None
        )
    if limit_alphabet is not None and (
        kind != "char" or not isinstance(limit_alphabet, int) or limit_alphabet < 1
    ):
        raise ValueError(
            f"limit_alphabet={limit_alphabet!r} is only valid as a positive integer (or 'auto') with "
            "kind='char'; pass None otherwise."
        )
    if corpus is None and not files:
        raise ValueError("No corpus given: pass texts, a file path, a datasets.Dataset, or files=[...].")

    if kind == "char":
        extra = {}
        if limit_alphabet is not None:
            # a one-shot iterator: it is read twice below
            if corpus is not None and hasattr(corpus, "__next__"):
                corpus = list(corpus)
            # `tokenizers` keeps the limit_alphabet most frequent characters but breaks ties at the cut-off in
            # hash-map order, which differs between runs (two trainings on the same corpus gave different ids);
            # choosing them here, ties broken by code point, and passing them as the initial alphabet makes
            # the training reproducible.
            alphabet = frequent_characters(
                iter_corpus_texts(corpus, files=files, columns=columns, max_lines=max_lines), limit_alphabet
            )
            extra = {"limit_alphabet": limit_alphabet, "initial_alphabet": alphabet}
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size - len(BYTE_TOKENS),
            min_frequency=min_frequency,
            special_tokens=list(specials),
            show_progress=show_progress,
            **extra,
        )
    else:
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(specials),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=show_progress,
        )
    backend = _build_pipeline(kind, models.BPE(unk_token=UNK_TOKEN), han_characters)
    n_texts = [0]
    texts = _counting(iter_corpus_texts(corpus, files=files, columns=columns, max_lines=max_lines), n_texts)
    backend.train_from_iterator(texts, trainer=trainer)
    if n_texts[0] == 0:
        raise ValueError(
            "The corpus is empty: it yielded no non-empty text"
            + (f" (files: {[str(f) for f in files]}, columns: {columns})" if files else "")
            + ". Pass files/texts that contain text, or check `columns`."
        )

    trained = json.loads(backend.to_str())["model"]
    vocab: dict[str, int] = trained["vocab"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    if kind == "char":
        learned = len(vocab)
        if learned > vocab_size - len(BYTE_TOKENS):
            alphabet = learned - len(merges) - n_special
            raise ValueError(
                f"vocab_size={vocab_size} is smaller than the corpus alphabet: {n_special} special tokens + "
                f"{len(BYTE_TOKENS)} byte tokens + {alphabet} distinct characters = "
                f"{n_special + len(BYTE_TOKENS) + alphabet}. Raise vocab_size well above that (so that BPE "
                "can learn merges), or pass limit_alphabet=N to keep only the N most frequent characters "
                "(the rest are spelled as bytes)."
            )
        # Re-number: specials 0..3, byte tokens 4..259, denoising tokens (if any) and the learned pieces after
        # them in training order (the trainer gave the special tokens the first ids).
        new_vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
        for b in BYTE_TOKENS:
            new_vocab[b] = len(new_vocab)
        for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            if tok not in new_vocab:
                new_vocab[tok] = len(new_vocab)
        model = models.BPE(vocab=new_vocab, merges=merges, unk_token=UNK_TOKEN, byte_fallback=True)
        backend = _build_pipeline(kind, model, han_characters)
    fixed = len(BYTE_TOKENS) if kind == "char" else 0
    expected = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    expected.update(
        {tok: len(SPECIAL_TOKENS) + fixed + i for i, tok in enumerate(specials[len(SPECIAL_TOKENS) :])}
    )
    for tok, i in expected.items():
        if backend.token_to_id(tok) != i:
            raise RuntimeError(f"special token {tok} got id {backend.token_to_id(tok)}, expected {i}")
    logger.info(
        "Trained %s BPE tokenizer: %d tokens from %d texts", kind, backend.get_vocab_size(), n_texts[0]
    )
    return wrap_backend_tokenizer(backend, model_max_length=model_max_length)


def wrap_backend_tokenizer(
    backend: Tokenizer, model_max_length: int = DEFAULT_MODEL_MAX_LENGTH
) -> PreTrainedTokenizerFast:
    """Wrap a `tokenizers.Tokenizer` built by this module as a transformers fast tokenizer.

    The result saves to a folder that ``AutoTokenizer.from_pretrained`` loads with no project code. When the
    vocabulary has the denoising tokens (module docstring), ``<mask>`` is the mask token, the sentinels are extra
    special tokens and special tokens written in the text are recognised.
    """
    denoising = all(backend.token_to_id(t) is not None for t in DENOISING_TOKENS)
    extra = dict(mask_token=MASK_TOKEN, extra_special_tokens=list(SENTINEL_TOKENS)) if denoising else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **extra,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        add_bos_token=False,
        add_eos_token=True,
        model_input_names=["input_ids", "attention_mask"],
        clean_up_tokenization_spaces=False,
        split_special_tokens=not denoising,
        model_max_length=model_max_length,
        padding_side="right",
        truncation_side="right",
    )


def sentinel_token_ids(tokenizer) -> list[int]:
    """The ids of ``<extra_id_0>`` ... ``<extra_id_99>`` in ``tokenizer``, in sentinel order.

    Raises:
        ValueError: the tokenizer has no sentinels (it was trained without ``denoising_tokens``), saying how to
            get one that has them.
    """
    vocab = tokenizer.get_vocab()
    if missing := [t for t in SENTINEL_TOKENS if t not in vocab]:
        raise ValueError(
            f"The tokenizer has no T5 sentinel tokens ({missing[0]} is missing), which span corruption needs. "
            "Train one with train_bpe_tokenizer(..., denoising_tokens=True), or leave --tokenizer unset so that "
            "a span-corruption or masked-LM run trains one with them."
        )
    return [vocab[t] for t in SENTINEL_TOKENS]
