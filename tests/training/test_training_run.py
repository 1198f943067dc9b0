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
from conftest import han_characters_per_token, small_run
from helpers.shared import SMALL_CORPUS_FLAGS
from safetensors.torch import load_file

from vanilla_transformer.corpus import DEFAULT_DATA
from vanilla_transformer.modeling import DEFAULT_LENGTH_PENALTY
from vanilla_transformer.training import train

ROOT = Path(__file__).resolve().parents[2]
SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:"


# the shared short run, trained from its own 1200-token tokenizer, with validation BLEU, samples and an export
smoke_run = partial(
    small_run,
    vocab_size=1200,
    max_steps=16,
    eval_every=8,
    log_every=4,
    bleu_samples=2,
    eval_batch_size=16,
    test_beams=2,
    num_samples=2,
    export=True,
)


def reuse_tokenizer(run: Path) -> dict:
    """Options of a smoke run that uses the tokenizer `run` trained (smoke_run's --vocab_size back at its default:
    with --tokenizer it is an error)."""
    from vanilla_transformer.training.options import DEFAULT_VOCAB_SIZE

    return dict(tokenizer=str(run / "checkpoints" / "tokenizer"), vocab_size=DEFAULT_VOCAB_SIZE)


def load_script(name: str):
    return importlib.import_module(f"vanilla_transformer.commands.{name}")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    events = []
    result = train(smoke_run(out, report_to="tensorboard"), lambda name, info: events.append(name))
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
    # no --length_penalty: beam search with the default length penalty, exported with the test beams
    generation = json.loads((out / "generation_config.json").read_text())
    assert (
        result.length_penalty == m["length_penalty"] == generation["length_penalty"] == DEFAULT_LENGTH_PENALTY
    )
    assert m["num_beams"] == generation["num_beams"] == 2
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


def test_tensorboard_event_file_holds_the_losses_the_run_returned(smoke):
    """Read back from TensorBoard's event file: train/loss every --log_every=4 updates and the validation loss
    of each --eval_every=8 evaluation, equal (float32) to what the run returned."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, result, _ = smoke
    events = EventAccumulator(str(out / "runs" / "train"))  # the event files of the tracker "train"
    events.Reload()

    def logged(tag: str) -> dict[int, float]:
        return {event.step: event.value for event in events.Scalars(tag)}

    by_step = {h["step"]: h for h in result.history}
    assert logged("train/loss") == pytest.approx(
        {step: by_step[step]["loss"] for step in (4, 8, 12, 16)}, rel=1e-6
    )
    assert logged("train/nll_loss") == pytest.approx(
        {s: by_step[s]["nll_loss"] for s in (4, 8, 12, 16)}, rel=1e-6
    )
    assert logged("train/lr") == pytest.approx({s: by_step[s]["lr"] for s in (4, 8, 12, 16)}, rel=1e-6)
    valid = {v["step"]: v["valid_loss"] for v in result.valid_history}
    assert sorted(valid) == [8, 16] and logged("valid_loss") == pytest.approx(valid, rel=1e-6)


def test_evaluate_script_prints_bleu_and_signature(smoke, capsys, tmp_path):
    """vanilla-transformer evaluate on the exported model with the run's test decoding (its beams, its chosen length
    penalty, its batch size) prints the test BLEU and chrF the run returned, with the same signatures."""
    out, result, _ = smoke
    m = result.test_metrics
    evaluate = load_script("evaluate")
    args = [
        "--model",
        str(out),
        "--data",
        str(DEFAULT_DATA),
        *SMALL_CORPUS_FLAGS,
        "--split",
        "test",
        "--num_beams",
        str(m["num_beams"]),
        "--length_penalty",
        str(m["length_penalty"]),
        "--batch_size",
        "16",
        "--json",
        str(tmp_path / "s.json"),
    ]
    code = evaluate.main(args)
    text = capsys.readouterr().out
    assert code in (0, None)
    assert f"{m['bleu']:.2f}" in text and f"{m['chrf']:.2f}" in text, text
    assert m["bleu_signature"] in text and m["chrf_signature"] in text and "nc:6|nw:0" in text
    scores = json.loads((tmp_path / "s.json").read_text())
    assert (scores["bleu"], scores["chrf"]) == pytest.approx((m["bleu"], m["chrf"]), abs=1e-9)


def test_average_checkpoints_gives_the_mean_and_loads(smoke, tmp_path):
    out, _, _ = smoke
    load_script("average").main(["--run", str(out), "--num", "2", "--output", str(tmp_path / "avg")])
    a = load_file(out / "checkpoints" / "checkpoint-8" / "model.safetensors")
    b = load_file(out / "checkpoints" / "checkpoint-16" / "model.safetensors")
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "avg", trust_remote_code=True)
    state = model.state_dict()
    for key in a:
        torch.testing.assert_close(state[key], (a[key] + b[key]) / 2, rtol=1e-6, atol=1e-7)
    assert torch.equal(state["lm_head.weight"], state["model.shared.weight"])  # tying survived
    assert (tmp_path / "avg" / "tokenizer.json").exists()


def validation_loss(
    weights: dict[str, torch.Tensor], folder: Path, cfg, label_smoothing: float = 0.1
) -> float:
    """The label-smoothed validation loss per target token of the model `weights` (config and tokenizer from the
    exported `folder`), written out independently of training/: one pair at a time, no padding, the smoothed
    target distribution q = 1 - eps on the label and eps / (V - 1) elsewhere."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
    model.load_state_dict(weights, strict=False)  # the exported folder drops the tied copies
    tokenizer = AutoTokenizer.from_pretrained(folder)
    valid = cfg.load_splits()[0]["validation"]
    total = tokens = 0.0
    with torch.no_grad():
        for source, target in zip(valid["source"], valid["target"]):
            labels = torch.tensor([tokenizer(target)["input_ids"]])
            decoder_input_ids = torch.cat(
                [torch.tensor([[model.config.decoder_start_token_id]]), labels[:, :-1]], 1
            )
            logits = model(
                input_ids=torch.tensor([tokenizer(source)["input_ids"]]), decoder_input_ids=decoder_input_ids
            ).logits[0]
            logp = torch.log_softmax(logits.double(), -1)
            q = torch.full_like(logp, label_smoothing / (logp.shape[-1] - 1))
            q[torch.arange(labels.shape[1]), labels[0]] = 1 - label_smoothing
            total += float(-(q * logp).sum())
            tokens += labels.shape[1]
    return total / tokens


def test_in_run_averaging_exports_the_mean_of_the_last_snapshots_only_when_validation_improves(tmp_path):
    """`average_last=3, average_every=4` over 14 updates averages the weights at updates 8, 12 and 14 (the
    final weights are always included); the exported model is that mean if its validation loss (computed here
    independently) is lower than the final weights', else the final weights, while checkpoint-14 keeps the
    un-averaged training state for resuming."""
    events = []
    cfg = smoke_run(
        tmp_path,
        max_steps=14,
        eval_every=4,
        keep_last=5,
        average_last=3,
        average_every=4,
        bleu_samples=0,
        test_size=2,
    )
    result = train(cfg, lambda name, info: events.append((name, info)))
    info = result.averaging
    assert info is not None and info["steps"] == [8, 12, 14]
    assert ("average", info) in events
    ck = {
        s: load_file(tmp_path / "checkpoints" / f"checkpoint-{s}" / "model.safetensors") for s in (8, 12, 14)
    }
    mean = {key: (ck[8][key] + ck[12][key] + ck[14][key]) / 3 for key in ck[14]}
    final_loss, mean_loss = validation_loss(ck[14], tmp_path, cfg), validation_loss(mean, tmp_path, cfg)
    assert info["valid_loss_final"] == pytest.approx(final_loss, rel=1e-4)
    assert info["valid_loss_averaged"] == pytest.approx(mean_loss, rel=1e-4)
    assert abs(final_loss - mean_loss) > 1e-3 * final_loss, "too close to tell which is better"
    kept = mean_loss < final_loss
    assert info["kept"] is kept
    exported = load_file(tmp_path / "model.safetensors")
    for key, value in exported.items():
        torch.testing.assert_close(value, mean[key] if kept else ck[14][key], rtol=1e-5, atol=1e-6)
    assert not torch.equal(ck[12]["model.shared.weight"], ck[14]["model.shared.weight"])


def test_explicit_length_penalty_is_tested_and_exported(tmp_path):
    """--length_penalty decodes the test split and is what the exported generation config and the model card
    say."""
    result = train(smoke_run(tmp_path, max_steps=4, eval_every=4, bleu_samples=0, length_penalty=0.8))
    assert result.length_penalty == result.test_metrics["length_penalty"] == 0.8
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    assert generation["length_penalty"] == 0.8 and generation["num_beams"] == 2  # smoke_run's test beams
    assert "length penalty 0.8" in (tmp_path / "README.md").read_text()


def test_export_at_minutes_saves_intermediate_models_without_changing_training(tmp_path):
    """Two marks of about a millisecond export after the first updates (one mark per update) into
    OUTPUT_DIR/minute-M/, a 1000-minute mark never comes; the run itself ends with exactly the weights of the same
    run without marks. Without a validation split the average always wins, so the second mark exports the mean
    of the snapshots of its update and the one before, and must put the training weights back."""
    base = {
        "max_steps": 24,
        "eval_every": 24,
        "bleu_samples": 0,
        "average_last": 2,
        "average_every": 1,
        "length_penalty": 0.8,
        "valid_size": 0,
        "test_size": 2,
    }
    plain = train(smoke_run(tmp_path / "plain", **base))
    given = reuse_tokenizer(tmp_path / "plain")
    marks = "0.00002, 0.00004, 1000"
    marked = train(smoke_run(tmp_path / "marked", export_at_minutes=marks, **given, **base))
    first, second = marked.exports
    assert [first["minutes"], second["minutes"]] == [0.00002, 0.00004]
    assert first["step"] >= 1 and second["step"] == first["step"] + 1
    assert second["averaged_steps"] == [first["step"], second["step"]]
    folder = tmp_path / "marked" / "minute-2e-05"
    assert Path(first["path"]) == folder and (folder / "model.safetensors").exists()
    assert json.loads((folder / "generation_config.json").read_text())["length_penalty"] == 0.8  # the run's
    ck = tmp_path / "marked" / "checkpoints" / "checkpoint-24" / "model.safetensors"
    from transformers import AutoModelForSeq2SeqLM

    early = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
    averaged = load_file(tmp_path / "marked" / "minute-4e-05" / "model.safetensors")
    assert not torch.equal(early.state_dict()["model.shared.weight"], load_file(ck)["model.shared.weight"])
    assert not torch.equal(early.state_dict()["model.shared.weight"], averaged["model.shared.weight"])
    for run in ("checkpoints/checkpoint-24/model.safetensors", "model.safetensors"):  # training state, export
        reference = load_file(tmp_path / "plain" / run)
        for key, value in load_file(tmp_path / "marked" / run).items():
            assert torch.equal(value, reference[key]), (run, key)
    assert plain.averaging["steps"] == marked.averaging["steps"] == [23, 24] and marked.averaging["kept"]


def test_bad_export_marks_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="--export_at_minutes must be comma-separated positive minutes"):
        train(smoke_run(tmp_path, export_at_minutes="25,sixty"))


@pytest.mark.parametrize("tune", [True, False])
def test_trainer_tunes_the_cpu_allocator_only_when_asked(tmp_path, monkeypatch, tune):
    import vanilla_transformer.training.hardware as hardware

    calls = []
    monkeypatch.setattr(hardware, "tune_cpu_allocator", lambda: calls.append(1) or True)
    train(
        smoke_run(
            tmp_path, max_steps=1, eval_every=100, bleu_samples=0, export=False, tune_cpu_allocator=tune
        )
    )
    assert calls == ([1] if tune else [])


def test_cooldown_decays_the_learning_rate_linearly_to_zero_over_the_end_of_the_budget(tmp_path):
    """--cooldown 0.5 of a 16-update run: before update k, (k - 1) / 16 of the budget is done, so updates 1-9 get
    the scheduled rate and updates 10..16 get 7/8, 6/8, ..., 1/8 of it (the last one small but not zero); the
    weights differ from a plain run."""
    base = dict(max_steps=16, eval_every=100, bleu_samples=0, export=False)
    plain = train(smoke_run(tmp_path / "plain", cooldown=0.0, **base))
    cooled = train(
        smoke_run(tmp_path / "cooled", cooldown=0.5, **reuse_tokenizer(tmp_path / "plain"), **base)
    )
    factors = [1.0] * 9 + [7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8]
    # the tiny preset's schedule (lr_scale 1, d_model 64, warm-up 100) at updates 1..16
    scheduled = [64**-0.5 * k * 100**-1.5 for k in range(1, 17)]
    assert [h["lr"] for h in plain.history] == pytest.approx(scheduled, rel=1e-12)
    assert [h["lr"] for h in cooled.history] == pytest.approx(
        [f * lr for f, lr in zip(factors, scheduled)], rel=1e-12
    )
    # same until then
    assert [h["loss"] for h in cooled.history[:10]] == [h["loss"] for h in plain.history[:10]]
    assert cooled.history[10]["loss"] != plain.history[10]["loss"]
    last = "checkpoint-16/model.safetensors"
    a, b = (load_file(tmp_path / run / "checkpoints" / last) for run in ("plain", "cooled"))
    assert not torch.equal(a["model.shared.weight"], b["model.shared.weight"])


def test_cooldown_progress_follows_the_budget_that_ends_first():
    from vanilla_transformer.training.schedule import budget_progress

    def progress(step, seconds, max_minutes: int | None = 10, max_steps=None, max_epochs=None, epochs=0.0):
        return budget_progress(
            step=step,
            epochs=epochs,
            seconds=seconds,
            max_steps=max_steps,
            max_epochs=max_epochs,
            max_minutes=max_minutes,
        )

    assert progress(step=10**6, seconds=150) == 0.25
    assert progress(step=0, seconds=900) == 1.0  # capped
    assert progress(step=80, seconds=300, max_steps=100) == 0.8
    assert progress(step=20, seconds=420, max_steps=100) == 0.7
    assert progress(step=5, seconds=10**6, max_minutes=None, max_epochs=4, epochs=3.0) == 0.75


@pytest.mark.parametrize("value", [1.0, -0.1, float("nan")])
def test_bad_cooldown_is_rejected(tmp_path, value):
    with pytest.raises(ValueError, match=r"--cooldown must be in \[0, 1\)"):
        train(smoke_run(tmp_path, cooldown=value))


def test_han_characters_reaches_the_tokenizer_a_run_trains(tmp_path):
    """--han_characters: the run's own tokenizer (saved in the run folder and used for its data) has one piece per
    Han character; without it, Chinese words are tokens."""
    from transformers import AutoTokenizer

    for flag in (False, True):
        out = tmp_path / str(flag)
        result = train(small_run(out, vocab_size=600, max_steps=1, han_characters=flag))
        assert result.step == 1
        lengths = set(
            han_characters_per_token(AutoTokenizer.from_pretrained(out / "checkpoints" / "tokenizer"))
        )
        assert (lengths == {1}) if flag else (max(lengths) > 1), lengths


def test_train_reads_data_from_bash_process_substitution(tokenizer_dir, tmp_path):
    """``train --data <(xzcat ...)``: the command reads the pipe once, through a copy, and trains on all its pairs
    (the 300 of the file), saying in the log that it was a pipe; a ``--resume`` whose pipe gives other content is
    refused with exit status 2 and one line."""
    import lzma
    import subprocess
    import sys

    from conftest import SMALL_RUN_LINES
    from helpers.shared import run_checked

    with lzma.open(DEFAULT_DATA, "rb") as f:
        lines = [line for _, line in zip(range(SMALL_RUN_LINES), f)]
    compressed = tmp_path / "small.tsv.xz"
    compressed.write_bytes(lzma.compress(b"".join(lines)))

    flags = [*SMALL_CORPUS_FLAGS, "--preset", "tiny", "--max_tokens", "512", "--max_steps", "1"]
    flags += ["--max_minutes", "0", "--bleu_samples", "0", "--report_to", "none", "--export", "false"]
    flags += ["--tokenizer", tokenizer_dir, "--output_dir", str(tmp_path / "run")]
    flags += ["--data_cache_dir", str(tmp_path / "pairs"), "--num_threads", "1"]
    command = '"$0" -m vanilla_transformer train --data <(xzcat "$1") "${@:2}"'
    done = run_checked(["bash", "-c", command, sys.executable, str(compressed), *flags], tmp_path)
    out = done.stdout + done.stderr
    assert re.search(r"is a pipe: its [\d,]+ bytes were read once", out), out[-2000:]
    assert "300 pairs from 300 lines" in out and "274 train" in out, out[-2000:]
    assert "Stopped after 1 updates" in done.stdout

    edited = '"$0" -m vanilla_transformer train --data <(xzcat "$1" | sed 5d) "${@:2}" --resume --max_steps 2'
    refused = subprocess.run(
        ["bash", "-c", edited, sys.executable, str(compressed), *flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: Cannot resume: the data changed since checkpoint-1 (/dev/fd/"), line
    assert (
        "(300 pairs, sha256 " in line
        and ", now 299 pairs, sha256 " in line
        and "--allow_changed_data" in line
    )
