"""How a model-card template is rendered (`export.model_card.build_model_card`): lines that hold only a tag leave
nothing, ``{% filter paragraph %}`` makes one line of a wrapped paragraph, ``fmt`` formats numbers, and a field
that a variable lacks is an error naming it."""

from __future__ import annotations

import pytest
from huggingface_hub import ModelCardData

from vanilla_transformer.export import CardValues, build_model_card, model_card_data


def values(**context) -> CardValues:
    return CardValues(model_card_data(model_name="m", languages=("fr", "en"), dataset="d"), context)


def test_tags_paragraphs_and_numbers(tmp_path):
    """A paragraph block ends without a line break (the filter strips it): the template's two line breaks after it
    end the paragraph's line and leave one blank line; the loop's tag lines leave nothing."""
    template = tmp_path / "card.md"
    template.write_text(
        "---\n{{ card_data }}\n---\n"
        "{% filter paragraph %}\n"
        "{{ updates | fmt(',') }} updates\n"
        "{% if averaging %}\n"
        "and {{ averaging.steps | join(', ') }} averaged\n"
        "{% endif %}\n"
        "in {{ minutes | fmt('.1f') }} min.\n"
        "{% endfilter %}\n"
        "\n"
        "\n"
        "{% for sample in samples %}\n"
        "- {{ sample }}\n"
        "{% endfor %}\n",
        encoding="utf-8",
    )
    card = build_model_card(
        values(updates=12345, averaging={"steps": [1, 2]}, minutes=1.25, samples=["a", "b"]), template
    )
    assert isinstance(card.data, ModelCardData) and card.data.language == ["fr", "en"]
    assert card.text == "12,345 updates and 1, 2 averaged in 1.2 min.\n\n- a\n- b\n"
    card = build_model_card(values(updates=3, averaging=None, minutes=0.0, samples=[]), template)
    assert card.text == "3 updates in 0.0 min.\n\n"


def test_a_field_the_variable_lacks_is_an_error_naming_it(tmp_path):
    template = tmp_path / "card.md"
    template.write_text("# {{ test.blue }}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"card\.md.*has no attribute 'blue'.*Fix the template"):
        build_model_card(values(test={"bleu": 12.3}), template)
