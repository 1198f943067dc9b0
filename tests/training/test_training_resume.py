"""Resuming: a run interrupted after k updates and resumed equals an uninterrupted run exactly (CPU, same
data order, dropout RNG, learning rate and step); corrupted checkpoints are clear errors; each option that fixes
the data, the model or the batches is refused when it changes on --resume, the budget and logging options may
change."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from conftest import small_run, small_run_options, tiny_config
from safetensors.torch import load_file
from transformers import AutoTokenizer

from vanilla_transformer.training import train
from vanilla_transformer.training.checkpoint import CheckpointError


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


def test_budget_dropout_rule_of_the_small_preset_counts_epochs():
    from vanilla_transformer.training.options import TrainConfig
    from vanilla_transformer.training.presets import budget_dropout
    from vanilla_transformer.training.recipe import budget_dropout_decision, expected_epochs, resolve_recipe

    assert budget_dropout("small", None, 11.9) is None  # the preset's own dropout (0.0)
    assert budget_dropout("small", None, 12) == 0.1 and budget_dropout("small", None, 40) == 0.1
    assert budget_dropout("small", None, None) is None
    # --dropout wins
    assert budget_dropout("small", 0.0, 40) == 0.0 and budget_dropout("small", 0.3, 1) == 0.3
    assert budget_dropout("base", None, 600) is None  # presets without the rule

    # budgets in epochs: the smallest of --max_epochs, --max_steps and --max_minutes at the batch time
    cfg = TrainConfig(preset="small", max_minutes=60, max_steps=5000, max_epochs=30, grad_accum=2)
    assert expected_epochs(cfg, 1000, 1) == pytest.approx(10.0)  # 5,000 updates x 2 batches / 1,000
    assert expected_epochs(cfg, 1000, 2, seconds_per_batch=0.6) == pytest.approx(12.0)  # 3,600 s x 2 / 600 s
    assert expected_epochs(TrainConfig(max_minutes=60, max_epochs=30), 1000, 1) == 30.0
    assert expected_epochs(TrainConfig(max_minutes=60), 1000, 1) is None  # minutes need a measured batch time

    calls = []

    def measured(seconds):
        return lambda: calls.append(seconds) or seconds

    def decide(seconds, **options):
        cfg = TrainConfig(preset="small", **options)
        return budget_dropout_decision(cfg, resolve_recipe(cfg), 1000, 1, measured(seconds))

    # the fast machine's 25 minutes (~0.17 s per 1,024-token batch: 8.8 epochs) keep no dropout ...
    recipe, note = decide(0.17, max_minutes=25)
    assert recipe.dropout is None and recipe.expected_epochs == pytest.approx(1500 / 170)
    assert (
        note.startswith("no long-budget dropout: the budget allows about 8.82 epochs") and "measured" in note
    )
    # ... its 60 minutes (21 epochs) switch it on; a slow machine's 60 minutes (1.3 s per batch, 2.8 epochs) do not
    recipe, note = decide(0.17, max_minutes=60, export_at_minutes="25,40")
    assert recipe.dropout == 0.1 and note.startswith("dropout 0.1: the budget allows about 21.2 epochs")
    assert "the minute-25 export is this run's state" in note  # 8.8 epochs at minute 25; minute 40 has 14.1
    assert decide(1.3, max_minutes=60)[0].dropout is None
    assert calls == [0.17, 0.17, 1.3]
    # a budget in updates or epochs needs no measurement; nor does --max_minutes when it cannot change the decision
    calls.clear()
    assert decide(0.01, max_minutes=0, max_steps=20_000)[0].dropout == 0.1  # 20 epochs of 1,000 batches
    assert decide(0.01, max_minutes=0, max_epochs=11)[0].dropout is None
    assert decide(0.01, max_minutes=600, max_steps=3_000)[0].dropout is None  # at most 3 epochs
    assert calls == []
    assert decide(0.01, max_minutes=600, max_steps=30_000)[0].dropout == 0.1 and calls == [0.01]


def test_warmup_note_only_for_runs_shorter_than_twice_the_warmup():
    from vanilla_transformer.training.options import TrainConfig
    from vanilla_transformer.training.recipe import resolve_recipe, warmup_note

    recipe = resolve_recipe(TrainConfig(preset="small", max_minutes=25))
    assert recipe.warmup_steps == 450
    note = warmup_note(recipe, 612)
    assert note is not None and "after 612 updates, before twice its 450 warm-up updates" in note
    note = warmup_note(recipe, 899)
    assert note is not None and "--warmup_steps" in note
    assert warmup_note(recipe, 900) is None and warmup_note(recipe, 8813) is None
    longer = resolve_recipe(TrainConfig(preset="small", max_minutes=25, warmup_steps=1000))
    note = warmup_note(longer, 1017)
    assert note is not None and "before twice its 1000 warm-up updates" in note


def test_long_budget_dropout_is_applied_and_kept_on_resume(tokenizer_dir, tmp_path, monkeypatch):
    """The rule measures the batch time on a throwaway model without touching training (the run equals one with
    the same --dropout given), is recorded in recipe.json, and a resumed run keeps the dropout it started with."""
    from vanilla_transformer.training.presets import PRESETS

    def rule(epochs):
        recipe = {**PRESETS["tiny"]["recipe"], "long_budget_epochs": epochs, "long_budget_dropout": 0.3}
        monkeypatch.setitem(PRESETS["tiny"], "recipe", recipe)

    rule(0.001)
    common = dict(tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"))
    messages = []
    long = train(
        small_run(tmp_path / "long", **common, max_minutes=5, max_steps=2, export_at_minutes="0.5"),
        lambda name, info: messages.append(info.get("message", "")),
    )
    assert long.model.config.dropout == 0.3
    note = next(m for m in messages if m.startswith("dropout 0.3: the budget allows about"))
    assert "s per batch measured" in note and "at least the tiny preset's 0.001" in note
    saved = json.loads((tmp_path / "long" / "checkpoints" / "recipe.json").read_text())
    assert saved["dropout"] == 0.3 and 0 < saved["expected_epochs"] < 1  # 2 updates of a 300-line corpus
    # 2 updates of the tiny preset's 100 warm-up updates: the run says so
    assert any("stopped after 2 updates, before twice its 100 warm-up updates" in m for m in messages)
    explicit = train(small_run(tmp_path / "explicit", **common, max_minutes=5, max_steps=2, dropout=0.3))
    assert [(h["loss"], h["lr"]) for h in explicit.history] == [(h["loss"], h["lr"]) for h in long.history]
    rule(1000.0)  # far beyond the budget: the preset's dropout, and no measurement is needed
    messages.clear()
    short = train(
        small_run(tmp_path / "short", **common, max_minutes=5, max_steps=2),
        lambda name, info: messages.append(info.get("message", "")),
    )
    assert short.model.config.dropout == 0.1
    assert any(m.startswith("no long-budget dropout") and "measured" not in m for m in messages)
    assert train(small_run(tmp_path / "zero", **common, max_steps=2, dropout=0.0)).model.config.dropout == 0.0
    # resuming with a budget below the threshold keeps the dropout the run was trained with
    resumed = train(small_run(tmp_path / "long", **common, max_minutes=5, max_steps=3, resume=True))
    assert resumed.step == 3 and resumed.model.config.dropout == 0.3


def test_resume_keeps_the_recipe_it_started_with_when_the_preset_changes(
    tokenizer_dir, tmp_path, monkeypatch
):
    """Options left unset on --resume take the saved recipe's values, not the preset's (another version of the
    code may have changed the preset): the learning rate continues exactly and recipe.json stays true; a new
    learning-rate schedule is refused (it is restored from the checkpoint); a new --clip_norm applies to the
    rest of the run and the log says so."""
    from vanilla_transformer.training.presets import PRESETS
    from vanilla_transformer.training.recipe import resolve_recipe

    common = dict(tokenizer=tokenizer_dir, cache_dir=str(tmp_path / "c"), max_steps=5)
    full = train(small_run(tmp_path / "full", **common))
    train(small_run(tmp_path / "cut", **{**common, "max_steps": 2}))
    shutil.copytree(tmp_path / "cut", tmp_path / "cut2")
    tiny = PRESETS["tiny"]["recipe"]
    monkeypatch.setitem(
        PRESETS["tiny"], "recipe", {**tiny, "warmup_steps": 7, "lr_scale": 0.5, "max_tokens": 900}
    )
    messages = []
    resumed = train(
        small_run(tmp_path / "cut", **common, resume=True),
        lambda name, info: messages.append(info.get("message", "")),
    )
    assert [(h["step"], h["lr"], h["loss"]) for h in resumed.history] == [
        (h["step"], h["lr"], h["loss"]) for h in full.history[2:]
    ]
    assert not any(m.startswith("resumed with") for m in messages)
    recipe_file = json.loads((tmp_path / "cut" / "checkpoints" / "recipe.json").read_text())
    assert (recipe_file["warmup_steps"], recipe_file["lr_scale"]) == (tiny["warmup_steps"], tiny["lr_scale"])
    with pytest.raises(ValueError, match=r"different learning-rate schedule.*--warmup_steps 100 vs 50\. "):
        train(small_run(tmp_path / "cut2", **common, warmup_steps=50, resume=True))
    changed = []
    train(
        small_run(tmp_path / "cut2", **common, warmup_steps=tiny["warmup_steps"], clip_norm=0.5, resume=True),
        lambda name, info: changed.append(info.get("message", "")),
    )
    assert f"resumed with --clip_norm 0.5 (started with {tiny['clip_norm']}):" in "\n".join(changed)

    saved = {
        "max_tokens": 2048,
        "warmup_steps": 450,
        "lr_scale": 0.3,
        "clip_norm": 0.0,
        "cooldown": 0.0,
        "average_last": 0,
        "average_every": 300,
        "dropout": 0.2,
    }
    recipe = resolve_recipe(small_run(tmp_path / "r", clip_norm=0.9, lr_scale=0.3), saved)
    assert {name: getattr(recipe, name) for name in saved} == {**saved, "clip_norm": 0.9, "max_tokens": 512}
    with pytest.raises(ValueError, match=r"--lr_scale 0\.3 vs 0\.9\. "):
        resolve_recipe(small_run(tmp_path / "r", lr_scale=0.9), saved)
    assert resolve_recipe(small_run(tmp_path / "r")).warmup_steps == 7  # a new run takes the preset's


@pytest.fixture(scope="module")
def one_update_run(tokenizer_dir, tmp_path_factory) -> tuple[Path, dict]:
    """A run folder with one checkpoint (read-only for the tests) and the options it was trained with."""
    root = tmp_path_factory.mktemp("resumable")
    options = dict(tokenizer=tokenizer_dir, cache_dir=str(root / "cache"), max_steps=1)
    train(small_run(root / "run", **options))
    return root / "run", options


def copied_data(tmp_path: Path) -> str:
    from vanilla_transformer.corpus import DEFAULT_DATA

    copy = tmp_path / DEFAULT_DATA.name
    shutil.copyfile(DEFAULT_DATA, copy)
    return str(copy)


# every option documented as fixed for a resumed run, a different valid value for it, the value the run was
# trained with (small_run_options and the preset defaults); written out here, not read from training/
CHANGED = {
    "data": (copied_data, None),
    "max_lines": (299, 300),
    "valid_size": (21, 20),
    "test_size": (7, 6),
    "split_by": ("blocks", "auto"),
    "split_block_size": (10, 20),
    "split_seed": (7, 1234),
    "max_length": (200, 256),
    "preset": ("small", "tiny"),
    "dropout": (0.2, None),
    "init_std": (0.05, None),
    "linear_init_std": (0.05, None),
    "seed": (5, 1),
    "grad_accum": (2, 1),
    "label_smoothing": (0.2, 0.1),
    "source_column": ("0", None),
    "target_column": ("1", None),
    "source_lang": ("de", None),
    "target_lang": ("fr", None),
    "has_header": (False, None),
    "hub_config": ("x", None),
    "train_split": ("all", "train"),
    "valid_split": ("none", "auto"),
    "test_split": ("none", "auto"),
    "on_bad_line": ("error", "skip"),
    "max_tokens": (400, 512),
    "objective": ("causal_lm", "translation"),
    "causal_lm_data": ("text", "pairs"),
    "mlm_probability": (0.2, 0.15),
    "noise_density": (0.2, 0.15),
    "mean_noise_span_length": (2.0, 3.0),
    "bpe_dropout": (0.1, 0.0),
    "normalize_before": (True, None),
    "encoder_layers": (1, None),
    "decoder_layers": (1, None),
}


@pytest.mark.parametrize("option", list(CHANGED))
def test_resume_refuses_each_option_that_fixes_the_data_model_or_batches(one_update_run, tmp_path, option):
    folder, options = one_update_run
    new, old = CHANGED[option]
    if callable(new):
        new, old = new(tmp_path), small_run_options()[option]
    with pytest.raises(ValueError, match="Cannot resume with different options") as err:
        train(small_run(folder, **{**options, "max_steps": 2, option: new}, resume=True))
    assert f"--{option} {old!r} vs {new!r}." in str(err.value)  # the only difference named
    assert str(err.value).count(" vs ") == 1


def test_resume_takes_new_budget_logging_and_checkpoint_options(one_update_run, tmp_path):
    """Options outside the fixed set apply to the resumed part: a longer --max_steps, checkpoints every update
    (--eval_every 1) of which --keep_last 1 is kept, losses logged every update."""
    folder, options = one_update_run
    shutil.copytree(folder, tmp_path / "run")
    steps = []
    result = train(
        small_run(
            tmp_path / "run",
            **{**options, "max_steps": 3},
            eval_every=1,
            keep_last=1,
            log_every=1,
            resume=True,
        ),
        lambda name, info: steps.append((name, info.get("step"))),
    )
    assert result.step == 3 and [h["step"] for h in result.history] == [2, 3]
    assert [step for name, step in steps if name == "checkpoint"] == [2, 3]
    assert [p.name for p in (tmp_path / "run" / "checkpoints").glob("checkpoint-*")] == ["checkpoint-3"]


def test_a_run_folder_whose_saved_state_has_unknown_keys_resumes(one_update_run, tmp_path):
    """Keys of the checkpoint's state, the saved options and the saved recipe that are not fields (here those of a
    length-penalty search on validation, which other versions of the code saved) are ignored on resume."""
    from vanilla_transformer.training.checkpoint import write_manifest

    folder, options = one_update_run
    shutil.copytree(folder, tmp_path / "run")
    checkpoints = tmp_path / "run" / "checkpoints"
    old_keys = {
        "checkpoint-1/trainer_state.json": {"length_penalty_search": [{"length_penalty": 0.6, "bleu": 1.0}]},
        "train_config.json": {"length_penalty_candidates": "0.6,1.0"},
        "recipe.json": {"length_penalty_candidates": [0.6, 1.0]},
    }
    for name, keys in old_keys.items():
        saved = json.loads((checkpoints / name).read_text())
        (checkpoints / name).write_text(json.dumps({**saved, **keys}))
    write_manifest(checkpoints / "checkpoint-1")
    result = train(small_run(tmp_path / "run", **{**options, "max_steps": 2}, resume=True))
    assert result.step == 2


def test_tokenizer_options_are_fixed_on_resume_and_refused_with_a_given_tokenizer(tokenizer_dir, tmp_path):
    """--vocab_size and --han_characters shape the tokenizer a run trains for itself: a resumed run keeps that
    tokenizer, so changing them is refused like the other fixed options; with --tokenizer (or --init_from's
    tokenizer) they cannot apply."""
    from vanilla_transformer.training.options import check_options

    options = dict(cache_dir=str(tmp_path / "c"), max_steps=1, vocab_size=500)
    train(small_run(tmp_path / "own", **options))
    for option, new, old in (("vocab_size", 600, 500), ("han_characters", True, False)):
        with pytest.raises(ValueError, match="Cannot resume with different options") as err:
            train(small_run(tmp_path / "own", **{**options, "max_steps": 2, option: new}, resume=True))
        assert f"--{option} {old!r} vs {new!r}." in str(err.value)
    with pytest.raises(
        ValueError,
        match=r"--vocab_size 500 and --han_characters shape a tokenizer trained by the "
        r"run; --tokenizer .* is used as it is",
    ):
        check_options(
            small_run(
                tmp_path / "given", tokenizer=tokenizer_dir, vocab_size=500, han_characters=True, max_steps=1
            )
        )
    with pytest.raises(ValueError, match=r"--han_characters shape"):
        check_options(
            small_run(tmp_path / "given", tokenizer=tokenizer_dir, han_characters=True, max_steps=1)
        )
    check_options(small_run(tmp_path / "given", tokenizer=tokenizer_dir, vocab_size=8000, max_steps=1))
    # --init_from brings its own tokenizer unless --tokenizer is given: the same options cannot apply to it
    model_dir = tmp_path / "model"
    shutil.copytree(tokenizer_dir, model_dir)
    tiny_config(vocab_size=len(AutoTokenizer.from_pretrained(tokenizer_dir))).save_pretrained(model_dir)
    with pytest.raises(
        ValueError,
        match=r"--vocab_size 600 shapes a tokenizer trained by the run; --init_from .*'s "
        r"tokenizer is used as it is",
    ):
        check_options(small_run(tmp_path / "tuned", init_from=str(model_dir), vocab_size=600, max_steps=1))
    check_options(small_run(tmp_path / "tuned", init_from=str(model_dir), vocab_size=8000, max_steps=1))


def small_corpus(folder: Path) -> Path:
    """The first `SMALL_RUN_LINES` lines of the shipped corpus as a TSV file of their own in ``folder``."""
    import lzma

    from conftest import SMALL_RUN_LINES

    from vanilla_transformer.corpus import DEFAULT_DATA

    with lzma.open(DEFAULT_DATA, "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(SMALL_RUN_LINES), f)]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bible.zh-en.tsv"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def edit_one_line(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[100] = "一个改过的句子\tAn edited sentence\n"
    path.write_text("".join(lines), encoding="utf-8")


def trainer_state(run: Path, step: int) -> dict:
    return json.loads((run / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").read_text())


@pytest.mark.parametrize("streaming", [False, True])
def test_resume_on_changed_data_is_refused_or_restarts_the_data_with_allow_changed_data(
    tokenizer_dir, tmp_path, streaming
):
    """A resumed run compares its data with the checkpoint's by content: one edited line is refused, naming the
    file and the fix, with nothing in the run folder rewritten; --allow_changed_data keeps the step and restarts the batch order on the new data (saying so),
    and its checkpoints record the new data, so that the next resume needs no flag."""
    data, run = small_corpus(tmp_path / "data"), tmp_path / "run"
    options = dict(
        tokenizer=tokenizer_dir,
        cache_dir=str(tmp_path / "c"),
        data=str(data),
        data_cache_dir=str(tmp_path / "pairs"),
        streaming=streaming,
    )
    train(small_run(run, **options, max_steps=2))
    edit_one_line(data)
    written = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and "runs" not in p.parts}
    with pytest.raises(ValueError) as err:
        train(small_run(run, **options, max_steps=3, resume=True))
    # refused before anything was written in the run folder (train_config.json, recipe.json, checkpoints)
    assert {
        p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and "runs" not in p.parts
    } == written
    message = str(err.value)
    assert message.startswith(
        f"Cannot resume: the data changed since checkpoint-2 ({data} changed (300 pairs, "
    )
    assert "--allow_changed_data" in message and "\n" not in message
    before = trainer_state(run, 2)["data"]

    notes = []
    resumed = train(
        small_run(run, **options, max_steps=3, resume=True, allow_changed_data=True),
        lambda name, info: notes.append(info["message"]) if name == "info" else None,
    )
    assert resumed.step == 3 and [h["step"] for h in resumed.history] == [3]
    (said,) = [note for note in notes if "changed data" in note]
    assert said.startswith(f"Resuming on changed data (--allow_changed_data): {data} changed (")
    assert "step 2" in said and "epoch 0" in said
    saved = trainer_state(run, 3)
    # the batch order started over: one batch taken on the new data, not the third of the old order
    assert (saved["stream"]["epoch"], saved["stream"]["position"]) == (0, 1)
    assert saved["data"] != before and saved["data"][str(data)]["pairs"] == 300
    if not streaming:
        from vanilla_transformer.training.options import check_options

        with pytest.raises(ValueError, match="--allow_changed_data applies to a resumed run only"):
            check_options(small_run(tmp_path / "new", **options, max_steps=1, allow_changed_data=True))
        again = train(small_run(run, **options, max_steps=4, resume=True))
        assert again.step == 4 and trainer_state(run, 4)["stream"]["position"] == 2


def test_resume_of_a_run_on_a_pipe_compares_the_piped_content(tokenizer_dir, tmp_path):
    """Data given as a FIFO is read once, through a copy, with all its pairs; a resume with a new pipe of the same
    content continues, one with other content is refused."""
    import os
    import threading

    text = small_corpus(tmp_path / "data").read_text(encoding="utf-8")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def pipe(content: str) -> threading.Thread:
        def write():
            with open(fifo, "w", encoding="utf-8") as f:
                f.write(content)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        return writer

    options = dict(
        tokenizer=tokenizer_dir,
        cache_dir=str(tmp_path / "c"),
        data=str(fifo),
        data_cache_dir=str(tmp_path / "p"),
    )
    writer = pipe(text)
    first = train(small_run(tmp_path / "run", **options, max_steps=1))
    writer.join(timeout=10)
    assert sum(first.split_sizes.values()) == 300 and "is a pipe" in first.data_summary
    writer = pipe(text)
    again = train(small_run(tmp_path / "run", **options, max_steps=2, resume=True))
    writer.join(timeout=10)
    assert again.step == 2 and [h["step"] for h in again.history] == [2]
    writer = pipe(text.replace("\n", "!\n", 1))
    with pytest.raises(
        ValueError,
        match=r"Cannot resume: the data changed since checkpoint-2 \(" + re.escape(f"{fifo} changed"),
    ):
        train(small_run(tmp_path / "run", **options, max_steps=3, resume=True))
    writer.join(timeout=10)
