"""Model card rendering: fill ``{placeholder}`` fields of a Markdown template with measured values.

Placeholders are ``{name}`` with ``name`` a Python identifier; ``{{`` and ``}}`` are literal braces. Other
braces (YAML, JSON, code) are left alone unless they look like a placeholder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

TEMPLATE_FILE = Path(__file__).resolve().parents[1] / "model_card.md"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")

DEFAULT_TEMPLATE = """---
library_name: transformers
pipeline_tag: translation
tags:
- translation
- vanilla-transformer
---

# {model_name}

An encoder-decoder Transformer ("Attention Is All You Need") trained from scratch for {source_lang}→{target_lang}
translation. Load it with `trust_remote_code=True`.

## Data
{data}

## Training recipe
{recipe}

## Results
{metrics}

sacreBLEU signatures: BLEU `{bleu_signature}`, chrF `{chrf_signature}`.
"""


def render_model_card(template_text: str, values: Mapping[str, object], strict: bool = True) -> str:
    """Replace every ``{name}`` in ``template_text`` with ``str(values[name])``.

    Raises:
        ValueError: ``strict`` and the template uses placeholders that ``values`` lacks (all are named).
            With ``strict=False`` they are left as they are and a warning is logged.
    """
    missing: list[str] = []

    def fill(m: re.Match) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = m.group(1)
        if name in values:
            return str(values[name])
        missing.append(name)
        return token

    text = _PLACEHOLDER.sub(fill, template_text)
    if missing:
        names = sorted(set(missing))
        message = (
            f"model card template uses placeholder(s) {names} that have no value; available: {sorted(values)}. "
            "Fix the template (write {{ and }} for literal braces)."
        )
        if strict:
            raise ValueError(message)
        logger.warning(message)
    return text


def load_template(path: str | Path | None = None) -> str:
    """The template at ``path`` (default: the repository's ``model_card.md``), or `DEFAULT_TEMPLATE` when that
    default file does not exist."""
    if path is not None:
        return Path(path).read_text(encoding="utf-8")
    if TEMPLATE_FILE.exists():
        return TEMPLATE_FILE.read_text(encoding="utf-8")
    return DEFAULT_TEMPLATE
