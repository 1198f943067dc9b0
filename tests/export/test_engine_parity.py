"""With default options, `vanilla-transformer translate` gives the same tokens on every engine: the torch engine
(the model folder, in its saved float32 precision whatever the CPU), the CTranslate2 float32 export and the ONNX
export of the same model, on every CPU kind (simulated as in tests/inference/test_precision_choice.py)."""

from __future__ import annotations

import pytest
import torch
from conftest import MAX_POSITIONS, tiny_model, tiny_tokenizer
from helpers.precision import CPU_KINDS, simulate
from helpers.shared import run_main

pytest.importorskip("ctranslate2")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

LINES = [
    "起初，神创造天地。",
    "地是空虚混沌",
    "神说：「要有光」，就有了光。",
    "神看光是好的，就把光暗分开了。",
    "And God said",
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny model saved as a folder, and its CTranslate2 (float32) and ONNX exports."""
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.export.onnx import export_onnx
    from vanilla_transformer.modeling import save_with_remote_code

    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    # as a trained model: <pad> and <s> ~0 probability (CTranslate2 removes suppressed tokens before the softmax,
    # transformers after), sentences that end at varied lengths
    with torch.no_grad():
        model.final_logits_bias[[0, 2]] = -30.0
        model.final_logits_bias[3] = 2.5
    model.generation_config.max_new_tokens = 10
    root = tmp_path_factory.mktemp("parity")
    folder = save_with_remote_code(model, root / "model", tokenizer)
    return {
        "torch": folder,
        "ct2": export_ct2(folder, root / "ct2"),
        "onnx": export_onnx(folder, root / "onnx"),
    }


@pytest.mark.parametrize("cpu", list(CPU_KINDS))
def test_every_engine_translates_alike_with_the_default_options(folders, monkeypatch, capsys, cpu):
    simulate(monkeypatch, *CPU_KINDS[cpu])
    stdin = "\n".join(LINES) + "\n"
    outputs = {}
    for engine, folder in folders.items():
        code, out, err = run_main(
            monkeypatch, capsys, "--engine", engine, "--model", str(folder), stdin=stdin
        )
        assert code == 0, err
        outputs[engine] = out.splitlines()
    assert len(outputs["torch"]) == len(LINES) and len(set(outputs["torch"])) > 1
    assert outputs["ct2"] == outputs["torch"] and outputs["onnx"] == outputs["torch"], outputs
