"""`push_to_hub` of our models, however they were loaded, uploads a repo that loads and translates with
`trust_remote_code=True` in a fresh process where this project cannot be imported (through the stand-in Hub,
tests/helpers/hub_server.py): a model loaded through the classes `import vanilla_transformer` registers, and a model loaded from
that repo as remote code and pushed again."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, tiny_model
from helpers.hub_server import HubServer
from helpers.shared import CODE_FILES, MASK, SRC, TEXT, run_python, word_tokenizer
from test_hub import TOKEN, hub_env


@pytest.fixture(scope="module")
def hub():
    with HubServer(tokens={TOKEN: "alice"}) as server:
        yield server


def test_push_to_hub_of_local_and_remote_code_models_loads_without_the_project(hub, tmp_path):
    model, tokenizer = tiny_model(seed=62), word_tokenizer()  # a seed whose greedy and beam outputs differ
    model.save_pretrained(tmp_path / "created")
    tokenizer.save_pretrained(tmp_path / "created")
    # the model loaded through the classes `import vanilla_transformer` registers, pushed with its own push_to_hub
    run_python(
        f"""
        import vanilla_transformer.modeling as modeling
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        model = AutoModelForSeq2SeqLM.from_pretrained({str(tmp_path / "created")!r})
        assert type(model) is modeling.VanillaTransformerForConditionalGeneration, type(model)
        model.push_to_hub("alice/local-push")
        AutoTokenizer.from_pretrained({str(tmp_path / "created")!r}).push_to_hub("alice/local-push")
        """,
        tmp_path,
        env=hub_env(hub, tmp_path / "home-1", TOKEN),
        block_project=False,
    )
    # that repo loaded as remote code, pushed again
    run_python(
        """
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        model = AutoModelForSeq2SeqLM.from_pretrained("alice/local-push", trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        model.push_to_hub("alice/remote-push")
        AutoTokenizer.from_pretrained("alice/local-push", trust_remote_code=True).push_to_hub("alice/remote-push")
        """,
        tmp_path,
        env=hub_env(hub, tmp_path / "home-2", TOKEN),
    )
    for repo in ("alice/local-push", "alice/remote-push"):
        files = hub.files(repo)
        for name in CODE_FILES:  # byte for byte the project's sources
            assert files.get(name) == (ROOT / "modeling" / name).read_bytes(), (repo, name)

    expected = {
        "greedy": model.generate(input_ids=SRC, attention_mask=MASK, max_new_tokens=6, num_beams=1).tolist(),
        "beam": model.generate(input_ids=SRC, attention_mask=MASK, max_new_tokens=6, num_beams=3).tolist(),
        "pipeline": tokenizer.decode(
            model.generate(
                **tokenizer(TEXT, return_tensors="pt", return_token_type_ids=False),
                max_new_tokens=6,
                num_beams=1,
            )[0],
            skip_special_tokens=True,
        ),
    }
    assert expected["greedy"] != expected["beam"] and expected["pipeline"]
    out = run_python(
        f"""
        import json, torch
        from transformers import AutoModelForSeq2SeqLM, pipeline
        model = AutoModelForSeq2SeqLM.from_pretrained("alice/remote-push", trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        src = torch.tensor({SRC.tolist()}); mask = torch.tensor({MASK.tolist()})
        translator = pipeline("translation", model="alice/remote-push", trust_remote_code=True, max_new_tokens=6)
        print(json.dumps({{
            "greedy": model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6, num_beams=1).tolist(),
            "beam": model.generate(input_ids=src, attention_mask=mask, max_new_tokens=6, num_beams=3).tolist(),
            "pipeline": translator({TEXT!r}, num_beams=1)[0]["translation_text"],
        }}))
        """,
        tmp_path,
        env=hub_env(hub, tmp_path / "home-3"),  # no token: the repo is public
    )
    assert json.loads(out.strip().splitlines()[-1]) == expected
