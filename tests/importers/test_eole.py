"""`convert --from eole` against eole itself: eole's trainer builds and saves small random models (every position
encoding it has, biases or none, shared or separate embeddings, tied or not, words or SentencePiece), eole's
translator decodes them; converted, our logits agree on a padded batch, our tokenizer + greedy and beam-4
generate() give eole's translations, and the folder exports to CTranslate2 and ONNX with the same tokens. Bad
checkpoints fail with one `error:` line, exit 2 and nothing written.

eole runs in a subprocess (tests/importers/eole_driver.py) with this environment's python, or with the one
EOLE_PYTHON names (eole installed in its own environment)."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers.shared import run_python

from vanilla_transformer.commands import convert as convert_command
from vanilla_transformer.convert.eole import convert_eole_checkpoint

EOLE_PYTHON = os.environ.get("EOLE_PYTHON", sys.executable)
DRIVER = Path(__file__).with_name("eole_driver.py")
MAX_LENGTH = 12

WORDS = "the a cat dog house tree runs sleeps big small red blue over under quickly slowly and or near far".split()

# eole model options of each variant, and whether its data is cut by SentencePiece
VARIANTS = {
    "sinusoidal interleaved, separate embeddings, untied, no biases, words": (
        dict(position_encoding_type="SinusoidalInterleaved"),
        dict(),
        False,
    ),
    "sinusoidal concat, biases, shared tied embeddings, sentencepiece": (
        dict(position_encoding_type="SinusoidalConcat"),
        dict(
            add_qkvbias=True,
            add_final_linear_bias=True,
            add_ffnbias=True,
            share_embeddings=True,
            share_decoder_embeddings=True,
            mlp_activation_fn="gelu",
        ),
        True,
    ),
    "learned scaled, tied, no output bias, gelu-tanh, words": (
        dict(position_encoding_type="Learned", n_positions=64, normalize=True),
        dict(
            share_decoder_embeddings=True,
            generator_bias=False,
            mlp_activation_fn="gelu-tanh",
            add_ffnbias=True,
        ),
        False,
    ),
    "rotary interleaved, silu, sentencepiece": (
        dict(position_encoding_type="Rotary"),
        # eole's validation fails to create the rotary options itself in an encoder-decoder: given here
        dict(
            mlp_activation_fn="silu",
            add_qkvbias=True,
            add_final_linear_bias=True,
            rope_config={"rotary_theta": 10000},
        ),
        True,
    ),
}


def write_variant(folder: Path, name: str) -> None:
    """Data, vocabulary, eole's train.yaml, the sentences to translate and the padded batch of variant `name`."""
    embeddings, options, sentencepiece = VARIANTS[name]
    folder.mkdir(parents=True)
    rng = random.Random(len(name))
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(200)]
    (folder / "train.src").write_text("\n".join(lines) + "\n")
    (folder / "train.tgt").write_text("\n".join(" ".join(reversed(line.split())) for line in lines) + "\n")
    transforms: dict = {}
    if sentencepiece:
        import sentencepiece as spm

        spm.SentencePieceTrainer.train(
            input=str(folder / "train.src"),
            model_prefix=str(folder / "spm"),
            vocab_size=40,
            model_type="unigram",
            character_coverage=1.0,
            minloglevel=2,
        )
        # eole's spm_to_vocab: the SentencePiece vocabulary with pseudo-counts, without its special pieces
        entries = []
        for line in (folder / "spm.vocab").read_text(encoding="utf-8").splitlines():
            piece, score = line.split("\t")
            if piece not in ("<unk>", "<s>", "</s>"):
                entries.append(f"{piece}\t{int(math.exp(float(score)) * 1000000) + 1}")
        transforms = {
            "transforms": ["sentencepiece"],
            "transforms_configs": {
                "sentencepiece": {
                    "src_subword_model": str(folder / "spm.model"),
                    "tgt_subword_model": str(folder / "spm.model"),
                }
            },
        }
    else:
        entries = [f"{word}\t10" for word in WORDS]
    (folder / "vocab.txt").write_text("\n".join(entries) + "\n", encoding="utf-8")
    config = {
        "src_vocab": str(folder / "vocab.txt"),
        "tgt_vocab": str(folder / "vocab.txt"),
        "share_vocab": True,
        "seed": 1,
        **transforms,
        "data": {"corpus_1": {"path_src": str(folder / "train.src"), "path_tgt": str(folder / "train.tgt")}},
        "training": {
            "model_path": str(folder / "model"),
            "train_steps": 2,
            "save_checkpoint_steps": 2,
            "batch_size": 16,
            "batch_type": "sents",
            "world_size": 1,
            "gpu_ranks": [],
            "bucket_size": 64,
            "bucket_size_init": 64,
            "num_workers": 0,
            "optim": "adam",
            "learning_rate": 0.002,
            "decay_method": "none",
            "warmup_steps": 0,
            # large random weights: decisive next-token distributions, translations that differ by source
            "param_init": 0.5,
        },
        "model": {
            "architecture": "transformer",
            "hidden_size": 32,
            "layers": 2,
            "heads": 4,
            "transformer_ff": 64,
            "embeddings": {"word_vec_size": 32, **embeddings},
            **options,
        },
    }
    (folder / "train.yaml").write_text(yaml.safe_dump(config))
    sources = ["the cat runs quickly", "big dog", "a red house near the tree and a blue house", "or"]
    (folder / "sources.txt").write_text("\n".join(sources) + "\n")
    # ids of the vocabulary's entries: eole puts <unk> <blank> <s> </s> first
    g = torch.Generator().manual_seed(len(name))
    lengths = (7, 3, 5)
    src = torch.full((3, 7), 1)
    dec = torch.full((3, 6), 1)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, 4 + len(entries), (length,), generator=g)
        dec[row, : length - 1] = torch.cat(
            [torch.tensor([2]), torch.randint(4, 4 + len(entries), (length - 2,), generator=g)]
        )
    (folder / "batch.json").write_text(
        json.dumps({"src": src.tolist(), "decoder_input": dec.tolist(), "pad": 1})
    )


@pytest.fixture(scope="module")
def eole_runs(tmp_path_factory) -> dict[str, Path]:
    """Each variant's folder, after eole trained, saved and decoded its model (eole_driver.py)."""
    probe = subprocess.run([EOLE_PYTHON, "-c", "import eole"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(
            "eole is not installed (pip install eole, or EOLE_PYTHON=the python of an environment with it)"
        )
    root = tmp_path_factory.mktemp("eole")
    folders = {}
    for index, name in enumerate(VARIANTS):
        folders[name] = root / f"variant{index}"
        write_variant(folders[name], name)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [EOLE_PYTHON, str(DRIVER), *map(str, folders.values())],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return folders


@pytest.fixture(scope="module")
def converted(eole_runs) -> dict[str, Path]:
    return {
        name: convert_eole_checkpoint(folder / "model", folder / "ours") for name, folder in eole_runs.items()
    }


def load(folder: Path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    return model, AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_logits_match_eole_on_a_padded_batch(name, eole_runs, converted):
    model, _ = load(converted[name])
    batch = json.loads((eole_runs[name] / "batch.json").read_text())
    src, dec = torch.tensor(batch["src"]), torch.tensor(batch["decoder_input"])
    with torch.no_grad():
        logits = model(input_ids=src, attention_mask=src.ne(1).long(), decoder_input_ids=dec).logits
    expected = torch.load(eole_runs[name] / "eole_logits.pt")
    # eole also masks padded decoder inputs as keys: compare the real target positions
    real = dec.ne(1)
    torch.testing.assert_close(logits[real], expected[real], atol=1e-4, rtol=1e-4)


def hypotheses(sequences: torch.Tensor, eos: int, through_eos: bool = False) -> list[list[int]]:
    """generate()'s tokens after the start token, up to </s> (included with `through_eos`): a finished row is
    padded after its </s>, an unfinished one has every token (pad tokens it generated included)."""
    rows = []
    for row in sequences.tolist():
        end = row.index(eos, 1) + int(through_eos) if eos in row[1:] else None
        rows.append(row[1:end])
    return rows


@pytest.mark.parametrize("name", list(VARIANTS))
def test_tokenizer_greedy_and_beam_equal_eole(name, eole_runs, converted):
    model, tokenizer = load(converted[name])
    sources = (eole_runs[name] / "sources.txt").read_text().splitlines()
    expected = json.loads((eole_runs[name] / "eole.json").read_text())
    # the source ids of eole's pipeline (SentencePiece or words, then its vocabulary; no </s>)
    assert tokenizer(sources)["input_ids"] == expected["source_ids"]
    inputs = tokenizer(sources, return_tensors="pt", padding=True)
    for beams in (1, 4):
        out = model.generate(
            **inputs, num_beams=beams, max_new_tokens=MAX_LENGTH, length_penalty=0.0, do_sample=False
        )
        got = hypotheses(out, model.config.eos_token_id)
        assert got == expected[str(beams)], beams


# CTranslate2 for both variants; ONNX (whose exporter takes ~30 s a folder) for the first: the ONNX graphs of each
# architecture option are compared with PyTorch in tests/export/test_export_onnx.py
@pytest.mark.parametrize(
    "name, engine",
    [(next(iter(VARIANTS)), "ct2"), (next(iter(VARIANTS)), "onnx"), (list(VARIANTS)[1], "ct2")],
)
def test_exports_decode_the_tokens_of_generate(name, engine, converted, tmp_path):
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.export.onnx import export_onnx
    from vanilla_transformer.inference.engine_ct2 import CT2Translator
    from vanilla_transformer.inference.engine_onnx import OnnxTranslator

    model, tokenizer = load(converted[name])
    sources = ["the cat runs quickly", "big dog", "a red house near the tree"]
    ids = [tokenizer(text)["input_ids"] for text in sources]
    inputs = tokenizer(sources, return_tensors="pt", padding=True)
    if engine == "ct2":
        translator = CT2Translator(export_ct2(converted[name], tmp_path / "ct2"), num_threads=1)
    else:
        translator = OnnxTranslator(export_onnx(converted[name], tmp_path / "onnx"), num_threads=1)
    for beams in (1, 4):
        out = model.generate(**inputs, num_beams=beams, max_new_tokens=MAX_LENGTH, do_sample=False)
        expected = [[row] for row in hypotheses(out, model.config.eos_token_id, through_eos=True)]
        got = translator.generate_ids(ids, num_beams=beams, max_new_tokens=MAX_LENGTH)
        assert got == expected, (engine, beams)


def cli(src: Path, out: Path, capsys) -> tuple[int, list[str]]:
    code = convert_command.main(["--from", "eole", str(src), str(out)])
    return code, capsys.readouterr().err.strip().splitlines()


def broken_copy(eole_runs, tmp_path: Path) -> Path:
    """A copy of the first variant's eole checkpoint (its files, not the links to them) to break."""
    source = eole_runs[next(iter(VARIANTS))] / "model"
    copy = tmp_path / "checkpoint"
    copy.mkdir()
    for path in source.iterdir():
        if path.is_file():
            shutil.copyfile(path, copy / path.name)
    return copy


@pytest.mark.parametrize(
    "break_it, message",
    [
        (
            lambda folder: edit_json(
                folder / "config.json", ["model", "encoder", "encoder_layer_style"], "postnorm"
            ),
            "encoder_layer_style='postnorm'",
        ),
        (
            lambda folder: edit_json(folder / "config.json", ["model", "decoder", "heads_kv"], 2),
            "heads_kv=2",
        ),
        (
            lambda folder: (folder / "model.00.safetensors").write_bytes(
                (folder / "model.00.safetensors").read_bytes()[:5000]
            ),
            "truncated or corrupt",
        ),
        (
            lambda folder: edit_json(
                folder / "vocab.json", ["src"], json.loads((folder / "vocab.json").read_text())["src"][:-1]
            ),
            "vocab.json does not match the checkpoint's weights",
        ),
        (lambda folder: (folder / "vocab.json").unlink(), "has no vocab.json"),
        (
            lambda folder: edit_json(folder / "config.json", ["transforms"], ["onmt_tokenize"]),
            "transforms=['onmt_tokenize']",
        ),
    ],
    ids=["post-norm encoder", "grouped-query attention", "truncated", "vocabulary", "no vocab.json", "BPE"],
)
def test_bad_checkpoints_fail_with_one_line_and_write_nothing(break_it, message, eole_runs, tmp_path, capsys):
    folder = broken_copy(eole_runs, tmp_path)
    break_it(folder)
    code, lines = cli(folder, tmp_path / "out", capsys)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "out").exists()


def edit_json(path: Path, keys: list[str], value) -> None:
    data = json.loads(path.read_text())
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    path.write_text(json.dumps(data))


def test_cli_writes_a_complete_folder(eole_runs, tmp_path, capsys):
    name = list(VARIANTS)[1]
    code, _ = cli(eole_runs[name] / "model", tmp_path / "out", capsys)
    assert code == 0
    # eole's own files (its vocab.json, optimizer state, SentencePiece model) are not copied: tokenizer.json holds it
    written = {path.name for path in (tmp_path / "out").iterdir()}
    assert not {"vocab.json", "optimizer.pt", "spm.model"} & written
    model, tokenizer = load(tmp_path / "out")
    # eole feeds the source without </s>
    ids = tokenizer("the cat")["input_ids"]
    assert tokenizer.eos_token_id not in ids and len(ids) > 0
    # the saved generation_config.json decodes (eole's beam 5)
    assert model.generation_config.num_beams == 5
    out = model.generate(**tokenizer(["the cat"], return_tensors="pt"), max_new_tokens=4)
    assert out.shape[0] == 1 and out[0, 0] == model.config.decoder_start_token_id


def test_converted_folder_translates_without_the_package(eole_runs, converted, tmp_path):
    """In a process that cannot import the project: AutoTokenizer + AutoModelForSeq2SeqLM (remote code) load the
    converted SentencePiece folder and generate eole's beam-4 tokens."""
    name = list(VARIANTS)[3]
    sources = (eole_runs[name] / "sources.txt").read_text().splitlines()
    expected = json.loads((eole_runs[name] / "eole.json").read_text())["4"]
    out = run_python(
        f"""
        import json
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        folder = {str(converted[name])!r}
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        inputs = tokenizer({sources!r}, return_tensors="pt", padding=True)
        out = model.generate(**inputs, num_beams=4, max_new_tokens={MAX_LENGTH}, length_penalty=0.0)
        print("sequences", json.dumps(out.tolist()))
        """,
        cwd=tmp_path,
    )
    line = next(line for line in out.splitlines() if line.startswith("sequences "))
    sequences = torch.tensor(json.loads(line.removeprefix("sequences ")))
    eos = json.loads((converted[name] / "config.json").read_text())["eos_token_id"]
    assert hypotheses(sequences, eos) == expected
