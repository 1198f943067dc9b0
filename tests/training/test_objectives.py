"""The training objectives (``--objective``) through the one trainer: each learns on a toy corpus in seconds
(causal and masked LM far below the unigram perplexity, span corruption reconstructs the masked spans), the losses
score exactly the positions they should (explicit cross entropy), a span-corruption model fine-tunes into
translation (``--init_from``), and the objective round-trips through the command line, the saved options and an
exact resume."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import small_run_options
from transformers import PreTrainedTokenizerBase

from vanilla_transformer.modeling import IGNORE_INDEX, shift_tokens_right
from vanilla_transformer.training import TrainConfig, train
from vanilla_transformer.training.batching import batch_generator, collate_causal_lm, collate_span_corruption
from vanilla_transformer.training.cli import parse_dataclass
from vanilla_transformer.training.objectives import CausalLM, MaskedLM, SpanCorruption, Translation
from vanilla_transformer.training.options import DEFAULT_VOCAB_SIZE

# A copy-task corpus whose texts are predictable from their context: runs of consecutive words of a 30-word cycle
# (each line's source and target are the same run), so a masked token or span follows from its neighbours.
WORDS = [c + v + c for c in "bcdfgklmnp" for v in "aeiou"][:30]


def toy_corpus(path: Path, lines: int, shortest: int, longest: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    rows = []
    for _ in range(lines):
        start, length = rng.randrange(len(WORDS)), rng.randint(shortest, longest)
        text = " ".join(WORDS[(start + i) % len(WORDS)] for i in range(length))
        rows.append(f"{text}\t{text}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def toy_run(out: Path, data: str, **overrides) -> TrainConfig:
    """A short run on a toy corpus: `small_run_options` with the whole corpus, 100 validation texts, no test
    split, no dropout, validation and a checkpoint at the last update."""
    toy = dict(max_lines=None, vocab_size=450, valid_size=100, test_size=0, mixed_precision="no", dropout=0.0)
    values = small_run_options(data=data, output_dir=str(out), **{**toy, **overrides})
    values["eval_every"] = overrides.get("eval_every", values.get("max_steps", 100))
    return TrainConfig(**values)


def unigram_perplexity(train_texts: list[list[int]], scored: list[int]) -> float:
    """Perplexity of the tokens ``scored`` under the add-one unigram distribution of the training texts."""
    counts = Counter(t for text in train_texts for t in text)
    total, vocab = sum(counts.values()), len(counts) + 1
    return math.exp(-sum(math.log((counts[t] + 1) / (total + vocab)) for t in scored) / len(scored))


def tokenized(folder: Path, data: str) -> tuple[list[list[int]], PreTrainedTokenizerBase]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder / "checkpoints" / "tokenizer")
    texts = [line.split("\t")[0] for line in Path(data).read_text(encoding="utf-8").splitlines()]
    return [tokenizer(t).input_ids for t in texts], tokenizer


@pytest.fixture(scope="module")
def short_texts(tmp_path_factory) -> str:
    return toy_corpus(tmp_path_factory.mktemp("toy") / "toy.tsv", 1200, 4, 10)


@pytest.mark.parametrize(
    "objective, causal_lm_data", [("causal_lm", "text"), ("causal_lm", "pairs"), ("masked_lm", "text")]
)
def test_language_models_learn_far_below_the_unigram_perplexity(
    short_texts, tmp_path, objective, causal_lm_data
):
    result = train(
        toy_run(
            tmp_path / "run", short_texts, objective=objective, causal_lm_data=causal_lm_data, max_steps=100
        )
    )
    texts, tokenizer = tokenized(tmp_path / "run", short_texts)
    # the scored tokens of the validation examples: every token of the text (causal LM: after <s>, or as the target
    # of 'source </s> target </s>') or the chosen tokens (masked LM: any token but </s>, all equally likely)
    scored = [t for text in texts for t in (text if objective == "causal_lm" else text[:-1])]
    baseline = unigram_perplexity(texts, scored)
    valid_ppl = result.valid_history[-1]["valid_ppl"]
    assert baseline > 20 and valid_ppl < baseline / 4, (valid_ppl, baseline)
    assert (
        result.model.__class__.__name__
        == {"causal_lm": "VanillaDecoderOnlyForCausalLM", "masked_lm": "VanillaEncoderOnlyForMaskedLM"}[
            objective
        ]
    )
    if objective == "masked_lm":
        assert tokenizer.mask_token == "<mask>"


@pytest.fixture(scope="module")
def span_corruption_run(tmp_path_factory):
    """A span-corruption run (exported) on long runs of the word cycle (2-3 noise spans per text at T5's
    settings), and its corpus."""
    root = tmp_path_factory.mktemp("span")
    data = toy_corpus(root / "toy.tsv", 1200, 30, 50)
    result = train(
        toy_run(
            root / "pretrained", data, objective="span_corruption", max_steps=700, lr_scale=0.3, export=True
        )
    )
    return root / "pretrained", data, result


def test_span_corruption_reconstructs_the_masked_spans(span_corruption_run):
    folder, data, result = span_corruption_run
    texts, tokenizer = tokenized(folder, data)
    model = result.model.eval()
    sentinels = SpanCorruption().for_tokenizer(tokenizer).sentinel_ids
    batch = collate_span_corruption(texts[:200], sentinels, batch_generator(12345), eos_token_id=3)
    with torch.no_grad():
        decoder_input_ids = shift_tokens_right(batch["labels"], 0, model.config.decoder_start_token_id)
        logits = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_input_ids,
        ).logits
    predicted, labels = logits.argmax(-1), batch["labels"]
    # every target token that the input determines: all spans but the last whole (sentinel, tokens, the next
    # sentinel ending them) and the first token of the last span; the last span's length is not in the input
    # (a text always ends with noise), so its other tokens and </s> are left out
    right = total = 0
    for row in range(len(labels)):
        last = max(i for i, t in enumerate(labels[row].tolist()) if t in sentinels)
        right += int((predicted[row, : last + 2] == labels[row, : last + 2]).sum())
        total += last + 2
    untrained_guess = 1 / len(WORDS)
    assert right / total > 0.75 > 20 * untrained_guess, right / total


def test_span_corruption_model_fine_tunes_into_translation(span_corruption_run, tmp_path):
    folder, data, _ = span_corruption_run
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from vanilla_transformer.training.planning import objective_model
    from vanilla_transformer.training.recipe import resolve_recipe

    def from_pretrained(out: Path, objective: str, **overrides) -> TrainConfig:
        """A toy run that starts from the span-corruption model (and its tokenizer, of the default size)."""
        return toy_run(
            out, data, objective=objective, init_from=str(folder), vocab_size=DEFAULT_VOCAB_SIZE, **overrides
        )

    cfg = from_pretrained(
        tmp_path / "ft",
        "translation",
        max_steps=2,
        dropout=None,
        export=True,
        length_penalty=1.0,
        test_beams=1,
    )
    model = objective_model(cfg, resolve_recipe(cfg), len(AutoTokenizer.from_pretrained(folder)))
    saved = load_file(folder / "model.safetensors")
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())
    result = train(cfg)  # the tokenizer is the pretrained model's: its sentinels and ids
    assert result.step == 2 and AutoTokenizer.from_pretrained(tmp_path / "ft").mask_token == "<mask>"
    assert "fine-tuned from `pretrained`" in (tmp_path / "ft" / "README.md").read_text(encoding="utf-8")
    from huggingface_hub import ModelCard, ModelCardData

    pretrained_card = ModelCard.load(folder / "README.md").data
    assert isinstance(pretrained_card, ModelCardData)
    assert (
        pretrained_card.pipeline_tag == "text2text-generation"
        and pretrained_card.tags is not None
        and "translation" not in pretrained_card.tags
    )
    fine_tuned_card = ModelCard.load(tmp_path / "ft" / "README.md").data
    assert isinstance(fine_tuned_card, ModelCardData) and fine_tuned_card.pipeline_tag == "translation"
    causal = from_pretrained(tmp_path / "wrong", "causal_lm", max_steps=1)
    with pytest.raises(
        ValueError, match="holds a VanillaTransformerConfig model; --objective causal_lm trains"
    ):
        train(causal)


def test_losses_score_the_positions_of_their_objective():
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 11, requires_grad=True)

    class Fixed(torch.nn.Module):  # a model whose logits are given
        def forward(self, **kwargs):
            return type("Out", (), {"logits": logits})()

    batch = collate_causal_lm([[5, 6, 3], [7, 3]], [[8, 9, 3], [10, 3]])
    assert batch["labels"].tolist() == [[-100, -100, -100, 8, 9, 3], [-100, -100, 10, 3, -100, -100]]
    assert int(batch["ntokens"]) == 5
    _, nll = CausalLM().loss(Fixed(), batch, 0.0)
    # explicit: logits at t score the token at t + 1 of the answer
    expected = F.cross_entropy(
        logits[:, :-1].reshape(-1, 11),
        batch["labels"][:, 1:].reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    torch.testing.assert_close(nll, expected)
    prompt_grad = torch.autograd.grad(nll, logits)[0]
    # prompt targets not scored
    assert prompt_grad[0, :2].abs().sum() == 0 and prompt_grad[1, :1].abs().sum() == 0
    masked = {
        "input_ids": torch.zeros(2, 6, dtype=torch.long),
        "attention_mask": torch.ones(2, 6, dtype=torch.long),
        "labels": torch.full((2, 6), IGNORE_INDEX).index_put_(
            (torch.tensor([0, 1]), torch.tensor([2, 5])), torch.tensor([4, 9])
        ),
    }
    _, nll = MaskedLM().loss(Fixed(), masked, 0.0)
    torch.testing.assert_close(nll, -(logits.log_softmax(-1)[0, 2, 4] + logits.log_softmax(-1)[1, 5, 9]))


def test_objective_round_trips_through_the_command_line_and_the_saved_options(tmp_path):
    argv = [
        "--objective",
        "span_corruption",
        "--noise_density",
        "0.2",
        "--mean_noise_span_length",
        "2.5",
        "--causal_lm_data",
        "text",
        "--mlm_probability",
        "0.3",
    ]
    cfg = parse_dataclass(TrainConfig, argv)
    assert (cfg.objective, cfg.noise_density, cfg.mean_noise_span_length) == ("span_corruption", 0.2, 2.5)
    assert (cfg.causal_lm_data, cfg.mlm_probability, parse_dataclass(TrainConfig, []).objective) == (
        "text",
        0.3,
        "translation",
    )
    (tmp_path / "options.json").write_text(json.dumps({"objective": "masked_lm", "init_from": str(tmp_path)}))
    from_file = parse_dataclass(TrainConfig, ["--config", str(tmp_path / "options.json")])
    assert (from_file.objective, from_file.init_from) == ("masked_lm", str(tmp_path))
    with pytest.raises(SystemExit):
        parse_dataclass(TrainConfig, ["--objective", "denoising"])
    from vanilla_transformer.training.options import check_options

    bad = TrainConfig(
        objective="masked_lm", mlm_probability=1.5, noise_density=0.0, init_from=str(tmp_path / "x")
    )
    with pytest.raises(
        ValueError, match=r"--mlm_probability must be in \(0, 1\).*--noise_density.*--init_from"
    ):
        check_options(bad)


@pytest.mark.parametrize("objective", ["span_corruption", "masked_lm"])
def test_resume_is_exact_for_random_objectives_and_refuses_another_objective(
    short_texts, tmp_path, objective
):
    common = dict(objective=objective, cache_dir=str(tmp_path / "cache"), max_steps=4)
    full = train(toy_run(tmp_path / "full", short_texts, **common))
    train(toy_run(tmp_path / "cut", short_texts, **{**common, "max_steps": 2}))
    resumed = train(toy_run(tmp_path / "cut", short_texts, **common, resume=True))
    assert [h["loss"] for h in full.history[2:]] == [h["loss"] for h in resumed.history]
    assert full.valid_history[-1]["valid_loss"] == resumed.valid_history[-1]["valid_loss"]
    with pytest.raises(ValueError, match=f"--objective '{objective}' vs 'translation'"):
        train(
            toy_run(
                tmp_path / "cut",
                short_texts,
                **{**common, "max_steps": 5, "objective": "translation"},
                resume=True,
            )
        )


def test_masked_lm_batches_mask_like_bert_and_are_seeded(short_texts):
    from vanilla_transformer.tokenizer.bpe import train_bpe_tokenizer
    from vanilla_transformer.training.batching import collate_masked_lm

    lines = Path(short_texts).read_text(encoding="utf-8").splitlines()
    tokenizer = train_bpe_tokenizer(
        [line.split("\t")[0] for line in lines], vocab_size=450, denoising_tokens=True
    )
    masker = MaskedLM().for_tokenizer(tokenizer).masker
    texts = [tokenizer(line.split("\t")[0]).input_ids for line in lines]
    batch = collate_masked_lm(texts, masker, batch_generator(3))
    again = collate_masked_lm(texts, masker, batch_generator(3))
    assert all(torch.equal(batch[k], again[k]) for k in batch)
    lengths = torch.tensor([len(t) for t in texts])
    assert torch.equal(batch["attention_mask"].sum(1), lengths)
    original = torch.zeros_like(batch["input_ids"])
    for row, text in enumerate(texts):
        original[row, : len(text)] = torch.tensor(text)
    chosen = batch["labels"] != IGNORE_INDEX
    ordinary = (batch["attention_mask"] == 1) & (original != 3)  # </s> and padding are never chosen
    assert not (chosen & ~ordinary).any() and torch.equal(batch["labels"][chosen], original[chosen])
    n = int(chosen.sum())
    assert int(batch["ntokens"]) == n and abs(n / int(ordinary.sum()) - 0.15) < 0.01
    mask_id = tokenizer.mask_token_id
    assert isinstance(mask_id, int)
    masked = (batch["input_ids"][chosen] == mask_id).float().mean()
    kept = (batch["input_ids"][chosen] == original[chosen]).float().mean()
    assert abs(masked - 0.8) < 0.03 and 0.07 < kept < 0.14  # 10 % kept, plus random draws of the same token


def test_examples_of_each_objective_and_their_length_filter():
    sources, targets = [[5, 3], [6, 7, 8, 3], [9, 3]], [[10, 11, 3], [12, 3], [13, 14, 15, 16, 3]]
    assert Translation().examples(sources, targets, 4) == ([[5, 3], [6, 7, 8, 3]], [[10, 11, 3], [12, 3]], 1)
    assert CausalLM().examples(sources, targets, 5) == ([[5, 3]], [[10, 11, 3]], 2)  # source + target
    texts = [[5, 3], [6, 7, 8, 3], [9, 3], [10, 11, 3], [12, 3]]
    assert CausalLM("text").examples(sources, targets, 4) == ([[2]] * 5, texts, 1)  # after <s>
    for objective in (MaskedLM(), SpanCorruption()):
        assert objective.examples(sources, targets, 4) == (texts, texts, 1)
    causal = CausalLM()
    assert causal.lengths([[2], [5, 3]], [[7, 3], [8, 3]]) == ([3, 4], [3, 4])


def test_masked_lm_batches_with_no_masked_token_are_skipped_and_counted(short_texts, tmp_path):
    """At a tiny --mlm_probability many 64-token batches of short texts have no token chosen for masking: those
    updates are skipped (no step, no NaN), counted, and a resumed run still continues exactly."""
    common = dict(
        objective="masked_lm",
        mlm_probability=0.01,
        max_tokens=64,
        cache_dir=str(tmp_path / "cache"),
        max_steps=6,
    )
    full = train(toy_run(tmp_path / "full", short_texts, **common))
    assert full.step == 6 and 0 < full.skipped_updates < 6 and len(full.history) == 6 - full.skipped_updates
    assert all(math.isfinite(h["loss"]) and h["ntokens"] > 0 for h in full.history)
    cut = train(toy_run(tmp_path / "cut", short_texts, **{**common, "max_steps": 3}))
    resumed = train(toy_run(tmp_path / "cut", short_texts, **common, resume=True))
    after_cut = [h["loss"] for h in full.history if h["step"] > 3]
    assert after_cut == [h["loss"] for h in resumed.history]
    assert resumed.skipped_updates == full.skipped_updates >= cut.skipped_updates
    with pytest.raises(ValueError, match="a whole epoch of batches had no target token.*--mlm_probability"):
        train(
            toy_run(tmp_path / "none", short_texts, **{**common, "mlm_probability": 1e-9, "max_steps": 1000})
        )
    with pytest.raises(ValueError, match="validation examples have no target token.*--mlm_probability"):
        train(
            toy_run(tmp_path / "none", short_texts, **{**common, "mlm_probability": 1e-9, "overwrite": True})
        )
