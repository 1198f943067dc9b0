"""A saved folder loads and translates in a fresh process where this project cannot be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import ROOT, random_batch, tiny_model
from test_generation import word_tokenizer
from transformers import pipeline

import modeling
from modeling import save_with_remote_code

BLOCK_PROJECT = textwrap.dedent(
    """
    import sys
    for name in ("modeling", "corpus", "tokenizer", "inference", "export", "training", "benchmarks"):
        sys.modules[name] = None  # `import modeling` now raises ImportError: only remote code can be used
    """
)


def run_isolated(code: str, cwd) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["HF_HUB_OFFLINE"] = "1"
    result = subprocess.run([sys.executable, "-c", BLOCK_PROJECT + textwrap.dedent(code)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exported")
    model = tiny_model(seed=60)
    tokenizer = word_tokenizer()
    save_with_remote_code(model, folder, tokenizer)
    return folder, model, tokenizer


def test_folder_contents(exported):
    folder, _, _ = exported
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("VanillaTransformerForConditionalGeneration")
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_vanilla_transformer.TranslationPipeline"
    for name in ("modeling_vanilla_transformer.py", "configuration_vanilla_transformer.py",
                 "kernels_vanilla_transformer.py", "checks_vanilla_transformer.py", "positions_vanilla_transformer.py",
                 "pipeline_vanilla_transformer.py", "model.safetensors", "generation_config.json"):
        assert (folder / name).is_file(), name
    assert not list(folder.glob("*.bin"))  # weights only as safetensors


def test_fresh_process_loads_remote_code_and_generates(exported, tmp_path):
    folder, model, _ = exported
    src, mask = random_batch(97, 2, 7, seed=61)
    expected = model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6)
    out = run_isolated(
        f"""
        import torch
        from transformers import AutoModel, AutoModelForSeq2SeqLM
        model = AutoModelForSeq2SeqLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        base = AutoModel.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert type(base).__name__ == "VanillaTransformerModel"
        src = torch.tensor({src.tolist()}); mask = torch.tensor({mask.tolist()})
        print(model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6).tolist())
        """,
        cwd=tmp_path,
    )
    assert json.loads(out.strip().splitlines()[-1]) == expected.tolist()


def test_fresh_process_translation_pipeline(exported, tmp_path):
    folder, model, tokenizer = exported
    text = "w5 w9 w17 w33"
    expected = tokenizer.decode(
        model.generate(**tokenizer(text, return_tensors="pt", return_token_type_ids=False), max_new_tokens=6)[0],
        skip_special_tokens=True,
    )
    out = run_isolated(
        f"""
        import json
        from transformers import pipeline
        translator = pipeline("translation", model={str(folder)!r}, trust_remote_code=True, max_new_tokens=6)
        print(json.dumps(translator({text!r})))
        """,
        cwd=tmp_path,
    )
    assert json.loads(out.strip().splitlines()[-1]) == [{"translation_text": expected}]


def test_in_process_pipeline_after_import(exported):
    folder, model, tokenizer = exported
    assert "translation" in modeling.TranslationPipeline._registered_impl
    translator = pipeline("translation", model=model, tokenizer=tokenizer)
    result = translator(["w5 w9", "w7"], max_new_tokens=4, num_beams=1)
    assert [len(r) for r in result] == [1, 1] and all("translation_text" in r[0] for r in result)
    with torch.no_grad():
        ids = model.generate(**tokenizer("w7", return_tensors="pt", return_token_type_ids=False), max_new_tokens=4,
                             num_beams=1)
    assert result[1][0]["translation_text"] == tokenizer.decode(ids[0], skip_special_tokens=True)


def test_convert_script_reports_bad_folder(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_marian.py"), str(tmp_path),
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "config.json" in result.stderr and "Traceback" not in result.stderr
