"""Word alignments (`inference.alignment`): subwords merged to words, the Pharaoh format, the alignment attention the
config selects, AER, and the same alignments from a CTranslate2 export as from PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import export_tiny_model, tiny_model, tiny_tokenizer

from vanilla_transformer.inference.alignment import (
    align_pairs,
    alignment_attentions,
    alignment_error_rate,
    hard_alignment,
    parse_pharaoh,
    pharaoh,
    token_words,
    word_spans,
)
from vanilla_transformer.inference.attention import alignment_attention
from vanilla_transformer.modeling import VanillaTransformerConfig

SOURCES = ["起初神创造天地。", "神说：要有光，就有了光。"]
TARGETS = ["In the beginning", "And God said"]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def test_words_are_space_separated_runs_and_single_han_characters():
    assert word_spans("起初神。") == [(0, 1), (1, 2), (2, 3), (3, 4)]
    text = "In the beginning, 神说"
    assert ["In", "the", "beginning,", "神", "说"] == [text[a:b] for a, b in word_spans(text)]


def test_subwords_are_merged_into_the_words_they_spell(tokenizer):
    text = "In the beginning"
    encoded = tokenizer(text_target=[text], return_offsets_mapping=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    words = token_words(encoded["offset_mapping"][0], text, tokens)
    # every token that spells characters of a word maps to that word; markers and </s> to none
    spelled = {w: "".join(t.strip("\u2581") for t, ws in zip(tokens, words) if w in ws) for w in range(3)}
    assert spelled == {0: "In", 1: "the", 2: "beginning"}
    assert words[-1] == [] and all(ws == [] for t, ws in zip(tokens, words) if t == "\u2581")
    # one token over two Han characters spells two words
    assert token_words([(0, 2), (2, 3), (0, 0)], "起初神", ["起初", "神", "</s>"]) == [[0, 1], [2], []]


def test_hard_alignment_links_each_target_word_to_its_most_attended_source_word():
    # target token 0 (word 0) -> source token 1 (word 0); target token 1 (word 1) -> source token 0 spells no
    # word, so token 2 (word 1); target token 2 (word 1) -> source token 3 is </s>, so token 2; </s>: no link
    attention = np.array(
        [
            [0.1, 0.7, 0.2, 0.0],
            [0.6, 0.1, 0.3, 0.0],
            [0.0, 0.1, 0.3, 0.6],
            [0.0, 0.9, 0.0, 0.1],
        ]
    )
    source_words = [[], [0], [1], []]
    target_words = [[0], [1], [1], []]
    assert hard_alignment(attention, source_words, target_words) == [(0, 0), (1, 1)]
    assert pharaoh([(1, 1), (0, 0), (2, 0)]) == "0-0 1-1 2-0"


def test_pharaoh_lines_parse_into_sure_and_possible_links():
    sure, possible = parse_pharaoh("0-0 1?2 2-1")
    assert sure == {(0, 0), (2, 1)} and possible == {(0, 0), (1, 2), (2, 1)}
    with pytest.raises(ValueError, match="not a Pharaoh link"):
        parse_pharaoh("0-0 1:2")


def test_alignment_error_rate_follows_och_and_ney():
    assert alignment_error_rate([[(0, 0), (1, 1)]], ["0-0 1-1"]) == 0.0
    assert alignment_error_rate([[(0, 1)]], ["0-0 1-1"]) == 1.0
    # A = {00, 12, 23}, S = {00, 11}, P = S + {12}: 1 - (1 + 2) / (3 + 2)
    assert alignment_error_rate([[(0, 0), (1, 2), (2, 3)]], ["0-0 1-1 1?2"]) == pytest.approx(1 - 3 / 5)
    # sums over the corpus, not a mean of sentences
    assert alignment_error_rate([[(0, 0)], [(0, 1)]], ["0-0", "0-0 1-1 2-2"]) == pytest.approx(1 - 2 / 6)


@pytest.mark.parametrize(("layer", "heads", "index"), [(None, 0, 1), (-1, 1, 2), (0, 2, 0)])
def test_the_config_selects_the_alignment_layer_and_heads(layer, heads, index):
    model = tiny_model(alignment_layer=layer, alignment_heads=heads)
    ids = torch.tensor([[5, 6, 7, 3]])
    out = model(input_ids=ids, decoder_input_ids=torch.tensor([[2, 8, 9]]), output_attentions=True)
    want = out.cross_attentions[index][:, : heads or 2].mean(1)
    torch.testing.assert_close(alignment_attention(out.cross_attentions, model.config), want)
    assert model.config.alignment_layer_index == index


def test_alignment_fields_out_of_range_are_refused():
    with pytest.raises(ValueError, match=r"alignment_layer=3 .*alignment_heads=5"):
        VanillaTransformerConfig(
            decoder_layers=3, decoder_attention_heads=4, alignment_layer=3, alignment_heads=5
        )


def test_aligned_pairs_in_input_order_with_empty_texts_unaligned(tokenizer):
    model = tiny_model(vocab_size=len(tokenizer))
    both = align_pairs(model, tokenizer, SOURCES, TARGETS)
    alone = [align_pairs(model, tokenizer, [s], [t])[0] for s, t in zip(SOURCES, TARGETS)]
    assert both == alone and all(both)
    assert align_pairs(model, tokenizer, ["", SOURCES[0]], ["x", TARGETS[0]]) == [[], both[0]]
    # every link is a word of each side
    for links, source, target in zip(both, SOURCES, TARGETS):
        assert all(i < len(word_spans(source)) and j < len(word_spans(target)) for i, j in links)


@pytest.mark.parametrize(("layer", "heads"), [(None, 0), (-1, 1), (0, 2)])
def test_ctranslate2_alignments_equal_pytorch(tmp_path, tokenizer, layer, heads):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.modeling import save_with_remote_code

    folder = export_tiny_model(tmp_path / "model", tokenizer)
    model, _ = load_model_and_tokenizer(str(folder), dtype="float32")
    model.config.alignment_layer, model.config.alignment_heads = layer, heads
    save_with_remote_code(model, folder, tokenizer)
    export_ct2(folder, tmp_path / "ct2")
    engine, _ = load_engine("ct2", tmp_path / "ct2")
    ids = tokenizer(SOURCES)["input_ids"], tokenizer(text_target=TARGETS)["input_ids"]
    for want, got in zip(alignment_attentions(model, *ids), alignment_attentions(engine, *ids)):
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert align_pairs(engine, tokenizer, SOURCES, TARGETS) == align_pairs(model, tokenizer, SOURCES, TARGETS)


def test_translate_alignments_follow_each_hypothesis(export, loaded, monkeypatch, capsys):
    from helpers.shared import run_main

    from vanilla_transformer.inference import translate_nbest

    model, tokenizer = loaded
    stdin = "\n".join([SOURCES[0], "", SOURCES[1]]) + "\n"
    args = ("--model", str(export), "--num_beams", "2", "--num_return_sequences", "2")
    code, out, _ = run_main(monkeypatch, capsys, *args, "--alignments", stdin=stdin)
    assert code == 0
    rows = out.split("\n")[:-1]
    nbest = translate_nbest(
        model, tokenizer, [SOURCES[0], "", SOURCES[1]], num_beams=2, num_return_sequences=2
    )
    for row, source, hyps in zip(rows, [SOURCES[0], "", SOURCES[1]], nbest):
        cells = row.split("\t")
        assert [cell.split(" ||| ")[0] for cell in cells] == hyps
        links = align_pairs(model, tokenizer, [source] * len(hyps), hyps)
        assert [cell.split(" ||| ")[1] for cell in cells] == [pharaoh(found) for found in links]
    assert rows[0].split("\t")[0].split(" ||| ")[1]


def test_an_engine_without_attention_weights_is_refused_by_name(loaded):
    from types import SimpleNamespace

    from vanilla_transformer.inference.alignment import check_alignable
    from vanilla_transformer.inference.engines import EngineModel

    model, tokenizer = loaded
    runtime = SimpleNamespace(config=model.config, generation_config=model.generation_config)
    with pytest.raises(ValueError, match="--engine onnx cannot return attention weights"):
        align_pairs(EngineModel(runtime, "onnx"), tokenizer, SOURCES, TARGETS)
    check_alignable(model)
