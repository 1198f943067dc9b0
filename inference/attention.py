"""Cross-attention of a translation as a matrix and as a heat map (PNG, matplotlib's Agg canvas, no pyplot
state).

`cross_attention` translates one sentence, re-runs the decoder on its own output with
``output_attentions=True`` and returns one (target tokens x source tokens) matrix whose rows are attention
distributions over the source (each sums to 1). `alignment_attention` is the attention word alignments and
guided-alignment training read: the config's `alignment_layer`, its first `alignment_heads` heads averaged. Matplotlib's bundled fonts have no CJK glyphs;
`plot_attention` looks for an installed font that has them and otherwise labels those tokens by id, with a
warning. torch and matplotlib are imported where used.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

# Font families known to cover CJK; checked first, then every installed font's character map.
_CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
    "AR PL UMing CN",
    "Droid Sans Fallback",
    "Arial Unicode MS",
)


@dataclass
class AttentionMap:
    """Cross-attention of one translation: ``matrix[i, j]`` is the weight output token ``i`` put on source
    token ``j`` (rows sum to 1). Source tokens end with ``</s>``; target tokens are the generated ones,
    ``</s>`` included, without the decoder start token."""

    matrix: np.ndarray  # (T, S)
    source_ids: list[int]
    target_ids: list[int]
    source_tokens: list[str]
    target_tokens: list[str]
    translation: str
    layer: int
    head: int | str


def alignment_attention(cross_attentions: Sequence[torch.Tensor], config) -> torch.Tensor:
    """The alignment attention (B, T, S) of a decoder's per-layer cross-attention weights (each (B, H, T, S), as
    ``output_attentions=True`` returns them): layer ``config.alignment_layer_index``, the mean of its first
    ``config.alignment_heads`` heads (all heads when 0). Rows stay distributions over the source."""
    weights = cross_attentions[config.alignment_layer_index]  # (B, H, T, S)
    heads = config.alignment_heads or weights.shape[1]
    return weights[:, :heads].mean(dim=1)  # (B, T, S)


def cross_attention(
    model,
    tokenizer,
    text: str,
    *,
    layer: int = -1,
    head: int | str = "mean",
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
) -> AttentionMap:
    """Translate ``text`` with ``model.generate`` and return the cross-attention of decoder layer ``layer``
    (negative counts from the last) for head ``head`` (an index, or ``"mean"`` over heads). ``num_beams`` and
    ``max_new_tokens`` left at None come from ``model.generation_config``.

    The weights come from one teacher-forced forward pass over the generated tokens with
    ``output_attentions=True``: row ``i`` is the attention of the decoder position that predicted output
    token ``i``. The model must return attention weights (our model does on any backend; load other models
    with ``attn_implementation="eager"``)."""
    import torch

    model.eval()
    device = next(model.parameters()).device
    enc = tokenizer([text], return_tensors="pt")
    enc = {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
    gen_kwargs = {
        k: v for k, v in (("num_beams", num_beams), ("max_new_tokens", max_new_tokens)) if v is not None
    }
    with torch.no_grad():
        generated = model.generate(**enc, **gen_kwargs)  # (1, 1 + T): decoder start token first
        out = model(**enc, decoder_input_ids=generated[:, :-1], output_attentions=True, use_cache=False)
    layers = out.cross_attentions
    if not layers or layers[0] is None:
        raise ValueError(
            "The model returned no cross-attention weights; load it with attn_implementation='eager' "
            "(e.g. AutoModelForSeq2SeqLM.from_pretrained(path, attn_implementation='eager'))."
        )
    if not -len(layers) <= layer < len(layers):
        raise ValueError(
            f"layer={layer} is out of range for a decoder with {len(layers)} layers (use 0..{len(layers) - 1} or -1)."
        )
    weights = layers[layer][0].float()  # (H, T, S)
    if head == "mean":
        matrix = weights.mean(0)  # (T, S)
    else:
        h = int(head)
        if not -weights.shape[0] <= h < weights.shape[0]:
            raise ValueError(
                f"head={head} is out of range for {weights.shape[0]} heads (use 0..{weights.shape[0] - 1} or 'mean')."
            )
        matrix = weights[h]  # (T, S)
    source_ids = enc["input_ids"][0].tolist()
    target_ids = generated[0, 1:].tolist()
    return AttentionMap(
        matrix=matrix.cpu().numpy(),
        source_ids=source_ids,
        target_ids=target_ids,
        source_tokens=tokenizer.convert_ids_to_tokens(source_ids),
        target_tokens=tokenizer.convert_ids_to_tokens(target_ids),
        translation=tokenizer.decode(target_ids, skip_special_tokens=True).strip(),
        layer=layer,
        head=head,
    )


def _font_covers(path: str, chars: set[str]) -> bool:
    from matplotlib.ft2font import FT2Font

    try:
        charmap = FT2Font(path).get_charmap()
    except (OSError, RuntimeError, ValueError):
        return False
    return all(ord(c) in charmap for c in chars)


def find_fonts(texts: Sequence[str]) -> list[str] | None:
    """Font families that together have glyphs for every character of ``texts``: matplotlib's default font,
    plus (for what it lacks) a known CJK family or else any installed font that covers the rest; None if no
    installed font does. Matplotlib's "Last Resort" font (a box for every character) does not count."""
    from matplotlib import font_manager

    chars = {c for t in texts for c in t if not c.isspace()}
    default = font_manager.findfont(font_manager.FontProperties())
    default_name = font_manager.FontProperties(fname=default).get_name()
    missing = (
        {c for c in chars if not _font_covers(default, {c})} if not _font_covers(default, chars) else set()
    )
    if not missing:
        return [default_name]
    fonts = [f for f in font_manager.fontManager.ttflist if not f.name.startswith("Last Resort")]
    known = [f for name in _CJK_FAMILIES for f in fonts if f.name == name]
    for f in known + [f for f in fonts if f not in known]:
        if _font_covers(f.fname, missing):
            return [default_name, f.name]  # matplotlib falls back from one family to the next per glyph
    return None


def tick_labels(tokens: Sequence[str], ids: Sequence[int]) -> tuple[list[str], list[str] | None]:
    """Tick labels for ``tokens`` and the font families to draw them with. Tokens that no installed font can
    draw are replaced by their id (``#123``) and a warning names the missing characters."""
    fonts = find_fonts(tokens)
    if fonts is not None:
        return list(tokens), fonts
    from matplotlib import font_manager

    default = font_manager.findfont(font_manager.FontProperties())
    labels, missing = [], set()
    for tok, i in zip(tokens, ids):
        chars = {c for c in tok if not c.isspace()}
        if _font_covers(default, chars):
            labels.append(tok)
        else:
            labels.append(f"#{i}")
            missing |= chars - {c for c in chars if _font_covers(default, {c})}
    warnings.warn(
        f"No installed font has glyphs for {''.join(sorted(missing))!r}; those tokens are labelled by id. Install a "
        "CJK font (e.g. `apt-get install fonts-noto-cjk`) and delete matplotlib's font cache to see them.",
        stacklevel=3,
    )
    return labels, None


def plot_attention(amap: AttentionMap, path: str | Path, title: str | None = None) -> Path:
    """Draw ``amap`` as a heat map (rows: output tokens, columns: source tokens) and save a PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    src_labels, src_font = tick_labels(amap.source_tokens, amap.source_ids)
    tgt_labels, tgt_font = tick_labels(amap.target_tokens, amap.target_ids)
    rows, cols = amap.matrix.shape
    fig = Figure(figsize=(max(4.0, 0.45 * cols + 2.5), max(3.0, 0.35 * rows + 2.0)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(amap.matrix, cmap="viridis", vmin=0.0, aspect="auto")
    ax.set_xticks(range(cols), src_labels, rotation=90, fontfamily=src_font)
    ax.set_yticks(range(rows), tgt_labels, fontfamily=tgt_font)
    ax.set_xlabel("source tokens")
    ax.set_ylabel("output tokens")
    fig.colorbar(image, ax=ax, label="attention weight")
    head = "mean over heads" if amap.head == "mean" else f"head {amap.head}"
    ax.set_title(title or f"cross-attention, layer {amap.layer}, {head}", fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
