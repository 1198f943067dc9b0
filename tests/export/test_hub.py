"""Hub push and load end to end against the stand-in Hub (tests/helpers/hub_server.py): vanilla-transformer push in a
subprocess pushes a tiny exported model, then a fresh process that cannot import this project loads the repo
through the same endpoint with remote code, translates with generate() and with the "translation" pipeline.
A trained output folder is pushed without its training state unless asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from helpers.hub_server import HubServer, git_blob_oid
from helpers.synthetic_run import train_synthetic_run
from huggingface_hub import ModelCard, ModelCardData
from huggingface_hub.utils import filter_repo_objects

from vanilla_transformer.export import (
    TRAINING_STATE_PATTERNS,
    check_exported_folder,
    hub_model_card,
    push_folder,
)
from vanilla_transformer.inference import load_model_and_tokenizer, translate_lines
from vanilla_transformer.training.run_dir import RunDir

TOKEN = "hf_stand_in_SECRET_token_7d1c"
SOURCE = "起初，神创造天地。"

# Run in a fresh process, cwd outside the repo, PYTHONPATH unset. The project is installed in editable mode,
# so its top-level packages are also blocked on import: everything must come from the Hub repo.
LOAD_FROM_HUB = r"""
import importlib.abc, json, sys

BLOCKED = ("vanilla_transformer",)

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{name} is blocked: the project must not be needed")
        return None

sys.meta_path.insert(0, Block())
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

repo_id, source = sys.argv[1], sys.argv[2]
model = AutoModelForSeq2SeqLM.from_pretrained(repo_id, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=True)
batch = tokenizer([source], return_tensors="pt")
ids = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=1)
translator = pipeline("translation", model=repo_id, trust_remote_code=True)
print(json.dumps({
    "module": type(model).__module__,
    "pipeline_module": type(translator).__module__,
    "generate": tokenizer.batch_decode(ids, skip_special_tokens=True)[0],
    "pipeline": translator(source, num_beams=1)[0]["translation_text"],
    "project_imported": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED),
}))
"""


@pytest.fixture(scope="module")
def hub():
    with HubServer(tokens={TOKEN: "alice"}) as server:
        yield server


def hub_env(hub: HubServer, home: Path, token: str | None = None) -> dict[str, str]:
    """Environment of a fresh process that talks to the stand-in Hub only (and never to huggingface.co)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "PYTHON"))}
    env.update(
        HF_ENDPOINT=hub.endpoint,
        HF_HOME=str(home),
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
    )
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def push(hub, home, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "push", *args],
        env=hub_env(hub, home, token),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_push_then_load_in_a_fresh_process_without_the_project(hub, export, tmp_path):
    before = len(hub.requests)  # the module's other tests share the server
    done = push(hub, tmp_path / "push-home", "--model", str(export), "--repo_id", "alice/tiny-zh-en")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(f"{hub.endpoint}/alice/tiny-zh-en/commit/")
    assert TOKEN not in done.stdout + done.stderr

    local = {p.name: p.read_bytes() for p in export.iterdir() if p.is_file()}
    assert {
        "README.md",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "pipeline_vanilla_transformer.py",
    } <= set(local)
    assert hub.files("alice/tiny-zh-en") == local  # every file of the folder, byte for byte, in one commit
    assert hub.repos["alice/tiny-zh-en"].messages == [f"Upload {export.name} (vanilla-transformer export)"]
    writes = [r for r in hub.requests[before:] if r[0] == "POST" and "/agent-harnesses" not in r[1]]
    assert writes and all(authorized for _, _, authorized in writes)

    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    load = subprocess.run(
        [sys.executable, "-c", LOAD_FROM_HUB, "alice/tiny-zh-en", SOURCE],
        cwd=cwd,
        env=hub_env(hub, tmp_path / "load-home"),  # no token: the repo is public
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert load.returncode == 0, load.stderr
    assert "Do you wish to run the custom code" not in load.stdout + load.stderr
    result = json.loads(load.stdout.strip().splitlines()[-1])
    assert result["module"].startswith("transformers_modules"), result
    assert result["pipeline_module"].startswith("transformers_modules"), result
    assert result["project_imported"] == []

    model, tokenizer = load_model_and_tokenizer(str(export), device="cpu")
    expected = translate_lines(model, tokenizer, [SOURCE], num_beams=1)[0]
    assert result["generate"] == expected != ""
    assert result["pipeline"] == expected
    downloaded = {
        path.rsplit("/", 1)[-1]
        for method, path, _ in hub.requests[before:]
        if "/resolve/" in path and method == "GET"
    }
    assert {
        "config.json",
        "model.safetensors",
        "modeling_vanilla_transformer.py",
        "tokenizer.json",
    } <= downloaded


def test_translate_cli_reads_a_hub_repo_id(hub, export, tmp_path):
    """vanilla-transformer translate --model USER/NAME downloads through the endpoint; an unknown repo exits 2."""
    if "alice/tiny-zh-en" not in hub.repos:
        assert push(hub, tmp_path, "--model", str(export), "--repo_id", "alice/tiny-zh-en").returncode == 0
    env = hub_env(hub, tmp_path / "home")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vanilla_transformer",
            "translate",
            "--model",
            "alice/tiny-zh-en",
            "--num_beams",
            "1",
            "--device",
            "cpu",
        ],
        input=f"{SOURCE}\n\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    model, tokenizer = load_model_and_tokenizer(str(export), device="cpu")
    assert done.stdout == translate_lines(model, tokenizer, [SOURCE], num_beams=1)[0] + "\n\n"
    missing = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "translate", "--model", "alice/no-such-repo"],
        input="x\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert (
        missing.returncode == 2
        and "'alice/no-such-repo' is neither a local folder nor a loadable Hub repo" in (missing.stderr)
    )
    assert "RepositoryNotFoundError" in missing.stderr and "Traceback" not in missing.stderr


def test_push_without_token_fails_clearly(hub, export, tmp_path):
    before = len(hub.requests)
    done = push(hub, tmp_path, "--model", str(export), "--repo_id", "alice/no-token", token=None)
    assert done.returncode == 2 and "no Hugging Face token found" in done.stderr and "HF_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr
    assert not [r for r in hub.requests[before:] if r[0] == "POST"]  # nothing was sent


def test_push_with_a_rejected_token_never_prints_it(hub, export, tmp_path):
    done = push(
        hub, tmp_path, "--model", str(export), "--repo_id", "alice/bad-token", token="hf_WRONG_secret_99"
    )
    assert done.returncode == 1 and "401" in done.stderr and "write access to 'alice'" in done.stderr
    assert "Traceback" not in done.stderr
    assert "hf_WRONG_secret_99" not in done.stdout + done.stderr
    assert "alice/bad-token" not in hub.repos


def test_push_bad_folders_exit_2(hub, tmp_path):
    missing = push(hub, tmp_path, "--model", str(tmp_path / "nope"), "--repo_id", "alice/x")
    assert (
        missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    )
    with pytest.raises(ValueError, match="has no config.json"):
        check_exported_folder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vanilla_transformer"}))
    with pytest.raises(ValueError, match="has no auto_map"):
        check_exported_folder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"auto_map": {"AutoConfig": "configuration_x.XConfig"}}))
    with pytest.raises(ValueError, match="configuration_x.py is missing"):
        check_exported_folder(tmp_path)
    with pytest.raises(ValueError, match="USER/NAME"):
        push_folder(tmp_path, "no-namespace", token=TOKEN, endpoint=hub.endpoint)


PRIVATE_PUSH_TWICE = r"""
import json, sys
from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError
from vanilla_transformer.export import push_folder

folder, repo_id = sys.argv[1], sys.argv[2]
first = push_folder(folder, repo_id, private=True)
second = push_folder(folder, repo_id, private=True)
info = HfApi().model_info(repo_id)
try:
    HfApi().model_info(repo_id, token=False)
    anonymous = "visible"
except RepositoryNotFoundError:
    anonymous = "not found"
print(json.dumps({"first": first, "second": second, "sha": info.sha, "private": info.private,
                  "siblings": sorted(s.rfilename for s in info.siblings), "anonymous": anonymous}))
"""


def test_private_repo_and_unchanged_second_push(hub, export, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PRIVATE_PUSH_TWICE, str(export), "alice/private-tiny"],
        env=hub_env(hub, tmp_path, TOKEN),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["private"] and result["anonymous"] == "not found"
    assert result["siblings"] == sorted(p.name for p in export.iterdir() if p.is_file())
    assert result["first"].endswith(result["sha"]) and result["second"].endswith(result["sha"])
    assert len(hub.repos["alice/private-tiny"].messages) == 1  # unchanged files are not committed again
    assert "No files have been modified since last commit" in done.stderr
    assert git_blob_oid(hub.files("alice/private-tiny")["README.md"]) == git_blob_oid(
        (export / "README.md").read_bytes()
    )


def test_model_card_has_metadata_and_usage():
    card = hub_model_card({"model_type": "vanilla_transformer", "d_model": 512}, "alice/m", {"num_beams": 4})
    parsed = ModelCard(card)
    assert isinstance(parsed.data, ModelCardData)
    assert (parsed.data.library_name, parsed.data.pipeline_tag) == ("transformers", "translation")
    assert parsed.data.tags is not None and "custom_code" in parsed.data.tags
    assert 'model_id = "alice/m"\n' in card and "from_pretrained(model_id, trust_remote_code=True)" in card
    assert "| d_model | 512 |" in card and "| vocabulary | not set |" in card and "num_beams=4" in card


# ---- a trained output folder: the model is pushed, the run's state is not (unless asked for) -----------------
STATE_FOLDERS = ("checkpoints", "runs", "cache", "plots")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The output folder of a short run (tests/helpers/synthetic_run.py): the model plus checkpoints/, runs/, cache/,
    plots/."""
    return Path(train_synthetic_run(tmp_path_factory.mktemp("hub-run"))[1].output_dir)


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


PUSH_WITH_DEFAULTS = r"""
import sys
from vanilla_transformer.export import push_folder
print(push_folder(sys.argv[1], sys.argv[2]))
"""


def test_push_of_a_training_output_folder_leaves_the_training_state_out(hub, trained, tmp_path):
    state = {p for p in folder_files(trained) if p.split("/")[0] in STATE_FOLDERS}
    # the folder holds what must stay local: optimizer, scheduler and RNG state, TensorBoard events, data cache
    names = {p.rsplit("/", 1)[-1] for p in state}
    assert {"optimizer.bin", "scheduler.bin", "random_states_0.pkl", "training_curves.png"} <= names
    assert any(n.startswith("events.out.tfevents") for n in names) and any(
        p.startswith("cache/") for p in state
    )

    done = push(hub, tmp_path / "script", "--model", str(trained), "--repo_id", "alice/toy-fr-en")
    assert done.returncode == 0, done.stderr
    local = folder_files(trained)  # README.md now names the repo
    model_files = {p: b for p, b in local.items() if p not in state}
    assert hub.files("alice/toy-fr-en") == model_files
    assert {"README.md", "config.json", "model.safetensors", "tokenizer.json", "eval_results.json"} <= set(
        model_files
    )

    card = ModelCard(hub.files("alice/toy-fr-en")["README.md"].decode("utf-8"))
    assert isinstance(card.data, ModelCardData)
    assert 'model_id = "alice/toy-fr-en"\n' in card.text and card.data.model_name == "alice/toy-fr-en"
    saved = json.loads(local["eval_results.json"])
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {
        "bleu": saved["bleu"],
        "chrf": saved["chrf"],
    }

    api = subprocess.run(
        [sys.executable, "-c", PUSH_WITH_DEFAULTS, str(trained), "alice/toy-fr-en-api"],
        cwd=ROOT,
        env={**hub_env(hub, tmp_path / "api", TOKEN), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert api.returncode == 0, api.stderr
    assert hub.files("alice/toy-fr-en-api") == {
        p: b for p, b in folder_files(trained).items() if p not in state
    }

    full = push(
        hub,
        tmp_path / "full",
        "--model",
        str(trained),
        "--repo_id",
        "alice/toy-fr-en-full",
        "--include_training_state",
    )
    assert full.returncode == 0, full.stderr
    assert hub.files("alice/toy-fr-en-full") == folder_files(trained)


def test_training_state_patterns_cover_the_run_folder_layout(tmp_path):
    run = RunDir(tmp_path)
    state = [
        run.checkpoints / "checkpoint-100" / "optimizer.bin",
        run.checkpoints / "checkpoint-100" / "random_states_0.pkl",
        run.checkpoints / "train_config.json",
        run.tokenizer / "tokenizer.json",
        run.runs / "train" / "events.out.tfevents.1.host",
        run.plots / "training_curves.png",
        run.cache / "tokenized-0123.arrow",
        run.minute_export(5) / "model.safetensors",
        run.minute_export(12.5) / "README.md",
        tmp_path / "optimizer.pt",
        tmp_path / "scheduler.bin",
        tmp_path / "rng_state_0.pth",
        tmp_path / "random_states_1.pkl",
        tmp_path / "trainer_state.json",
    ]
    model = [
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "README.md",
        "eval_results.json",
        "tokenizer.json",
        "modeling_vanilla_transformer.py",
        "pipeline_vanilla_transformer.py",
    ]
    paths = [p.relative_to(tmp_path).as_posix() for p in state] + model
    assert list(filter_repo_objects(paths, ignore_patterns=list(TRAINING_STATE_PATTERNS))) == model
