"""Terminology constraints (inference/constraints.py): lexically constrained beam search through `generate()`, the
translation loop and `vanilla-transformer translate --glossary` (bad glossary files, engines and sampling refused),
on a tiny model trained to copy sentences of ``w`` words (helpers.copy_task: the ``x`` words, which no training
target holds, never come out unless a glossary asks for them)."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config, tiny_model
from helpers.copy_task import WORDS, copy_tokenizer, train_copy_model
from helpers.shared import run_main

from vanilla_transformer.inference import translate_nbest, translate_scored
from vanilla_transformer.inference.constraints import constrained_beam_search
from vanilla_transformer.inference.glossary import Glossary, read_glossary
from vanilla_transformer.modeling import save_with_remote_code


@pytest.fixture(scope="module")
def copier():
    """The tiny copy model (helpers.copy_task) and its tokenizer."""
    return train_copy_model()


SOURCES = ["w1 w2 w3 w4", "w5 w6 w7", "w8 w9 w0 w1 w2", "w3 w3 w5 w6 w8 w9"]


def test_copier_learned_to_copy(copier):
    """The fixture's premise: unconstrained beam search outputs w words only, most sources copied exactly."""
    model, tokenizer = copier
    outputs = [hyps[0] for hyps in translate_nbest(model, tokenizer, SOURCES)]
    assert all(word in WORDS for output in outputs for word in output.split())
    assert sum(output == source for output, source in zip(outputs, SOURCES)) >= 3


def test_every_applying_term_comes_out_contiguous(copier):
    """Each target term whose source term occurs in a line appears in its translation where the unconstrained
    output lacks it, multi-word terms as one contiguous phrase; a do-not-translate term (empty target) is kept;
    lines without a term translate as without the glossary, in the same batch."""
    model, tokenizer = copier
    glossary = Glossary.from_pairs([("w2", "x0"), ("w6", "x1 x2"), ("w9", "x3 x0 x1"), ("w3", "")])
    plain = [hyps[0] for hyps in translate_nbest(model, tokenizer, SOURCES)]
    sources = [*SOURCES, "w0 w1 w4", "w7 w8"]
    constrained = [hyps[0] for hyps in translate_nbest(model, tokenizer, sources, glossary=glossary)]
    for source, output in zip(sources, constrained):
        terms = glossary.terms_for(source)
        for term in terms:
            assert f" {term} " in f" {output} ", (source, term, output)
        if not terms:
            assert output == translate_nbest(model, tokenizer, [source])[0][0]
    for source, before in zip(SOURCES, plain):
        assert any(term not in before.split() for term in glossary.terms_for(source) if term.startswith("x"))


@pytest.mark.parametrize(
    "options",
    [
        {"num_beams": 4},
        {"num_beams": 4, "num_return_sequences": 3},
        {"num_beams": 3, "early_stopping": False, "length_penalty": 0.6},
        {"num_beams": 5, "early_stopping": "never", "length_penalty": 1.5},
    ],
)
def test_without_constraints_it_is_transformers_beam_search(options):
    """With no phrase for any row, the strategy returns what `generate()`'s own beam search returns: the same
    sequences, and the same scores within 1e-5 (a random model, so that hypotheses end at many lengths)."""
    model = tiny_model()
    model.generation_config.max_new_tokens = 10
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(4, 97, (5, 7), generator=g)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[2:, 5:] = 0
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, return_dict_in_generate=True)
    kwargs.update(output_scores=True, **options)
    expected = model.generate(**kwargs)
    got = model.generate(**kwargs, custom_generate=constrained_beam_search, constraints=[[]] * 5)
    torch.testing.assert_close(got.sequences, expected.sequences, rtol=0, atol=0)
    torch.testing.assert_close(got.sequences_scores, expected.sequences_scores, rtol=0, atol=1e-5)


def test_constrained_scores_are_the_hypotheses_scores(copier):
    """A constrained hypothesis' score is its own sum of log-probabilities over its length (forced decoding of the
    output), and its n-best list is sorted by it."""
    from vanilla_transformer.inference.forced_decoding import score_pairs

    model, tokenizer = copier
    glossary = Glossary.from_pairs([("w6", "x1 x2")])
    hyps, scores = translate_scored(model, tokenizer, ["w5 w6 w7"], glossary=glossary, num_return_sequences=3)
    ranked = [score for score in scores[0] if score is not None]
    assert len(ranked) == 3 and ranked == sorted(ranked, reverse=True)
    forced = score_pairs(model, tokenizer, ["w5 w6 w7"], [hyps[0][0]])
    assert forced[0].score(model.generation_config.length_penalty) == pytest.approx(ranked[0], abs=1e-4)


def test_a_completed_phrase_is_not_continued_by_a_word_piece():
    """After a phrase comes out, no token of ``word_pieces`` follows it (the phrase's word is not lengthened):
    on a random model, the token that followed the phrase without the rule is given as a word piece, and the
    phrase then comes out followed by another token; hypotheses without a phrase are searched as before."""
    model = tiny_model(seed=3)
    model.generation_config.max_new_tokens = 10
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(4, 97, (2, 6), generator=g)
    kwargs = dict(input_ids=input_ids, num_beams=4, custom_generate=constrained_beam_search)
    eos, pad = model.generation_config.eos_token_id, model.generation_config.pad_token_id
    tried = 0
    for phrase in range(4, 97):
        constraints = [[[phrase]], []]
        before = model.generate(**kwargs, constraints=constraints)
        first = before[0].tolist()
        after_phrase = (first + [eos])[first.index(phrase) + 1]
        if after_phrase in (eos, pad):
            continue
        tried += 1
        got = model.generate(**kwargs, constraints=constraints, word_pieces=[after_phrase])
        row = got[0].tolist()
        assert phrase in row
        assert all(row[i + 1] != after_phrase for i, token in enumerate(row[:-1]) if token == phrase), (
            first,
            row,
        )
        # the row without a phrase: the same tokens (the batch's padding may differ in width)
        plain, same = before[1].tolist(), got[1].tolist()
        width = min(len(plain), len(same))
        assert plain[:width] == same[:width] and set(plain[width:] + same[width:]) <= {pad}
        if tried == 5:
            break
    assert tried == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a\tb\tc\n", "line 1 has 3 tab-separated columns"),
        ("ok\tfine\n \tx\n", "line 2: glossary entry with target 'x' has an empty source term"),
        ("x\ty\nx\tz\n", "two targets"),
        ("# only a comment\n\n", "holds no term"),
        (b"\xff\xfe", "cannot be read"),
    ],
)
def test_bad_glossary_file_is_one_error_line_exit_2(text, message, copier, tmp_path, monkeypatch, capsys):
    """A glossary file that cannot be used ends `translate` with exit code 2 and one ``error:`` line naming the
    file and the problem, before anything is translated."""
    path = tmp_path / "glossary.tsv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=message):
        read_glossary(path)
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(tmp_path), "--glossary", str(path), stdin="w1\n"
    )
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith("error: --glossary"), err
    assert message in err


def test_cli_glossary(copier, tmp_path, monkeypatch, capsys):
    """`translate --glossary` prints the constrained translations (do-not-translate lines: source term only)."""
    model, tokenizer = copier
    folder = save_with_remote_code(model, tmp_path / "model", tokenizer)
    path = tmp_path / "glossary.tsv"
    path.write_text("# terms\nw6\tx1 x2\nw2\n", encoding="utf-8")
    glossary = read_glossary(path)
    assert glossary.entries == (("w6", "x1 x2"), ("w2", "w2"))
    lines = ["w5 w6 w7", "", "w1 w2 w3"]
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(folder), "--glossary", str(path), stdin="\n".join(lines) + "\n"
    )
    expected = [hyps[0] for hyps in translate_nbest(model, tokenizer, lines, glossary=glossary)]
    assert (code, out) == (0, "".join(f"{line}\n" for line in expected)), err
    assert "x1 x2" in out.split("\n")[0]


@pytest.mark.parametrize("engine", ["ct2", "onnx"])
def test_engines_refuse_a_glossary_by_name(engine, tmp_path, monkeypatch, capsys):
    """--engine ct2 / onnx cannot constrain their search: --glossary is a one-line error naming it (exit 2),
    before the engine or the folder is looked at; `translate_scored` on an engine model refuses it too."""
    from vanilla_transformer.inference.engines import EngineModel

    path = tmp_path / "glossary.tsv"
    path.write_text("w6\tx1\n", encoding="utf-8")
    code, out, err = run_main(
        monkeypatch,
        capsys,
        "--engine",
        engine,
        "--model",
        str(tmp_path),
        "--glossary",
        str(path),
        stdin="w6\n",
    )
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert f"--engine {engine} does not take --glossary" in err

    class Runtime:
        config = tiny_config()
        generation_config = tiny_model().generation_config

    stand_in = EngineModel(Runtime(), engine)
    with pytest.raises(ValueError, match=f"--engine {engine} does not take --glossary"):
        translate_scored(stand_in, copy_tokenizer(), ["w6"], glossary=read_glossary(path))


def test_sampling_with_a_glossary_is_refused(copier):
    """Constrained decoding is a beam search: sampling with a glossary is a `ValueError` naming both."""
    model, tokenizer = copier
    with pytest.raises(ValueError, match="--glossary needs beam search"):
        translate_nbest(
            model, tokenizer, ["w6"], glossary=Glossary.from_pairs([("w6", "x1")]), do_sample=True
        )
