"""End-to-end training on a 300-line slice of the shipped corpus with the `tiny` preset: a smoke run
(loss decreases, checkpoints, test BLEU with a sacreBLEU signature, an exported model that loads), the
evaluation script and checkpoint averaging."""

from __future__ import annotations

import importlib.util
import json
import re
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import small_run
from safetensors.torch import load_file

from corpus import DEFAULT_DATA
from training import train

ROOT = Path(__file__).resolve().parents[1]
SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:"


# the shared short run, trained from its own 1200-token tokenizer, with validation BLEU, samples and an export
smoke_run = partial(
    small_run, vocab_size=1200, max_steps=16, eval_every=8, log_every=4, bleu_samples=2, eval_batch_size=16,
    test_beams=2, num_samples=2, export=True,
)  # fmt: skip


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    events = []
    result = train(smoke_run(out, tensorboard=True), lambda name, info: events.append(name))
    return out, result, events


def test_smoke_run_trains_checkpoints_evaluates_and_exports(smoke):
    out, result, events = smoke
    losses = [h["loss"] for h in result.history]
    assert result.step == 16 and len(losses) == 16
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.5, losses
    assert {"start", "step", "eval", "checkpoint", "exported"} <= set(events)
    ckpts = sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*"))
    assert ckpts == ["checkpoint-16", "checkpoint-8"]
    assert (out / "checkpoints" / "latest").read_text().strip() == "checkpoint-16"
    m = result.test_metrics
    assert m["num_sentences"] == 6 and m["bleu_signature"].startswith(SIGNATURE) and "chrf_signature" in m
    assert json.loads((out / "eval_results.json").read_text())["bleu"] == m["bleu"]
    assert (
        len(result.samples) == 3
        and result.samples[-1]["source"] == "我爱机器翻译"
        and result.valid_history[-1]["bleu_signature"].startswith(SIGNATURE)
    )
    card = (out / "README.md").read_text()
    assert "- zh\n- en" in card and m["bleu_signature"] in card and "我爱机器翻译" in card
    assert not re.search(r"\{[A-Za-z_]+\}", card), "unfilled placeholder in the model card"
    assert list((out / "runs").rglob("events.out.tfevents*")), "no TensorBoard log"
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(out, trust_remote_code=True)
    tok = AutoTokenizer.from_pretrained(out)
    ids = model.generate(**tok(["神说要有光"], return_tensors="pt"), num_beams=1, max_new_tokens=5)
    assert ids.shape[0] == 1


def test_evaluate_script_prints_bleu_and_signature(smoke, capsys):
    out, _, _ = smoke
    evaluate = load_script("evaluate")
    evaluate.main(["--model", str(out), "--data", str(DEFAULT_DATA), "--max_lines", "300", "--valid_size", "20",
                   "--test_size", "6", "--split", "test", "--limit", "4", "--num_beams", "1", "--batch_size", "4"])  # fmt: skip
    text = capsys.readouterr().out
    assert "BLEU = " in text and SIGNATURE in text and "chrF = " in text and "nc:6|nw:0" in text


def test_average_checkpoints_gives_the_mean_and_loads(smoke, tmp_path):
    out, _, _ = smoke
    load_script("average_checkpoints").main(
        ["--run", str(out), "--num", "2", "--output", str(tmp_path / "avg")]
    )
    a = load_file(out / "checkpoints" / "checkpoint-8" / "model.safetensors")
    b = load_file(out / "checkpoints" / "checkpoint-16" / "model.safetensors")
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "avg", trust_remote_code=True)
    state = model.state_dict()
    for key in a:
        torch.testing.assert_close(state[key], (a[key] + b[key]) / 2, rtol=1e-6, atol=1e-7)
    assert torch.equal(state["lm_head.weight"], state["model.shared.weight"])  # tying survived
    assert (tmp_path / "avg" / "tokenizer.json").exists()


def test_in_run_averaging_exports_the_mean_of_the_last_snapshots_only_when_validation_improves(tmp_path):
    """`average_last=3, average_every=4` over 14 updates averages the weights at updates 8, 12 and 14 (the
    final weights are always included); the exported model is that mean if it lowered the validation loss,
    else the final weights, while checkpoint-14 keeps the un-averaged training state for resuming."""
    events = []
    cfg = smoke_run(tmp_path, max_steps=14, eval_every=4, keep_last=5, average_last=3, average_every=4,
                    bleu_samples=0, test_size=2)  # fmt: skip
    result = train(cfg, lambda name, info: events.append((name, info)))
    info = result.averaging
    assert info is not None and info["steps"] == [8, 12, 14]
    assert ("average", info) in events
    assert info["kept"] == (info["valid_loss_averaged"] < info["valid_loss_final"])
    ck = {s: load_file(tmp_path / "checkpoints" / f"checkpoint-{s}" / "model.safetensors") for s in (8, 12, 14)}
    exported = load_file(tmp_path / "model.safetensors")
    for key, value in exported.items():
        expected = (ck[8][key] + ck[12][key] + ck[14][key]) / 3 if info["kept"] else ck[14][key]
        torch.testing.assert_close(value, expected, rtol=1e-5, atol=1e-6)
    assert not torch.equal(ck[12]["model.shared.weight"], ck[14]["model.shared.weight"])
    if info["kept"]:
        assert "averag" in (tmp_path / "README.md").read_text()


@pytest.mark.parametrize("kept", [True, False])
def test_averaging_decision_follows_validation_loss(tmp_path, monkeypatch, kept):
    """Whichever way the validation loss goes, the model left in place is the better of final and average."""
    from training.loop import Trainer

    real = Trainer.validate
    calls = []

    def fake_validate(self, bleu=True):
        metrics = real(self, bleu=bleu)
        if not bleu:  # the two averaging validations: final weights first, then the average
            calls.append(metrics["valid_loss"])
            metrics["valid_loss"] = 1.0 if (len(calls) == 1) == kept else 0.5
        return metrics

    monkeypatch.setattr(Trainer, "validate", fake_validate)
    cfg = smoke_run(tmp_path, max_steps=6, eval_every=6, average_last=2, average_every=3, bleu_samples=0,
                    export=False)  # fmt: skip
    result = train(cfg)
    assert result.averaging["kept"] is kept and len(calls) == 2
    assert result.averaging["steps"] == [3, 6]
    assert result.averaging["valid_loss_final"] == (1.0 if kept else 0.5)


def test_length_penalty_is_chosen_on_validation_and_exported(tmp_path):
    """Unset --length_penalty: every candidate is tried with the test beam size on the validation split, the best
    BLEU wins, and the test translation, the model card and the exported generation config all use it."""
    events = []
    cfg = smoke_run(tmp_path, max_steps=8, eval_every=8, bleu_samples=0, test_beams=2, length_penalty=None,
                    length_penalty_candidates="0.0, 2.0")  # fmt: skip
    result = train(cfg, lambda name, info: events.append((name, info)))
    search = result.length_penalty_search
    assert [r["length_penalty"] for r in search] == [0.0, 2.0]
    best = max(search, key=lambda r: (r["bleu"], r["chrf"]))["length_penalty"]
    assert result.length_penalty == best == result.test_metrics["length_penalty"]
    assert any(name == "length_penalty" and info["chosen"] == best for name, info in events)
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    assert generation["length_penalty"] == best and generation["num_beams"] == 4
    assert "chosen on the validation split" in (tmp_path / "README.md").read_text()


def test_explicit_length_penalty_skips_the_search(tmp_path):
    result = train(smoke_run(tmp_path, max_steps=4, eval_every=4, bleu_samples=0, length_penalty=0.8))
    assert result.length_penalty_search == [] and result.length_penalty == 0.8
    assert json.loads((tmp_path / "generation_config.json").read_text())["length_penalty"] == 0.8


def test_bad_length_penalty_candidates_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="--length_penalty_candidates must be comma-separated numbers"):
        train(smoke_run(tmp_path, length_penalty_candidates="0.6,long"))


def test_export_at_minutes_saves_intermediate_models_without_changing_training(tmp_path, monkeypatch):
    """A 1-ms mark exports after the first update (averaging rules included) into OUTPUT_DIR/minute-M/; the run
    itself ends with exactly the weights of the same run without the mark. The averaging validations are rigged
    so that the average always wins, so the marks export averaged weights and must put the training ones back."""
    from training.loop import Trainer

    real = Trainer.validate
    counter = iter(range(10**6))

    def rigged(self, bleu=True):
        metrics = real(self, bleu=bleu)
        if not bleu:
            metrics["valid_loss"] = 1e6 - next(counter)  # each call "better" than the previous one
        return metrics

    monkeypatch.setattr(Trainer, "validate", rigged)
    base = dict(max_steps=24, eval_every=24, bleu_samples=0, average_last=2, average_every=1, length_penalty=0.6,
                test_size=2)  # fmt: skip
    plain = train(smoke_run(tmp_path / "plain", **base))
    tokenizer = str(tmp_path / "plain" / "checkpoints" / "tokenizer")
    marks = "0.00002, 0.003, 1000"  # after update 1; after about 0.2 s (snapshots to average by then); never
    marked = train(smoke_run(tmp_path / "marked", export_at_minutes=marks, tokenizer=tokenizer, **base))
    assert [e["minutes"] for e in marked.exports] == [0.00002, 0.003] and marked.exports[0]["step"] == 1
    assert marked.exports[1]["step"] > 1 and (tmp_path / "marked" / "minute-0.003" / "model.safetensors").exists()
    assert marked.exports[1]["averaged_steps"] is not None and marked.averaging["kept"]
    folder = tmp_path / "marked" / "minute-2e-05"
    assert Path(marked.exports[0]["path"]) == folder and (folder / "model.safetensors").exists()
    from transformers import AutoModelForSeq2SeqLM

    early = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
    final = load_file(tmp_path / "marked" / "model.safetensors")
    assert not torch.equal(early.state_dict()["model.shared.weight"], final["model.shared.weight"])
    for key, value in load_file(tmp_path / "plain" / "model.safetensors").items():
        assert torch.equal(value, final[key]), key
    assert plain.averaging["steps"] == marked.averaging["steps"]


def test_bad_export_marks_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="--export_at_minutes must be comma-separated positive minutes"):
        train(smoke_run(tmp_path, export_at_minutes="25,sixty"))


@pytest.mark.parametrize("tune", [True, False])
def test_trainer_tunes_the_cpu_allocator_only_when_asked(tmp_path, monkeypatch, tune):
    import training.hardware as hardware

    calls = []
    monkeypatch.setattr(hardware, "tune_cpu_allocator", lambda: calls.append(1) or True)
    train(smoke_run(tmp_path, max_steps=1, eval_every=100, bleu_samples=0, export=False, tune_cpu_allocator=tune))
    assert calls == ([1] if tune else [])


def test_cooldown_decays_the_learning_rate_linearly_to_zero_over_the_end_of_the_budget(tmp_path):
    """--cooldown 0.5 of a 16-update run: updates 1-8 follow the schedule, update k > 8 gets the scheduled rate
    times (1 - (k - 1) / 16) / 0.5, so the last one is small but not zero; the weights differ from a plain run."""
    base = dict(max_steps=16, eval_every=100, bleu_samples=0, export=False)
    plain = train(smoke_run(tmp_path / "plain", cooldown=0.0, **base))
    tokenizer = str(tmp_path / "plain" / "checkpoints" / "tokenizer")
    cooled = train(smoke_run(tmp_path / "cooled", cooldown=0.5, tokenizer=tokenizer, **base))
    expected = [h["lr"] * min(1.0, (1 - (h["step"] - 1) / 16) / 0.5) for h in plain.history]
    assert [h["lr"] for h in cooled.history] == pytest.approx(expected, rel=1e-12)
    assert [h["loss"] for h in cooled.history[:9]] == [h["loss"] for h in plain.history[:9]]  # same until then
    assert 0 < cooled.history[-1]["lr"] < plain.history[-1]["lr"] / 7
    last = "checkpoint-16/model.safetensors"
    a, b = (load_file(tmp_path / run / "checkpoints" / last) for run in ("plain", "cooled"))
    assert not torch.equal(a["model.shared.weight"], b["model.shared.weight"])


def test_cooldown_progress_follows_the_budget_that_ends_first():
    from training.schedule import budget_progress

    def progress(step, seconds, max_minutes=10, max_steps=None, max_epochs=None, epochs=0.0):
        return budget_progress(step=step, epochs=epochs, seconds=seconds, max_steps=max_steps, max_epochs=max_epochs,
                               max_minutes=max_minutes)  # fmt: skip

    assert progress(step=10**6, seconds=150) == 0.25
    assert progress(step=0, seconds=900) == 1.0  # capped
    assert progress(step=80, seconds=300, max_steps=100) == 0.8
    assert progress(step=20, seconds=420, max_steps=100) == 0.7
    assert progress(step=5, seconds=10**6, max_minutes=None, max_epochs=4, epochs=3.0) == 0.75


@pytest.mark.parametrize("value", [1.0, -0.1, float("nan")])
def test_bad_cooldown_is_rejected(tmp_path, value):
    with pytest.raises(ValueError, match=r"--cooldown must be in \[0, 1\)"):
        train(smoke_run(tmp_path, cooldown=value))
