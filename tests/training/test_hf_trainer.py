"""Our model under transformers' `Seq2SeqTrainer` with `DataCollatorForSeq2Seq`: gradient accumulation normalises the
loss over the whole accumulated batch (`num_items_in_batch`), and `predict_with_generate` evaluation works."""

from __future__ import annotations

import math
from typing import Any

import datasets
import pytest
import torch
from conftest import tiny_model
from helpers.shared import word_tokenizer
from torch.nn import functional as F
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

from vanilla_transformer.modeling import IGNORE_INDEX

# four pairs whose targets have 2, 6, 3 and 7 tokens: the two halves of the concatenated batch hold 8 and 10
# target tokens, so averaging two per-batch means differs from the mean over all 18 tokens
PAIRS = [
    ([5, 9, 17, 3], [11, 3]),
    ([6, 3], [12, 40, 41, 42, 43, 3]),
    ([7, 8, 19, 20, 21, 3], [13, 14, 3]),
    ([30, 31, 3], [50, 51, 52, 53, 54, 55, 3]),
]
LEARNING_RATE = 0.5


def dataset(pairs=PAIRS) -> datasets.Dataset:
    return datasets.Dataset.from_list(
        [
            {"input_ids": source, "attention_mask": [1] * len(source), "labels": target}
            for source, target in pairs
        ]
    )


def trainer_args(tmp_path, **overrides) -> Seq2SeqTrainingArguments:
    values: dict[str, Any] = dict(
        output_dir=str(tmp_path),
        optim="sgd",  # the update is lr * gradient: any scale error in the loss shows in the weights
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=0.0,  # no clipping, which would hide a scale error
        max_steps=2,
        train_sampling_strategy="sequential",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    values.update(overrides)
    return Seq2SeqTrainingArguments(**values)


def train(tmp_path, batch_size: int, accumulation: int, label_smoothing: float):
    model = tiny_model(seed=81).train()
    tokenizer = word_tokenizer()
    args = trainer_args(
        tmp_path,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        label_smoothing_factor=label_smoothing,
    )
    collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=IGNORE_INDEX)
    trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=dataset(PAIRS * 2), data_collator=collator)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return model, losses


def reference_loss(model, pairs, label_smoothing: float) -> float:
    """Mean over all target tokens of the pairs, each pair run alone (no padding), label smoothing as transformers'
    `LabelSmoother` defines it: (1 - eps) * nll + eps * mean over the vocabulary of -log p."""
    total, count = 0.0, 0
    with torch.no_grad():
        for source, target in pairs:
            labels = torch.tensor([target])
            logits = model(input_ids=torch.tensor([source]), labels=labels).logits[0]  # (T, V)
            log_probs = F.log_softmax(logits.double(), dim=-1)
            nll = -log_probs.gather(-1, labels[0][:, None]).sum()
            uniform = -log_probs.mean(dim=-1).sum()
            total += ((1 - label_smoothing) * nll + label_smoothing * uniform).item()
            count += len(target)
    return total / count


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_gradient_accumulation_equals_the_concatenated_batch(tmp_path, label_smoothing):
    accumulated, accumulated_losses = train(
        tmp_path / "a", batch_size=2, accumulation=2, label_smoothing=label_smoothing
    )
    concatenated, concatenated_losses = train(
        tmp_path / "c", batch_size=4, accumulation=1, label_smoothing=label_smoothing
    )
    start = tiny_model(seed=81)
    moved = max((p - p0).abs().max().item() for p, p0 in zip(concatenated.parameters(), start.parameters()))
    assert moved > 1e-2  # the two updates are large, so equal weights below are a sharp check
    for (name, p), q in zip(accumulated.named_parameters(), concatenated.parameters()):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=0, msg=name)
    # the first logged loss is the loss of the update's four pairs under the initial weights
    expected = reference_loss(start, PAIRS, label_smoothing)
    assert accumulated_losses[0] == pytest.approx(expected, rel=1e-4)
    assert concatenated_losses[0] == pytest.approx(expected, rel=1e-4)
    assert len(accumulated_losses) == len(concatenated_losses) == 2


def test_forward_divides_the_summed_loss_by_num_items_in_batch():
    model = tiny_model(seed=82)
    source, target = PAIRS[1]
    batch = dict(input_ids=torch.tensor([source]), labels=torch.tensor([target]))
    mean = model(**batch).loss
    assert model(**batch, num_items_in_batch=18).loss.item() == pytest.approx(mean.item() * len(target) / 18)
    assert model(**batch, num_items_in_batch=torch.tensor(3)).loss.item() == pytest.approx(mean.item() * 2)


def test_predict_with_generate_evaluation(tmp_path):
    model = tiny_model(seed=67)
    tokenizer = word_tokenizer()
    sources = [source for source, _ in PAIRS]
    # targets = the model's own beam-2 outputs (start token dropped), so a correct evaluation scores them exactly
    targets = []
    for source in sources:
        ids = model.generate(input_ids=torch.tensor([source]), num_beams=2, max_new_tokens=5)[0, 1:].tolist()
        targets.append([token for token in ids if token != tokenizer.pad_token_id])
    assert len({tuple(t) for t in targets}) > 1  # not one constant output
    seen = {}

    def compute_metrics(prediction):
        predictions = [[t for t in row if t >= 0] for row in prediction.predictions.tolist()]
        labels = [[t for t in row if t != IGNORE_INDEX] for row in prediction.label_ids.tolist()]
        seen["predictions"] = tokenizer.batch_decode(predictions, skip_special_tokens=True)
        return {
            "exact_match": sum(
                p == r
                for p, r in zip(seen["predictions"], tokenizer.batch_decode(labels, skip_special_tokens=True))
            )
            / len(labels)
        }

    args = trainer_args(
        tmp_path, predict_with_generate=True, generation_num_beams=2, per_device_eval_batch_size=2
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        # transformers types eval_dataset as torch's Dataset only, though it documents and takes a datasets.Dataset
        eval_dataset=dataset(list(zip(sources, targets))),  # pyright: ignore[reportArgumentType]
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=IGNORE_INDEX),
        compute_metrics=compute_metrics,
    )
    # the length as max_new_tokens: generation_max_length (max_length) would lose to generation_config.max_new_tokens
    metrics = trainer.evaluate(max_new_tokens=5)
    assert seen["predictions"] == tokenizer.batch_decode(targets, skip_special_tokens=True)
    assert metrics["eval_exact_match"] == 1.0
    assert math.isfinite(metrics["eval_loss"])
    # Trainer's eval_loss is the mean of the two batches' losses (each the mean over its target tokens)
    pairs = list(zip(sources, targets))
    expected = (reference_loss(model, pairs[:2], 0.0) + reference_loss(model, pairs[2:], 0.0)) / 2
    assert metrics["eval_loss"] == pytest.approx(expected, rel=1e-4)
