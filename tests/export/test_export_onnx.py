"""ONNX export (export/onnx.py) and the ONNX Runtime engine (inference/engine_onnx.py) against the PyTorch model:
graph outputs within 1e-4 on padded batches, with and without cache inputs; greedy and beam-search tokens equal to
`generate()`'s; `translate` equal to `inference.translate`; bad folders and options. Three tiny random configs
cover the kinds of positions (a fixed table, a learned table, rotary), activations, pre-/post-LN and the
embedding options (one export each, shared by the tests of the module). The graphs are traced, so a position
table enters them as a constant whatever its layout."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
ort = pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from conftest import random_batch, tiny_model, tiny_tokenizer  # noqa: E402
from helpers.precision import CPU_KINDS, simulate  # noqa: E402
from helpers.shared import scored_generate  # noqa: E402

from vanilla_transformer.export.onnx import (  # noqa: E402
    DECODER_FILE,
    ENCODER_FILE,
    QUANTIZED_FILES,
    export_onnx,
    past_names,
)
from vanilla_transformer.inference import translate  # noqa: E402
from vanilla_transformer.inference.engine_onnx import OnnxTranslator, resolve_decoding, top_k  # noqa: E402
from vanilla_transformer.inference.forced_decoding import score_ids  # noqa: E402
from vanilla_transformer.modeling.cache_vanilla_transformer import CACHE_FIELD  # noqa: E402

TOLERANCE: dict[str, Any] = dict(atol=1e-4, rtol=1e-4)
CONFIGS = {  # one encoder and two decoder layers keep each export short; the cache names differ per layer
    "paper": dict(),  # post-LN, ReLU, interleaved sinusoids, shared + tied embeddings, output bias, scaled
    "pre_ln_gelu_learned_separate": dict(
        normalize_before=True,
        activation_function="gelu",
        position_encoding="learned",
        share_encoder_decoder_embeddings=False,
        tie_word_embeddings=False,
        output_bias=False,
        scale_embedding=False,
    ),
    "rope_silu": dict(position_encoding="rope", activation_function="silu"),
}


FAVOURED = [0, 2, 5, 6, 7, 9, 11, 12, 13]  # pad, <s> and the ids of the processor tests


def make_decisive(model, tokenizer, eos_boost: float = 3.25) -> None:
    """A random model repeats one token and almost never ends: centre its output bias on the mean logits of
    random inputs (so the source decides the tokens) and favour FAVOURED and </s>, so that suppressed tokens,
    bad words, minimum lengths and finished beams all change the outputs."""
    with torch.no_grad():
        ids, mask = random_batch(len(tokenizer), 8, 9, seed=5)
        target = torch.randint(4, len(tokenizer), (8, 12), generator=torch.Generator().manual_seed(6))
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        model.final_logits_bias -= logits.reshape(-1, logits.shape[-1]).mean(0)
        model.final_logits_bias[FAVOURED] += 2.5
        model.final_logits_bias[model.config.eos_token_id] += eos_boost


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def exported(tokenizer, tmp_path_factory):
    """name -> (model, ONNX folder, OnnxTranslator) for each of CONFIGS, exported once per module."""
    results = {}

    def get(name: str):
        if name not in results:
            overrides = dict(CONFIGS[name])
            if not overrides.get("share_encoder_decoder_embeddings", True):
                overrides["decoder_vocab_size"] = len(tokenizer) + 7
            model = tiny_model(
                seed=len(results), vocab_size=len(tokenizer), encoder_layers=1, decoder_layers=2, **overrides
            )
            if model.config.output_bias:
                make_decisive(model, tokenizer)
            # export_onnx traces in eval mode and gives the mode back (no dropout here)
            model.train(name == "paper")
            folder = export_onnx(model, tmp_path_factory.mktemp(name), tokenizer)
            results[name] = (model, folder, OnnxTranslator(folder, num_threads=1))
        return results[name]

    return get


def source_lists(ids: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    return [row[: int(keep.sum())].tolist() for row, keep in zip(ids, mask)]


def generated(sequences: torch.Tensor, eos: int) -> list[list[int]]:
    """generate()'s (N, 1 + T) output as generate_ids returns it: no start token, cut after </s>, no padding."""
    hypotheses = []
    for row in sequences[:, 1:].tolist():
        hypotheses.append(row[: row.index(eos) + 1] if eos in row else row)
    return hypotheses


# ---- the graphs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["paper", "pre_ln_gelu_learned_separate"])
def test_forced_decoding_scores_equal_pytorch(exported, name):
    """`score_ids` through the ONNX decoder (one cached step per target token) equals PyTorch's forced decoding."""
    model, _, translator = exported(name)
    ids, mask = random_batch(model.config.vocab_size, 4, 9, seed=3)
    sources = source_lists(ids, mask)
    eos = model.config.eos_token_id
    vocab = model.config.decoder_vocab_size
    targets = [
        torch.randint(4, vocab, (length,), generator=torch.Generator().manual_seed(length)).tolist() + [eos]
        for length in (5, 1, 8, 3)
    ]
    expected = score_ids(model, sources, targets)
    scored = translator.score_ids(sources, targets)
    for mine, theirs in zip(scored, expected):
        assert mine == pytest.approx(theirs.token_log_probs, abs=1e-4)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_graphs_equal_pytorch_with_and_without_cache(exported, name):
    """Encoder states, first-step logits and caches (the merged decoder with use_cache_branch false and empty
    pasts), and later-step logits and caches (use_cache_branch true, fed the first step's presents) equal
    PyTorch's on a padded batch."""
    model, folder, _ = exported(name)
    config = model.config
    ids, mask = random_batch(config.vocab_size, 3, 7, seed=2)
    target = torch.randint(4, config.decoder_vocab_size, (3, 5), generator=torch.Generator().manual_seed(3))
    target[:, 0] = config.decoder_start_token_id
    with torch.no_grad():
        hidden = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        full = model(attention_mask=mask, encoder_outputs=(hidden,), decoder_input_ids=target, use_cache=True)
    encoder = ort.InferenceSession(str(folder / ENCODER_FILE))
    decoder = ort.InferenceSession(str(folder / DECODER_FILE))
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    onnx_hidden = encoder.run(None, feeds)[0]
    torch.testing.assert_close(torch.from_numpy(onnx_hidden), hidden, **TOLERANCE)

    layers = config.decoder_layers
    heads, head_dim = config.decoder_attention_heads, config.d_model // config.decoder_attention_heads
    empty = {
        name: np.zeros((3, heads, 0, head_dim), np.float32) for name in past_names(layers, "past_key_values")
    }
    common = {"encoder_attention_mask": mask.numpy(), "encoder_hidden_states": onnx_hidden}
    first = decoder.run(
        None, {**common, **empty, "input_ids": target[:, :3].numpy(), "use_cache_branch": np.array([False])}
    )
    torch.testing.assert_close(torch.from_numpy(first[0]), full.logits[:, :3], **TOLERANCE)
    cache = getattr(full, CACHE_FIELD)
    presents = dict(zip(past_names(layers, "present"), first[1:]))
    for i in range(layers):
        self_layer, cross_layer = cache.self_attention_cache.layers[i], cache.cross_attention_cache.layers[i]
        torch.testing.assert_close(
            torch.from_numpy(presents[f"present.{i}.decoder.key"]), self_layer.keys[:, :, :3], **TOLERANCE
        )
        torch.testing.assert_close(
            torch.from_numpy(presents[f"present.{i}.encoder.value"]), cross_layer.values, **TOLERANCE
        )

    past = {name.replace("present", "past_key_values"): value for name, value in presents.items()}
    later = decoder.run(
        None, {**common, **past, "input_ids": target[:, 3:].numpy(), "use_cache_branch": np.array([True])}
    )
    torch.testing.assert_close(torch.from_numpy(later[0]), full.logits[:, 3:], **TOLERANCE)
    grown = dict(zip(past_names(layers, "present"), later[1:]))
    for name, value in presents.items():  # the encoder keys/values pass through the cached branch
        if ".encoder." in name:
            np.testing.assert_array_equal(grown[name], value)
    for i in range(layers):
        torch.testing.assert_close(
            torch.from_numpy(grown[f"present.{i}.decoder.value"]),
            cache.self_attention_cache.layers[i].values,
            **TOLERANCE,
        )


def test_export_folder_and_model_state(exported):
    """The folder holds the graphs (float32 and int8) in onnx/, configs, tokenizer and README, without remote
    code; config.json is a MarianConfig (transformers' own class reads it) holding the model's config; the axes
    have names and the pasts fixed head sizes; the exported model keeps its attention implementation and
    training mode (the trace uses eager, eval)."""
    from transformers import AutoConfig, MarianConfig

    from vanilla_transformer.modeling import VanillaTransformerConfig

    model, folder, _ = exported("paper")
    for name in (*QUANTIZED_FILES, ENCODER_FILE, DECODER_FILE, "config.json", "generation_config.json"):
        assert (folder / name).is_file(), name
    assert {"tokenizer.json", "README.md"} <= {path.name for path in folder.iterdir()}
    assert not (folder / "encoder_model.onnx").exists()
    assert model.config._attn_implementation == "sdpa" and model.training
    config = json.loads((folder / "config.json").read_text())
    assert "auto_map" not in config and config["model_type"] == "marian"
    marian = AutoConfig.from_pretrained(folder)
    assert isinstance(marian, MarianConfig)
    for name in (
        "d_model",
        "decoder_layers",
        "decoder_attention_heads",
        "vocab_size",
        "decoder_start_token_id",
    ):
        assert getattr(marian, name) == getattr(model.config, name), name
    own = VanillaTransformerConfig.from_dict(config["vanilla_transformer_config"])
    assert own.to_diff_dict() == {
        k: v for k, v in model.config.to_diff_dict().items() if k in own.to_diff_dict()
    }
    assert "OnnxTranslator" in (folder / "README.md").read_text()
    inputs = {i.name: i.shape for i in ort.InferenceSession(str(folder / DECODER_FILE)).get_inputs()}
    heads = model.config.decoder_attention_heads
    assert inputs["past_key_values.0.decoder.key"] == [
        "batch_size",
        heads,
        "past_decoder_sequence_length",
        model.config.d_model // heads,
    ]
    assert inputs["past_key_values.0.encoder.key"][2] == "encoder_sequence_length_out"
    assert inputs["use_cache_branch"] == [1]


def test_first_step_caches_built_from_the_config_as_optimum_does_fit_the_graph(exported):
    """optimum's ORTModelForSeq2SeqLM builds the first step's empty caches from a Marian config.json as
    (batch, encoder_attention_heads, 0, d_model // encoder_attention_heads), self- and cross-attention alike
    (its normalized config for "marian" reads `encoder_attention_heads`). On a model whose encoder and decoder
    head counts differ, those caches are what the merged decoder takes, and its first step gives PyTorch's
    logits."""
    model, folder, _ = exported("paper")
    config = model.config
    assert config.encoder_attention_heads != config.decoder_attention_heads
    marian = json.loads((folder / "config.json").read_text())
    heads = marian["encoder_attention_heads"]
    empty = np.zeros((2, heads, 0, marian["d_model"] // heads), np.float32)
    ids, mask = random_batch(config.vocab_size, 2, 6, seed=4)
    start = torch.full((2, 1), config.decoder_start_token_id)
    with torch.no_grad():
        hidden = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        expected = model(attention_mask=mask, encoder_outputs=(hidden,), decoder_input_ids=start).logits
    decoder = ort.InferenceSession(str(folder / DECODER_FILE))
    feeds = {name: empty for name in past_names(marian["decoder_layers"], "past_key_values")}
    feeds.update(
        encoder_attention_mask=mask.numpy(),
        input_ids=start.numpy(),
        encoder_hidden_states=hidden.numpy(),
        use_cache_branch=np.array([False]),
    )
    logits = decoder.run(["logits"], feeds)[0]
    torch.testing.assert_close(torch.from_numpy(logits), expected, **TOLERANCE)


def test_int8_graphs_are_quantized_and_close(exported):
    """The *_quantized graphs hold int8 weights (ONNX Runtime's dynamic quantization ops, no MatMul of a float
    weight left), their logits stay close to the float32 graphs', and OnnxTranslator(dtype="int8") decodes with them."""
    import onnx

    model, folder, engine = exported("paper")
    for name in QUANTIZED_FILES:
        graph = onnx.load(str(folder / name)).graph
        weights = {tensor.name for tensor in graph.initializer}
        nodes = list(graph.node)
        for node in graph.node:  # the merged decoder's two branches
            nodes += [
                inner for a in node.attribute if a.type == onnx.AttributeProto.GRAPH for inner in a.g.node
            ]
        ops = {node.op_type for node in nodes}
        assert "DynamicQuantizeLinear" in ops or "DynamicQuantizeMatMul" in ops, name
        # MatMuls left multiply activations (attention scores); none reads a float weight
        assert not [node for node in nodes if node.op_type == "MatMul" and weights & set(node.input)], name
    int8 = OnnxTranslator(folder, num_threads=1, dtype="int8")
    ids, mask = random_batch(model.config.vocab_size, 3, 7, seed=4)
    sources = source_lists(ids, mask)
    decoding = resolve_decoding(engine.generation_config, max_new_tokens=1)
    fp32_hidden = engine._encoder.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    int8_hidden = int8._encoder.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    assert isinstance(int8_hidden, np.ndarray)
    start = np.full((3, 1), model.config.decoder_start_token_id, np.int64)
    fp32_logits, _ = engine._step(start, mask.numpy(), fp32_hidden, {})
    int8_logits, _ = int8._step(start, mask.numpy(), int8_hidden, {})
    spread = float(fp32_logits.std())
    assert 0 < np.abs(int8_logits - fp32_logits).max() < 0.2 * spread
    assert len(int8.generate_ids(sources, max_new_tokens=decoding.max_new_tokens)) == 3
    with pytest.raises(ValueError, match="--dtype float16"):
        OnnxTranslator(folder, dtype="float16")


# ---- decoding ------------------------------------------------------------------------------------------------


def test_top_k_equals_torch_topk():
    """The beam search's top-k: torch.topk's values, largest first, for every k (ties included)."""
    values = np.random.default_rng(0).integers(0, 6, (4, 20)).astype(np.float32)
    for k in (1, 3, 8, 20):
        got, indices = top_k(values, k)
        np.testing.assert_array_equal(got, torch.topk(torch.from_numpy(values), k).values.numpy())
        np.testing.assert_array_equal(np.take_along_axis(values, indices, -1), got)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_greedy_and_beam_tokens_equal_generate(exported, name):
    """Greedy and beam-4 with length penalty (the generation config's early stopping), on a padded batch:
    the same tokens as generate(), and scores within 1e-4 of its own (beam: sequences_scores; greedy: the summed
    log-probabilities of its processed scores)."""
    model, _, engine = exported(name)
    ids, mask = random_batch(model.config.vocab_size, 5, 9, seed=1)
    sources = source_lists(ids, mask)
    eos = model.config.eos_token_id
    for beams, penalty, count in ((1, 1.0, 1), (4, 0.6, 1), (4, 1.5, 2)):
        settings = dict(
            num_beams=beams, length_penalty=penalty, max_new_tokens=12, num_return_sequences=count
        )
        out = scored_generate(model, ids, mask, **settings)
        got = engine.generate_ids(sources, **settings)
        hypotheses = generated(out.sequences, eos)
        assert [hyp for hyps in got for hyp in hyps] == hypotheses, (beams, penalty)
        decoding = resolve_decoding(engine.generation_config, **settings)
        _, scores = engine.search(*engine.pad_sources(sources), decoding)
        if beams > 1:
            expected = out.sequences_scores.numpy()
        else:  # greedy: the log-probabilities of the chosen tokens under the processed scores, summed
            steps = torch.stack(out.scores, 1).log_softmax(-1)  # (B, T, V)
            expected = [
                float(sum(steps[row, t, token] for t, token in enumerate(hyp)))
                for row, hyp in enumerate(hypotheses)
            ]
        np.testing.assert_allclose(np.ravel(scores), expected, atol=1e-4)


@pytest.mark.parametrize("early_stopping", [False, "never"])
def test_beam_stopping_rules_equal_generate(exported, early_stopping):
    """early_stopping False and "never" (transformers' heuristics), with a negative and a positive penalty."""
    model, _, engine = exported("paper")
    ids, mask = random_batch(model.config.vocab_size, 6, 8, seed=7)
    for penalty in (-0.5, 1.2, 2.0):
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                num_beams=3,
                length_penalty=penalty,
                max_new_tokens=10,
                early_stopping=early_stopping,
            )
        decoding = resolve_decoding(
            engine.generation_config,
            num_beams=3,
            length_penalty=penalty,
            max_new_tokens=10,
            early_stopping=early_stopping,
        )
        got, _ = engine.search(*engine.pad_sources(source_lists(ids, mask)), decoding)
        assert [hyps[0] for hyps in got] == generated(out, model.config.eos_token_id), penalty


def test_exported_generation_config_bans_the_suppressed_tokens_for_every_runtime(exported):
    """The folder's generation config repeats `suppress_tokens` as single-token `bad_words_ids` (what
    transformers.js applies) and decodes exactly as the model's own config: the model favours `<pad>` and
    `<s>`, so dropping either ban would change the tokens."""
    from transformers import GenerationConfig

    model, folder, _ = exported("paper")
    own = model.generation_config
    runtime = GenerationConfig.from_pretrained(folder)
    assert own.suppress_tokens and runtime.suppress_tokens == own.suppress_tokens
    assert runtime.bad_words_ids == [[token] for token in own.suppress_tokens]
    ids, mask = random_batch(model.config.vocab_size, 4, 6, seed=11)
    model.eval()
    try:
        for beams in (1, 4):
            decode = functools.partial(model.generate, input_ids=ids, attention_mask=mask, num_beams=beams)
            with torch.no_grad():
                expected, unbanned = decode(), decode(suppress_tokens=None)
                by_bad_words = decode(generation_config=runtime, suppress_tokens=None)
            assert not torch.equal(unbanned, expected), "the model must favour a suppressed token"
            assert torch.equal(by_bad_words, expected), beams
    finally:
        model.train()


def test_generation_config_processors_equal_generate(exported, tmp_path):
    """The generation config's processors (forced </s> at the length limit, bad words of one and three tokens,
    a minimum length, tokens suppressed at the first step) give generate()'s tokens, greedy and beam."""
    model, folder, _ = exported("paper")
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    config = model.generation_config
    settings = dict(
        forced_eos_token_id=config.eos_token_id,
        bad_words_ids=[[7], [12, 12, 3], [13, 13, 13], [5, 5, 3]],
        min_new_tokens=3,
        begin_suppress_tokens=[5, 6],
        max_new_tokens=8,
    )
    custom = config.__class__.from_dict({**config.to_dict(), **settings})
    custom.save_pretrained(copy)
    engine = OnnxTranslator(copy, num_threads=1)
    ids, mask = random_batch(model.config.vocab_size, 4, 6, seed=11)
    for beams in (1, 4):
        with torch.no_grad():
            out = model.generate(
                input_ids=ids, attention_mask=mask, generation_config=custom, num_beams=beams
            )
        got = engine.generate_ids(
            source_lists(ids, mask), num_beams=beams, length_penalty=custom.length_penalty
        )
        assert [hyps[0] for hyps in got] == generated(out, model.config.eos_token_id), beams


def test_translate_equals_inference_translate(exported, tokenizer):
    """translate() is inference.translate's loop on this engine: same outputs for empty, short and over-long
    lines (truncated to the position limit), greedy and with the folder's beam settings, and with max_len_a."""
    model, _, engine = exported("paper")
    lines = ["起初，神创造天地。", "", "神说：「要有光」，就有了光。" * 8, "地是空虚混沌"]
    options: dict[str, Any]
    for options in (
        dict(num_beams=1),
        dict(),
        dict(num_beams=2, length_penalty=1.0, max_new_tokens=5),
        dict(max_len_a=0.1, max_len_b=1),
    ):
        expected = translate(model, tokenizer, lines, batch_size=2, **options)
        assert engine.translate(lines, batch_size=2, **options) == expected, options


@pytest.mark.parametrize(
    "options", [dict(num_beams=1), dict(num_beams=3, num_return_sequences=3, length_penalty=0.6)]
)
def test_translation_scores_equal_pytorch(exported, tokenizer, monkeypatch, options: dict[str, Any]):
    """`translate_hypotheses` with token scores on this engine: PyTorch's texts, output tokens, sequence scores and
    per-token log-probabilities (1e-3), n-best sorted; with a generation config that alters no logits, each score
    is forced decoding's score of its output (beams: log_prob / length ** length_penalty; greedy: log_prob)."""
    from vanilla_transformer.inference.engines import EngineModel
    from vanilla_transformer.inference.translate import translate_hypotheses

    model, _, engine = exported("paper")
    # the export writes suppress_tokens as bad words too
    for config in (model.generation_config, engine.generation_config):
        monkeypatch.setattr(config, "suppress_tokens", None)
        monkeypatch.setattr(config, "bad_words_ids", None)
    lines = ["起初，神创造天地。", "", "神说：「要有光」，就有了光。", "地是空虚混沌"]
    options = {**options, "max_new_tokens": 10}
    expected = translate_hypotheses(model, tokenizer, lines, batch_size=2, token_scores=True, **options)
    nbest = translate_hypotheses(
        EngineModel(engine, "onnx"), tokenizer, lines, batch_size=3, token_scores=True, **options
    )
    penalty = options.get("length_penalty", 0.0)
    for hypotheses, theirs in zip(nbest, expected):
        assert len(hypotheses) == options.get("num_return_sequences", 1)
        scores = [h.score for h in hypotheses if h.score is not None]
        assert scores == sorted(scores, reverse=True)
        for mine, their in zip(hypotheses, theirs):
            assert mine.text == their.text
            if mine.tokens is None or their.tokens is None or mine.score is None or their.score is None:
                assert mine == their
                continue
            assert mine.tokens.token_ids == their.tokens.token_ids
            assert mine.tokens.token_log_probs == pytest.approx(their.tokens.token_log_probs, abs=1e-3)
            assert mine.score == pytest.approx(their.score, abs=1e-3)
            assert mine.score == pytest.approx(mine.tokens.score(penalty), abs=1e-3)


def test_unsupported_and_bad_settings_raise(exported):
    _, folder, engine = exported("paper")
    for option in (dict(repetition_penalty=1.3), dict(do_sample=True), dict(no_repeat_ngram_size=2)):
        with pytest.raises(ValueError, match=next(iter(option))):
            resolve_decoding(engine.generation_config, **option)
    with pytest.raises(ValueError, match="unknown generation options"):
        resolve_decoding(engine.generation_config, num_beam=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.generate_ids([[5, 3]], max_new_tokens=engine.config.max_position_embeddings + 1)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        engine.generate_ids([[5] * (engine.config.max_position_embeddings + 1)])
    with pytest.raises(ValueError, match="num_return_sequences"):
        engine.generate_ids([[5, 3]], num_beams=1, num_return_sequences=2)
    with pytest.raises(ValueError, match="at least one"):
        engine.generate_ids([[]])


# ---- bad folders ---------------------------------------------------------------------------------------------


def test_bad_onnx_folders_raise(exported, tmp_path):
    folder = exported("paper")[1]
    with pytest.raises(ValueError, match="does not exist"):
        OnnxTranslator(tmp_path / "missing")
    incomplete = tmp_path / "incomplete"
    shutil.copytree(folder, incomplete)
    (incomplete / DECODER_FILE).unlink()
    with pytest.raises(ValueError, match=f"missing {DECODER_FILE}"):
        OnnxTranslator(incomplete)
    (incomplete / DECODER_FILE).write_bytes(b"not a graph")
    with pytest.raises(ValueError, match="not a loadable ONNX graph"):
        OnnxTranslator(incomplete)
    with pytest.raises(ValueError, match="num_threads"):
        OnnxTranslator(folder, num_threads=0)
    old = tmp_path / "old"  # the three-file layout: three graphs at the top, no onnx/
    old.mkdir()
    for name in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx", "config.json"):
        (old / name).write_bytes(b"x")
    with pytest.raises(ValueError, match="three-file layout.*re-export"):
        OnnxTranslator(old)


def test_export_rejects_bad_input(export, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        export_onnx(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        export_onnx(export, tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        export_onnx(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ValueError, match="expected a VanillaTransformerForConditionalGeneration"):
        # a module of the wrong class, on purpose: the check names the class it expects
        export_onnx(torch.nn.Linear(2, 2), tmp_path / "out")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="float32"):
        export_onnx(tiny_model(vocab_size=60).half(), tmp_path / "out")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(export, corrupt)
    (corrupt / "model.safetensors").write_bytes((export / "model.safetensors").read_bytes()[:100])
    with pytest.raises(ValueError, match="corrupt"):
        export_onnx(corrupt, tmp_path / "out")


@pytest.mark.parametrize("case", ["missing", "file_as_out"])
def test_script_bad_input_exits_2_with_one_line(export, tmp_path, case):
    """`vanilla-transformer export --engine onnx`: exit code 2 and one error line; both checks run before a model
    loads."""
    model, out = str(export), str(tmp_path / "out")
    if case == "missing":
        model = str(tmp_path / "nowhere")
    else:
        (tmp_path / "out").write_text("x")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer", "export", "--engine", "onnx", model, out],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    if case == "file_as_out":  # refused as the argument is parsed: argparse's usage, then its one error line
        assert (
            lines[-1].startswith("vanilla-transformer export: error: argument out: ")
            and "Traceback" not in done.stderr
        )
        return
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr


def test_readme_onnxruntime_loop_runs(exported, capsys):
    """The exported README's onnxruntime-only greedy loop runs as written on the folder."""
    folder = exported("paper")[1]
    code = (folder / "README.md").read_text().split("```python")[2].split("```")[0]
    exec(code.replace('"this-folder"', repr(str(folder))), {})
    assert capsys.readouterr().out.count("\n") == 1  # one translation printed


def test_int8_options_of_the_engines(export, exported, tmp_path):
    """--dtype int8: the torch engine loads the model with int8 linear layers (CPU only), the onnx engine runs the
    int8 graphs; `vanilla-transformer translate --engine onnx --dtype int8` translates; precisions an engine does
    not run are refused naming the option."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
    from transformers import PreTrainedModel

    from vanilla_transformer.inference.engines import load_engine

    model, tokenizer = load_engine("torch", export, dtype="int8")
    assert isinstance(model, PreTrainedModel)
    assert any(isinstance(module, DynamicLinear) for module in model.modules())
    lines = ["起初，神创造天地。", "地是空虚混沌"]
    assert len(translate(model, tokenizer, lines, num_beams=2)) == 2
    with pytest.raises(ValueError, match="--dtype int8 runs on the CPU"):
        load_engine("torch", export, dtype="int8", device="cuda")
    folder = exported("paper")[1]
    engine, _ = load_engine("onnx", folder, dtype="int8")
    assert engine.translator.dtype == "int8"
    with pytest.raises(ValueError, match="--dtype float32 or --dtype int8"):
        load_engine("onnx", folder, dtype="bfloat16")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "vanilla_transformer",
        "translate",
        "--engine",
        "onnx",
        "--model",
        str(folder),
    ]
    done = subprocess.run(
        [*command, "--dtype", "int8"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2, done.stderr
    done = subprocess.run(  # auto, the default: the export's own (float32) graphs
        [*command, "--dtype", "auto"], input="x\n", capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stderr
    done = subprocess.run(
        [*command, "--dtype", "bfloat16"], input="x\n", capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--dtype" in done.stderr, done.stderr


@pytest.mark.parametrize("cpu", list(CPU_KINDS))
def test_every_engine_translates_alike_with_the_default_options(
    exported, tokenizer, tmp_path, monkeypatch, capsys, cpu
):
    """`vanilla-transformer translate` with default options gives the same lines on the torch engine (the saved
    folder, in its saved float32 precision on every simulated CPU kind: tests/helpers/precision.py), the
    CTranslate2 float32 export and the ONNX export of the same model."""
    pytest.importorskip("ctranslate2")
    from helpers.shared import run_main

    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.modeling import save_with_remote_code

    model, onnx_folder, _ = exported("pre_ln_gelu_learned_separate")
    folders = {"torch": save_with_remote_code(model, tmp_path / "torch", tokenizer)}
    folders["ct2"] = export_ct2(folders["torch"], tmp_path / "ct2")
    folders["onnx"] = onnx_folder
    simulate(monkeypatch, *CPU_KINDS[cpu])
    lines = [
        "起初，神创造天地。",
        "地是空虚混沌",
        "神说：「要有光」，就有了光。",
        "神看光是好的，就把光暗分开了。",
    ]
    outputs = {}
    for engine, folder in folders.items():
        code, out, err = run_main(
            monkeypatch, capsys, "--engine", engine, "--model", str(folder), stdin="\n".join(lines) + "\n"
        )
        assert code == 0, err
        outputs[engine] = out.splitlines()
    assert len(outputs["torch"]) == len(lines) and len(set(outputs["torch"])) > 1, outputs
    assert outputs["ct2"] == outputs["torch"] and outputs["onnx"] == outputs["torch"], outputs
