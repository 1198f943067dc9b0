"""Reading a model's card (its README.md), beside loading the model: `load_card` reads the card of a local folder,
or of a Hub repo (downloaded with `huggingface_hub`, or from its cache); a model without a card, or a Hub that
cannot be reached, gives no card (logged), never an error. `card_languages` is its ``language`` metadata (the
server's pairs, /info, the sentence rules of `translate --split_sentences`, an exported engine folder's card),
`card_examples` the source sentences its usage section translates (the demo page's examples).
`huggingface_hub` is imported where used.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# a usage section's pipeline call (`export.model_card.usage_section`): the example sentence as a JSON string
_CARD_EXAMPLE = re.compile(r'^print\(translator\(("(?:[^"\\]|\\.)*")\)\)$', re.MULTILINE)


def load_card(model: str | Path) -> Any | None:
    """The `huggingface_hub.ModelCard` of the folder or Hub id ``model``; None when it has none or it cannot be
    read (the reason is logged)."""
    from huggingface_hub import ModelCard
    from huggingface_hub.errors import EntryNotFoundError

    folder = Path(model)
    if folder.is_dir():
        card = folder / "README.md"
        return ModelCard.load(card) if card.is_file() else None
    try:
        return ModelCard.load(str(model))
    except EntryNotFoundError:
        return None
    except Exception as err:  # noqa: BLE001 - unreachable, offline, not a repo: the card is optional
        logger.warning(
            "no model card for %s (%s: %s); set HF_ENDPOINT / HF_HUB_OFFLINE or pass a local folder to read it",
            model,
            type(err).__name__,
            str(err).splitlines()[0] if str(err) else "no details",
        )
        return None


def card_languages(model: str | Path) -> list[str]:
    """The ``language`` list of the model card of the folder or Hub id ``model``; empty when there is none."""
    card = load_card(model)
    language = card.data.language if card is not None else None
    return [language] if isinstance(language, str) else list(language or [])


def card_examples(model: str | Path) -> list[str]:
    """The source sentences the model card of the folder or Hub id ``model`` translates in its usage section
    (`export.model_card.usage_section` writes them); empty when there is no card or no example."""
    card = load_card(model)
    return [] if card is None else [json.loads(found) for found in _CARD_EXAMPLE.findall(card.text)]
