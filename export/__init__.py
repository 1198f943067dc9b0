"""Export: model cards and pushing an exported model folder to the Hugging Face Hub.

Modules:
    model_card   THE model-card code: `render_model_card`, `load_template`, `DEFAULT_TEMPLATE`,
                 `TEMPLATE_FILE` (the card training writes) and `hub_model_card` (the card of a pushed folder)
    hub          `push_folder`, `check_exported_folder`, `resolve_token`

The folder itself is written by `modeling.save_with_remote_code`.
"""

from .hub import check_exported_folder, push_folder, resolve_token
from .model_card import DEFAULT_TEMPLATE, TEMPLATE_FILE, hub_model_card, load_template, render_model_card

__all__ = [
    "DEFAULT_TEMPLATE",
    "TEMPLATE_FILE",
    "check_exported_folder",
    "hub_model_card",
    "load_template",
    "push_folder",
    "render_model_card",
    "resolve_token",
]
