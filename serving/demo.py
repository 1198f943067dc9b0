"""The demo page: a Gradio app for one model (an exported folder or a Hub id), the way a Hub Space shows a model.

A source box and a Translate button; the page shows the translation, the beam's alternatives with their scores
(`scored_nbest`: transformers' ``sequences_scores``, sum(log p) / length ** length_penalty) and the decoder's
cross-attention as a heat map (`inference.cross_attention`, `inference.plot_attention`). The example sentences
are the ones the model card shows (`inference.cards.card_examples`, for a folder or a Hub id). gradio is imported
where used (the ``demo`` extra).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from vanilla_transformer.inference.cards import card_examples

# what tests find on the page
ELEMENT_IDS = ("source", "translate", "translation", "alternatives", "attention")


def scored_nbest(
    model: Any, tokenizer: Any, text: str, num_beams: int = 4, max_new_tokens: int | None = None
) -> list[tuple[str, float]]:
    """The ``num_beams`` hypotheses of beam search for ``text``, best first, with their scores (greedy with
    ``num_beams=1``: the one hypothesis and its mean log-probability per token)."""
    import torch

    encoded = tokenizer([text], return_tensors="pt")
    options = {"num_beams": num_beams, "num_return_sequences": num_beams}
    if max_new_tokens is not None:
        options["max_new_tokens"] = max_new_tokens
    with torch.no_grad():
        out = model.generate(
            input_ids=encoded["input_ids"].to(model.device),
            attention_mask=encoded["attention_mask"].to(model.device),
            output_scores=True,
            return_dict_in_generate=True,
            **options,
        )
    texts = tokenizer.batch_decode(
        out.sequences, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    if num_beams > 1:
        scores = out.sequences_scores.tolist()
    else:
        steps = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)  # (1, T)
        scores = [float(steps[0][torch.isfinite(steps[0])].mean())]
    return [(" ".join(t.split()), float(s)) for t, s in zip(texts, scores)]


def translate_for_page(model: Any, tokenizer: Any, text: str, num_beams: int, folder: Path):
    """What the page shows for ``text``: (translation, alternatives as rows [rank, hypothesis, score], path of the
    attention heat map PNG, written under ``folder``)."""
    from vanilla_transformer.inference import cross_attention, plot_attention

    if not text.strip():
        return "", [], None
    num_beams = max(1, int(num_beams))
    nbest = scored_nbest(model, tokenizer, text, num_beams)
    amap = cross_attention(model, tokenizer, text, num_beams=num_beams)
    folder.mkdir(parents=True, exist_ok=True)
    image = plot_attention(amap, Path(tempfile.mkstemp(suffix=".png", dir=folder)[1]))
    rows = [[rank, hyp, round(score, 4)] for rank, (hyp, score) in enumerate(nbest, 1)]
    return nbest[0][0], rows, str(image)


def build_demo(
    model: Any,
    tokenizer: Any,
    *,
    title: str = "vanilla-transformer",
    examples: list[str] | None = None,
    num_beams: int | None = None,
    image_folder: str | Path | None = None,
):
    """The Gradio Blocks app for ``model`` and ``tokenizer``; ``num_beams`` defaults to the model's generation
    config; heat maps are written under ``image_folder`` (default: a new temporary folder)."""
    import gradio as gr

    beams = num_beams or getattr(model.generation_config, "num_beams", None) or 4
    folder = Path(image_folder or tempfile.mkdtemp(prefix="vanilla-demo-"))

    def run(text: str, beams_chosen: float):
        return translate_for_page(model, tokenizer, text, int(beams_chosen), folder)

    with gr.Blocks(title=title) as demo:
        gr.Markdown(
            f"# {title}\nType a sentence and press **Translate**: the translation, the beam's alternatives "
            "with their scores (sum of log-probabilities / length ** length_penalty) and the cross-attention "
            "of the last decoder layer (rows: output tokens, columns: source tokens)."
        )
        with gr.Row():
            with gr.Column():
                source = gr.Textbox(label="Source", lines=3, elem_id="source")
                beam_box = gr.Slider(1, 8, value=beams, step=1, label="Beams")
                button = gr.Button("Translate", variant="primary", elem_id="translate")
                if examples:
                    gr.Examples(
                        examples=[[e] for e in examples], inputs=[source], label="Examples from the card"
                    )
            with gr.Column():
                translation = gr.Textbox(label="Translation", lines=3, elem_id="translation")
                alternatives = gr.Dataframe(
                    headers=["rank", "hypothesis", "score"],
                    label="Beam alternatives",
                    elem_id="alternatives",
                    wrap=True,
                    column_widths=["12%", "68%", "20%"],
                )
        attention = gr.Image(label="Cross-attention", type="filepath", elem_id="attention")
        button.click(run, inputs=[source, beam_box], outputs=[translation, alternatives, attention])
        source.submit(run, inputs=[source, beam_box], outputs=[translation, alternatives, attention])
    return demo


def load_demo(model: str, *, device: str | None = None, trust_remote_code: bool | None = None, **options):
    """`build_demo` for the folder or Hub id ``model`` (loaded with `inference.load_model_and_tokenizer`), with
    the examples and title of its card; ``options`` go to `build_demo`."""
    from vanilla_transformer.inference import load_model_and_tokenizer

    loaded, tokenizer = load_model_and_tokenizer(model, device=device, trust_remote_code=trust_remote_code)
    options.setdefault("examples", card_examples(model))
    options.setdefault("title", f"vanilla-transformer: {Path(model).name or model}")
    return build_demo(loaded, tokenizer, **options)
