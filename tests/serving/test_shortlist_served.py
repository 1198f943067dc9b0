"""serve --shortlist: every batch of the server decodes over the model's vocabulary shortlist, as translate does."""

from __future__ import annotations

import pytest
import torch
from conftest import export_tiny_model
from helpers.serving import post

from vanilla_transformer.inference import load_model_and_tokenizer, translate_nbest
from vanilla_transformer.inference.shortlist import Shortlist, load_shortlist

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

SOURCES = ["起初神创造天地。", "神说：要有光，就有了光。"]


def test_served_translations_decode_over_the_shortlist(tmp_path):
    from vanilla_transformer.serving import Limits, create_app, load_served, start_in_thread

    folder = export_tiny_model(tmp_path / "model")
    model, tokenizer = load_model_and_tokenizer(str(folder), dtype="float32")
    with pytest.raises(ValueError, match="vanilla-transformer shortlist"):
        load_served(str(folder), "torch", shortlist=True)
    size = model.config.decoder_vocab_size
    # every third target token and the special ones: outputs of the random model change
    Shortlist(
        offsets=torch.zeros(model.config.vocab_size + 1, dtype=torch.long),
        targets=torch.zeros(0, dtype=torch.long),
        always=torch.tensor(sorted({0, 1, 2, 3} | set(range(4, size, 3)))),
        source_vocab_size=model.config.vocab_size,
        target_vocab_size=size,
        settings={},
    ).save(folder)
    shortlist = load_shortlist(folder)
    expected = [hyps[0] for hyps in translate_nbest(model, tokenizer, SOURCES, shortlist=shortlist)]
    assert expected != [hyps[0] for hyps in translate_nbest(model, tokenizer, SOURCES)]
    served = load_served(str(folder), "torch", dtype="float32", shortlist=True)
    app = create_app(served, Limits(max_texts=8, max_request_bytes=4096, max_new_tokens=20), max_wait_ms=20)
    with start_in_thread(app) as running:
        reply = post(running.url, "/translate", {"text": SOURCES})
        assert reply.status_code == 200, reply.text
        assert reply.json()["translations"] == expected
