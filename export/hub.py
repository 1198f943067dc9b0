"""Push an exported model folder (see `modeling.save_with_remote_code`) to the Hugging Face Hub.

The folder is uploaded in one commit: weights, config (with `auto_map` and `custom_pipelines`), generation
config, the modeling and pipeline source files (remote code), the tokenizer, ``eval_results.json`` and a
README.md model card. A card is written into the folder first when it has none
(`export.model_card.hub_model_card`); a card written by training gets the repo id in its usage code and
``model-index`` (`export.model_card.model_card_for_repo`). A training output folder also holds the run's state
(``TRAINING_STATE_PATTERNS``: checkpoints with optimizer and RNG state, TensorBoard logs, the tokenised-data
cache, plots, the ``--export_at_minutes`` models): it is left out unless ``include_training_state=True``.
After the push, anyone can load the repo without this project: ``AutoModelForSeq2SeqLM.from_pretrained(repo_id,
trust_remote_code=True)`` or ``pipeline("translation", model=repo_id, trust_remote_code=True)``.

The token comes from ``HF_TOKEN`` or the ``hf auth login`` cache (`huggingface_hub.get_token`) and is never
logged. User errors raise `ValueError` with the fix in the message.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from huggingface_hub import HfApi, get_token

from vanilla_transformer.inference.loading import TOKENIZER_FILES

from .model_card import hub_model_card, model_card_for_repo

logger = logging.getLogger(__name__)

_REPO_ID = re.compile(r"^[\w][\w.-]*/[\w][\w.-]*$")

# `huggingface_hub` ignore patterns (fnmatch on the path in the folder; "dir/" means everything under dir) of
# what a training output folder holds besides the model (the layout of training/run_dir.py), and of optimizer,
# scheduler and RNG state files wherever they are.
TRAINING_STATE_PATTERNS: tuple[str, ...] = (
    "checkpoints/",
    "runs/",
    "cache/",
    "plots/",
    "minute-*/",
    "optimizer*.bin",
    "optimizer*.pt",
    "scheduler*.bin",
    "scheduler*.pt",
    "rng_state*.pth",
    "*.pkl",
    "trainer_state.json",
    "training_args.bin",
)


def check_exported_folder(folder: str | Path) -> dict:
    """Return the folder's config.json as a dict, or raise `ValueError` when `folder` is not an exported model
    (missing folder, no config.json, no `auto_map`, or a remote-code file named in the config is absent)."""
    folder = Path(folder)
    export_hint = "write it with modeling.save_with_remote_code(model, folder, tokenizer)"
    if not folder.is_dir():
        raise ValueError(f"model folder {str(folder)!r} does not exist or is not a folder: {export_hint}")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{str(folder)!r} has no config.json, so it is not an exported model: {export_hint}")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{config_path} is not valid JSON ({err}): re-export the model ({export_hint})"
        ) from err
    if not config.get("auto_map"):
        raise ValueError(
            f"{config_path} has no auto_map, so the repo could not be loaded without this project installed: "
            f"{export_hint}"
        )
    references = list(config["auto_map"].values())
    references += [task.get("impl", "") for task in (config.get("custom_pipelines") or {}).values()]
    for reference in references:
        module = (reference.split("--")[-1] if isinstance(reference, str) else "").rsplit(".", 1)[0]
        if module and not (folder / f"{module}.py").is_file():
            raise ValueError(
                f"config.json refers to {reference!r} but {module}.py is missing from {str(folder)!r}: "
                f"{export_hint}"
            )
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        logger.warning(
            "%s has no tokenizer (%s): the pushed repo will load but cannot translate text; pass the tokenizer "
            "to save_with_remote_code",
            folder,
            " or ".join(TOKENIZER_FILES),
        )
    return config


def resolve_token(token: str | None = None) -> str:
    """`token`, else ``HF_TOKEN``, else the ``hf auth login`` cache; `ValueError` when there is none."""
    token = token or get_token()
    if not token:
        raise ValueError(
            "no Hugging Face token found: set the HF_TOKEN environment variable to a token with write access "
            "(https://huggingface.co/settings/tokens) or run `hf auth login`"
        )
    return token


def push_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    commit_message: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    include_training_state: bool = False,
) -> str:
    """Create `repo_id` if needed and upload the exported `folder` in one commit: every file but those matching
    `TRAINING_STATE_PATTERNS`, unless `include_training_state`.

    Writes README.md (a model card) into `folder` first when it has none, and sets `repo_id` in a card
    training wrote (module docstring). `endpoint` defaults to ``HF_ENDPOINT`` (https://huggingface.co). Returns
    the commit URL. Raises `ValueError` for a bad folder, repo id or a missing token; Hub errors propagate as
    `huggingface_hub.errors.HfHubHTTPError`."""
    folder = Path(folder)
    if not _REPO_ID.match(repo_id):
        raise ValueError(
            f"repo_id {repo_id!r} is not of the form USER/NAME (or ORG/NAME), e.g. alice/zh-en-base"
        )
    config = check_exported_folder(folder)
    token = resolve_token(token)
    readme = folder / "README.md"
    if not readme.exists():
        generation_path = folder / "generation_config.json"
        generation = (
            json.loads(generation_path.read_text(encoding="utf-8")) if generation_path.is_file() else {}
        )
        readme.write_text(hub_model_card(config, repo_id, generation), encoding="utf-8")
        logger.info("wrote a model card to %s", readme)
    else:
        card = readme.read_text(encoding="utf-8")
        for_repo = model_card_for_repo(card, repo_id)
        if for_repo != card:
            readme.write_text(for_repo, encoding="utf-8")
            logger.info("set the repo id %s in the model card %s", repo_id, readme)
    api = HfApi(endpoint=endpoint, token=token)
    repo_url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    logger.info("uploading %s to %s", folder, repo_url)
    commit = api.upload_folder(
        repo_id=repo_url.repo_id,
        folder_path=folder,
        repo_type="model",
        commit_message=commit_message or f"Upload {folder.name} (vanilla-transformer export)",
        ignore_patterns=None if include_training_state else list(TRAINING_STATE_PATTERNS),
    )
    return commit.commit_url
