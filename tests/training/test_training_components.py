"""Training building blocks against independent references: token-budget batching, collation, the
label-smoothed loss, the learning-rate schedule and its cool-down, checkpoints (atomic, verified, pruned),
averaging and the length-penalty choice."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vanilla_transformer.training.averaging import average_state_dicts
from vanilla_transformer.training.batching import BatchStream, TokenBudgetBatchSampler, collate
from vanilla_transformer.training.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    save_checkpoint,
    verify_checkpoint,
)
from vanilla_transformer.training.loss import label_smoothed_nll_loss
from vanilla_transformer.training.schedule import build_optimizer, build_scheduler


def lengths(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n).tolist(), rng.integers(1, 60, n).tolist()


def test_batches_respect_budget_and_cover_every_example_once():
    src, tgt = lengths()
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=200, seed=3)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        assert len(b) * max(max(src[i], tgt[i]) for i in b) <= 200
    # bucketed: a batch holds similar lengths, much less padding than random batches would have
    spread = np.mean([np.ptp([max(src[i], tgt[i]) for i in b]) for b in batches])
    assert spread < 5


def test_batches_deterministic_per_seed_and_epoch_and_resumable_mid_epoch():
    src, tgt = lengths()
    a = TokenBudgetBatchSampler(src, tgt, 200, seed=1)
    b = TokenBudgetBatchSampler(src, tgt, 200, seed=1)
    assert a.batches(0) == b.batches(0)
    assert a.batches(0) != a.batches(1) and a.batches(0) != TokenBudgetBatchSampler(
        src, tgt, 200, seed=2
    ).batches(0)
    stream = BatchStream(a)
    full = stream.take(len(a.batches(0)) + 7)  # crosses into epoch 1
    first = BatchStream(TokenBudgetBatchSampler(src, tgt, 200, seed=1))
    head = first.take(10)
    state = first.state_dict()
    resumed = BatchStream(TokenBudgetBatchSampler(src, tgt, 200, seed=1))
    resumed.load_state_dict(state)
    assert head + resumed.take(len(full) - 10) == full
    with pytest.raises(ValueError, match="same --seed and --max_tokens"):
        TokenBudgetBatchSampler(src, tgt, 300, seed=1).load_state_dict(state)


def test_sentence_longer_than_budget_is_an_error_or_a_counted_skip():
    with pytest.raises(
        ValueError, match=r"max_tokens=50 is smaller than 2 example\(s\).*100 tokens.*--max_tokens"
    ):
        TokenBudgetBatchSampler([10, 100, 20, 70], [10, 5, 20, 3], max_tokens=50)
    sampler = TokenBudgetBatchSampler([10, 100, 20, 70], [10, 5, 20, 3], max_tokens=50, skip_too_long=True)
    assert sampler.num_skipped == 2 and sorted(i for b in sampler for i in b) == [0, 2]


def test_collate_pads_with_zero_and_minus_100_and_counts_eos():
    batch = collate([[5, 6, 3], [7, 3]], [[8, 3], [9, 10, 11, 3]], pad_token_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 3], [7, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[8, 3, -100, -100], [9, 10, 11, 3]]
    assert int(batch["ntokens"]) == 6  # both </s> count, padding does not


def test_label_smoothed_loss_matches_explicit_target_distribution():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 11)
    labels = torch.tensor([[1, 2, 3, -100], [4, 5, -100, -100]])
    eps = 0.1
    loss, nll = label_smoothed_nll_loss(logits, labels, eps)
    lp = F.log_softmax(logits, -1)
    ref_loss = ref_nll = 0.0
    for b in range(2):
        for t in range(4):
            y = int(labels[b, t])
            if y == -100:
                continue
            q = torch.full((11,), eps / 10)
            q[y] = 1 - eps
            ref_loss += float(-(q * lp[b, t]).sum())
            ref_nll += float(-lp[b, t, y])
    torch.testing.assert_close(loss.item(), ref_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll.item(), ref_nll, rtol=1e-5, atol=1e-5)
    plain, _ = label_smoothed_nll_loss(logits, labels, 0.0)
    ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
    torch.testing.assert_close(plain, ce)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_gradient_matches_autograd_of_the_explicit_loss(eps):
    """The loss has its own backward pass: its gradient (through both returned sums, any weights) must equal
    autograd's gradient of the loss written out with log_softmax and an explicit target distribution."""
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 13, dtype=torch.float32) * 3
    labels = torch.randint(0, 13, (3, 5))
    labels[0, 3:] = -100
    labels[2, 0] = -100
    x = logits.clone().requires_grad_(True)
    loss, nll = label_smoothed_nll_loss(x, labels, eps)
    (0.7 * loss + 0.2 * nll).backward()

    ref = logits.clone().requires_grad_(True)
    lp = F.log_softmax(ref, -1)
    keep = (labels != -100).float()
    q = torch.full((3, 5, 13), eps / 12)
    q.scatter_(-1, labels.clamp(min=0)[..., None], 1 - eps)
    ref_loss = (-(q * lp).sum(-1) * keep).sum()
    ref_nll = (-lp.gather(-1, labels.clamp(min=0)[..., None]).squeeze(-1) * keep).sum()
    (0.7 * ref_loss + 0.2 * ref_nll).backward()
    torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll, ref_nll.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, ref.grad, rtol=1e-5, atol=1e-6)
    assert x.grad[0, 3:].abs().max() == 0 and x.grad[2, 0].abs().max() == 0  # ignored positions get nothing


def test_label_smoothed_loss_accepts_half_precision_logits_and_returns_fp32():
    torch.manual_seed(2)
    logits = torch.randn(2, 3, 7).to(torch.bfloat16).requires_grad_(True)
    labels = torch.tensor([[1, 2, -100], [3, 4, 5]])
    loss, nll = label_smoothed_nll_loss(logits, labels, 0.1)
    assert loss.dtype == torch.float32 and nll.dtype == torch.float32
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16 and torch.isfinite(logits.grad.float()).all()


def test_schedule_is_the_papers_formula():
    model = torch.nn.Linear(2, 2)
    opt = build_optimizer(model, lr_scale=2.0)
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-9
    sched = build_scheduler(opt, d_model=512, warmup_steps=4000)
    seen = []
    for _ in range(8000):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    for step in (1, 100, 4000, 8000):
        want = 2.0 * 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert math.isclose(seen[step - 1], want, rel_tol=1e-9)
    assert max(seen) == seen[3999]


@pytest.mark.parametrize("schedule", ["constant", "inverse_sqrt"])
def test_fine_tuning_schedules_warm_up_to_the_learning_rate(schedule):
    model = torch.nn.Linear(2, 2)
    opt = build_optimizer(model, lr_scale=3e-4)
    sched = build_scheduler(opt, d_model=512, warmup_steps=10, schedule=schedule)
    seen = []
    for _ in range(40):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    for step in (1, 5, 10, 11, 40):
        after = 1.0 if schedule == "constant" else (10 / step) ** 0.5
        want = 3e-4 * (step / 10 if step < 10 else after)
        assert math.isclose(seen[step - 1], want, rel_tol=1e-9)


def test_init_from_defaults_to_the_fine_tuning_schedule_and_refuses_the_other_schedules_options(tmp_path):
    from conftest import export_tiny_model

    from vanilla_transformer.training.options import TrainConfig, check_options
    from vanilla_transformer.training.presets import FINE_TUNING
    from vanilla_transformer.training.recipe import resolve_recipe

    folder = str(export_tiny_model(tmp_path / "model"))
    recipe = resolve_recipe(TrainConfig(init_from=folder, max_steps=1))
    assert (recipe.lr_schedule, recipe.learning_rate, recipe.warmup_steps) == (
        FINE_TUNING["lr_schedule"],
        FINE_TUNING["learning_rate"],
        FINE_TUNING["warmup_steps"],
    )
    assert recipe.peak_learning_rate == FINE_TUNING["learning_rate"]
    new = resolve_recipe(TrainConfig(preset="tiny", max_steps=1))
    assert new.lr_schedule == "paper" and new.peak_learning_rate == new.lr_scale
    with pytest.raises(ValueError, match="--lr_scale scales the paper's schedule"):
        check_options(TrainConfig(init_from=folder, lr_scale=2.0, max_steps=1))
    with pytest.raises(ValueError, match="--learning_rate sets the peak"):
        check_options(TrainConfig(learning_rate=1e-4, max_steps=1))
    check_options(TrainConfig(init_from=folder, lr_schedule="paper", lr_scale=2.0, max_steps=1))
    check_options(TrainConfig(lr_schedule="inverse_sqrt", learning_rate=1e-4, max_steps=1))


class FakeAccelerator:
    """The subset of accelerate.Accelerator that save_checkpoint uses, for one process."""

    is_main_process = True
    process_index = 0

    def wait_for_everyone(self):
        pass

    def save_state(self, folder):
        import pathlib

        from safetensors.torch import save_file

        pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
        save_file({"w": torch.full((3,), float(len(folder)))}, f"{folder}/model.safetensors")
        (pathlib.Path(folder) / "optimizer.bin").write_bytes(b"x" * 100)


def test_tied_weights_checkpoint_without_the_shared_tensor_warning(tmp_path, caplog):
    """accelerate's save_state warns "Removed shared tensor" for every checkpoint of a tied model; save_checkpoint
    drops that warning (only while saving) and the checkpoint loads back into the tied model exactly."""
    import logging

    from accelerate import Accelerator
    from accelerate.utils import clean_state_dict_for_safetensors
    from conftest import tiny_model

    acc = Accelerator(cpu=True)
    model = acc.prepare(tiny_model(seed=3))
    assert model.lm_head.weight is model.model.shared.weight
    with caplog.at_level(logging.WARNING):
        folder = save_checkpoint(acc, tmp_path, 7, {"step": 7})
    assert not [r for r in caplog.records if "Removed shared tensor" in r.getMessage()]
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    acc.load_state(str(folder))
    assert model.lm_head.weight is model.model.shared.weight
    assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())
    # outside save_checkpoint the warning is accelerate's as before
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        clean_state_dict_for_safetensors(dict(model.state_dict()))
    assert [r for r in caplog.records if "Removed shared tensor" in r.getMessage()]


def test_checkpoints_atomic_verified_pruned(tmp_path):
    acc = FakeAccelerator()
    for step in (10, 20, 30, 40):
        save_checkpoint(acc, tmp_path, step, {"step": step})
    assert latest_checkpoint(tmp_path).name == "checkpoint-40"
    verify_checkpoint(tmp_path / "checkpoint-40")
    # a crash mid-write leaves a temporary directory that is never taken for a checkpoint
    (tmp_path / ".tmp-checkpoint-50").mkdir()
    (tmp_path / ".tmp-checkpoint-50" / "model.safetensors").write_bytes(b"half")
    assert latest_checkpoint(tmp_path).name == "checkpoint-40"
    deleted = prune_checkpoints(tmp_path, keep_last=2, keep=["checkpoint-10"])
    assert [p.name for p in deleted] == ["checkpoint-20"]
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-10", "checkpoint-30", "checkpoint-40"]
    assert not (tmp_path / ".tmp-checkpoint-50").exists()
    # truncation and corruption are clear errors
    opt = tmp_path / "checkpoint-40" / "optimizer.bin"
    opt.write_bytes(b"x" * 50)
    with pytest.raises(
        CheckpointError, match="truncated or corrupted: optimizer.bin has 50 bytes, expected 100"
    ):
        verify_checkpoint(tmp_path / "checkpoint-40")
    opt.write_bytes(b"y" * 100)
    with pytest.raises(CheckpointError, match="sha256 of optimizer.bin does not match"):
        verify_checkpoint(tmp_path / "checkpoint-40")
    (tmp_path / "checkpoint-30" / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="incomplete: it has no manifest.json"):
        verify_checkpoint(tmp_path / "checkpoint-30")


def test_average_state_dicts_is_the_mean():
    sds = [
        {"a": torch.tensor([1.0, 2.0]), "n": torch.tensor([3])},
        {"a": torch.tensor([3.0, 6.0]), "n": torch.tensor([3])},
    ]
    avg = average_state_dicts(sds)
    assert avg["a"].tolist() == [2.0, 4.0] and avg["n"].tolist() == [3]
    with pytest.raises(ValueError, match="different keys"):
        average_state_dicts([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])


def test_average_if_better_keeps_the_mean_only_when_it_lowers_the_validation_loss():
    """A one-weight model with snapshots w=1 (update 2) and w=3 (update 4, the current weights) and the validation
    loss (w - target)^2: the mean w=2 is kept for target 2 (loss 1 -> 0), the current w=3 is put back for target 3
    (0 -> 1) and on a tie (target 2.5: 0.25 both); without a validation split the mean is kept."""
    from vanilla_transformer.training.averaging import average_if_better

    model = torch.nn.Linear(1, 1, bias=False)

    def case(target: float | None) -> tuple[dict | None, float]:
        current = {"weight": torch.tensor([[3.0]])}
        model.load_state_dict(current)
        snapshots = [(2, {"weight": torch.tensor([[1.0]])}), (4, current)]

        def validation() -> dict:
            return (
                {}
                if target is None
                else {"valid_loss": (model.weight.item() - target) ** 2, "valid_ppl": 1.0}
            )

        return average_if_better(model, snapshots, current, validation), model.weight.item()

    def outcome(info: dict | None) -> tuple:
        assert info is not None
        return info["kept"], info["valid_loss_final"], info["valid_loss_averaged"]

    info, weight = case(2.0)
    assert outcome(info) == (True, 1.0, 0.0) and weight == 2.0 and info["steps"] == [2, 4]
    info, weight = case(3.0)
    assert outcome(info) == (False, 0.0, 1.0) and weight == 3.0
    info, weight = case(2.5)
    assert outcome(info) == (False, 0.25, 0.25) and weight == 3.0
    info, weight = case(None)
    assert outcome(info) == (True, None, None) and weight == 2.0
    model.load_state_dict({"weight": torch.tensor([[3.0]])})
    assert average_if_better(model, [(4, {"weight": torch.tensor([[3.0]])})], {}, lambda: {}) is None


@pytest.fixture
def scored_by_length_penalty(monkeypatch) -> list[dict]:
    """Replace the translation scorer that training.finish calls (through `inference.evaluate_split`) with fixed
    scores (BLEU 30, chrF 60); returns the calls."""
    import vanilla_transformer.inference.scoring as scoring

    calls = []

    def fake(model, tokenizer, sources, references, *, tokenize, length_penalty, num_beams, **kwargs):
        calls.append({"sources": list(sources), "length_penalty": length_penalty, "num_beams": num_beams})
        return {"bleu": 30.0, "chrf": 60.0}, ["hypothesis"] * len(sources)

    monkeypatch.setattr(scoring, "evaluate_translation", fake)
    return calls


def run_finish(length_penalty: float, num_beams: int):
    import datasets
    from transformers import GenerationConfig

    from vanilla_transformer.training.finish import evaluate_run

    class Model:
        generation_config = GenerationConfig()

    splits = datasets.DatasetDict(
        {
            name: datasets.Dataset.from_dict(
                {"source": [f"{name} {i}" for i in range(3)], "target": ["t"] * 3}
            )
            for name in ("validation", "test")
        }
    )
    model = Model()
    events = []
    evaluation = evaluate_run(
        model,
        None,
        splits,
        length_penalty=length_penalty,
        num_beams=num_beams,
        batch_size=8,
        tokenize="13a",
        num_samples=1,
        emit=lambda name, info: events.append((name, info)),
    )
    return evaluation, model, events


@pytest.mark.parametrize("num_beams, exported", [(4, 0.8), (1, 1.0)])
def test_the_test_split_is_decoded_with_the_given_length_penalty(
    scored_by_length_penalty, num_beams, exported
):
    """--length_penalty 0.8 decodes the test split (and nothing else) with the test beams; the exported generation
    config carries both, except that greedy decoding keeps transformers' default length penalty 1.0 (beam-only
    settings are refused with one beam)."""
    evaluation, model, events = run_finish(length_penalty=0.8, num_beams=num_beams)
    assert evaluation.length_penalty == 0.8 and evaluation.test_metrics["length_penalty"] == 0.8
    assert evaluation.test_metrics["bleu"] == 30.0
    assert [(c["sources"], c["length_penalty"], c["num_beams"]) for c in scored_by_length_penalty] == [
        (["test 0", "test 1", "test 2"], 0.8, num_beams)
    ]
    assert (
        model.generation_config.length_penalty == exported and model.generation_config.num_beams == num_beams
    )
    assert [name for name, _ in events] == ["test_start"]


@pytest.mark.parametrize(
    "progress, factor",
    [(0.0, 1.0), (0.5, 1.0), (0.75, 1.0), (0.8, 0.8), (0.9, 0.4), (0.95, 0.2), (1.0, 0.0), (1.2, 0.0)],
)
def test_cooldown_factor_decays_linearly_over_the_last_quarter(progress, factor):
    """cooldown 0.25: full rate until 75% of the budget, then linear to 0 at 100% (hand-computed: 0.8 -> 0.2/0.25)."""
    from vanilla_transformer.training.schedule import cooldown_factor

    assert cooldown_factor(progress, 0.25) == pytest.approx(factor, abs=1e-12)
    assert cooldown_factor(progress, 0.0) == 1.0  # off


def test_cpu_allocator_tuning_takes_effect_once_on_glibc_linux():
    import platform
    import subprocess
    import sys

    code = (
        "import sys; sys.path.insert(0, '.'); import training.allocator as a; "
        "print(a._applied, a.tune_cpu_allocator(), a.tune_cpu_allocator(), a._applied)"
    )
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert out.split() == (
        ["False", "True", "True", "True"] if glibc else ["False", "False", "False", "False"]
    )


@pytest.mark.parametrize(
    "module, name",
    [
        ("vanilla_transformer.training.options", "TrainConfig"),
        ("studies.quality", "QualityConfig"),
    ],
)
def test_every_option_of_the_training_clis_has_printable_help(module, name, capsys):
    """`vanilla-transformer train --help` and `python -m studies.quality --help` format every option's help (argparse
    %-formats help strings: a '%' in one crashed --help)."""
    import importlib

    from vanilla_transformer.training.cli import parse_dataclass

    cls = getattr(importlib.import_module(module), name)
    with pytest.raises(SystemExit) as exit_info:
        parse_dataclass(cls, ["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--max_minutes" in out or "--budget_minutes" in out


def test_run_dir_reads_the_saved_recipe_and_the_dropout_of_an_older_run_folder(tmp_path):
    """Resume takes the recipe saved with the checkpoints; a folder with only the options file (written before
    recipe.json existed) still gives the dropout its run was trained with."""
    import json

    from vanilla_transformer.training.options import TrainConfig
    from vanilla_transformer.training.recipe import dropout_pending, resolve_recipe
    from vanilla_transformer.training.run_dir import RunDir

    run = RunDir(tmp_path)
    run.checkpoints.mkdir(parents=True)
    assert run.saved_recipe() is None
    (run.checkpoints / "train_config.json").write_text(json.dumps({"effective_dropout": 0.25}))
    assert run.saved_recipe() == {"dropout": 0.25}
    cfg = TrainConfig(preset="small", max_minutes=25)
    # a new small run leaves its dropout to the long-budget rule; a resumed one keeps its own
    assert resolve_recipe(cfg).dropout is None and dropout_pending(cfg, None)
    assert resolve_recipe(cfg, run.saved_recipe()).dropout == 0.25 and not dropout_pending(
        cfg, run.saved_recipe()
    )
    run.save(cfg, resolve_recipe(TrainConfig(preset="small", max_minutes=90, dropout=0.1)))
    assert run.saved_recipe()["dropout"] == 0.1 and resolve_recipe(cfg, run.saved_recipe()).dropout == 0.1


def test_architecture_options_override_the_preset_in_every_model_family(tmp_path):
    """--normalize_before, --encoder_layers and --decoder_layers replace the preset's fields in the model a run
    builds (pre-LN adds a final LayerNorm after each stack); the options left unset keep the preset's."""
    from vanilla_transformer.training.options import TrainConfig
    from vanilla_transformer.training.planning import objective_model
    from vanilla_transformer.training.presets import PRESETS
    from vanilla_transformer.training.recipe import resolve_recipe

    tiny = PRESETS["tiny"]["model"]
    cfg = TrainConfig(preset="tiny", normalize_before=True, encoder_layers=3, decoder_layers=1, max_steps=1)
    model = objective_model(cfg, resolve_recipe(cfg), 120)
    c = model.config
    assert (c.normalize_before, c.encoder_layers, c.decoder_layers, c.d_model) == (
        True,
        3,
        1,
        tiny["d_model"],
    )
    assert len(model.model.encoder.layers) == 3 and len(model.model.decoder.layers) == 1
    assert model.model.encoder.layer_norm is not None and model.model.decoder.layer_norm is not None
    plain = objective_model(
        TrainConfig(preset="tiny", max_steps=1), resolve_recipe(TrainConfig(preset="tiny")), 120
    )
    assert plain.config.normalize_before is False and plain.model.encoder.layer_norm is None
    assert (plain.config.encoder_layers, plain.config.decoder_layers) == (
        tiny["encoder_layers"],
        tiny["decoder_layers"],
    )
    causal = TrainConfig(
        preset="tiny", objective="causal_lm", normalize_before=True, decoder_layers=1, max_steps=1
    )
    lm = objective_model(causal, resolve_recipe(causal), 120).config
    assert (type(lm).__name__, lm.normalize_before, lm.decoder_layers) == (
        "VanillaDecoderOnlyConfig",
        True,
        1,
    )
    masked = TrainConfig(preset="tiny", objective="masked_lm", encoder_layers=1, max_steps=1)
    assert objective_model(masked, resolve_recipe(masked), 120).config.encoder_layers == 1


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(encoder_layers=0), "--encoder_layers must be >= 1, got 0"),
        (dict(decoder_layers=-2), "--decoder_layers must be >= 1, got -2"),
        (
            dict(objective="causal_lm", encoder_layers=2),
            "causal_lm trains a model without encoder: drop --encoder_layers",
        ),
        (
            dict(objective="masked_lm", decoder_layers=2),
            "masked_lm trains a model without decoder: drop --decoder_layers",
        ),
    ],
)
def test_architecture_options_out_of_range_or_unused_are_refused(options, message):
    from vanilla_transformer.training.options import TrainConfig, check_options

    with pytest.raises(ValueError, match=message):
        check_options(TrainConfig(preset="tiny", max_steps=1, **options))


def test_architecture_options_are_refused_with_init_from(tmp_path):
    """--init_from brings its architecture: an option that would shape a new model cannot apply to it."""
    from conftest import export_tiny_model

    from vanilla_transformer.training.options import TrainConfig, check_options

    export_tiny_model(tmp_path)
    with pytest.raises(
        ValueError, match="--normalize_before, --decoder_layers shape a new model; --init_from"
    ):
        check_options(
            TrainConfig(init_from=str(tmp_path), normalize_before=False, decoder_layers=2, max_steps=1)
        )
    check_options(TrainConfig(init_from=str(tmp_path), max_steps=1))
