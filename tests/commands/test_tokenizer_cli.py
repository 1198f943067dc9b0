"""The tokenizer command: `vanilla-transformer train-tokenizer` trains and saves a tokenizer (and refuses a missing
corpus with exit code 2). The tokenizer itself is tested in tests/tokenizer/test_tokenizer.py."""

from __future__ import annotations

import importlib
from pathlib import Path

from conftest import han_characters_per_token
from transformers import AutoTokenizer

from vanilla_transformer.tokenizer import EOS_ID

ZH_EN = Path(__file__).resolve().parents[2] / "data" / "bible.zh-en.tsv.xz"


def _load_script(name: str):
    return importlib.import_module(f"vanilla_transformer.commands.{name}")


def test_train_tokenizer_cli(tmp_path, capsys):
    cli = _load_script("train_tokenizer")
    out = tmp_path / "tok"
    rc = cli.main(
        [str(ZH_EN), "--max_lines", "300", "--vocab_size", "1200", "--no_progress", "--output", str(out)]
    )
    assert rc == 0 and (out / "tokenizer.json").exists()
    loaded = AutoTokenizer.from_pretrained(out)
    assert len(loaded) == 1200 and loaded.eos_token_id == EOS_ID
    han = tmp_path / "han"
    assert (
        cli.main(
            [
                str(ZH_EN),
                "--max_lines",
                "300",
                "--vocab_size",
                "1200",
                "--no_progress",
                "--han_characters",
                "--output",
                str(han),
            ]
        )
        == 0
    )
    assert max(han_characters_per_token(AutoTokenizer.from_pretrained(han))) == 1
    assert max(han_characters_per_token(loaded)) > 1
    assert cli.main([str(tmp_path / "missing.tsv"), "--output", str(out), "--no_progress"]) == 2
    assert "missing.tsv" in capsys.readouterr().err
