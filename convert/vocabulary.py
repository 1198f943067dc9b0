"""The tokenizer of a model imported from another toolkit (fairseq, eole / OpenNMT-py, JoeyNMT) whose subwords come
from SentencePiece: written in the OPUS-MT layout, which `AutoTokenizer` loads as transformers' `MarianTokenizer`
without this package.

    source.spm, target.spm          the SentencePiece models of the source and target sides (the same file twice
                                    for a joint model)
    vocab.json                      piece -> id of the toolkit's vocabulary (the source's, with separate vocabularies)
    target_vocab.json               only with separate vocabularies: the target's
    tokenizer_config.json           MarianTokenizer and its special tokens

That is the toolkit's own pipeline: SentencePiece cuts the text into pieces, the toolkit's vocabulary (not the
SentencePiece model's ids) gives each piece its id, a piece missing from the vocabulary becomes the unknown token,
and the end-of-sequence token is appended to the source and to the labels; decoding joins the pieces with
SentencePiece. A toolkit whose inputs differ from that (no end-of-sequence token on the source, a
beginning-of-sequence token) needs another layout.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from transformers import MarianTokenizer

logger = logging.getLogger(__name__)

SOURCE_SPM = "source.spm"
TARGET_SPM = "target.spm"
VOCAB = "vocab.json"
TARGET_VOCAB = "target_vocab.json"


def _piece_ids(vocab: Sequence[str], side: str) -> dict[str, int]:
    """{piece: id} for the vocabulary list `vocab` (id = position); a piece listed twice has no single id."""
    ids: dict[str, int] = {}
    for index, piece in enumerate(vocab):
        if piece in ids:
            raise ValueError(
                f"the {side} vocabulary lists {piece!r} twice (ids {ids[piece]} and {index}): a piece needs one id"
            )
        ids[piece] = index
    return ids


def _check_sentencepiece(path: Path, ids: dict[str, int], side: str) -> None:
    """Raise `ValueError` if `path` is not a SentencePiece model; log how many of its pieces the vocabulary lacks
    (those become the unknown token, as in the toolkit)."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.Load(str(path))
    except (OSError, RuntimeError) as error:
        raise ValueError(f"{path} is not a SentencePiece model ({error})") from error
    pieces = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
    missing = [
        piece
        for i, piece in enumerate(pieces)
        if piece not in ids and not (processor.IsControl(i) or processor.IsUnknown(i))
    ]
    if missing:
        logger.info(
            "%d of the %d pieces of the %s SentencePiece model are not in the vocabulary: they encode as the "
            "unknown token (e.g. %s)",
            len(missing),
            len(pieces),
            side,
            ", ".join(repr(piece) for piece in missing[:5]),
        )


def write_sentencepiece_tokenizer(
    out_dir: str | Path,
    source_spm: str | Path,
    source_vocab: Sequence[str],
    target_spm: str | Path | None = None,
    target_vocab: Sequence[str] | None = None,
    *,
    unk_token: str = "<unk>",
    eos_token: str = "</s>",
    pad_token: str = "<pad>",
    model_max_length: int = 1024,
) -> MarianTokenizer:
    """Write the OPUS-MT layout into `out_dir` and return the tokenizer loaded back from it.

    `source_vocab` / `target_vocab` list the toolkit's pieces in id order (special tokens included, where the
    toolkit puts them); `target_spm` None = the source's model, `target_vocab` None or equal to the source's = one
    joint vocabulary. The special tokens must be in every vocabulary. Raises `ValueError` for a file that is not a
    SentencePiece model, a missing special token or a piece listed twice.
    """
    out_dir = Path(out_dir)
    source_spm = Path(source_spm)
    target_spm = Path(target_spm) if target_spm is not None else source_spm
    separate = target_vocab is not None and list(target_vocab) != list(source_vocab)
    sides = {"source": _piece_ids(source_vocab, "source")}
    if separate:
        assert target_vocab is not None
        sides["target"] = _piece_ids(target_vocab, "target")
    for side, ids in sides.items():
        absent = [token for token in (unk_token, eos_token, pad_token) if token not in ids]
        if absent:
            raise ValueError(
                f"the {side} vocabulary has no {', '.join(map(repr, absent))}: the special tokens "
                f"must be pieces of every vocabulary"
            )
    _check_sentencepiece(source_spm, sides["source"], "source")
    _check_sentencepiece(target_spm, sides.get("target", sides["source"]), "target")

    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source_spm, out_dir / SOURCE_SPM)
    shutil.copyfile(target_spm, out_dir / TARGET_SPM)
    (out_dir / VOCAB).write_text(json.dumps(sides["source"], ensure_ascii=False, indent=0), encoding="utf-8")
    options = {}
    if separate:
        target_file = out_dir / TARGET_VOCAB
        target_file.write_text(json.dumps(sides["target"], ensure_ascii=False, indent=0), encoding="utf-8")
        options = {"separate_vocabs": True, "target_vocab_file": str(target_file)}
    tokenizer = MarianTokenizer(
        source_spm=str(out_dir / SOURCE_SPM),
        target_spm=str(out_dir / TARGET_SPM),
        vocab=str(out_dir / VOCAB),
        unk_token=unk_token,
        eos_token=eos_token,
        pad_token=pad_token,
        model_max_length=model_max_length,
        **options,
    )
    tokenizer.save_pretrained(out_dir)
    return MarianTokenizer.from_pretrained(out_dir)
