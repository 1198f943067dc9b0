"""Model cards (README.md): the one home for the card's metadata block and usage text.

Two cards share them: the card that training writes next to its exported model, rendered from a Markdown
template (`load_template`, `render_model_card`: the repository's ``model_card.md``, else `DEFAULT_TEMPLATE`),
and the card `export.hub.push_folder` writes into a folder that has none (`hub_model_card`, from the
folder's config).

Template placeholders are ``{name}`` with ``name`` a Python identifier; ``{{`` and ``}}`` are literal braces.
Other braces (YAML, JSON, code) are left alone unless they look like a placeholder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

TEMPLATE_FILE = Path(__file__).resolve().parents[1] / "model_card.md"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def metadata_block(*extra_tags: str) -> str:
    """The card's YAML front matter (library, pipeline tag, tags), ending with its closing ``---`` line."""
    tags = "".join(f"- {tag}\n" for tag in ("translation", "vanilla-transformer", *extra_tags))
    return f"---\nlibrary_name: transformers\npipeline_tag: translation\ntags:\n{tags}---\n"


def usage_section(repo_id: str) -> str:
    """How to load the model (remote code) and translate with it, for a folder or Hub repo `repo_id`."""
    return f"""## Usage

The model code is stored with the weights, so loading needs `trust_remote_code=True` (also for the tokenizer:
config.json maps `AutoConfig` to that code):

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
model = AutoModelForSeq2SeqLM.from_pretrained("{repo_id}", trust_remote_code=True)
batch = tokenizer(["我爱机器翻译"], return_tensors="pt")
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))

translator = pipeline("translation", model="{repo_id}", trust_remote_code=True)
print(translator("我爱机器翻译"))
```
"""


DEFAULT_TEMPLATE = (
    metadata_block()
    + """
# {model_name}

An encoder-decoder Transformer ("Attention Is All You Need") trained from scratch for {source_lang}→{target_lang}
translation.

"""
    + usage_section("PATH_OR_REPO")
    + """
## Data
{data}

## Training recipe
{recipe}

## Results
{metrics}

sacreBLEU signatures: BLEU `{bleu_signature}`, chrF `{chrf_signature}`.
"""
)


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


def hub_model_card(config: Mapping, repo_id: str, generation_config: Mapping | None = None) -> str:
    """A README.md for an exported folder pushed as `repo_id`, from its config.json and generation_config.json
    (as dicts): the metadata block, the architecture's sizes, the default decoding and the usage section."""
    generation_config = generation_config or {}

    def field(name: str) -> str:
        return str(config.get(name, "?"))

    decoding = ", ".join(
        f"{name}={generation_config[name]}"
        for name in ("num_beams", "length_penalty", "max_new_tokens")
        if name in generation_config
    )
    return (
        metadata_block("custom_code")
        + f"""
# {repo_id}

An encoder-decoder Transformer as in "Attention Is All You Need" (Vaswani et al., 2017), implemented from
scratch as Hugging Face remote code (`{field("model_type")}`).

| field | value |
|---|---|
| d_model | {field("d_model")} |
| encoder / decoder layers | {field("encoder_layers")} / {field("decoder_layers")} |
| attention heads (encoder / decoder) | {field("encoder_attention_heads")} / {field("decoder_attention_heads")} |
| feed-forward size (encoder / decoder) | {field("encoder_ffn_dim")} / {field("decoder_ffn_dim")} |
| vocabulary | {field("vocab_size")} |
| maximum positions | {field("max_position_embeddings")} |
| default decoding | {decoding or "see generation_config.json"} |

`length_penalty` follows transformers: a finished hypothesis scores sum(log p) / length ** length_penalty.

"""
        + usage_section(repo_id)
    )
