"""`train --init_from` a converted multilingual model (a tiny NLLB-200, helpers.multilingual) on one pair: the run
keeps the multilingual tokenizer and its language codes, marks sources and labels with the data's languages
(en -> de from the file name), saves them as the tokenizer's defaults, and the adapted pair's held-out loss falls."""

from __future__ import annotations

import lzma

import torch
from conftest import ROOT
from helpers.multilingual import nllb_folder

from vanilla_transformer.commands.train import main as train_command
from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint
from vanilla_transformer.inference import load_model_and_tokenizer
from vanilla_transformer.inference.languages import model_languages
from vanilla_transformer.tokenizer.loading import load_tokenizer


def english_german(count: int) -> list[tuple[str, str]]:
    """The first ``count`` (English, German) verses of the shipped corpus, cut to 60 characters (the tiny model has
    64 positions)."""
    with lzma.open(ROOT / "data" / "bible.de-en.tsv.xz", "rt", encoding="utf-8") as file:
        rows = [line.rstrip("\n").split("\t")[:2] for _, line in zip(range(count), file)]
    return [(en[:60], de[:60]) for de, en in rows]


def held_out_loss(folder, pairs: list[tuple[str, str]]) -> float:
    """The mean token cross-entropy of the model in ``folder`` on English -> German ``pairs``."""
    model, tokenizer = load_model_and_tokenizer(str(folder), dtype="float32")
    tokenizer.src_lang, tokenizer.tgt_lang = "eng_Latn", "deu_Latn"
    batch = tokenizer(
        [s for s, _ in pairs], text_target=[t for _, t in pairs], padding=True, return_tensors="pt"
    )
    labels = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    with torch.no_grad():
        return float(
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
        )


def test_finetuning_keeps_the_languages_and_adapts_the_pair(tmp_path):
    folder = convert_m2m100_checkpoint(nllb_folder(tmp_path), tmp_path / "converted")
    pairs = english_german(232)
    data = tmp_path / "mine.en-de.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in pairs[:200]), encoding="utf-8")
    out = tmp_path / "out"
    options = ["--valid_size", "20", "--test_size", "10", "--split_by", "blocks", "--max_tokens", "512"]
    options += ["--max_steps", "30", "--max_minutes", "0", "--eval_every", "30", "--bleu_samples", "0"]
    options += [
        "--test_beams",
        "1",
        "--report_to",
        "none",
        "--num_threads",
        "1",
        "--tune_cpu_allocator",
        "false",
    ]
    options += ["--max_length", "60", "--learning_rate", "3e-3", "--warmup_steps", "5"]
    assert (
        train_command(["--data", str(data), "--init_from", str(folder), "--output_dir", str(out), *options])
        == 0
    )
    tokenizer = load_tokenizer(out)
    languages = model_languages(tokenizer)
    assert languages is not None and len(languages.codes) == 202
    assert (tokenizer.src_lang, tokenizer.tgt_lang) == ("eng_Latn", "deu_Latn")
    # the labels training read: the target language's token first, as transformers' NllbTokenizer marks them
    labels = tokenizer(text_target=pairs[0][1])["input_ids"]
    assert labels[0] == tokenizer.convert_tokens_to_ids("deu_Latn")
    held_out = pairs[200:]
    before, after = held_out_loss(folder, held_out), held_out_loss(out, held_out)
    assert after < before - 0.5, (before, after)
