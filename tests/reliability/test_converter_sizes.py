"""The converters (`vanilla-transformer convert`) against source folders that lie or are damaged: a config.json that
claims sizes its weights do not have is refused before any model is built (one line naming each field, both sizes
and the fix; the process stays small however large the claim), a truncated model.safetensors is one line naming
the file, and a pickle-only checkpoint is read only with --trust_pickle. A YAML config with aliases (a "billion
laughs" bomb of 1 KB) is refused as it is read, with a message of bounded length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.shared import run_python
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    MarianConfig,
    MarianMTModel,
)

from vanilla_transformer.commands.convert import main as convert_main


def tiny_source(family: str, folder: Path, classifier: bool = False) -> Path:
    """A saved transformers model of `family` (marian, gpt2, bert) with random weights: vocabulary 50, width 16,
    one layer, feed-forward width 32, 32 positions."""
    torch.manual_seed(0)
    if family == "marian":
        config = MarianConfig(
            vocab_size=50,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=32,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
        model = MarianMTModel(config)
    elif family == "gpt2":
        config = GPT2Config(
            vocab_size=50,
            n_embd=16,
            n_layer=1,
            n_head=2,
            n_inner=32,
            n_positions=32,
            bos_token_id=49,
            eos_token_id=49,
        )
        model = GPT2LMHeadModel(config)
    else:
        config = BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
        model = (BertForSequenceClassification if classifier else BertForMaskedLM)(config)
    model.save_pretrained(folder)
    return folder


def claim(folder: Path, **fields) -> Path:
    """`folder` with `fields` written over its config.json."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, **fields}), encoding="utf-8")
    return folder


def convert(capsys, *argv: str) -> tuple[int, str]:
    """`vanilla-transformer convert ARGV` in this process: (exit code, what it wrote to stderr)."""
    capsys.readouterr()
    code = convert_main(list(argv))
    return code, capsys.readouterr().err


# family -> config.json fields far larger than the tiny weights (a vocabulary of 2^31 alone is 128 GiB in fp32)
HUGE_CLAIMS = {
    "marian": {"vocab_size": 2**31, "d_model": 2**20, "encoder_layers": 2**20},
    "gpt2": {"vocab_size": 2**31, "n_embd": 2**20, "n_layer": 2**20},
    "bert": {"vocab_size": 2**31, "hidden_size": 2**20, "num_hidden_layers": 2**20},
}
# the address space the converting process may use: enough for torch and transformers (under 1 GiB here), far
# below any of the claims, so that a converter that allocates what the config claims fails instead of swapping
ADDRESS_SPACE = 4 * 2**30


def test_huge_claimed_sizes_are_refused_before_any_allocation(tmp_path):
    """One process converts a tiny folder of each family whose config.json claims sizes of gigabytes: each is
    refused with one line naming every field and both sizes, and the process's peak memory grows by no more than
    the tiny models it reads."""
    runs = {
        family: [
            "--from",
            family,
            str(claim(tiny_source(family, tmp_path / family), **fields)),
            str(tmp_path / f"{family}-out"),
        ]
        for family, fields in HUGE_CLAIMS.items()
    }
    result = run_python(
        f"""
        import contextlib, io, json, resource
        resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))
        from vanilla_transformer.commands.convert import main
        imported_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        outcomes = {{}}
        for family, argv in {runs!r}.items():
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                outcomes[family] = (main(argv), err.getvalue())
        maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"outcomes": outcomes, "imported_kib": imported_kib, "maxrss_kib": maxrss_kib}}))
        """,
        cwd=tmp_path,
        block_project=False,
    )
    report = json.loads(result.splitlines()[-1])
    for family, (code, err) in report["outcomes"].items():
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (family, err)
        assert "config.json does not fit" in lines[0] and "set these fields to the weights' sizes" in lines[0]
        for field, size in HUGE_CLAIMS[family].items():
            assert f"{field}={size} but the weights have " in lines[0], lines[0]
        assert not (tmp_path / f"{family}-out").exists()
    # the peak after the imports (torch and transformers: their size varies with the machine and the releases) grows
    # by what three tiny conversions read, far below the smallest claim: 2^31 x 16 fp32 values (128 GiB)
    grown = (report["maxrss_kib"] - report["imported_kib"]) * 1024
    assert grown < 256 * 2**20, report


@pytest.mark.parametrize(
    ("family", "field", "size", "found"),
    [
        ("marian", "vocab_size", 51, "50 (model.shared.weight [50, 16])"),
        ("marian", "decoder_vocab_size", 60, "50 (final_logits_bias [1, 50])"),
        ("marian", "decoder_layers", 3, "1 (layers decoder.layers.0..0)"),
        ("marian", "decoder_ffn_dim", 64, "32 (model.decoder.layers.0.fc1.weight [32, 16])"),
        ("gpt2", "n_positions", 64, "32 (transformer.wpe.weight [32, 16])"),
        ("gpt2", "n_inner", 64, "32 (transformer.h.0.mlp.c_fc.weight [16, 32])"),
        ("bert", "max_position_embeddings", 512, "32 (bert.embeddings.position_embeddings.weight [32, 16])"),
        ("bert", "type_vocab_size", 9, "2 (bert.embeddings.token_type_embeddings.weight [2, 16])"),
        ("bert", "intermediate_size", 7, "32 (bert.encoder.layer.0.intermediate.dense.weight [32, 16])"),
    ],
)
def test_each_claimed_size_is_checked_against_its_tensor(family, field, size, found, tmp_path, capsys):
    src = claim(tiny_source(family, tmp_path / "src"), **{field: size})
    code, err = convert(capsys, "--from", family, str(src), str(tmp_path / "out"))
    assert code == 2, err
    assert err.count("\n") == 1 and f"{field}={size} but the weights have {found}" in err, err


def test_marian_positions_are_bounded_by_the_weights(tmp_path, capsys):
    """Marian's sinusoidal positions are not stored: their table may not outgrow the checkpoint itself."""
    src = claim(tiny_source("marian", tmp_path / "src"), max_position_embeddings=2**31)
    code, err = convert(capsys, "--from", "marian", str(src), str(tmp_path / "out"))
    assert code == 2, err
    assert f"max_position_embeddings={2**31} asks for a table of {2**31} x 16 values" in err, err


def test_bert_labels_are_checked_against_the_classifier(tmp_path, capsys):
    src = claim(
        tiny_source("bert", tmp_path / "src", classifier=True),
        id2label={str(i): f"L{i}" for i in range(5)},
        label2id={f"L{i}": i for i in range(5)},
    )
    code, err = convert(capsys, "--from", "bert", str(src), str(tmp_path / "out"))
    assert code == 2, err
    assert "num_labels=5 but the weights have 2 (classifier.weight [2, 16])" in err, err


@pytest.mark.parametrize("family", ["marian", "gpt2", "bert"])
def test_a_truncated_safetensors_file_is_one_line_naming_it(family, tmp_path, capsys):
    src = tiny_source(family, tmp_path / "src")
    weights = src / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    code, err = convert(capsys, "--from", family, str(src), str(tmp_path / "out"))
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"error: {weights} is truncated or corrupt"), err
    assert "Traceback" not in err and err.rstrip().endswith("download or save the checkpoint again")
    assert not (tmp_path / "out").exists()


def test_a_pickle_only_checkpoint_converts_only_with_trust_pickle(tmp_path, capsys):
    src = tiny_source("marian", tmp_path / "src")
    weights = src / "model.safetensors"
    torch.save(MarianMTModel.from_pretrained(src).state_dict(), src / "pytorch_model.bin")
    weights.unlink()
    code, err = convert(capsys, "--from", "marian", str(src), str(tmp_path / "out"))
    assert code == 2, err
    assert "has no safetensors weights" in err and "read only with --trust_pickle" in err, err
    code, err = convert(capsys, "--from", "marian", str(src), str(tmp_path / "out"), "--trust_pickle")
    assert code == 0, err
    assert (tmp_path / "out" / "model.safetensors").is_file()


def alias_bomb(levels: int) -> str:
    """A YAML config.yaml of JoeyNMT whose `data.src.level` is 10^`levels` strings written in about 1 KB: each
    level a list of ten aliases of the level below."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    lines += [
        "model: {encoder: {type: transformer, layer_norm: post}, decoder: {layer_norm: post}}",
        f"data: {{src: {{level: *l{levels - 1}}}, trg: {{level: bpe}}}}",
    ]
    return "\n".join(lines) + "\n"


def test_a_joeynmt_config_with_yaml_aliases_is_refused_as_it_is_read(tmp_path, capsys):
    """Without --trust_pickle (nothing of the checkpoint is read): the config's aliases are refused by the YAML
    reader itself, before any value is used or printed."""
    src = tmp_path / "joey"
    src.mkdir()
    (src / "config.yaml").write_text(alias_bomb(6), encoding="utf-8")
    for name in ("src_vocab.txt", "trg_vocab.txt"):
        (src / name).write_text("a\nb\n", encoding="utf-8")
    assert (src / "config.yaml").stat().st_size < 1500
    code, err = convert(capsys, "--from", "joeynmt", str(src), str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and len(err) < 500, err[:500]
    assert f"{src / 'config.yaml'} is not a valid YAML config" in err and "an alias (*l0)" in err, err
    assert not (tmp_path / "out").exists()
