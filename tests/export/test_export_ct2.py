"""CTranslate2 export: the exported model decodes the tokens our generate() does (greedy, beam search with length
penalty, n-best) on padded batches for every expressible architecture option, with the same scores; int8 exports
translate; configs CTranslate2 cannot express and bad folders fail with one clear line."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import random_batch, tiny_model, tiny_tokenizer
from helpers.shared import scored_generate

pytest.importorskip("ctranslate2")

from vanilla_transformer.export.ct2 import export_ct2  # noqa: E402
from vanilla_transformer.inference.engine_ct2 import CT2Translator  # noqa: E402

CONFIGS = {
    "post-LN relu sinusoidal interleaved, shared": {},
    "pre-LN gelu sinusoidal concatenated, unscaled": dict(
        normalize_before=True,
        activation_function="gelu",
        sinusoidal_layout="concatenated",
        scale_embedding=False,
        layer_norm_eps=1e-2,
    ),
    "post-LN silu learned, separate untied, no output bias": dict(
        activation_function="silu",
        position_encoding="learned",
        share_encoder_decoder_embeddings=False,
        tie_word_embeddings=False,
        output_bias=False,
    ),
    "pre-LN gelu_new, separate vocabulary sizes": dict(
        normalize_before=True,
        activation_function="gelu_new",
        share_encoder_decoder_embeddings=False,
        decoder_vocab_size=420,
    ),
}


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def trained_like(tokenizer, **overrides):
    """A tiny random model that, like a trained one, gives <pad> and <s> ~0 probability (CTranslate2 removes
    suppressed tokens before the softmax, transformers after: the scores then agree) and ends sentences at
    varied lengths (a raised </s> logit); both through the output bias, where the model has one."""
    model = tiny_model(vocab_size=len(tokenizer), **overrides)
    if model.final_logits_bias is not None:
        with torch.no_grad():
            model.final_logits_bias[[0, 2]] = -30.0
            model.final_logits_bias[3] = 2.5
    return model


def reference(model, ids, mask, num_beams, length_penalty, max_new_tokens, n=1):
    """generate()'s hypotheses (ids after the start token, through </s>) and scores."""
    settings = dict(num_beams=num_beams, length_penalty=length_penalty, max_new_tokens=max_new_tokens)
    out = scored_generate(model, ids, mask, num_return_sequences=n, **settings)
    eos = model.config.eos_token_id
    hyps = [row[1 : row.index(eos) + 1] if eos in row[1:] else row[1:] for row in out.sequences.tolist()]
    hyps = [[t for t in h if t != model.config.pad_token_id] for h in hyps]
    if num_beams > 1:
        scores = out.sequences_scores.tolist()
    else:
        log_probs = torch.stack([torch.log_softmax(step, -1) for step in out.logits], 1)  # (B, T, V)
        picked = log_probs.gather(-1, out.sequences[:, 1:, None])[..., 0]  # (B, T)
        scores = [float(picked[i, : len(h)].sum()) for i, h in enumerate(hyps)]
    group = lambda xs: [xs[i : i + n] for i in range(0, len(xs), n)]  # noqa: E731
    return group(hyps), group(scores)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ct2_decodes_the_tokens_of_generate(name, tokenizer, tmp_path):
    model = trained_like(tokenizer, **CONFIGS[name])
    translator = CT2Translator(export_ct2(model, tmp_path / "ct2", tokenizer=tokenizer), num_threads=1)
    ids, mask = random_batch(len(tokenizer), 8, 9, seed=3)
    sources = [row[: int(m.sum())] for row, m in zip(ids.tolist(), mask)]
    lengths = set()
    for num_beams, length_penalty, n in ((1, 1.0, 1), (4, 0.6, 1), (4, 1.3, 2)):
        expected, expected_scores = reference(model, ids, mask, num_beams, length_penalty, 12, n)
        got, scores = translator.generate_with_scores(
            sources,
            num_beams=num_beams,
            length_penalty=length_penalty,
            max_new_tokens=12,
            num_return_sequences=n,
        )
        assert got == expected, (num_beams, length_penalty)
        assert (
            translator.generate_ids(
                sources,
                num_beams=num_beams,
                length_penalty=length_penalty,
                max_new_tokens=12,
                num_return_sequences=n,
            )
            == got
        )
        if model.final_logits_bias is not None:  # else <pad> and <s> keep their random probability
            torch.testing.assert_close(torch.tensor(scores), torch.tensor(expected_scores), atol=1e-3, rtol=0)
        lengths |= {len(h) for hyps in got for h in hyps}
    # finished at several lengths: </s>, the length penalty and early stopping matter
    assert len(lengths) > 2 or model.final_logits_bias is None


def test_translate_equals_the_pytorch_translation_path(tokenizer, tmp_path):
    from vanilla_transformer.inference import translate

    model = trained_like(tokenizer, max_position_embeddings=24)
    model.generation_config.max_new_tokens = 10
    model.generation_config.length_penalty = 1.2
    folder = export_ct2(model, tmp_path / "ct2", tokenizer=tokenizer)
    texts = [
        "In the beginning God created the heaven and the earth.",
        "",
        "起初神创造天地。 " * 8,
        "And God said",
    ]
    translator = CT2Translator(folder, num_threads=1)
    for beams in (None, 1):
        expected = translate(model, tokenizer, texts, batch_size=2, num_beams=beams)
        assert translator.translate(texts, batch_size=2, num_beams=beams) == expected
    assert translator.translate(texts)[1] == ""
    expected = translate(model, tokenizer, texts, batch_size=2, num_beams=2, max_len_a=0.3, max_len_b=1)
    assert translator.translate(texts, batch_size=2, num_beams=2, max_len_a=0.3, max_len_b=1) == expected


def test_generation_config_settings_are_mapped(tokenizer, tmp_path):
    """bad_words_ids, no_repeat_ngram_size and min_new_tokens give generate()'s tokens. (On some random models the
    two beam searches part where hypotheses reach max_new_tokens under these constraints: docs/deploy.md.)"""
    model = trained_like(tokenizer, seed=4)
    ids, mask = random_batch(len(tokenizer), 6, 7, seed=5)
    sources = [row[: int(m.sum())] for row, m in zip(ids.tolist(), mask)]
    free, _ = reference(model, ids, mask, 3, 1.0, 10)
    longest = max((hyps[0] for hyps in free), key=len)
    config = model.generation_config
    config.bad_words_ids = [[free[0][0][0]], longest[1:3]]  # words the unconstrained search produces
    config.no_repeat_ngram_size = 2
    config.min_new_tokens = 3
    translator = CT2Translator(export_ct2(model, tmp_path / "ct2", tokenizer=tokenizer), num_threads=1)
    for num_beams in (1, 3):
        expected, _ = reference(model, ids, mask, num_beams, 1.0, 10)
        assert expected != free and min(len(hyps[0]) for hyps in expected) >= 3
        assert translator.generate_ids(sources, num_beams=num_beams, max_new_tokens=10) == expected


def test_unsupported_generation_settings_raise(tokenizer, tmp_path):
    model = trained_like(tokenizer)
    model.generation_config.early_stopping = False
    translator = CT2Translator(export_ct2(model, tmp_path / "ct2", tokenizer=tokenizer), num_threads=1)
    with pytest.raises(ValueError, match="early_stopping=False"):
        translator.generate_ids([[5, 3]], num_beams=4)
    assert len(translator.generate_ids([[5, 3]], num_beams=1)[0]) == 1  # greedy: early stopping plays no part
    translator.generation_config.forced_eos_token_id = 3
    with pytest.raises(ValueError, match="forced_eos_token_id=3"):
        translator.generate_ids([[5, 3]])
    translator.generation_config.forced_eos_token_id = None
    translator.generation_config.repetition_penalty = 1.2
    with pytest.raises(ValueError, match="repetition_penalty=1.2"):
        translator.generate_ids([[5, 3]])
    translator.generation_config.repetition_penalty = 1.0
    with pytest.raises(ValueError, match="num_return_sequences=3"):
        translator.generate_ids([[5, 3]], num_beams=2, num_return_sequences=3)


def test_int8_export_loads_and_translates(tokenizer, tmp_path):
    model = trained_like(tokenizer)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    folder = export_ct2(model, tmp_path / "int8", quantization="int8", tokenizer=tokenizer)
    for name, value in model.state_dict().items():  # quantization works on a copy of the weights
        assert torch.equal(value, before[name]), name
    fp32 = export_ct2(model, tmp_path / "fp32", tokenizer=tokenizer)
    assert (folder / "model.bin").stat().st_size < 0.6 * (fp32 / "model.bin").stat().st_size
    out = CT2Translator(folder, num_threads=1).translate(
        ["In the beginning", ""], num_beams=2, max_new_tokens=5
    )
    assert len(out) == 2 and out[1] == ""
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "ctranslate2.Translator" in readme and "CT2Translator" in readme and "int8" in readme
    assert json.loads((folder / "generation_config.json").read_text())["num_beams"] == 4


def test_export_refuses_what_ctranslate2_cannot_express(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="position_encoding='rope'"):
        export_ct2(
            tiny_model(vocab_size=len(tokenizer), position_encoding="rope"),
            tmp_path / "a",
            tokenizer=tokenizer,
        )
    with pytest.raises(ValueError, match="position_encoding='none'"):
        export_ct2(
            tiny_model(vocab_size=len(tokenizer), position_encoding="none"),
            tmp_path / "a",
            tokenizer=tokenizer,
        )
    with pytest.raises(ValueError, match="quantization='int4'"):
        export_ct2(
            tiny_model(vocab_size=len(tokenizer)), tmp_path / "b", quantization="int4", tokenizer=tokenizer
        )
    with pytest.raises(ValueError, match="tokenizer"):
        export_ct2(tiny_model(vocab_size=len(tokenizer)), tmp_path / "c")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not part of an earlier CTranslate2 export"):
        export_ct2(tiny_model(vocab_size=len(tokenizer)), tmp_path / "d", tokenizer=tokenizer)
    assert (tmp_path / "d" / "notes.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="not a CTranslate2 export"):
        CT2Translator(tmp_path / "d")


def _script(argv, capsys):
    import importlib

    script = importlib.import_module("vanilla_transformer.commands.export")
    capsys.readouterr()
    code = script.main(["--engine", "ct2", *[str(a) for a in argv]])
    return code, capsys.readouterr()


def test_script_exports_a_saved_folder(export, tmp_path, capsys):
    code, out = _script([export, tmp_path / "ct2", "--quantization", "int8"], capsys)
    assert code == 0 and "int8" in out.out
    assert CT2Translator(tmp_path / "ct2", num_threads=1).translate(["And God said"])[0] is not None


def test_script_bad_input_exits_2_with_one_line(tokenizer, tmp_path, capsys):
    from vanilla_transformer.modeling import save_with_remote_code

    rope = save_with_remote_code(
        tiny_model(vocab_size=len(tokenizer), position_encoding="rope"), tmp_path / "rope", tokenizer
    )
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "config.json").write_text("{not json")
    for argv, message in (
        ([rope, tmp_path / "o1"], "position_encoding='rope'"),
        ([tmp_path / "missing", tmp_path / "o2"], "does not exist"),
        ([corrupt, tmp_path / "o3"], "not valid JSON"),
    ):
        code, out = _script(argv, capsys)
        assert code == 2, argv
        assert out.err.count("\n") == 1 and out.err.startswith("error: ") and message in out.err, out.err
        assert not (tmp_path / argv[1]).exists()


def test_a_run_leaves_a_ct2_folder_that_translates_like_the_model(tmp_path, tokenizer_dir):
    """`--export_ct2 float32`: the run's output folder gets ct2/, whose greedy translations equal the exported
    model's own through the one translation loop; without --export it is an option error."""
    from conftest import small_run

    from vanilla_transformer.inference import load_model_and_tokenizer, translate
    from vanilla_transformer.inference.engines import load_engine
    from vanilla_transformer.training import train
    from vanilla_transformer.training.options import check_options

    out = tmp_path / "run"
    result = train(
        small_run(out, max_steps=3, export=True, test_beams=1, tokenizer=tokenizer_dir, export_ct2="float32")
    )
    sources = list(result.samples[i]["source"] for i in range(len(result.samples)))
    model, tokenizer = load_model_and_tokenizer(str(out))
    engine, engine_tokenizer = load_engine("ct2", out / "ct2")
    expected = translate(model, tokenizer, sources, num_beams=1, max_new_tokens=12)
    assert translate(engine, engine_tokenizer, sources, num_beams=1, max_new_tokens=12) == expected
    with pytest.raises(ValueError, match="--export_ct2 needs --export"):
        check_options(small_run(tmp_path / "x", max_steps=1, export=False, export_ct2="int8"))
