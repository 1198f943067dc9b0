"""Loading a saved tokenizer (a model folder's, a training run's, a Hub repository's): what inference needs, without
the corpus readers and the BPE training of `tokenizer.prepare`."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase

TOKENIZER_JSON_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)


def load_tokenizer(source: str | Path, **options) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained(source, **options)`; for a local folder whose tokenizer does not load, a
    `ValueError` that names the damaged file (a tokenizer JSON file that does not parse) or the folder.

    A tokenizer's own code (its ``auto_map``) runs only with ``trust_remote_code=True`` in `options` (the loading
    policy, `inference.loading_policy`): transformers is never left to decide (it would ask on stdin)."""
    options.setdefault("trust_remote_code", False)
    try:
        return AutoTokenizer.from_pretrained(str(source), **options)
    except Exception as err:  # noqa: BLE001 - tokenizers raises plain Exception for data it cannot read
        folder = Path(source)
        if not folder.is_dir():
            raise
        for name in TOKENIZER_JSON_FILES:
            try:
                if (folder / name).is_file():
                    json.loads((folder / name).read_text(encoding="utf-8"))
            except (ValueError, OSError) as bad:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise ValueError(
                    f"{folder / name} is damaged (not valid JSON: {bad}); copy the tokenizer again from the "
                    "training run or the model folder it was saved with"
                ) from err
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(
            f"the tokenizer in {folder} does not load ({first_line}); copy it again from the training run or "
            "the model folder it was saved with"
        ) from err
