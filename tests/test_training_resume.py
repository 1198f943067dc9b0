"""Resuming: a run interrupted after k updates and resumed equals an uninterrupted run exactly (CPU, same
data order, dropout RNG, learning rate and step); corrupted checkpoints and changed options are clear errors."""

from __future__ import annotations

import pytest
import torch
from conftest import small_run
from safetensors.torch import load_file

from training import train
from training.checkpoint import CheckpointError


def test_resume_continues_exactly_and_corruption_is_a_clear_error(tokenizer_dir, tmp_path):
    # the cooldown (last quarter of 6 updates) starts after the cut: the resumed update 6 is cooled down
    common = dict(tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"), cooldown=0.25, max_steps=6)
    full = train(small_run(tmp_path / "full", **common))
    train(small_run(tmp_path / "cut", **{**common, "max_steps": 3}))
    resumed = train(small_run(tmp_path / "cut", **common, resume=True))
    assert [h["step"] for h in resumed.history] == [4, 5, 6]
    for a, b in zip(full.history[3:], resumed.history):
        assert a["loss"] == b["loss"] and a["lr"] == b["lr"], (a, b)  # exact: same data order, RNG, LR
    final_full = load_file(tmp_path / "full" / "checkpoints" / "checkpoint-6" / "model.safetensors")
    final_cut = load_file(tmp_path / "cut" / "checkpoints" / "checkpoint-6" / "model.safetensors")
    assert all(torch.equal(final_full[k], final_cut[k]) for k in final_full)

    opt = tmp_path / "cut" / "checkpoints" / "checkpoint-6" / "optimizer.bin"
    opt.write_bytes(opt.read_bytes()[:100])
    with pytest.raises(
        CheckpointError, match=r"checkpoint-6.*truncated or corrupted: optimizer.bin has 100 bytes"
    ):
        train(small_run(tmp_path / "cut", **{**common, "max_steps": 7}, resume=True))
    with pytest.raises(ValueError, match="already has 1 checkpoint.*--resume"):
        train(small_run(tmp_path / "full", **common))
    with pytest.raises(ValueError, match="Cannot resume with different options.*--seed"):
        train(small_run(tmp_path / "full", **{**common, "max_steps": 7}, seed=5, resume=True))


def test_token_budget_smaller_than_a_sentence_is_a_clear_error_or_counted_skip(tokenizer_dir, tmp_path):
    run = dict(tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"), max_tokens=40, max_steps=1)
    with pytest.raises(
        ValueError, match=r"max_tokens=40 is smaller than \d+ example.*Raise --max_tokens to at least"
    ):
        train(small_run(tmp_path / "a", **run))
    result = train(small_run(tmp_path / "b", **run, skip_too_long=True))
    assert "training pairs longer than --max_tokens=40" in result.data_summary and result.step == 1


def test_budget_dropout_rule_of_the_small_preset():
    from training.presets import budget_dropout

    assert budget_dropout("small", None, 25) is None  # the preset's own dropout (0.0)
    assert budget_dropout("small", None, 59.9) is None
    assert budget_dropout("small", None, 60) == 0.1 and budget_dropout("small", None, 120) == 0.1
    assert budget_dropout("small", None, None) is None  # --max_steps / --max_epochs budgets: no rule
    assert budget_dropout("small", 0.0, 120) == 0.0 and budget_dropout("small", 0.3, 25) == 0.3  # --dropout wins
    assert budget_dropout("base", None, 600) is None  # presets without the rule


def test_long_budget_dropout_is_applied_and_kept_on_resume(tokenizer_dir, tmp_path, monkeypatch):
    from training.presets import PRESETS

    monkeypatch.setitem(
        PRESETS["tiny"], "recipe", {**PRESETS["tiny"]["recipe"], "long_budget_minutes": 1.0, "long_budget_dropout": 0.3}
    )
    common = dict(tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"))
    messages = []
    long = train(small_run(tmp_path / "long", **common, max_minutes=5, max_steps=2, export_at_minutes="0.5"),
                 lambda name, info: messages.append(info.get("message", "")))  # fmt: skip
    assert long.model.config.dropout == 0.3
    assert any("long-budget dropout" in m and "minute-0.5 export is this run's state" in m for m in messages)
    short = train(small_run(tmp_path / "short", **common, max_minutes=0.9, max_steps=2))
    assert short.model.config.dropout == 0.1  # below the threshold: the preset's dropout
    explicit = train(small_run(tmp_path / "explicit", **common, max_minutes=5, max_steps=2, dropout=0.0))
    assert explicit.model.config.dropout == 0.0
    # resuming with a budget below the threshold keeps the dropout the run was trained with
    resumed = train(small_run(tmp_path / "long", **common, max_minutes=0.9, max_steps=3, resume=True))
    assert resumed.step == 3 and resumed.model.config.dropout == 0.3
