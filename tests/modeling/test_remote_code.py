"""Every save of our models writes a folder that loads and translates in a fresh process where this project
cannot be imported: a model created from its config, the same model loaded through the registered local classes
(package installed), and a model loaded as remote code, each saved with plain `save_pretrained`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, tiny_family_config, tiny_model
from helpers.remote_code import foreign_imports, shipped_files
from helpers.shared import CODE_FILES, MASK, SRC, TEXT, run_python, word_tokenizer
from transformers import pipeline

import vanilla_transformer.modeling as modeling
from vanilla_transformer.modeling import save_with_remote_code


@pytest.fixture(scope="module")
def original():
    """The model (created from its config) and tokenizer every folder below was saved from."""
    return tiny_model(seed=62), word_tokenizer()  # a seed whose greedy, beam-3 and beam-4 outputs all differ


@pytest.fixture(scope="module")
def saved(original, tmp_path_factory) -> dict[str, Path]:
    """Folders written by plain `save_pretrained`, each from a different kind of model object:
    "created" (the model built from its config, in this process), "local" (loaded from "created" through the
    classes `import vanilla_transformer` registers, in a fresh process), "remote" (loaded from "local" as remote code, in a
    fresh process that cannot import the project); and "exported" (`save_with_remote_code`)."""
    root = tmp_path_factory.mktemp("saved")
    model, tokenizer = original
    folders = {name: root / name for name in ("created", "local", "remote", "exported")}
    model.save_pretrained(folders["created"])
    tokenizer.save_pretrained(folders["created"])
    save_with_remote_code(model, folders["exported"], tokenizer)
    run_python(
        f"""
        import vanilla_transformer.modeling as modeling
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        model = AutoModelForSeq2SeqLM.from_pretrained({str(folders["created"])!r})
        assert type(model) is modeling.VanillaTransformerForConditionalGeneration, type(model)
        model.save_pretrained({str(folders["local"])!r})
        AutoTokenizer.from_pretrained({str(folders["created"])!r}).save_pretrained({str(folders["local"])!r})
        """,
        cwd=root,
        block_project=False,
    )
    run_python(
        f"""
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        model = AutoModelForSeq2SeqLM.from_pretrained({str(folders["local"])!r}, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        model.save_pretrained({str(folders["remote"])!r})
        tokenizer = AutoTokenizer.from_pretrained({str(folders["local"])!r}, trust_remote_code=True)
        tokenizer.save_pretrained({str(folders["remote"])!r})
        """,
        cwd=root,
    )
    return folders


@pytest.mark.parametrize("kind", ["created", "local", "remote", "exported"])
def test_every_save_writes_the_code(saved, kind):
    folder = saved[kind]
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_vanilla_transformer.VanillaTransformerConfig",
        "AutoModel": "modeling_vanilla_transformer.VanillaTransformerModel",
        "AutoModelForSeq2SeqLM": "modeling_vanilla_transformer.VanillaTransformerForConditionalGeneration",
    }
    assert config["custom_pipelines"] == {
        "translation": {
            "impl": "pipeline_vanilla_transformer.TranslationPipeline",
            "pt": ["AutoModelForSeq2SeqLM"],
            "type": "text",
        }
    }
    for name in CODE_FILES:  # byte for byte the project's sources, whoever saved them
        assert (folder / name).read_bytes() == (ROOT / "modeling" / name).read_bytes(), name
    for name in ("model.safetensors", "generation_config.json", "tokenizer.json"):
        assert (folder / name).is_file(), name
    assert not list(folder.glob("*.bin"))  # weights only as safetensors


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_a_save_writes_the_named_modules_and_their_sibling_imports(family, saved, tmp_path):
    """The code files of a saved folder are the modules config.json names (`auto_map`, `custom_pipelines`) and,
    recursively, their sibling imports, read from modeling/ (`shipped_files`, the set whose imports
    tests/package/test_layering.py checks): no converter travels, and what travels imports only the standard
    library, torch and transformers."""
    if family == "encoder-decoder":
        folder = saved["created"]
    else:
        side = "decoder" if family == "decoder-only" else "encoder"
        config_class, model_class = {
            "decoder": (modeling.VanillaDecoderOnlyConfig, modeling.VanillaDecoderOnlyForCausalLM),
            "encoder": (modeling.VanillaEncoderOnlyConfig, modeling.VanillaEncoderOnlyForMaskedLM),
        }[side]
        model_class(tiny_family_config(config_class, side, 16, vocab_size=40)).save_pretrained(tmp_path)
        folder = tmp_path
    config = json.loads((folder / "config.json").read_text())
    named = [*config["auto_map"].values()]
    named += [task["impl"] for task in config.get("custom_pipelines", {}).values()]
    entries = {reference.rsplit(".", 1)[0] for reference in named}
    written = sorted(folder.glob("*.py"))
    assert {path.name for path in written} == {
        path.name for path in shipped_files(ROOT / "modeling", entries)
    }
    assert not [path.name for path in written if path.name.startswith("convert")]
    assert foreign_imports(written) == []


def test_fresh_process_generates_and_translates(saved, original, tmp_path):
    """The last folder of the chain (saved by a remote-code model) in a process that cannot import the project:
    generate() gives the original model's tokens (greedy, beam, and the saved generation_config's beam 4), and the
    "translation" pipeline its translations."""
    model, tokenizer = original
    expected = {
        "greedy": model.generate(input_ids=SRC, attention_mask=MASK, max_new_tokens=6, num_beams=1).tolist(),
        "beam": model.generate(input_ids=SRC, attention_mask=MASK, max_new_tokens=6, num_beams=3).tolist(),
        "default": model.generate(input_ids=SRC, attention_mask=MASK, max_new_tokens=6).tolist(),
        "pipeline": [
            [
                {
                    "translation_text": tokenizer.decode(
                        model.generate(
                            **tokenizer(text, return_tensors="pt", return_token_type_ids=False),
                            max_new_tokens=6,
                            num_beams=beams,
                        )[0],
                        skip_special_tokens=True,
                    )
                }
            ]
            for text, beams in ((TEXT, 1), ("w7 w8", 3))
        ],
    }
    assert model.generation_config.num_beams == 4
    # the three decodings differ here, so each comparison checks its own setting (and the saved beam 4 for
    # "default"); the translations are not empty
    assert len({json.dumps(expected[name]) for name in ("greedy", "beam", "default")}) == 3
    assert all(row[0]["translation_text"] for row in expected["pipeline"])
    out = run_python(
        f"""
        import json, torch
        from transformers import AutoModel, AutoModelForSeq2SeqLM, pipeline
        folder = {str(saved["remote"])!r}
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        base = AutoModel.from_pretrained(folder, trust_remote_code=True)
        assert type(base).__name__ == "VanillaTransformerModel", type(base)
        translator = pipeline("translation", model=folder, trust_remote_code=True, max_new_tokens=6)
        assert type(translator).__module__.startswith("transformers_modules"), type(translator).__module__
        src = torch.tensor({SRC.tolist()}); mask = torch.tensor({MASK.tolist()})
        print(json.dumps({{
            "greedy": model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6, num_beams=1).tolist(),
            "beam": model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6, num_beams=3).tolist(),
            "default": model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6).tolist(),
            "pipeline": [translator({TEXT!r}, num_beams=1), translator("w7 w8", num_beams=3)],
        }}))
        """,
        cwd=tmp_path,
    )
    assert json.loads(out.strip().splitlines()[-1]) == expected


def test_in_process_pipeline_after_import(original):
    """`import vanilla_transformer` makes pipeline("translation") our pipeline; a list gives one dict per text (several per
    text with num_return_sequences); long sources are truncated to the model's maximum unless truncation=False."""
    model, tokenizer = original

    def translate(text: str, beams: int = 1, count: int = 1) -> list[str]:
        ids = model.generate(
            **tokenizer(text, return_tensors="pt", return_token_type_ids=False),
            max_new_tokens=4,
            num_beams=beams,
            num_return_sequences=count,
        )
        return tokenizer.batch_decode(ids, skip_special_tokens=True)

    # transformers' pipeline() overloads list only its own tasks; "translation" is the one this package registers
    translator = pipeline("translation", model=model, tokenizer=tokenizer)  # pyright: ignore[reportCallIssue, reportArgumentType]
    assert type(translator) is modeling.TranslationPipeline
    with torch.no_grad():
        assert translator(["w5 w9", "w7"], max_new_tokens=4, num_beams=1) == [
            {"translation_text": translate("w5 w9")[0]},
            {"translation_text": translate("w7")[0]},
        ]
        assert translator("w7", max_new_tokens=4, num_beams=1) == [{"translation_text": translate("w7")[0]}]
        nbest = translator(["w5 w9", "w7"], max_new_tokens=4, num_beams=3, num_return_sequences=2)
        assert nbest == [
            [{"translation_text": text} for text in translate(source, 3, 2)] for source in ("w5 w9", "w7")
        ]
        long_text = " ".join(f"w{4 + i % 90}" for i in range(model.config.max_position_embeddings + 6))
        truncated = " ".join(long_text.split()[: model.config.max_position_embeddings])
        assert translator(long_text, max_new_tokens=4, num_beams=1) == [
            {"translation_text": translate(truncated)[0]}
        ]
        with pytest.raises(ValueError, match="max_position_embeddings"):
            translator(long_text, truncation=False, max_new_tokens=4, num_beams=1)


def test_convert_script_reports_bad_folder(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vanilla_transformer",
            "convert",
            "--from",
            "marian",
            str(tmp_path),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "config.json" in result.stderr and "Traceback" not in result.stderr
