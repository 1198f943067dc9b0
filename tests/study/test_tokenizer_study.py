"""The tokenizer study (`python -m studies.tokenizer`) on a tiny slice: both tokenizers trained, the table of tokens
per sentence and the encode-speed ratios printed. No timing is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from studies import tokenizer

ZH_EN = Path(__file__).resolve().parents[2] / "data" / "bible.zh-en.tsv.xz"


def test_tokenizer_study_runs_on_a_tiny_slice(capsys):
    pytest.importorskip("sentencepiece")
    assert tokenizer.main([str(ZH_EN), "--max_lines", "150", "--vocab_size", "1200", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "ratio vs SentencePiece" in out and "tokens per sentence" in out
