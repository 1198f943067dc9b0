"""Nothing the project loads can run code: model weights are read from safetensors only, and the pickled
training state (optimizer, scheduler, RNG) is read with torch.load(weights_only=True).

Each test plants a malicious pickle whose unpickling would create a marker file, in every place the project
might read a pickle from, and shows that loading fails with a clear error and the marker never appears. The
payload is first shown to be live (a plain unpickle does create the marker), so the tests cannot pass
vacuously. Also checked: the trust_remote_code statements of the README."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import ROOT, small_run
from helpers.layout import package_dirs
from helpers.shared import run_main, run_python

from vanilla_transformer.inference import load_model_and_tokenizer
from vanilla_transformer.training import checkpoint as ckpt
from vanilla_transformer.training import train
from vanilla_transformer.training.averaging import average_checkpoints


class Payload:
    """Unpickling this calls open(marker, "w"): arbitrary code execution, observable as a file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plant(path: Path, marker: Path) -> None:
    torch.save({"state": Payload(marker)}, path)


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "PWNED"


def test_the_payload_is_live(tmp_path, marker):
    plant(tmp_path / "evil.bin", marker)
    torch.load(tmp_path / "evil.bin", weights_only=False)  # what an unsafe loader would do
    assert marker.exists()
    marker.unlink()
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(tmp_path / "evil.bin", weights_only=True)
    assert not marker.exists()


# --------------------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def finished_run(tokenizer_dir, tmp_path_factory) -> tuple[Path, dict]:
    """The output folder of a one-update run, and the options (besides the folder) it was trained with."""
    root = tmp_path_factory.mktemp("run")
    options = dict(max_steps=1, tokenizer=tokenizer_dir, cache_dir=str(root / "cache"))
    train(small_run(root / "out", **options))
    return root / "out", options


def tampered_run(finished_run, tmp_path, marker, replace: str, planted: str | None = None) -> Path:
    """A copy of the run whose checkpoint has `replace` deleted and a malicious `planted` file (default: in
    its place), with a manifest rewritten to match: the attacker controls the whole folder."""
    out = tmp_path / "out"
    shutil.copytree(finished_run[0], out)
    folder = out / "checkpoints" / "checkpoint-1"
    (folder / replace).unlink()
    plant(folder / (planted or replace), marker)
    ckpt.write_manifest(folder)
    return out


@pytest.mark.parametrize("name", ["optimizer.bin", "scheduler.bin", "random_states_0.pkl"])
def test_malicious_training_state_is_not_unpickled(finished_run, tmp_path, marker, name):
    out = tampered_run(finished_run, tmp_path, marker, name)
    with pytest.raises(
        ckpt.CheckpointError,
        match=rf"{re.escape(name)} is not plain tensors and numbers, so it was "
        r"not loaded \(torch.load\(weights_only=True\) refused it.*nothing "
        r"in it was executed. Delete this checkpoint",
    ):
        train(small_run(out, resume=True, **{**finished_run[1], "max_steps": 2}))
    assert not marker.exists()


def test_checkpoint_weights_are_read_from_safetensors_only(finished_run, tmp_path, marker):
    out = tampered_run(finished_run, tmp_path, marker, "model.safetensors", planted="pytorch_model.bin")
    with pytest.raises(
        ckpt.CheckpointError,
        match="has no model.safetensors; model weights are only read from "
        "safetensors, never from pickle files",
    ):
        train(small_run(out, resume=True, **{**finished_run[1], "max_steps": 2}))
    with pytest.raises(ckpt.CheckpointError, match="has no model.safetensors"):
        average_checkpoints([out / "checkpoints" / "checkpoint-1"])  # vanilla-transformer average
    assert not marker.exists()


# ----------------------------------------------------------------------------------- model folders


@pytest.fixture
def pickled_model_folder(export, tmp_path, marker) -> Path:
    """A copy of the tiny exported model whose weights are a malicious pytorch_model.bin (no safetensors)."""
    folder = tmp_path / "evil-model"
    shutil.copytree(export, folder)
    (folder / "model.safetensors").unlink()
    plant(folder / "pytorch_model.bin", marker)
    return folder


def test_model_folder_with_pickled_weights_is_not_unpickled(pickled_model_folder, marker):
    from transformers import AutoModelForSeq2SeqLM

    with pytest.raises(ValueError, match="has no safetensors weights.*never read from pickle files"):
        load_model_and_tokenizer(str(pickled_model_folder))
    with pytest.raises(Exception, match="Weights only load failed"):
        # plain transformers also refuses (weights_only=True)
        AutoModelForSeq2SeqLM.from_pretrained(pickled_model_folder)
    assert not marker.exists()


@pytest.mark.parametrize("name", ["translate", "evaluate"])
def test_scripts_refuse_a_model_folder_with_pickled_weights(
    pickled_model_folder, marker, name, monkeypatch, capsys
):
    """vanilla-transformer translate and vanilla-transformer evaluate load models through the safe loader: exit code 2 with its
    message, and nothing is unpickled."""
    script = importlib.import_module(f"vanilla_transformer.commands.{name}")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("起初\n".encode())))
    assert script.main(["--model", str(pickled_model_folder)]) == 2
    err = capsys.readouterr().err
    assert (
        "has no safetensors weights" in err
        and "never read from pickle files" in err
        and "Traceback" not in err
    )
    assert not marker.exists()


def test_converter_does_not_unpickle_a_malicious_marian_folder(tmp_path, marker):
    from transformers import MarianConfig

    from vanilla_transformer.convert.marian import convert_marian_checkpoint

    src = tmp_path / "marian"
    MarianConfig(
        vocab_size=50,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    ).save_pretrained(src)
    plant(src / "pytorch_model.bin", marker)
    with pytest.raises(FileNotFoundError, match="has no safetensors weights.*read only with --trust_pickle"):
        convert_marian_checkpoint(src, tmp_path / "out")
    # the opt-in reads the pickle with torch.load(weights_only=True), which still refuses the payload
    with pytest.raises(Exception, match="Weights only load failed"):
        convert_marian_checkpoint(src, tmp_path / "out", trust_pickle=True)
    assert not marker.exists()


# ----------------------------------------------------------------------------------- the source itself

UNSAFE = [
    (re.compile(r"torch\.load\((?![^)]*weights_only=True)"), "torch.load without weights_only=True"),
    (re.compile(r"\bpickle\.loads?\(|\bdill\.|\bjoblib\.load|\bcloudpickle\."), "pickle/dill/joblib loading"),
    (re.compile(r"allow_pickle\s*=\s*True"), "numpy allow_pickle=True"),
    (
        re.compile(r"use_safetensors\s*=\s*False|weights_only\s*=\s*False"),
        "safetensors/weights_only disabled",
    ),
]


# the one reviewed exception: a toolkit's pickled checkpoint (fairseq, JoeyNMT) read with the full unpickler after
# weights_only refused it, only with --trust_pickle (test_the_full_unpickler_needs_trust_pickle)
FULL_UNPICKLER = (
    "convert/common.py",
    'return torch.load(path, map_location="cpu", weights_only=False)',
)


def test_project_code_never_unpickles_untrusted_data():
    # every installed package, the scripts and the studies
    folders = [*package_dirs().values(), ROOT / "scripts", ROOT / "studies"]
    sources = sorted({p for folder in folders for p in folder.rglob("*.py")})
    assert len(sources) > 20
    found = [
        f"{path.relative_to(ROOT)}:{n}: {why}"
        for path in sources
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for pattern, why in UNSAFE
        if pattern.search(line)
        and (str(path.relative_to(ROOT)).replace("src/vanilla_transformer/", ""), line.strip())
        != FULL_UNPICKLER
    ]
    assert not found, found


def test_the_full_unpickler_needs_trust_pickle(tmp_path):
    """The one full unpickler refuses without the flag and reads nothing then; with it, a checkpoint of plain
    tensors is read by weights_only alone (the full unpickler is reached only for other objects)."""
    from unittest import mock

    from vanilla_transformer.convert.common import load_pickled_checkpoint

    marker = tmp_path / "ran"
    path = tmp_path / "checkpoint.pt"
    plant(path, marker)
    with mock.patch("torch.load") as load, pytest.raises(ValueError, match="read only with --trust_pickle"):
        load_pickled_checkpoint(path, False, "")
    load.assert_not_called()
    assert not marker.exists()
    plain = tmp_path / "plain.pt"
    torch.save({"model": {"w": torch.ones(2)}}, plain)
    calls = []
    real = torch.load

    def recorded(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    with mock.patch("torch.load", recorded):
        assert torch.equal(load_pickled_checkpoint(plain, True, "")["model"]["w"], torch.ones(2))
    assert calls == [True]


# --------------------------------------------------------------------------------- trust_remote_code


def test_trust_remote_code_is_needed_only_without_the_package(export):
    """README: the flag is needed only where this package is not installed (imported); with `import vanilla_transformer`
    the registered classes load the folder and no remote code runs."""
    from transformers import AutoModelForSeq2SeqLM

    import vanilla_transformer.modeling as modeling

    model = AutoModelForSeq2SeqLM.from_pretrained(export)  # no flag
    assert type(model) is modeling.VanillaTransformerForConditionalGeneration
    out = run_python(
        textwrap.dedent(
            f"""
            from transformers import AutoModelForSeq2SeqLM
            try:
                AutoModelForSeq2SeqLM.from_pretrained({str(export)!r})
                print("loaded without the flag")
            except ValueError as err:
                print("refused:", err)
            model = AutoModelForSeq2SeqLM.from_pretrained({str(export)!r}, trust_remote_code=True)
            print("with the flag:", type(model).__module__)
            """
        ),
        cwd=export.parent,
    )
    assert "refused:" in out and "trust_remote_code=True" in out, out
    assert "with the flag: transformers_modules." in out, out


def test_a_corrupt_safetensors_file_is_a_clear_error(tmp_path):
    from conftest import export_tiny_model

    folder = export_tiny_model(tmp_path / "model")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"has a corrupt model.safetensors .*export the model again"):
        load_model_and_tokenizer(str(folder))


# ------------------------------------------------------------------------------------------------ model code

FOREIGN_CODE = {
    "configuration_evil.py": """
        import pathlib
        pathlib.Path({marker!r}).write_text("ran")
        from vanilla_transformer.modeling import VanillaTransformerConfig

        class EvilConfig(VanillaTransformerConfig):
            model_type = "evil_transformer"
        """,
    "modeling_evil.py": """
        import pathlib
        pathlib.Path({marker!r}).write_text("ran")
        from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration
        from .configuration_evil import EvilConfig

        class EvilModel(VanillaTransformerForConditionalGeneration):
            config_class = EvilConfig
        """,
}
FOREIGN_AUTO_MAP = {
    "AutoConfig": "configuration_evil.EvilConfig",
    "AutoModelForSeq2SeqLM": "modeling_evil.EvilModel",
}


def plant_code(folder: Path, marker: Path, model_type: str) -> Path:
    """`folder` (a saved model) with Python files that create `marker` when imported, named by its config's
    auto_map, and `model_type` as its config's model type."""
    for name, code in FOREIGN_CODE.items():
        (folder / name).write_text(textwrap.dedent(code.format(marker=str(marker))), encoding="utf-8")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(model_type=model_type, auto_map=FOREIGN_AUTO_MAP)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@pytest.fixture
def foreign_code_folder(export, tmp_path, marker) -> Path:
    """A copy of the tiny exported model whose config names another model type, loaded by code of the folder
    (auto_map) that creates the marker file when imported."""
    return plant_code(shutil.copytree(export, tmp_path / "evil-code"), marker, "evil_transformer")


def test_the_planted_code_is_live_and_loads_with_the_flag(foreign_code_folder, marker, monkeypatch, capsys):
    """With --trust_remote_code the folder's code runs (the marker appears) and the model translates: the refusals
    below are the policy's, not a broken folder's."""
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(foreign_code_folder), "--trust_remote_code", stdin="起初\n"
    )
    assert code == 0, err
    assert len(out.splitlines()) == 1 and marker.exists()


def _train_init_from(folder: Path, out: Path) -> int:
    """`vanilla-transformer train --init_from folder` for one update of the tiny preset, writing to `out`."""
    from vanilla_transformer.commands.train import main as train_main

    return train_main(
        ["--init_from", str(folder), "--output_dir", str(out), "--max_steps", "1", "--preset", "tiny"]
        + ["--max_lines", "300", "--valid_size", "20", "--test_size", "6", "--bleu_samples", "0"]
        + ["--report_to", "none", "--num_threads", "1", "--cache_dir", str(out.parent / "cache")]
    )


# entry point -> its module (a command, or a study) and its command line for model folder F and output folder O (F
# replaced by a checkpoint for average)
ENTRY_POINTS = {
    "translate": ("vanilla_transformer.commands.translate", ["--model", "F"]),
    "evaluate": ("vanilla_transformer.commands.evaluate", ["--model", "F"]),
    "serve": ("vanilla_transformer.commands.serve", ["--model", "F"]),
    "demo": ("vanilla_transformer.commands.demo", ["--model", "F"]),
    "plot-attention": (
        "vanilla_transformer.commands.plot_attention",
        ["--model", "F", "--text", "起初", "-o", "O/a.png"],
    ),
    "soak study": ("studies.soak", ["--model", "F", "--count", "1"]),
    "export ct2": ("vanilla_transformer.commands.export", ["--engine", "ct2", "F", "O"]),
    "export onnx": ("vanilla_transformer.commands.export", ["--engine", "onnx", "F", "O"]),
    "convert": ("vanilla_transformer.commands.convert", ["--from", "marian", "F", "O"]),
}


def _never_serve(*args, **kwargs):
    raise AssertionError("the model loaded")


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_foreign_code_unasked(
    foreign_code_folder, tmp_path, marker, entry, monkeypatch, capsys
):
    """Each command that loads a model refuses a folder that needs its own code, without a traceback; the code
    never runs."""
    module, argv = ENTRY_POINTS[entry]
    script = importlib.import_module(module)
    argv = [str(foreign_code_folder) if a == "F" else a.replace("O", str(tmp_path / "out"), 1) for a in argv]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("起初\n".encode())))
    # the demo command sets it for gradio; set here so that the test restores it
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    # a model that loads fails the test here instead of serving until the test times out
    servers = {"serve": "vanilla_transformer.serving.run_server", "demo": "gradio.Blocks.launch"}
    if entry in servers:
        monkeypatch.setattr(servers[entry], _never_serve)
    assert script.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "evil_transformer" in err and "Traceback" not in err, err
    assert not marker.exists()


def test_train_init_from_refuses_foreign_code(foreign_code_folder, tmp_path, marker, capsys):
    assert _train_init_from(foreign_code_folder, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "evil_transformer" in err and "runs only when asked" in err and "Traceback" not in err, err
    assert not marker.exists()


def test_train_init_from_refuses_pickled_weights(pickled_model_folder, tmp_path, marker, capsys):
    assert _train_init_from(pickled_model_folder, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "has no safetensors weights" in err and "never read from pickle files" in err, err
    assert not marker.exists()


def test_average_refuses_a_checkpoint_of_foreign_code(finished_run, tmp_path, marker, capsys):
    from vanilla_transformer.commands.average import main as average_main

    out = tmp_path / "out"
    shutil.copytree(finished_run[0], out)
    folder = plant_code(out / "checkpoints" / "checkpoint-1", marker, "evil_transformer")
    ckpt.write_manifest(folder)
    assert average_main(["--checkpoints", str(folder), "--output", str(tmp_path / "avg")]) == 2
    err = capsys.readouterr().err
    assert "evil_transformer" in err and "Traceback" not in err, err
    assert not marker.exists()


def test_our_model_type_loads_with_our_classes_whatever_its_auto_map(export, tmp_path, marker):
    """A folder of this project's model type whose auto_map names other code loads with the installed classes,
    with and without the flag: that code never runs."""
    import vanilla_transformer.modeling as modeling

    folder = plant_code(shutil.copytree(export, tmp_path / "ours"), marker, "vanilla_transformer")
    for trust in (False, True):
        model, _ = load_model_and_tokenizer(str(folder), trust_remote_code=trust)
        assert type(model) is modeling.VanillaTransformerForConditionalGeneration
    assert not marker.exists()


@pytest.mark.parametrize("name", ["folder/on/disk", "alice/zh-en"])
def test_the_remote_code_rule_is_the_same_for_a_folder_and_a_hub_repo(name):
    from vanilla_transformer.inference.loading_policy import remote_code_rule

    config = {"model_type": "evil_transformer", "auto_map": FOREIGN_AUTO_MAP}
    for unasked in (None, False):
        with pytest.raises(
            ValueError, match=r"evil_transformer.*modeling_evil.EvilModel.*--trust_remote_code"
        ):
            remote_code_rule(config, name, unasked)
    assert remote_code_rule(config, name, True) is True
    assert remote_code_rule({**config, "model_type": "vanilla_transformer"}, name, True) is False
    with pytest.raises(ValueError, match="this command loads only this project's models"):
        remote_code_rule(config, name, True, opt_in=None)


def test_a_tokenizer_with_its_own_code_is_refused_without_asking(export, tmp_path, marker, monkeypatch):
    """The one tokenizer loader (training's --tokenizer, the ct2 and onnx engines, average) never lets
    transformers ask on stdin whether to run a tokenizer's code: a "y" waiting there is not read."""
    from vanilla_transformer.tokenizer.loading import load_tokenizer

    folder = shutil.copytree(export, tmp_path / "evil-tokenizer")
    (folder / "tokenization_evil.py").write_text(
        textwrap.dedent(
            f"""
            import pathlib
            pathlib.Path({str(marker)!r}).write_text("ran")
            from transformers import PreTrainedTokenizerFast

            class EvilTokenizerFast(PreTrainedTokenizerFast):
                pass
            """
        ),
        encoding="utf-8",
    )
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings.update(
        tokenizer_class="EvilTokenizerFast",
        auto_map={"AutoTokenizer": [None, "tokenization_evil.EvilTokenizerFast"]},
    )
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    with pytest.raises(ValueError, match="does not load"):
        load_tokenizer(folder)
    assert not marker.exists()
    assert (
        type(load_tokenizer(folder, trust_remote_code=True)).__name__ == "EvilTokenizerFast"
        and marker.exists()
    )
