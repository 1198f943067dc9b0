"""Guided-alignment training (``--alignment_data``, `training.alignment`): word links mapped to subword links, the
loss is fairseq's (the reference's weight spread evenly over a target token's links), the guided head's attention
moves towards the reference on a toy task, the run wires the data through, and options it cannot go with are
refused by name."""

from __future__ import annotations

import json
import lzma

import pytest
import torch
from conftest import small_run, small_run_options, tiny_model

from vanilla_transformer.corpus import DEFAULT_DATA
from vanilla_transformer.inference.attention import alignment_attention
from vanilla_transformer.training.alignment import (
    AlignedTarget,
    guided_alignment_loss,
    reference_alignment,
    token_links,
)
from vanilla_transformer.training.objectives import Translation


def test_word_links_become_the_links_of_the_tokens_that_spell_the_words():
    # source tokens: "起初" (words 0, 1), "神" (word 2), </s>; target tokens: "▁In" (word 0), "▁the" (1), "▁beg" "inning" (2)
    source_words = [[0, 1], [2], []]
    target_words = [[0], [1], [2], [2], []]
    assert token_links({(1, 0), (2, 2)}, source_words, target_words) == [(0, 0), (1, 2), (1, 3)]


def test_the_loss_is_the_cross_entropy_with_the_normalised_reference():
    targets = [AlignedTarget([5, 6, 3], [(0, 0), (1, 0), (2, 1)]), [7, 3]]
    reference = reference_alignment(targets, (2, 3, 4))
    assert reference is not None
    torch.testing.assert_close(reference[0, 0], torch.tensor([0.5, 0.5, 0.0, 0.0]))
    assert reference[0, 2].sum() == 0 and reference[1].sum() == 0
    attention = torch.softmax(torch.randn(2, 3, 4), dim=-1)
    # fairseq: -sum over links of log(attention) / (links of that target token)
    want = -(attention[0, 0, 0].log() / 2 + attention[0, 0, 1].log() / 2 + attention[0, 1, 2].log())
    torch.testing.assert_close(guided_alignment_loss(attention, reference), want)
    assert reference_alignment([[5, 3], [7, 3]], (2, 2, 2)) is None


def _attention_on_reference(weight: float, steps: int = 40) -> tuple[float, float]:
    """Mean attention of the alignment head on the reference links of a toy batch (the reversed source, which
    attention does not find by itself), before and after ``steps`` updates with ``weight``."""
    torch.manual_seed(0)
    model = tiny_model(alignment_heads=1).train()
    objective = Translation(alignment_loss_weight=weight)
    sources = [[10 + (k + i) % 20 for i in range(6)] + [3] for k in range(8)]
    links = [(5 - t, t) for t in range(6)]
    targets = [AlignedTarget([*source[:-1], 3], links) for source in sources]
    batch = objective.collate(sources, targets, model.config)
    guided = Translation(alignment_loss_weight=1.0).collate(sources, targets, model.config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def on_reference() -> float:
        with torch.no_grad():
            out = model(
                input_ids=guided["input_ids"],
                attention_mask=guided["attention_mask"],
                decoder_input_ids=guided["decoder_input_ids"],
                output_attentions=True,
            )
        attention = alignment_attention(out.cross_attentions, model.config)
        return float((attention * guided["alignment"]).sum() / guided["alignment"].sum())

    before = on_reference()
    for _ in range(steps):
        loss, _ = objective.loss(model, batch, 0.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return before, on_reference()


def test_the_guided_head_moves_towards_the_reference():
    before, guided = _attention_on_reference(1.0)
    same_start, unguided = _attention_on_reference(0.0)
    assert before == pytest.approx(same_start)
    assert guided > 0.5 > before and guided > unguided + 0.3


@pytest.fixture(scope="module")
def diagonal_alignments(tmp_path_factory):
    """One Pharaoh line per pair of the small run's data: word i - word i, as many as the shorter side has."""
    from vanilla_transformer.inference.alignment import word_spans

    with lzma.open(DEFAULT_DATA, "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for _, line in zip(range(300), f)]
    lines = [
        " ".join(f"{i}-{i}" for i in range(min(len(word_spans(s)), len(word_spans(t))))) for s, t in rows
    ]
    path = tmp_path_factory.mktemp("align") / "train.align"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_run_trains_one_head_on_the_alignment_data(tmp_path, diagonal_alignments):
    from vanilla_transformer.training import train

    train(small_run(tmp_path, max_steps=2, alignment_data=str(diagonal_alignments), export=True))
    config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    assert config["alignment_heads"] == 1
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "guided alignment of one cross-attention head" in card
    assert "Guided alignment: 274 of 274 training pairs have reference links" in card


@pytest.mark.parametrize(
    ("change", "needs"),
    [
        ({"objective": "causal_lm"}, "--objective translation"),
        ({"bpe_dropout": 0.1}, "--bpe_dropout 0"),
        ({"streaming": True}, "--streaming false"),
        ({"mix_data": str(DEFAULT_DATA)}, "no --mix_data"),
    ],
)
def test_options_guided_alignment_cannot_go_with_are_refused(tmp_path, diagonal_alignments, change, needs):
    from vanilla_transformer.training import TrainConfig
    from vanilla_transformer.training.options import check_options

    options = small_run_options(
        output_dir=str(tmp_path), max_steps=1, alignment_data=str(diagonal_alignments), **change
    )
    with pytest.raises(ValueError, match=f"--alignment_data needs {needs}"):
        check_options(TrainConfig(**options))


def test_alignment_lines_must_match_the_training_pairs(tmp_path):
    from vanilla_transformer.training import train

    short = tmp_path / "short.align"
    short.write_text("0-0\n", encoding="utf-8")
    with pytest.raises(ValueError, match="has 1 lines but the training split of --data has 300 pairs"):
        train(small_run(tmp_path / "run", max_steps=1, alignment_data=str(short)))


def test_an_alignment_line_that_is_not_utf8_is_named_with_its_file(tmp_path):
    """A line of --alignment_data that is not UTF-8: one line naming the option, the file and the line number."""
    import datasets

    from vanilla_transformer.training.alignment import read_alignment_lines

    rows = datasets.Dataset.from_dict({"source": ["a b", "c", "d"], "target": ["x y", "z", "w"]})
    path = tmp_path / "train.align"
    path.write_bytes(b"0-0 1-1\n0-0\xff\n0-0\n")
    with pytest.raises(ValueError) as err:
        read_alignment_lines(str(path), rows)
    message = str(err.value)
    assert message.startswith(f"--alignment_data: Data file {str(path)!r} line 2 is not valid UTF-8")
    assert "\n" not in message
    path.write_bytes(b"0-0 1-1\n0-0\n0-0\n")
    assert read_alignment_lines(str(path), rows) == {
        ("a b", "x y"): "0-0 1-1",
        ("c", "z"): "0-0",
        ("d", "w"): "0-0",
    }
