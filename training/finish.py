"""The end of a run (main process): the test score and the export of the model folder with ``eval_results.json``
and a model card.

* Test: every test pair translated with the test beams and the length penalty (transformers': a finished
  hypothesis scores ``sum(log p) / length ** alpha``) ``--length_penalty``, by default
  `modeling.DEFAULT_LENGTH_PENALTY`, scored with sacreBLEU. The exported ``generation_config.json`` carries both.
* Objectives that do not translate: no length penalty and no BLEU; the test split's loss and perplexity under the
  objective (`score_test_loss`). `test_run` chooses.
* Export (`export_run`): `modeling.save_with_remote_code` (weights, config, code, tokenizer), then README.md: the
  model card (`export.model_card.build_model_card` of `export.model_card.card_values`); ``--export_ct2``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets

from vanilla_transformer.export.ct2 import export_ct2
from vanilla_transformer.export.model_card import CardValues, build_model_card
from vanilla_transformer.inference import evaluate_split, translate
from vanilla_transformer.modeling import save_with_remote_code

from . import checkpoint as ckpt
from .objectives import Objective
from .validation import LENGTH_CAP, validation_metrics

Event = Callable[[str, dict], None]


@dataclass
class Evaluation:
    """What the end of a run computed."""

    length_penalty: float | None  # None: no translation was scored (language-model objectives)
    test_metrics: dict | None = None
    samples: list[dict] = field(default_factory=list)


def evaluate_run(
    model,
    tokenizer,
    splits: datasets.DatasetDict,
    *,
    length_penalty: float,
    num_beams: int,
    batch_size: int,
    tokenize: str,
    num_samples: int,
    extra_sentences: Sequence[str] = (),
    emit: Event,
) -> Evaluation:
    """Test scores of ``model`` with ``num_beams`` beams and ``length_penalty``, which are also set in
    ``model.generation_config`` (module docstring)."""
    result = Evaluation(length_penalty)
    test = splits["test"]
    # the exported defaults are the decoding the reported figures used (vanilla-transformer evaluate reproduces them)
    model.generation_config.length_penalty = result.length_penalty
    model.generation_config.num_beams = num_beams
    if num_beams == 1:  # greedy: the beam-only settings return to their defaults (transformers refuses them)
        model.generation_config.length_penalty, model.generation_config.early_stopping = 1.0, False
    if not len(test):
        return result
    emit("test_start", {"num_sentences": len(test)})
    decoding: dict[str, Any] = dict(
        num_beams=num_beams, length_penalty=result.length_penalty, batch_size=batch_size, **LENGTH_CAP
    )
    result.test_metrics, hyps = evaluate_split(
        model,
        tokenizer,
        test,
        tokenize=tokenize,
        progress=lambda n: emit("test_progress", {"n": n}),
        **decoding,
    )
    result.test_metrics.update(num_beams=num_beams, length_penalty=result.length_penalty, split="test")
    result.samples = [
        {"source": s, "reference": r, "hypothesis": h}
        for s, r, h in list(zip(test["source"], test["target"], hyps))[:num_samples]
    ]
    if extra_sentences:
        outs = translate(model, tokenizer, list(extra_sentences), **decoding)
        result.samples += [
            {"source": s, "reference": None, "hypothesis": h} for s, h in zip(extra_sentences, outs)
        ]
    return result


def held_out_bleu(
    model, tokenizer, held_out: dict[str, datasets.Dataset], *, tokenize: str, **decoding: Any
) -> dict[str, float]:
    """BLEU of ``model`` on each named held-out split that has pairs (``decoding``: `translate`'s options, the test
    score's), by name: the run's test split ('yours') and ``--mix_data``'s ('general')."""
    return {
        name: evaluate_split(model, tokenizer, pairs, tokenize=tokenize, **LENGTH_CAP, **decoding)[0]["bleu"]
        for name, pairs in held_out.items()
        if len(pairs)
    }


def bleu_line(scores: dict[str, float]) -> str:
    """``{'yours': 12.3, 'general': 20.1}`` -> "12.3 on your held-out pairs, 20.1 on the general held-out pairs"."""
    return ", ".join(
        f"{bleu} on {'your' if name == 'yours' else 'the ' + name} held-out pairs"
        for name, bleu in scores.items()
    )


def domain_sets(data) -> dict[str, datasets.Dataset]:
    """The held-out splits a fine-tuning run reports BLEU on before and after: its test split ('yours') and, with
    ``--mix_data``, the general corpus's ('general'); ``data`` is the run's `TrainingData`."""
    sets = {"yours": data.splits["test"]}
    if data.general_test is not None:
        sets["general"] = data.general_test
    return sets


def score_test_loss(
    model,
    test_src: Sequence[Sequence[int]],
    test_tgt: Sequence[Sequence[int]],
    *,
    objective: Objective,
    label_smoothing: float,
    max_tokens: int,
    accelerator=None,
) -> Evaluation:
    """The test split's loss, NLL and perplexity per scored token under ``objective`` (the same computation as
    validation, the same seeded masks and spans); ``test_metrics`` is None without test examples."""
    result = Evaluation(None)
    if not test_src:
        return result
    metrics = validation_metrics(
        model,
        None,
        test_src,
        test_tgt,
        [],
        [],
        label_smoothing=label_smoothing,
        bleu_samples=0,
        length_penalty=None,
        batch_size=1,
        tokenize="none",
        max_tokens=max_tokens,
        accelerator=accelerator,
        objective=objective,
    )
    result.test_metrics = {
        "loss": metrics["valid_loss"],
        "nll_loss": metrics["valid_nll_loss"],
        "perplexity": metrics["valid_ppl"],
        "num_examples": len(test_src),
        "split": "test",
        "objective": objective.name,
    }
    return result


def export_model(
    model, tokenizer, folder: Path, card_values: CardValues, template: str | None, test_metrics: dict | None
) -> Path:
    """Save the model folder (code, weights, tokenizer), ``eval_results.json`` and README.md (the card, rendered
    from ``template``, default ``model_card.md``)."""
    card = build_model_card(card_values, template)  # a bad template fails before anything is written
    if test_metrics:
        ckpt.write_json_atomic(folder / "eval_results.json", test_metrics)
    save_with_remote_code(model, folder, tokenizer)
    card.save(folder / "README.md")
    return folder


def test_run(
    model, cfg, recipe, data, accelerator, tokenize: str, emit: Event, step: int
) -> Evaluation | None:
    """The end-of-run evaluation of ``model`` (``cfg``: the run's `TrainConfig`, ``data``: its `TrainingData`): the
    length penalty and test score (`evaluate_run`) on the main process (None elsewhere) when the objective
    translates, else the test loss and perplexity (`score_test_loss`, on every process; None off the main one).
    The test figures are logged to the accelerator's trackers at update ``step``."""
    acc = accelerator
    if not data.objective.translates:
        evaluation = score_test_loss(
            model,
            data.test_src,
            data.test_tgt,
            objective=data.objective,
            label_smoothing=cfg.label_smoothing,
            accelerator=acc,
            max_tokens=max(recipe.max_tokens, cfg.max_length),
        )
        if evaluation.test_metrics and acc.is_main_process:
            acc.log({"test/ppl": evaluation.test_metrics["perplexity"]}, step=step)
        return evaluation if acc.is_main_process else None
    if not acc.is_main_process:
        return None
    extra = cfg.sample_sentences
    if extra is None and cfg.languages()[0] == "zh":
        extra = "我爱机器翻译"
    evaluation = evaluate_run(
        model,
        data.tokenizer,
        data.splits,
        length_penalty=recipe.length_penalty,
        num_beams=test_beams(cfg, model),
        batch_size=cfg.eval_batch_size,
        tokenize=tokenize,
        num_samples=cfg.num_samples,
        extra_sentences=[t.strip() for t in (extra or "").split("|") if t.strip()],
        emit=emit,
    )
    if evaluation.test_metrics:
        metrics = evaluation.test_metrics
        acc.log({"test/bleu": metrics["bleu"], "test/chrf": metrics["chrf"]}, step=step)
    return evaluation


def test_beams(cfg, model) -> int:
    """The beams of the test translation: ``--test_beams``, else those of the model's generation config as
    `generate()` resolves it (a converted or imported folder may set none: transformers' default then)."""
    from vanilla_transformer.inference.decoding import resolved_generation_config

    return cfg.test_beams or resolved_generation_config(model, {}).num_beams


def export_run(model, tokenizer, run_dir, card: CardValues, cfg, test_metrics: dict | None) -> list[Path]:
    """Export the final model to the run folder (`export_model`, the card from ``cfg.model_card``'s template) and,
    with ``--export_ct2``, its CTranslate2 conversion; returns the folders written (main process)."""
    folders = [export_model(model, tokenizer, run_dir.root, card, cfg.model_card, test_metrics)]
    if cfg.export_ct2:
        quantization = None if cfg.export_ct2 == "float32" else cfg.export_ct2
        folders.append(export_ct2(run_dir.root, run_dir.ct2, quantization=quantization))
    return folders
