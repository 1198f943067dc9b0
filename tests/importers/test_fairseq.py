"""`convert --from fairseq` against fairseq itself: fairseq builds a random small `transformer` (post-LN and pre-LN,
sinusoidal and learned positions, shared and separate vocabularies), saves it with its own checkpoint code and
decodes a padded batch with its own SequenceGenerator; the converted folder gives the same logits (1e-4), the same
greedy and beam-4 tokens, the same token ids from text as fairseq's SentencePiece + dictionary pipeline, and
exports to CTranslate2 and ONNX with the same tokens. Bad inputs exit 2 with one `error:` line and write nothing.

fairseq comes from the `fairseq-fixed` package (scripts/install_reference_toolkits.sh); without it the parity tests skip, the bad-input
tests run on a checkpoint written in fairseq's format by hand."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import pytest
import torch
from conftest import perturb_biases_and_norms

from vanilla_transformer.commands import convert as convert_command
from vanilla_transformer.convert.fairseq import convert_fairseq_checkpoint

sentencepiece = pytest.importorskip("sentencepiece")

LANGS = ("de", "en")
TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "a small model translates short sentences",
    "der schnelle braune fuchs springt über den faulen hund",
    "ein kleines modell übersetzt kurze sätze",
    "numbers like 12 and 345 are split into pieces",
    "padding and positions must agree with fairseq",
] * 20
MAX_LEN_B = 20
SOURCES = ["the quick fox", "ein kleines modell übersetzt kurze sätze über den hund", "12 pieces"]
# fairseq option lists (command-line names) of the models under test
CONFIGS = {
    "post_ln_shared_sinusoidal": dict(share_all_embeddings=True),
    "pre_ln_learned_separate": dict(
        encoder_normalize_before=True,
        decoder_normalize_before=True,
        encoder_learned_pos=True,
        decoder_learned_pos=True,
        layernorm_embedding=True,
        activation_fn="gelu",
        no_scale_embedding=True,
    ),
    "post_ln_tied_separate": dict(share_decoder_input_output_embed=True, max_target_positions=48),
}
# how much each model favours </s> (`make_decisive`): hypotheses end at several lengths below the limit
EOS_BOOSTS = {"post_ln_shared_sinusoidal": 5.0, "pre_ln_learned_separate": 3.0, "post_ln_tied_separate": 3.0}


def train_spm(folder: Path, name: str, vocab_size: int) -> Path:
    prefix = folder / name
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXT),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        character_coverage=1.0,
        minloglevel=2,
    )
    return Path(f"{prefix}.model")


def write_dictionary(path: Path, spm_model: Path, skip: int = 0) -> None:
    """dict.txt as fairseq-preprocess writes it for SentencePiece pieces: 'piece count' lines (the model's own
    special pieces left out); `skip` leaves out a few pieces, which then encode as <unk>."""
    processor = sentencepiece.SentencePieceProcessor(model_file=str(spm_model))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    pieces = [p for p in pieces if p not in ("<unk>", "<s>", "</s>")][skip:]
    path.write_text("".join(f"{p} {1000 - i}\n" for i, p in enumerate(pieces)), encoding="utf-8")


# ----------------------------------------------------------------------------------------------------------------
# fairseq's side (skipped without fairseq)
# ----------------------------------------------------------------------------------------------------------------


def fairseq_model(folder: Path, options: dict, seed: int, eos_boost: float):
    """fairseq's task and model for `options` with the dictionaries of `folder`, built and saved by fairseq."""
    from fairseq import checkpoint_utils, tasks
    from fairseq import options as fairseq_options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    argv = [str(folder), "--task", "translation", "-s", LANGS[0], "-t", LANGS[1], "--arch", "transformer"]
    sizes = dict(
        encoder_embed_dim=32,
        decoder_embed_dim=32,
        encoder_ffn_embed_dim=48,
        decoder_ffn_embed_dim=40,
        encoder_layers=2,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=2,
        max_source_positions=64,
        max_target_positions=64,
        dropout=0.0,
    )
    for name, value in {**sizes, **options}.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    parser = fairseq_options.get_training_parser()
    args = fairseq_options.parse_args_and_arch(parser, argv)
    assert isinstance(args, argparse.Namespace)
    cfg = convert_namespace_to_omegaconf(args)
    # the decoding options of the training run, which the converted generation_config.json takes
    cfg.generation.beam, cfg.generation.lenpen, cfg.generation.max_len_b = 4, 1.0, MAX_LEN_B
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(seed)
    model = task.build_model(cfg.model).eval()
    perturb_biases_and_norms(model)
    make_decisive(model, task.target_dictionary.eos(), eos_boost)
    path = folder / "checkpoint_best.pt"
    state = {
        "args": None,
        "cfg": cfg,
        "model": model.state_dict(),
        "optimizer_history": [],
        "extra_state": {},
    }
    checkpoint_utils.torch_persistent_save(state, str(path))
    # fairseq's own loader, given the checkpoint unpickled in full (its torch.load call predates torch 2.6's
    # weights_only default, which refuses the omegaconf config)
    unpickled = torch.load(path, map_location="cpu", weights_only=False)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], state=unpickled)
    return models[0].eval(), task


def make_decisive(model, eos: int, eos_boost: float) -> None:
    """A random model repeats one token whatever the source and never ends: shift the bias of the decoder's last
    LayerNorm so that the logits, averaged over random inputs, are flat (the source decides the tokens) but for
    </s>, raised by `eos_boost`, so that hypotheses finish at several lengths before the length limit (where
    fairseq forces </s> and the exported engines cannot), and <pad>, lowered."""
    decoder = model.decoder
    norm = decoder.layer_norm if decoder.layer_norm is not None else decoder.layers[-1].final_layer_norm
    vocab = decoder.output_projection.weight.shape[0]
    g = torch.Generator().manual_seed(7)
    src = torch.randint(4, model.encoder.embed_tokens.weight.shape[0], (8, 9), generator=g)
    target = torch.randint(4, vocab, (8, 12), generator=g)
    target[:, 0] = eos
    with torch.no_grad():
        mean = model(src, torch.full((8,), 9), target)[0].reshape(-1, vocab).mean(0)  # (V,)
        wanted = -mean
        wanted[eos] += eos_boost
        # <pad> improbable: generate() and fairseq score a suppressed token's probability as lost, CTranslate2
        # renormalises without it, which reorders the beams of a model that gives <pad> a real probability
        wanted[decoder.padding_idx] -= 8.0
        shift = torch.linalg.lstsq(decoder.output_projection.weight, wanted[:, None]).solution[:, 0]
        norm.bias += shift


def make_source(folder: Path, name: str, seed: int) -> tuple:
    """A fairseq checkpoint folder for CONFIGS[name]: SentencePiece model(s), dictionaries, checkpoint."""
    folder.mkdir(parents=True)
    options = CONFIGS[name]
    if options.get("share_all_embeddings"):
        spm = train_spm(folder, "spm", 60)
        for lang in LANGS:
            write_dictionary(folder / f"dict.{lang}.txt", spm)
    else:
        for lang, size, skip in ((LANGS[0], 60, 3), (LANGS[1], 50, 0)):
            spm = train_spm(folder, f"spm.{lang}", size)
            write_dictionary(folder / f"dict.{lang}.txt", spm, skip)
    model, task = fairseq_model(folder, options, seed, EOS_BOOSTS[name])
    return model, task


@functools.cache
def fairseq_available() -> bool:
    try:
        import fairseq  # noqa: F401
    except Exception:
        return False
    return True


needs_fairseq = pytest.mark.skipif(
    not fairseq_available(), reason="needs fairseq (pip install fairseq-fixed)"
)


@pytest.fixture(scope="module", params=list(CONFIGS))
def converted(request, tmp_path_factory):
    """(fairseq model, its task, our converted folder) for each of CONFIGS, built once per module."""
    if not fairseq_available():
        pytest.skip("needs fairseq (pip install fairseq-fixed)")
    folder = tmp_path_factory.mktemp(request.param)
    model, task = make_source(folder / "fairseq", request.param, seed=list(CONFIGS).index(request.param))
    out = convert_fairseq_checkpoint(folder / "fairseq", folder / "converted", trust_pickle=True)
    return model, task, out


def fairseq_encode(task, folder: Path, sentences: list[str]) -> list[torch.Tensor]:
    """fairseq's own text -> source ids: its SentencePiece BPE and the source dictionary (eos appended)."""
    from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE, SentencepieceConfig

    model = folder / "spm.model" if (folder / "spm.model").exists() else folder / f"spm.{LANGS[0]}.model"
    bpe = SentencepieceBPE(SentencepieceConfig(sentencepiece_model=str(model)))
    return [
        task.source_dictionary.encode_line(bpe.encode(s), add_if_not_exist=False, append_eos=True).long()
        for s in sentences
    ]


def left_padded(rows: list[torch.Tensor], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fairseq's source batch: left padding (its default); and the lengths."""
    length = max(len(r) for r in rows)
    batch = torch.full((len(rows), length), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        batch[i, length - len(row) :] = row
    return batch, torch.tensor([len(r) for r in rows])


def ours(out: Path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out)


@needs_fairseq
def test_tokenizer_gives_fairseq_ids(converted):
    model, task, out = converted
    _, tokenizer = ours(out)
    expected = fairseq_encode(task, out.parent / "fairseq", SOURCES)
    assert [tokenizer(s)["input_ids"] for s in SOURCES] == [row.tolist() for row in expected]
    # the separate dictionaries leave pieces out: those become <unk>, as in fairseq
    separate = task.source_dictionary.symbols != task.target_dictionary.symbols
    assert not separate or any(task.source_dictionary.unk() in row.tolist() for row in expected)


@needs_fairseq
def test_logits_match_fairseq_on_a_padded_batch(converted):
    model, task, out = converted
    our_model, _ = ours(out)
    pad = task.source_dictionary.pad()
    src, lengths = left_padded(fairseq_encode(task, out.parent / "fairseq", SOURCES), pad)
    g = torch.Generator().manual_seed(3)
    target = torch.randint(4, len(task.target_dictionary), (len(SOURCES), 7), generator=g)
    target[:, 0] = task.target_dictionary.eos()
    target[1, 5:] = pad
    with torch.no_grad():
        expected = model(src, lengths, target)[0]
        got = our_model(
            input_ids=src,
            attention_mask=(src != pad).long(),
            decoder_input_ids=target,
            decoder_attention_mask=(target != pad).long(),
        ).logits
    real = target != pad
    torch.testing.assert_close(got[real], expected[real], atol=1e-4, rtol=1e-4)


@needs_fairseq
@pytest.mark.parametrize("beam", [1, 4])
def test_generate_matches_fairseq(converted, beam):
    from fairseq.sequence_generator import SequenceGenerator

    model, task, out = converted
    our_model, _ = ours(out)
    pad, eos = task.source_dictionary.pad(), task.target_dictionary.eos()
    src, lengths = left_padded(fairseq_encode(task, out.parent / "fairseq", SOURCES), pad)
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_b=MAX_LEN_B)
    with torch.no_grad():
        hypos = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
        generated = our_model.generate(input_ids=src, attention_mask=(src != pad).long(), num_beams=beam)
    expected = [h[0]["tokens"].tolist() for h in hypos]
    got = [[t for t in row[1:] if t != pad] for row in generated.tolist()]
    got = [row[: row.index(eos) + 1] if eos in row else row for row in got]
    for index, hypothesis in enumerate(expected):
        if len(hypothesis) == MAX_LEN_B + 1 and eos not in got[index]:
            # fairseq forces </s> as the last token at its length limit; the converted model cannot
            expected[index], got[index] = hypothesis[:-1], got[index][:-1]
    assert got == expected


@needs_fairseq
# CTranslate2 for every architecture; ONNX (whose exporter takes ~30 s a folder) for the one that differs most from
# the paper's (pre-LN, learned positions, layernorm_embedding, GELU, separate vocabularies): the ONNX graphs of each
# architecture option are compared with PyTorch in tests/export/test_export_onnx.py
@pytest.mark.parametrize(
    "converted, engine",
    [*((name, "ct2") for name in CONFIGS), ("pre_ln_learned_separate", "onnx")],
    indirect=["converted"],
)
def test_converted_folder_exports_with_token_parity(converted, engine, tmp_path):
    if engine == "ct2":
        pytest.importorskip("ctranslate2")
        from vanilla_transformer.export.ct2 import export_ct2 as exporter
        from vanilla_transformer.inference.engine_ct2 import CT2Translator as Translator
    else:
        pytest.importorskip("onnxruntime")
        from vanilla_transformer.export.onnx import export_onnx as exporter
        from vanilla_transformer.inference.engine_onnx import OnnxTranslator as Translator

    _, task, out = converted
    our_model, tokenizer = ours(out)
    pad, eos = task.source_dictionary.pad(), task.target_dictionary.eos()
    sources = [tokenizer(s)["input_ids"] for s in SOURCES]
    src, _ = left_padded([torch.tensor(s) for s in sources], pad)
    translator = Translator(exporter(out, tmp_path / engine), num_threads=1)
    for beam in (1, 4):
        with torch.no_grad():
            generated = our_model.generate(input_ids=src, attention_mask=(src != pad).long(), num_beams=beam)
        expected = [[t for t in row[1:] if t != pad] for row in generated.tolist()]
        expected = [row[: row.index(eos) + 1] if eos in row else row for row in expected]
        got = translator.generate_ids(sources, num_beams=beam)
        assert [hypotheses[0] for hypotheses in got] == expected, (engine, beam)


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one error line, exit 2, nothing written (checkpoints in fairseq's format, written without fairseq)
# ----------------------------------------------------------------------------------------------------------------


def handmade_source(folder: Path, separate: bool = False, **overrides) -> Path:
    """A fairseq-format checkpoint folder written without fairseq: the `args` Namespace of an old checkpoint and
    the state dict names of fairseq's transformer (1 + 1 layers, sinusoidal positions, shared embeddings; with
    `separate`, a SentencePiece model and a dictionary per side and the output tied to the target embedding)."""
    folder.mkdir(parents=True)
    if separate:
        for lang, size in zip(LANGS, (40, 46)):
            write_dictionary(folder / f"dict.{lang}.txt", train_spm(folder, f"spm.{lang}", size))
        overrides = {"share_all_embeddings": False, **overrides}
    else:
        spm = train_spm(folder, "spm", 40)
        for lang in LANGS:
            write_dictionary(folder / f"dict.{lang}.txt", spm)
    rows = 4 + len((folder / f"dict.{LANGS[0]}.txt").read_text().splitlines())
    target_rows = 4 + len((folder / f"dict.{LANGS[1]}.txt").read_text().splitlines())
    d, ffn = 16, 24
    args = dict(
        arch="transformer",
        source_lang=LANGS[0],
        target_lang=LANGS[1],
        encoder_embed_dim=d,
        decoder_embed_dim=d,
        encoder_ffn_embed_dim=ffn,
        decoder_ffn_embed_dim=ffn,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        max_source_positions=128,
        max_target_positions=128,
        share_all_embeddings=True,
        share_decoder_input_output_embed=True,
    )
    args.update(overrides)
    g = torch.Generator().manual_seed(0)
    state = {"encoder.embed_tokens.weight": torch.randn(rows, d, generator=g)}
    shared = args["share_all_embeddings"]
    target_embedding = torch.randn(target_rows, d, generator=g)
    state["decoder.embed_tokens.weight"] = (
        state["encoder.embed_tokens.weight"] if shared else target_embedding
    )
    attention = {
        f"{p}_proj.{k}": (d, d) if k == "weight" else (d,) for p in "qkvo" for k in ("weight", "bias")
    }
    attention = {name.replace("o_proj", "out_proj"): shape for name, shape in attention.items()}
    norm = {"weight": (d,), "bias": (d,)}
    layer = {f"self_attn.{n}": s for n, s in attention.items()}
    layer |= {f"self_attn_layer_norm.{n}": s for n, s in norm.items()}
    layer |= {"fc1.weight": (ffn, d), "fc1.bias": (ffn,), "fc2.weight": (d, ffn), "fc2.bias": (d,)}
    layer |= {f"final_layer_norm.{n}": s for n, s in norm.items()}
    for name, shape in layer.items():
        state[f"encoder.layers.0.{name}"] = torch.randn(shape, generator=g)
    for name, shape in {
        **layer,
        **{f"encoder_attn.{n}": s for n, s in attention.items()},
        **{f"encoder_attn_layer_norm.{n}": s for n, s in norm.items()},
    }.items():
        state[f"decoder.layers.0.{name}"] = torch.randn(shape, generator=g)
    state["decoder.output_projection.weight"] = state["decoder.embed_tokens.weight"]
    state["encoder.version"] = state["decoder.version"] = torch.tensor([3.0])
    torch.save({"args": argparse.Namespace(**args), "model": state}, folder / "checkpoint_best.pt")
    return folder


def test_separate_vocabularies_export_to_ct2_with_the_tokens_of_generate(tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.inference.engine_ct2 import CT2Translator

    code, err = run_convert(
        handmade_source(tmp_path / "src", separate=True), tmp_path / "out", capsys, "--trust_pickle"
    )
    assert code == 0, err
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert model.config.vocab_size != model.config.decoder_vocab_size
    sources = [tokenizer(s)["input_ids"] for s in SOURCES]
    translator = CT2Translator(export_ct2(tmp_path / "out", tmp_path / "ct2"), num_threads=1)
    # the source side's pieces (a tokenizer with separate vocabularies gives the target's for convert_ids_to_tokens)
    by_id = {index: token for token, index in tokenizer.get_vocab().items()}
    assert translator.source_tokens == [by_id[index] for index in range(model.config.vocab_size)]
    for source in sources:
        with torch.no_grad():
            generated = model.generate(input_ids=torch.tensor([source]), num_beams=1, max_new_tokens=6)
        expected = [t for t in generated[0, 1:].tolist() if t != model.config.pad_token_id]
        expected = expected[: expected.index(2) + 1] if 2 in expected else expected
        assert translator.generate_ids([source], num_beams=1, max_new_tokens=6)[0][0] == expected


def run_convert(src: Path, out: Path, capsys, *flags: str) -> tuple[int, str]:
    code = convert_command.main(["--from", "fairseq", str(src), str(out), *flags])
    return code, capsys.readouterr().err


def test_handmade_checkpoint_converts_and_generates(tmp_path, capsys):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    code, err = run_convert(handmade_source(tmp_path / "src"), tmp_path / "out", capsys, "--trust_pickle")
    assert code == 0, err
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    config = model.config
    assert (config.pad_token_id, config.eos_token_id, config.decoder_start_token_id) == (1, 2, 2)
    assert config.position_offset == 2 and config.sinusoidal_layout == "tensor2tensor"
    batch = tokenizer(SOURCES, return_tensors="pt", padding=True)
    assert batch["input_ids"][0, int(batch["attention_mask"][0].sum()) - 1] == 2
    assert model.generate(**batch, max_new_tokens=5).shape[0] == len(SOURCES)


@pytest.mark.parametrize(
    "overrides, flags, message",
    [
        (dict(), (), "is a pickle, which is read only with --trust_pickle"),
        (dict(arch="lightconv"), ("--trust_pickle",), "arch='lightconv'"),
        (dict(decoder_normalize_before=True), ("--trust_pickle",), "encoder_normalize_before=False with"),
        (dict(cross_self_attention=True), ("--trust_pickle",), "cross_self_attention=True"),
        (dict(activation_fn="tanh"), ("--trust_pickle",), "activation_fn='tanh'"),
        (dict(encoder_layers=2), ("--trust_pickle",), "encoder_layers=2 but the weights have 1"),
        # sinusoidal tables are not stored: 2^21 positions x 16 would be 2 x 128 MiB for a checkpoint of 20 KiB
        (
            dict(max_source_positions=2**21, max_target_positions=2**21),
            ("--trust_pickle",),
            "asks for a model of 67",
        ),
        # a value of 10^6 strings pickled in 60 lists (shared references): its message is cut, not expanded
        (
            dict(arch=functools.reduce(lambda inner, _: [inner] * 10, range(5), ["x"] * 10)),
            ("--trust_pickle",),
            "arch=[[",
        ),
    ],
    ids=[
        "pickle",
        "arch",
        "normalize_before",
        "cross_self_attention",
        "activation",
        "layers",
        "positions",
        "arch_bomb",
    ],
)
def test_bad_checkpoints_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, overrides, flags, message):
    src = handmade_source(tmp_path / "src", **overrides)
    code, err = run_convert(src, tmp_path / "out", capsys, *flags)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert len(err) < 1000, len(err)
    assert not (tmp_path / "out").exists()


def test_truncated_checkpoint_and_wrong_dictionary_are_refused(tmp_path, capsys):
    src = handmade_source(tmp_path / "src")
    data = (src / "checkpoint_best.pt").read_bytes()
    (src / "checkpoint_best.pt").write_bytes(data[: len(data) // 2])
    code, err = run_convert(src, tmp_path / "out", capsys, "--trust_pickle")
    assert code == 2 and "truncated or corrupt" in err and err.count("\n") == 1, err
    (src / "checkpoint_best.pt").write_bytes(data)
    lines = (src / f"dict.{LANGS[0]}.txt").read_text().splitlines()
    (src / f"dict.{LANGS[0]}.txt").write_text("\n".join(lines[:-9]) + "\n")
    code, err = run_convert(src, tmp_path / "out", capsys, "--trust_pickle")
    assert code == 2 and "rows; pass the dictionary the model was trained with" in err, err
    assert not (tmp_path / "out").exists()
