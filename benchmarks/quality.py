"""Translation quality against a peer trained in the same run: our model with our recipe (`training.train`,
the code path of ``vanilla-transformer train``) and transformers' `MarianMTModel` with `Seq2SeqTrainer` and the standard
Hugging Face recipe, at the same size, on the same tokenizer, training split and wall-clock budget, one after
the other on the same machine, then scored on the same held-out split with the same decoding.

Both systems:
    * data: the corpus and its deterministic split as `corpus.DataOptions` reads them (the same flags as
      ``vanilla-transformer train``), training pairs with more than ``max_length`` tokens on a side dropped;
    * tokenizer: `tokenizer.load_or_train_tokenizer` (``--tokenizer``, else one joint BPE trained on the training
      split, as ``vanilla-transformer train`` trains it), ids ``<pad>`` 0, ``<s>`` 2 (decoder start), ``</s>`` 3;
    * architecture: the preset's sizes (``small``: d_model 256, 4 heads, FFN 1024, 3+3 layers, ReLU, post-LN,
      tied embeddings; Marian's config is `benchmarks.marian.marian_config`); dropout: Marian 0.1 (the anchor's, ``marian_dropout``), ours its preset's (``small``: 0);
    * budget: ``budget_minutes`` of the training loop, periodic validation included (every ``eval_every``
      updates: `training.validation.validation_metrics`, perplexity on the validation split, greedy BLEU on its
      first ``bleu_samples`` pairs);
    * test decoding: `inference.evaluate_split` with beam ``num_beams`` and transformers' length penalty
      ``length_penalty`` (sum log-prob / length ** alpha; default 1.0, the value ``vanilla-transformer train`` decodes
      with and transformers' own default), at most ``2 * source length + 10`` new tokens, pad and
      ``<s>`` never generated; sacreBLEU BLEU/chrF with signatures and the output/reference length ratio
      (sacreBLEU's ``sys_len / ref_len``).

Recipes: ours is `TrainConfig`'s defaults for the preset (Adam (0.9, 0.98, 1e-9), the paper's inverse-sqrt
schedule, fairseq label smoothing 0.1, token-budget batches) plus any ``ours`` overrides. Marian's is the
standard `Seq2SeqTrainer` one: AdamW (0.9, 0.98, 1e-9, no weight decay), learning rate ``marian_lr`` with
``marian_warmup_steps`` linear warm-up then inverse-square-root decay (``lr_scheduler_type="inverse_sqrt"``),
``label_smoothing_factor`` 0.1, ``marian_batch_size``-sentence batches grouped by length, gradient clipping at
the `TrainingArguments` default (1.0), fp32 (``marian_bf16``: bf16 autocast). Ours trains in the precision
`vanilla-transformer train` chooses (bf16 autocast on CPUs where it is measured faster: `training.hardware`).

Both systems run in one process with the CPU allocator settings of `training.allocator` (our trainer applies
them when it starts; the Marian run that follows inherits them), so neither gains from them over the other.

Modules: `benchmarks.quality_options` (the options, results and prepared data), `benchmarks.quality_marian`
(the Marian anchor's training); this one prepares the data, trains ours, scores both and writes the results.

Output folder (``output_dir``): ``tokenizer/``, ``cache/``, ``ours/`` and ``marian/`` (each a loadable model
folder; ``ours/`` also has the trainer's checkpoints and plots), ``plots/comparison.png`` and ``results.json``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from vanilla_transformer.corpus import DataOptions
from vanilla_transformer.inference import bleu_tokenizer_for, evaluate_split, length_stats
from vanilla_transformer.modeling import VanillaTransformerConfig, default_generation_config
from vanilla_transformer.tokenizer import load_or_train_tokenizer
from vanilla_transformer.training.data import filter_by_length, tokenize_dataset
from vanilla_transformer.training.hardware import PRECISION_NAMES
from vanilla_transformer.training.loop import Event, train
from vanilla_transformer.training.options import TrainConfig
from vanilla_transformer.training.plots import curves_from_history, plot_training_curves
from vanilla_transformer.training.validation import LENGTH_CAP

from .quality_marian import train_marian
from .quality_options import (
    QualityConfig,
    QualityData,
    QualityResult,
    SystemResult,
    check_quality_options,
    parse_overrides,
)

logger = logging.getLogger(__name__)


def _prepare_data(cfg: QualityConfig, out: Path) -> QualityData:
    splits, _ = cfg.load_splits()
    tokenizer_dir = cfg.tokenizer or str(out / "tokenizer")
    tokenizer = load_or_train_tokenizer(cfg.tokenizer, out / "tokenizer", splits["train"], cfg.vocab_size)
    cache = out / "cache"
    train_split, _ = filter_by_length(tokenize_dataset(splits["train"], tokenizer, cache), cfg.max_length)
    valid_src: list[list[int]] = []
    valid_tgt: list[list[int]] = []
    if len(splits["validation"]):
        valid, _ = filter_by_length(tokenize_dataset(splits["validation"], tokenizer, cache), cfg.max_length)
        valid_src, valid_tgt = [list(x) for x in valid["input_ids"]], [list(x) for x in valid["labels"]]
    return QualityData(
        splits,
        tokenizer,
        tokenizer_dir,
        train_split,
        valid_src,
        valid_tgt,
        sum(len(t) for t in train_split["labels"]),
    )


def _train_ours(
    cfg: QualityConfig, data: QualityData, out: Path, emit: Event, tokenize: str
) -> tuple[Any, dict]:
    from vanilla_transformer.modeling import save_with_remote_code

    overrides = parse_overrides(cfg.ours)
    data_options = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(DataOptions)}
    fixed = dict(
        **data_options,
        max_length=cfg.max_length,
        tokenizer=data.tokenizer_dir,
        cache_dir=str(out / "cache"),
        output_dir=str(out / "ours"),
    )
    clash = sorted(set(overrides) & (set(fixed) | {"export", "resume", "overwrite", "max_minutes"}))
    if clash:
        raise ValueError(
            f"--ours cannot set {clash}: the benchmark sets them for both systems (use its own flags)."
        )
    # the benchmark's options that are train's options of the same name
    same_name = ("preset", "label_smoothing", "eval_every", "bleu_samples", "log_every", "length_penalty")
    same_name += ("eval_batch_size", "seed", "num_threads")
    train_cfg = TrainConfig(
        **fixed,
        **{name: getattr(cfg, name) for name in same_name},
        max_minutes=cfg.budget_minutes,
        sacrebleu_tokenize=tokenize,
        report_to="none",
        export=False,
        overwrite=True,
    )
    train_cfg = dataclasses.replace(train_cfg, **overrides)
    result = train(train_cfg, lambda name, info: emit(name, {**info, "system": "ours"}))
    model = result.model.eval()  # the final weights, or their average with the last snapshots (preset recipe)
    model.generation_config.update(num_beams=cfg.num_beams, length_penalty=cfg.length_penalty)  # as scored
    model_dir = save_with_remote_code(model, out / "ours", data.tokenizer)
    history = result.history
    last_valid = result.valid_history[-1] if result.valid_history else {}
    info = dict(
        description=f"VanillaTransformer, our training recipe (preset {cfg.preset}"
        + (f"; {cfg.ours.strip()}" if cfg.ours.strip() else "")
        + (
            f"; averaged updates {result.averaging['steps']}"
            if result.averaging and result.averaging["kept"]
            else ""
        )
        + f"; {PRECISION_NAMES.get(result.mixed_precision, result.mixed_precision)})",
        num_parameters=result.num_parameters,
        steps=result.step,
        target_tokens=result.target_tokens,
        train_seconds=result.train_seconds,
        tokens_per_second=result.target_tokens_per_second,
        valid_ppl=last_valid.get("valid_ppl"),
        history=history,
        valid_history=result.valid_history,
        model_dir=str(model_dir),
    )
    return model, info


def _evaluate(
    cfg: QualityConfig, name: str, model, data: QualityData, info: dict, tokenize: str, emit: Event
) -> SystemResult:
    test = data.splits["test"]
    sources, references = list(test["source"]), list(test["target"])
    emit("test_start", {"system": name, "num_sentences": len(sources)})
    decoding = dict(num_beams=cfg.num_beams, length_penalty=cfg.length_penalty)
    scores, hyps = evaluate_split(
        model,
        data.tokenizer,
        test,
        tokenize=tokenize,
        batch_size=cfg.eval_batch_size,
        **decoding,
        **LENGTH_CAP,
    )
    scores.update(**decoding, split="test")
    ratio, hyp_len, ref_len = length_stats(hyps, references, tokenize)
    samples = [
        {"source": s, "reference": r, "hypothesis": h}
        for s, r, h in list(zip(sources, references, hyps))[: cfg.num_samples]
    ]
    curves = curves_from_history(
        name, info["history"], info["valid_history"], window=cfg.log_every if name == "ours" else 1
    )
    return SystemResult(
        name=name,
        test=scores,
        length_ratio=ratio,
        hyp_len=hyp_len,
        ref_len=ref_len,
        samples=samples,
        curves=curves,
        epochs=info["target_tokens"] / max(data.train_target_tokens, 1),
        **info,
    )


def run_quality_benchmark(cfg: QualityConfig, event: Event | None = None) -> QualityResult:
    """Train and evaluate the systems of ``cfg.systems`` one after the other (module docstring); write
    ``plots/comparison.png`` and ``results.json`` under ``cfg.output_dir``.

    ``event(name, info)`` receives progress ("start", "step", "eval", "test_start", "done", and our trainer's
    other events), each ``info`` with a ``system`` key."""
    defaults = default_generation_config(VanillaTransformerConfig())  # the beams of both systems
    cfg = dataclasses.replace(cfg, num_beams=cfg.num_beams or defaults.num_beams)
    systems = check_quality_options(cfg)
    emit = event or (lambda name, info: None)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenize = bleu_tokenizer_for(cfg.languages()[1], cfg.sacrebleu_tokenize)
    data = _prepare_data(cfg, out)
    results: list[SystemResult] = []
    for name in systems:
        if name == "ours":
            model, info = _train_ours(cfg, data, out, emit, tokenize)
        else:
            model, info = train_marian(cfg, data, out, emit, tokenize)
        result = _evaluate(cfg, name, model, data, info, tokenize, emit)
        results.append(result)
        emit("done", {"system": name, "result": result})
        del model
    plot = plot_training_curves(
        [r.curves for r in results],
        out / "plots" / "comparison.png",
        title=f"{cfg.preset} preset, {cfg.budget_minutes:g} min each, {len(data.train)} training pairs",
    )
    results_file = out / "results.json"
    payload = {
        "config": dataclasses.asdict(cfg),
        "train_pairs": len(data.train),
        "test_pairs": len(data.splits["test"]),
        "systems": [
            {
                k: v
                for k, v in dataclasses.asdict(r).items()
                if k not in ("curves", "history", "valid_history")
            }
            for r in results
        ],
    }
    results_file.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return QualityResult(results, len(data.splits["test"]), len(data.train), str(plot), str(results_file))
