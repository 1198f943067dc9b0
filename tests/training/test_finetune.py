"""Fine-tuning a converted OPUS-MT model with its own tokenizer: a Marian model built by transformers with an
OPUS-MT-layout tokenizer (two SentencePiece models and a joint vocab.json, saved by `MarianTokenizer`), converted
with `convert --from marian`, then `train --init_from` on a few hundred pairs; LoRA; the fine-tuning schedules."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers.shared import run_python
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus
from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

sentencepiece = pytest.importorskip("sentencepiece")

DATA = DEFAULT_DATA.parent / "bible.de-en.tsv.xz"
TRAIN_LINES, HELD_OUT = 300, 40
SPM_VOCAB = 160


def corpus_pairs() -> tuple[list[str], list[str]]:
    pairs, _ = load_parallel_corpus(DATA, max_lines=TRAIN_LINES + HELD_OUT)
    return list(pairs["source"]), list(pairs["target"])


def opus_mt_tokenizer(folder: Path, sources: list[str], targets: list[str]) -> MarianTokenizer:
    """An OPUS-MT-layout tokenizer in `folder`: source.spm and target.spm (SentencePiece unigram models trained on
    each side) and a joint vocab.json (</s> 0, <unk> 1, the pieces of both, <pad> last), saved by MarianTokenizer."""
    raw = folder / "raw"
    raw.mkdir(parents=True)
    pieces: dict[str, None] = {}
    for side, texts in (("source", sources), ("target", targets)):
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_prefix=str(raw / side),
            vocab_size=SPM_VOCAB,
            model_type="unigram",
            character_coverage=1.0,
            minloglevel=2,
        )
        model = sentencepiece.SentencePieceProcessor(model_file=str(raw / f"{side}.model"))
        pieces.update(dict.fromkeys(model.id_to_piece(i) for i in range(3, model.get_piece_size())))
        (raw / f"{side}.model").rename(raw / f"{side}.spm")
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    (raw / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = MarianTokenizer(str(raw / "source.spm"), str(raw / "target.spm"), str(raw / "vocab.json"))
    tokenizer.save_pretrained(folder)
    return tokenizer


def tiny_marian(vocab_size: int, pad: int) -> MarianMTModel:
    config = MarianConfig(
        vocab_size=vocab_size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=256,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        # OPUS-MT's forced_eos_token_id: CTranslate2 cannot reproduce it (inference.engines refuses it)
        forced_eos_token_id=None,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(0)
    return MarianMTModel(config).eval()


def run_command(name: str, *argv: str) -> tuple[int, str]:
    """`vanilla-transformer NAME ARGV` in this process: (exit status, stderr)."""
    code, _, err = run_command_output(name, *argv)
    return code, err


def run_command_output(name: str, *argv: str) -> tuple[int, str, str]:
    """`vanilla-transformer NAME ARGV` in this process: (exit status, stdout, stderr)."""
    from importlib import import_module

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = import_module(f"vanilla_transformer.commands.{name}").main(list(argv))
        except SystemExit as exited:
            code = exited.code
    return int(code or 0), out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict:
    """A Marian model with an OPUS-MT-layout tokenizer, converted by `convert --from marian`; the training pairs
    (a TSV file) and held-out pairs."""
    root = tmp_path_factory.mktemp("opus")
    sources, targets = corpus_pairs()
    marian_dir = root / "marian"
    tokenizer = opus_mt_tokenizer(marian_dir, sources[:TRAIN_LINES], targets[:TRAIN_LINES])
    tiny_marian(len(tokenizer), tokenizer_id(marian_dir, "<pad>")).save_pretrained(marian_dir)
    code, err = run_command("convert", "--from", "marian", str(marian_dir), str(root / "converted"))
    assert code == 0, err
    data = root / "mine.de-en.tsv"
    rows = zip(sources[:TRAIN_LINES], targets[:TRAIN_LINES])
    data.write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    return {
        "root": root,
        "marian": marian_dir,
        "folder": root / "converted",
        "data": data,
        "held_out": (sources[TRAIN_LINES:], targets[TRAIN_LINES:]),
    }


def train_options(converted: dict, out: Path, *more: str) -> list[str]:
    return [
        "--data",
        str(converted["data"]),
        "--init_from",
        str(converted["folder"]),
        "--output_dir",
        str(out),
        "--valid_size",
        "20",
        "--test_size",
        "10",
        "--split_by",
        "blocks",
        "--max_tokens",
        "512",
        "--max_steps",
        "40",
        "--max_minutes",
        "0",
        "--eval_every",
        "40",
        "--bleu_samples",
        "0",
        "--test_beams",
        "1",
        "--report_to",
        "none",
        "--num_threads",
        "1",
        "--tune_cpu_allocator",
        "false",
        "--learning_rate",
        "3e-3",
        "--warmup_steps",
        "5",
        *more,
    ]


def tokenizer_id(folder: Path, piece: str) -> int:
    return json.loads((folder / "vocab.json").read_text(encoding="utf-8"))[piece]


def held_out_loss(folder: Path, sources: list[str], targets: list[str]) -> float:
    """The mean per-token cross-entropy of the model in `folder` on the pairs, with the folder's tokenizer."""
    from vanilla_transformer.tokenizer.loading import load_tokenizer

    tokenizer = load_tokenizer(folder)
    model = VanillaTransformerForConditionalGeneration.from_pretrained(folder).eval()
    batch = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    labels = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    with torch.no_grad():
        return float(
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
        )


@pytest.fixture(scope="module")
def finetuned(converted) -> Path:
    out = converted["root"] / "finetuned"
    code, err = run_command("train", *train_options(converted, out))
    assert code == 0, err
    return out


def test_finetuned_folder_keeps_the_opus_mt_tokenizer_on_both_sides(converted, finetuned):
    from vanilla_transformer.tokenizer.loading import load_tokenizer

    for name in ("source.spm", "target.spm", "vocab.json"):
        assert (finetuned / name).read_bytes() == (converted["marian"] / name).read_bytes(), name
    assert not (finetuned / "tokenizer.json").exists()
    # no tokenizer of its own was trained
    assert not (finetuned / "checkpoints" / "tokenizer" / "tokenizer.json").exists()
    reference = MarianTokenizer.from_pretrained(converted["marian"])
    ours = load_tokenizer(finetuned)
    sources, targets = converted["held_out"]
    got, want = ours(sources, text_target=targets), reference(sources, text_target=targets)
    assert got["input_ids"] == want["input_ids"] and got["labels"] == want["labels"]
    # the two sides segment differently: the labels come from the target model
    assert reference(targets)["input_ids"] != want["labels"]


def test_finetuning_lowers_the_held_out_loss(converted, finetuned):
    sources, targets = converted["held_out"]
    before = held_out_loss(converted["folder"], sources, targets)
    after = held_out_loss(finetuned, sources, targets)
    assert after < before - 0.5, (before, after)


def test_finetuned_folder_generates_without_the_package(converted, finetuned, tmp_path):
    from vanilla_transformer.tokenizer.loading import load_tokenizer

    sources = converted["held_out"][0][:4]
    model = VanillaTransformerForConditionalGeneration.from_pretrained(finetuned).eval()
    batch = load_tokenizer(finetuned)(sources, return_tensors="pt", padding=True)
    expected = model.generate(**batch, num_beams=2, max_new_tokens=8, min_new_tokens=4).tolist()
    out = run_python(
        f"""
        import json
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        folder = {str(finetuned)!r}
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
        batch = tokenizer({sources!r}, return_tensors="pt", padding=True)
        print(json.dumps(model.generate(**batch, num_beams=2, max_new_tokens=8, min_new_tokens=4).tolist()))
        """,
        cwd=tmp_path,
    )
    assert json.loads(out.strip().splitlines()[-1]) == expected


@pytest.mark.parametrize("engine", ["ct2", "onnx"])
def test_finetuned_folder_exports_with_its_tokenizer(converted, finetuned, tmp_path, engine):
    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.inference.loading import load_model_and_tokenizer
    from vanilla_transformer.inference.translate import translate

    if engine == "ct2":
        pytest.importorskip("ctranslate2")
        from vanilla_transformer.export.ct2 import export_ct2 as exporter
    else:
        pytest.importorskip("onnxruntime")
        from vanilla_transformer.export.onnx import export_onnx as exporter
    # the model after a few dozen updates would end every translation at once or write word boundaries only: at
    # least 4 tokens each, never the bare boundary piece (the engines read these from the generation config)
    saved = tmp_path / "model"
    shutil.copytree(finetuned, saved, ignore=shutil.ignore_patterns("checkpoints", "cache", "plots"))
    generation = json.loads((saved / "generation_config.json").read_text(encoding="utf-8"))
    generation.update(min_new_tokens=4, bad_words_ids=[[tokenizer_id(finetuned, "▁")]])
    (saved / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    sources = converted["held_out"][0][:4]
    model, tokenizer = load_model_and_tokenizer(str(saved), device="cpu")
    folder = exporter(saved, tmp_path / engine)
    for name in ("source.spm", "target.spm", "vocab.json"):
        assert (folder / name).read_bytes() == (finetuned / name).read_bytes(), name
    engine_model, engine_tokenizer = load_engine(engine, folder)
    got = translate(engine_model, engine_tokenizer, sources, num_beams=1, max_new_tokens=8)
    assert all(got) and got == translate(model, tokenizer, sources, num_beams=1, max_new_tokens=8)


def test_a_tokenizer_that_does_not_fit_the_model_exits_2_before_anything_is_written(converted, tmp_path):
    folder = tmp_path / "mismatched"
    folder.mkdir()
    for path in converted["folder"].iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    vocab.update({f"extra{i}": len(vocab) + i for i in range(5)})
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    out = tmp_path / "out"
    code, err = run_command("train", *train_options({**converted, "folder": folder}, out))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "tokenizer: the tokenizer does not match the model" in lines[0] and "vocab_size" in lines[0]
    assert not out.exists()


def test_init_from_a_folder_without_a_tokenizer_is_refused(converted, tmp_path):
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((converted["folder"] / name).read_bytes())
    out = tmp_path / "out"
    code, err = run_command("train", *train_options({**converted, "folder": folder}, out))
    assert code == 2 and "has no tokenizer" in err and not out.exists(), err


def test_lora_run_trains_the_adapters_only_and_exports_the_merged_model(converted, tmp_path):
    from safetensors.torch import load_file

    from vanilla_transformer.training import TrainConfig, train
    from vanilla_transformer.training.cli import parse_dataclass

    out = tmp_path / "lora"
    messages: list[str] = []
    cfg = parse_dataclass(TrainConfig, train_options(converted, out, "--lora", "4", "--max_steps", "10"))
    train(cfg, lambda name, info: messages.append(info.get("message", "")) if name == "info" else None)
    assert any(m.startswith("LoRA rank 4 on the attention projections") for m in messages), messages
    before = load_file(converted["folder"] / "model.safetensors")
    after = load_file(out / "model.safetensors")
    assert after.keys() == before.keys()
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    # the merged adapters changed the attention projections' weights, nothing else
    assert changed and all(
        name.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "out_proj") for name in changed
    )
    assert all(name.endswith(".weight") for name in changed), changed
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "LoRA rank 4 adapters on the attention projections" in card


def test_mixed_run_reports_bleu_on_both_held_out_sets_before_and_after(converted, tmp_path):
    from vanilla_transformer.training import TrainConfig, train
    from vanilla_transformer.training.cli import parse_dataclass

    pairs, _ = load_parallel_corpus(DATA, max_lines=TRAIN_LINES + HELD_OUT + 200)
    general = tmp_path / "general.de-en.tsv"
    rows = zip(pairs["source"][TRAIN_LINES + HELD_OUT :], pairs["target"][TRAIN_LINES + HELD_OUT :])
    general.write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    out = tmp_path / "mixed"
    messages: list[str] = []
    options = train_options(
        converted, out, "--max_steps", "4", "--mix_data", str(general), "--mix_ratio", "0.25"
    )
    cfg = parse_dataclass(TrainConfig, options)
    result = train(
        cfg, lambda name, info: messages.append(info.get("message", "")) if name == "info" else None
    )
    mine = TRAIN_LINES - 20 - 10
    assert result.split_sizes["train"] == mine + round(mine / 3)
    assert set(result.domain_bleu["before"]) == set(result.domain_bleu["after"]) == {"yours", "general"}
    assert result.domain_bleu["after"]["yours"] == result.test_metrics["bleu"]
    assert any(m.startswith("BLEU before fine-tuning: ") and "general held-out" in m for m in messages)
    assert any(m.startswith("BLEU after fine-tuning: ") for m in messages)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| held-out pairs | BLEU before | BLEU after |" in card and "| general |" in card
    assert "25% of the training pairs from the general-domain `general.de-en.tsv`" in card
    assert "lr 0.003 after a linear warm-up of 5 updates, constant" in card


def test_a_separate_target_vocabulary_larger_than_the_decoder_does_not_fit(converted, tmp_path):
    from vanilla_transformer.modeling import VanillaTransformerConfig
    from vanilla_transformer.tokenizer.prepare import tokenizer_fit_problem

    vocab = json.loads((converted["marian"] / "vocab.json").read_text(encoding="utf-8"))
    (tmp_path / "target_vocab.json").write_text(
        json.dumps({**vocab, **{f"extra{i}": len(vocab) + i for i in range(3)}}), encoding="utf-8"
    )
    tokenizer = MarianTokenizer(
        str(converted["marian"] / "source.spm"),
        str(converted["marian"] / "target.spm"),
        str(converted["marian"] / "vocab.json"),
        target_vocab_file=str(tmp_path / "target_vocab.json"),
        separate_vocabs=True,
    )
    ids = dict(pad_token_id=vocab["<pad>"], eos_token_id=0, share_encoder_decoder_embeddings=False)
    fits = VanillaTransformerConfig(vocab_size=len(vocab), decoder_vocab_size=len(vocab) + 3, **ids)
    assert tokenizer_fit_problem(tokenizer, fits) is None
    smaller = VanillaTransformerConfig(vocab_size=len(vocab), decoder_vocab_size=len(vocab) + 1, **ids)
    problem = tokenizer_fit_problem(tokenizer, smaller)
    assert problem is not None and f"target vocabulary has {len(vocab) + 3} tokens" in problem


def test_finetune_of_a_folder_without_beam_settings_ends_with_its_summary(converted, tmp_path):
    """A converted folder whose generation config sets no num_beams (transformers' Marian leaves it unset) trains,
    tests and exports, then prints its test summary with the beams generate() resolves an unset setting to (exit 0)."""
    generation = json.loads((converted["folder"] / "generation_config.json").read_text(encoding="utf-8"))
    assert generation.get("num_beams") is None
    out = tmp_path / "run"
    options = train_options(converted, out, "--max_steps", "2", "--eval_every", "2")
    at = options.index("--test_beams")
    del options[at : at + 2]
    code, stdout, err = run_command_output("train", *options)
    assert code == 0, err
    assert "Test BLEU" in stdout and "beam 1" in stdout, stdout
