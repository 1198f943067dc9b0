"""Tiny multilingual models built from configs in milliseconds, with real tokenizers: SentencePiece models trained
on a few lines of several languages, wrapped as transformers' `NllbTokenizer`, `M2M100Tokenizer` and a
multi-target `MarianTokenizer` with separate source and target vocabularies; the transformers models
(`M2M100ForConditionalGeneration`, `MarianMTModel`) saved with them as a downloaded checkpoint would be."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import sentencepiece
import torch
from transformers import (
    AutoTokenizer,
    M2M100Config,
    M2M100ForConditionalGeneration,
    M2M100Tokenizer,
    MarianConfig,
    MarianMTModel,
    MarianTokenizer,
)
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES as NLLB_CODES

# one sentence in each of six languages and scripts, the SentencePiece training text and the tokenizer sample
SAMPLE = [
    "Hello world, how are you today?",
    "Bonjour le monde, comment allez-vous aujourd'hui ?",
    "Hallo Welt, wie geht es dir heute?",
    "Hola mundo, ¿cómo estás hoy?",
    "你好，世界，你今天好吗？",
    "Привет, мир, как ты сегодня?",
]
# three target languages in each model's codes
NLLB_TARGETS = ("fra_Latn", "deu_Latn", "zho_Hans")
M2M100_TARGETS = ("fr", "de", "zh")
MARIAN_TARGETS = ("fra", "deu", "spa")


def train_sentencepiece(path: Path, lines: list[str], vocab_size: int, special_ids: bool = True) -> Path:
    """A BPE SentencePiece model of ``lines`` written to ``path``; ``special_ids``: fairseq's ids (<s> 0, <pad> 1,
    </s> 2, <unk> 3), else SentencePiece's defaults (<unk> 0, <s> 1, </s> 2, no pad; Marian's)."""
    model = io.BytesIO()
    ids: dict[str, Any] = dict(bos_id=0, pad_id=1, eos_id=2, unk_id=3) if special_ids else {}
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 8),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        minloglevel=2,
        **ids,
    )
    path.write_bytes(model.getvalue())
    return path


# the sizes of every tiny model here (M2M100Config's and MarianConfig's names): 2 + 2 layers of width 16, 64
# positions, no dropout
TINY: dict[str, Any] = dict(
    d_model=16,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    max_position_embeddings=64,
    dropout=0.0,
    attention_dropout=0.0,
    activation_dropout=0.0,
)


def m2m100_values(vocab_size: int, seed: int) -> dict:
    """A tiny M2M100Config's values (`TINY`, pre-LN) over ``vocab_size`` tokens."""
    return dict(
        vocab_size=vocab_size,
        **TINY,
        activation_function="relu" if seed % 2 else "gelu",
        scale_embedding=bool(seed % 2),
        # tied embeddings (NLLB-200's), or separate encoder, decoder and output matrices
        tie_word_embeddings=bool(seed % 2),
    )


def _m2m100_model(vocab_size: int, seed: int) -> M2M100ForConditionalGeneration:
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(M2M100Config(**m2m100_values(vocab_size, seed))).eval()
    randomize(model)
    return model


def randomize(model: torch.nn.Module) -> None:
    """Weights of unit-variance outputs instead of transformers' small init (under which a random model's outputs
    barely depend on its input, nor on the target language), and non-trivial LayerNorms, in place."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.1)
                module.bias.normal_(0.0, 0.1)
            elif isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, module.in_features**-0.5)
            elif isinstance(module, torch.nn.Embedding):
                module.weight.normal_(0.0, 1.0)


def nllb_folder(root: Path) -> Path:
    """A saved tiny NLLB-200 (`M2M100ForConditionalGeneration` with an `NllbTokenizer` of all 202 FLORES-200
    codes) in ``root``/nllb."""
    folder = root / "nllb"
    folder.mkdir(parents=True)
    train_sentencepiece(folder / "sentencepiece.bpe.model", SAMPLE, 120)
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "NllbTokenizer", "additional_special_tokens": NLLB_CODES})
    )
    tokenizer = AutoTokenizer.from_pretrained(folder, src_lang="eng_Latn")
    tokenizer.save_pretrained(folder)
    _m2m100_model(len(tokenizer), seed=11).save_pretrained(folder)
    return folder


def m2m100_folder(root: Path) -> Path:
    """A saved tiny M2M100 (`M2M100ForConditionalGeneration` with an `M2M100Tokenizer` of its 100 codes) in
    ``root``/m2m100."""
    folder = root / "m2m100"
    folder.mkdir(parents=True)
    spm = train_sentencepiece(folder / "sentencepiece.bpe.model", SAMPLE, 120)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(spm))
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = M2M100Tokenizer(vocab_file=str(folder / "vocab.json"), spm_file=str(spm), src_lang="en")
    tokenizer.save_pretrained(folder)
    vocab_size = max(tokenizer.lang_code_to_id.values()) + 1
    _m2m100_model(vocab_size, seed=2).save_pretrained(folder)
    return folder


def marian_multi_target_folder(root: Path) -> Path:
    """A saved tiny multi-target OPUS-MT model (`MarianMTModel`) with separate source and target vocabularies and
    SentencePiece models, its source vocabulary holding the target tokens ``>>fra<<``, ``>>deu<<``, ``>>spa<<``,
    in ``root``/marian."""
    folder = root / "marian"
    folder.mkdir(parents=True)
    vocabularies = {}
    for name, lines, size in (("source", SAMPLE[:4], 90), ("target", SAMPLE[1:4] + SAMPLE[4:], 110)):
        spm = train_sentencepiece(folder / f"{name}.spm", lines, size, special_ids=False)
        processor = sentencepiece.SentencePieceProcessor(model_file=str(spm))
        pieces = [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
        # </s>, <unk> and <pad> at the same ids in both vocabularies (Marian's config has one pad id)
        tokens = ["</s>", "<unk>", "<pad>"] + (
            [f">>{code}<<" for code in MARIAN_TARGETS] if name == "source" else []
        )
        vocabularies[name] = {token: i for i, token in enumerate(tokens + pieces)}
    (folder / "vocab.json").write_text(json.dumps(vocabularies["source"]))
    (folder / "target_vocab.json").write_text(json.dumps(vocabularies["target"]))
    tokenizer = MarianTokenizer(
        str(folder / "source.spm"),
        str(folder / "target.spm"),
        str(folder / "vocab.json"),
        target_vocab_file=str(folder / "target_vocab.json"),
        separate_vocabs=True,
    )
    tokenizer.save_pretrained(folder)
    source_size, target_size = len(vocabularies["source"]), len(vocabularies["target"])
    pad = 2
    config = MarianConfig(
        vocab_size=source_size,
        decoder_vocab_size=target_size,
        share_encoder_decoder_embeddings=False,
        **TINY,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        activation_function="swish",
    )
    torch.manual_seed(3)
    model = MarianMTModel(config).eval()
    # OPUS-MT models never emit pad
    model.generation_config.bad_words_ids = [[pad]]
    randomize(model)
    model.save_pretrained(folder)
    return folder
