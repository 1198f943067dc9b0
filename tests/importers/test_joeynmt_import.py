"""`convert --from joeynmt` against JoeyNMT itself: JoeyNMT 2.3 builds a random small Transformer with its own
`build_model`, saves it as its training does (config.yaml, best.ckpt, src_vocab.txt, trg_vocab.txt), and decodes a
padded batch with its own greedy and beam search; the converted folder gives the same logits (within 1e-4) and the
same tokens. Bad input (an architecture the converter cannot express, a truncated checkpoint, vocabularies that do
not fit the weights, a pickle without --trust_pickle) is one `error:` line, exit 2, nothing written."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import sentencepiece
import torch
import yaml

# JoeyNMT is installed by scripts/install_reference_toolkits.sh (its pins conflict with the dev extras), imported by name so that static checks
# pass where it is not installed
joeynmt_model = pytest.importorskip(
    "joeynmt.model", reason="JoeyNMT 2.3 (scripts/install_reference_toolkits.sh installs it)"
)
Batch = pytest.importorskip("joeynmt.batch").Batch
search = pytest.importorskip("joeynmt.search").search
Vocabulary = pytest.importorskip("joeynmt.vocabulary").Vocabulary
joeynmt_tokenizers = pytest.importorskip("joeynmt.tokenizers")

from vanilla_transformer.commands.convert import main as convert_main  # noqa: E402
from vanilla_transformer.convert.joeynmt import (  # noqa: E402
    convert_joeynmt_checkpoint,
    generation_config_from_joeynmt,
)
from vanilla_transformer.modeling import VanillaTransformerConfig  # noqa: E402

SPECIALS = SimpleNamespace(
    unk_token="<unk>", unk_id=0, pad_token="<pad>", pad_id=1, bos_token="<s>", bos_id=2, eos_token="</s>", eos_id=3,
    sep_token=None, sep_id=None, lang_tags=[],
)  # fmt: skip
PAD, BOS, EOS = 1, 2, 3
SOURCE_TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "a small model translates short sentences",
    "numbers like 12 and 345 are split into pieces",
    "padding and positions must agree with joey",
] * 20
TARGET_TEXT = [
    "der schnelle braune fuchs springt über den faulen hund",
    "ein kleines modell übersetzt kurze sätze",
    "zahlen wie 12 und 345 werden in stücke geteilt",
    "auffüllung und positionen müssen zu joey passen",
] * 20
SENTENCES = ["the quick fox", "a small model splits numbers like 345 into short pieces", "12 dogs"]


def train_spm(folder: Path, name: str, text: list[str], vocab_size: int) -> Path:
    prefix = folder / name
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_prefix=str(prefix), vocab_size=vocab_size, character_coverage=1.0,
        minloglevel=2,
    )  # fmt: skip
    return prefix.with_suffix(".model")


def spm_pieces(model: Path, skip: int) -> list[str]:
    """The pieces of the SentencePiece `model` as a JoeyNMT vocabulary file lists them (its own special pieces
    left out), less the `skip` last multi-character pieces (JoeyNMT splits those into smaller pieces)."""
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    pieces = [piece for piece in pieces if piece not in ("<unk>", "<s>", "</s>")]
    dropped = [piece for piece in pieces if len(piece) > 2][-skip:] if skip else []
    return [piece for piece in pieces if piece not in dropped]


def joey_config(layer_norm: str, tied: bool, activation: str, scale: bool, width: int = 32) -> dict:
    """A JoeyNMT config.yaml (as a dict) of a small Transformer (2 encoder and 2 decoder layers, 4 heads) with
    SentencePiece tokenizers (`joint.model` when tied, else `src.model` and `trg.model`)."""

    def stack(layers: int, ffn: int) -> dict:
        return {
            "type": "transformer",
            "num_layers": layers,
            "num_heads": 4,
            "embeddings": {"embedding_dim": width, "scale": scale, "dropout": 0.0},
            "hidden_size": width,
            "ff_size": ffn,
            "dropout": 0.0,
            "layer_norm": layer_norm,
            "activation": activation,
        }

    def side(lang: str) -> dict:
        model = "joint.model" if tied else f"{lang}.model"
        return {
            "lang": lang,
            "level": "bpe",
            "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": f"/data/joey/{model}"},
        }

    return {
        "name": "tiny",
        "data": {"src": side("src"), "trg": side("trg"), "special_symbols": vars(SPECIALS).copy()},
        "testing": {"beam_size": 4, "beam_alpha": -1, "max_output_length": 12},
        "model": {
            "initializer": "xavier_uniform",
            "embed_initializer": "normal",
            "embed_init_weight": 0.5,
            "bias_initializer": "normal",
            "tied_embeddings": tied,
            "tied_softmax": tied,
            "encoder": stack(2, 64),
            "decoder": stack(2, 48),
        },
    }


def save_joey_folder(
    folder: Path,
    config: dict,
    seed: int = 0,
    eos_scale: float = 1.0,
    drop_pieces: bool = True,
    trained_specials: bool = False,
):
    """JoeyNMT's model of `config`, built by its `build_model` with random weights (the LayerNorms drawn too, the
    output row of </s> multiplied by `eos_scale`; with `drop_pieces` the vocabularies lack a few multi-character
    pieces of the SentencePiece models; with `trained_specials` (a pre-LN model) <s> and <pad> get no probability,
    as in a trained model), saved in `folder` as JoeyNMT's training saves it (config.yaml,
    best.ckpt, src_vocab.txt, trg_vocab.txt, the SentencePiece models); returns the JoeyNMT model."""
    folder.mkdir(parents=True)
    if config["model"]["tied_embeddings"]:
        joint = train_spm(folder, "joint", SOURCE_TEXT + TARGET_TEXT, 80)
        src_vocab = trg_vocab = Vocabulary(spm_pieces(joint, skip=3 * drop_pieces), SPECIALS)
    else:
        src_vocab = Vocabulary(
            spm_pieces(train_spm(folder, "src", SOURCE_TEXT, 50), skip=3 * drop_pieces), SPECIALS
        )
        trg_vocab = Vocabulary(
            spm_pieces(train_spm(folder, "trg", TARGET_TEXT, 48), skip=2 * drop_pieces), SPECIALS
        )
    torch.manual_seed(seed)
    model = joeynmt_model.build_model(
        copy.deepcopy(config["model"]), src_vocab=src_vocab, trg_vocab=trg_vocab
    )
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layer_norm" in name:
                parameter.normal_(1.0 if name.endswith("weight") else 0.0, 0.2)
        model.decoder.output_layer.weight[EOS] *= eos_scale
        if trained_specials:
            # a constant 10 in the first feature of the decoder output, which only <s> and <pad> weigh (by -5)
            model.decoder.layer_norm.weight[0], model.decoder.layer_norm.bias[0] = 0.0, 10.0
            model.decoder.output_layer.weight[:, 0] = 0.0
            model.decoder.output_layer.weight[[BOS, PAD], 0] = -5.0
    model.eval()
    (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    src_vocab.to_file(folder / "src_vocab.txt")
    trg_vocab.to_file(folder / "trg_vocab.txt")
    optimizer = torch.optim.Adam(model.parameters())
    torch.save(
        {
            "model_state": model.state_dict(),
            "optimizer_state": optimizer.state_dict(),
            "scaler_state": None,
            "scheduler_state": None,
            "train_iter_state": torch.Generator().get_state(),
            "stats_state": {"epochs": 1, "steps": 10, "total_tokens": 100, "total_correct": 7,
                            "best_ckpt_score": 1.5, "best_ckpt_iter": 10},
        },
        folder / "best.ckpt",
    )  # fmt: skip
    return model


def padded_source(vocab_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three right-padded source sentences ending in </s> (JoeyNMT's source convention) and their lengths."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([9, 6, 3])
    src = torch.full((3, 9), PAD)
    for row, length in enumerate(lengths.tolist()):
        src[row, : length - 1] = torch.randint(4, vocab_size, (length - 1,), generator=g)
        src[row, length - 1] = EOS
    return src, lengths


def joey_decode(
    model, src: torch.Tensor, lengths: torch.Tensor, beam_size: int, max_length: int
) -> list[list[int]]:
    batch = Batch(
        src, lengths, None, None, None, torch.arange(len(src)), torch.device("cpu"), PAD, EOS, False
    )
    output, _, _ = search(model, batch, max_output_length=max_length, beam_size=beam_size, beam_alpha=-1)
    if beam_size > 1:
        # the beam's hypotheses come padded to the longest (its beam never produces <pad>)
        return [cut_at_eos([token for token in row if token != PAD]) for row in output.tolist()]
    return [cut_at_eos(row) for row in output.tolist()]


def cut_at_eos(row: list[int]) -> list[int]:
    """The tokens up to and including the first </s> (JoeyNMT's greedy goes on after it for the batch's sake;
    transformers pads after it)."""
    return row[: row.index(EOS) + 1] if EOS in row else row


# layer_norm, tied_embeddings and tied_softmax, activation, embeddings.scale, the std of the embeddings' normal
# initialisation, the seed and the scale of </s>'s output row: drawn so that the random models end hypotheses at
# several lengths
CASES = [
    pytest.param("post", True, "relu", True, 0.2, 3, 3.0, id="post-LN-tied-relu"),
    pytest.param("post", False, "gelu", False, 0.4, 1, 1.0, id="post-LN-separate-gelu-unscaled"),
    pytest.param("pre", False, "gelu", False, 0.4, 1, 3.0, id="pre-LN-separate-gelu-unscaled"),
    pytest.param("pre", True, "swish", True, 0.2, 0, 3.0, id="pre-LN-tied-swish"),
]


@pytest.mark.parametrize("layer_norm,tied,activation,scale,embed_std,seed,eos_scale", CASES)
def test_converted_joeynmt_model_matches_joeynmt(
    tmp_path, layer_norm, tied, activation, scale, embed_std, seed, eos_scale
):
    from transformers import AutoModelForSeq2SeqLM

    config = joey_config(layer_norm, tied, activation, scale)
    config["model"]["embed_init_weight"] = embed_std
    joey = save_joey_folder(tmp_path / "joey", config, seed=seed, eos_scale=eos_scale)
    out = convert_joeynmt_checkpoint(tmp_path / "joey", tmp_path / "ours", trust_pickle=True)
    ours = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    assert ours.config.normalize_before == (layer_norm == "pre")

    src, lengths = padded_source(len(joey.src_vocab), seed=1)
    mask = (src != PAD).long()
    g = torch.Generator().manual_seed(2)
    trg_input = torch.cat(
        [torch.full((3, 1), BOS), torch.randint(4, len(joey.trg_vocab), (3, 6), generator=g)], 1
    )
    with torch.no_grad():
        expected, _, _, _ = joey._encode_decode(
            src=src, trg_input=trg_input, src_mask=(src != PAD).unsqueeze(1), src_length=lengths,
            trg_mask=torch.ones(3, 1, trg_input.size(1), dtype=torch.bool),
        )  # fmt: skip
        got = ours(input_ids=src, attention_mask=mask, decoder_input_ids=trg_input).logits
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)

    finished = 0
    for beams, batch_seed in ((1, 0), (4, 0), (1, 1), (4, 1), (1, 2), (4, 2)):
        src, lengths = padded_source(len(joey.src_vocab), seed=batch_seed)
        with torch.no_grad():
            reference = joey_decode(joey, src, lengths, beam_size=beams, max_length=12)
            finished += sum(row[-1] == EOS and len(row) < 12 for row in reference)
            # the converted generation config is JoeyNMT's beam search (beam_size 4 in the config); its greedy
            # search can produce <pad>: the generation config of a JoeyNMT config with beam_size 1 suppresses <s> only
            greedy = {"num_beams": 1, "suppress_tokens": [BOS]} if beams == 1 else {}
            generated = ours.generate(input_ids=src, attention_mask=(src != PAD).long(), **greedy)
        assert [cut_at_eos(row[1:]) for row in generated.tolist()] == reference, f"beam {beams}"
    # the comparison covers hypotheses that end before the length limit
    assert finished > 0


@pytest.mark.parametrize("tied", [True, False], ids=["joint", "separate"])
def test_converted_tokenizer_gives_joeynmt_ids(tmp_path, tied):
    """Source ids (pieces + </s>), label ids (pieces + </s>, after JoeyNMT's <s>) and the decoded text equal
    JoeyNMT's own pipeline: its SentencePiece tokenizer, then its vocabulary (every piece in the vocabulary here:
    JoeyNMT's restriction of the model to its vocabulary needs a sentencepiece older than 0.2)."""
    from transformers import AutoTokenizer

    BasicTokenizer, build_tokenizer = joeynmt_tokenizers.BasicTokenizer, joeynmt_tokenizers.build_tokenizer

    config = joey_config("post", tied, "relu", True)
    joey = save_joey_folder(tmp_path / "joey", config, drop_pieces=False)
    out = convert_joeynmt_checkpoint(tmp_path / "joey", tmp_path / "ours", trust_pickle=True)
    sides = copy.deepcopy({side: config["data"][side] for side in ("src", "trg")})
    for values in sides.values():
        values["tokenizer_cfg"]["model_file"] = str(
            tmp_path / "joey" / Path(values["tokenizer_cfg"]["model_file"]).name
        )
    tokenizers = build_tokenizer(sides)
    # JoeyNMT's SentencePieceTokenizer.set_vocab also calls SetVocabulary, which sentencepiece 0.2 no longer has:
    # the special tokens only (every piece is in the vocabulary here, so the restriction would change nothing)
    BasicTokenizer.set_vocab(tokenizers["src"], joey.src_vocab)
    BasicTokenizer.set_vocab(tokenizers["trg"], joey.trg_vocab)
    ours = AutoTokenizer.from_pretrained(out)
    assert type(ours).__name__ == "MarianTokenizer"
    for text in SENTENCES + TARGET_TEXT[:4]:
        source_pieces = tokenizers["src"](tokenizers["src"].pre_process(text))
        target_pieces = tokenizers["trg"](tokenizers["trg"].pre_process(text))
        source_ids = joey.src_vocab.sentences_to_ids([source_pieces], bos=False, eos=True)[0][0]
        target_ids = joey.trg_vocab.sentences_to_ids([target_pieces], bos=True, eos=True)[0][0]
        assert ours(text).input_ids == source_ids
        assert ours(text_target=text).input_ids == target_ids[1:]
        if joey.trg_vocab.unk_index not in target_ids:
            # JoeyNMT's detokenisation: ids -> vocabulary tokens (cut at </s>) -> its tokenizer's post-processing
            tokens = joey.trg_vocab.arrays_to_sentences(np.array([target_ids[1:]]), cut_at_eos=True)[0]
            assert ours.decode(target_ids, skip_special_tokens=True) == tokenizers["trg"].post_process(tokens)


def test_sentencepiece_model_is_restricted_to_the_vocabulary(tmp_path):
    """A piece the JoeyNMT vocabulary lacks is split into pieces it has (sentencepiece's SetVocabulary, which
    JoeyNMT applies), not encoded as <unk>."""
    from transformers import AutoTokenizer

    save_joey_folder(tmp_path / "joey", joey_config("post", True, "relu", True))
    vocabulary = (tmp_path / "joey" / "src_vocab.txt").read_text(encoding="utf-8").splitlines()
    whole = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "joey" / "joint.model"))
    lacking = [text for text in SOURCE_TEXT[:4] if set(whole.encode(text, out_type=str)) - set(vocabulary)]
    assert lacking  # the vocabulary lacks pieces that the whole model produces for these sentences
    out = tmp_path / "ours"
    assert convert_main(["--from", "joeynmt", str(tmp_path / "joey"), str(out), "--trust_pickle"]) == 0
    ours = AutoTokenizer.from_pretrained(out)
    for text in lacking:
        ids = ours(text).input_ids
        assert ours.unk_token_id not in ids
        assert set(ours.convert_ids_to_tokens(ids)) <= set(vocabulary)
        assert ours.decode(ids, skip_special_tokens=True) == text


def test_converted_folder_exports_with_token_parity(tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.export.onnx import export_onnx
    from vanilla_transformer.inference.engine_ct2 import CT2Translator
    from vanilla_transformer.inference.engine_onnx import OnnxTranslator

    config = joey_config("pre", False, "gelu", False)
    config["model"]["embed_init_weight"] = 0.4
    # CTranslate2 removes suppressed tokens before the softmax, transformers after it: equal beams need a model
    # that gives <s> and <pad> no probability, as a trained one does (inference/engine_ct2.py)
    save_joey_folder(tmp_path / "joey", config, seed=0, trained_specials=True)
    out = convert_joeynmt_checkpoint(tmp_path / "joey", tmp_path / "ours", trust_pickle=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    sources = [tokenizer(text).input_ids for text in SENTENCES]
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    engines = {
        "ct2": CT2Translator(export_ct2(out, tmp_path / "ct2"), num_threads=1),
        "onnx": OnnxTranslator(export_onnx(out, tmp_path / "onnx"), num_threads=1),
    }
    for beams in (1, 4):
        with torch.no_grad():
            generated = model.generate(**batch, num_beams=beams, max_new_tokens=12)
        expected = [cut_at_eos([token for token in row[1:] if token != PAD]) for row in generated.tolist()]
        for name, engine in engines.items():
            got = engine.generate_ids(sources, num_beams=beams, max_new_tokens=12)
            assert [hypotheses[0] for hypotheses in got] == expected, (name, beams)


def test_converted_folder_translates_without_the_package(tmp_path):
    from helpers.shared import run_python
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    config = joey_config("post", True, "relu", True)
    config["model"]["embed_init_weight"] = 0.2
    save_joey_folder(tmp_path / "joey", config, seed=3, eos_scale=3.0)
    out = convert_joeynmt_checkpoint(tmp_path / "joey", tmp_path / "ours", trust_pickle=True)
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    with torch.no_grad():
        expected = model.generate(**tokenizer(SENTENCES, return_tensors="pt", padding=True)).tolist()
    printed = run_python(
        f"""
        import json, torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained({str(out)!r}, trust_remote_code=True)
        model = AutoModelForSeq2SeqLM.from_pretrained({str(out)!r}, trust_remote_code=True).eval()
        with torch.no_grad():
            print(json.dumps(model.generate(**tokenizer({SENTENCES!r}, return_tensors="pt", padding=True)).tolist()))
        """,
        tmp_path,
    )
    assert json.loads(printed.splitlines()[-1]) == expected


def test_generation_config_is_joeynmt_decoding():
    config = joey_config("post", True, "relu", True)
    config["testing"] = {"beam_size": 1, "generate_unk": False, "min_output_length": 2}
    greedy = generation_config_from_joeynmt(
        config, VanillaTransformerConfig(decoder_start_token_id=BOS, pad_token_id=PAD)
    )
    assert (greedy.num_beams, greedy.suppress_tokens, greedy.min_new_tokens) == (1, [BOS, 0], 2)
    assert greedy.decoder_start_token_id == BOS and greedy.max_new_tokens is None
    config["testing"] = {"beam_size": 5, "beam_alpha": 1.0, "max_output_length": 30}
    beam = generation_config_from_joeynmt(
        config, VanillaTransformerConfig(decoder_start_token_id=BOS, pad_token_id=PAD)
    )
    assert (beam.num_beams, beam.suppress_tokens, beam.length_penalty, beam.max_new_tokens) == (
        5,
        [BOS, PAD],
        1.0,
        30,
    )
    assert beam.early_stopping is True


def convert_cli(capsys, *argv: str) -> tuple[int, str]:
    code = convert_main(["--from", "joeynmt", *argv])
    return code, capsys.readouterr().err


def test_pickle_without_trust_pickle_is_refused(tmp_path, capsys):
    save_joey_folder(tmp_path / "joey", joey_config("post", True, "relu", True))
    code, err = convert_cli(capsys, str(tmp_path / "joey"), str(tmp_path / "out"))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert "--trust_pickle" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda config: config["model"]["encoder"].pop("layer_norm"), "model.encoder.layer_norm"),
        (lambda config: config["model"]["decoder"].update(activation="relu"), "model.*.activation"),
        (lambda config: config["model"]["encoder"].update(alpha=2.0), "model.encoder.alpha"),
        (lambda config: config["model"]["encoder"].update(type="recurrent"), "model.encoder.type"),
        (
            lambda config: config["data"]["src"].update(tokenizer_type="subword-nmt"),
            "tokenizer_type='subword-nmt'",
        ),
        (lambda config: config["data"]["trg"].update(lowercase=True), "data.trg.lowercase=True"),
    ],
    ids=[
        "pre-LN-without-final-norm",
        "different-activations",
        "residual-alpha",
        "recurrent",
        "subword-nmt",
        "lowercase",
    ],
)
def test_architecture_that_cannot_be_expressed_is_refused(tmp_path, capsys, edit, message):
    config = joey_config("pre", False, "gelu", True)
    save_joey_folder(tmp_path / "joey", config)
    edit(config)
    (tmp_path / "joey" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    code, err = convert_cli(capsys, str(tmp_path / "joey"), str(tmp_path / "out"), "--trust_pickle")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert not (tmp_path / "out").exists()


def test_checkpoint_beyond_weights_only_loads_with_trust_pickle(tmp_path):
    """A checkpoint whose training state holds objects `torch.load(weights_only=True)` refuses (here a numpy
    score) is read with the full unpickler under --trust_pickle."""
    save_joey_folder(tmp_path / "joey", joey_config("post", True, "relu", True))
    path = tmp_path / "joey" / "best.ckpt"
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["stats_state"]["best_ckpt_score"] = np.float64(1.5)
    torch.save(checkpoint, path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    out = convert_joeynmt_checkpoint(tmp_path / "joey", tmp_path / "ours", trust_pickle=True)
    assert (out / "model.safetensors").is_file()


def test_truncated_checkpoint_is_refused(tmp_path, capsys):
    save_joey_folder(tmp_path / "joey", joey_config("post", True, "relu", True))
    checkpoint = tmp_path / "joey" / "best.ckpt"
    checkpoint.write_bytes(checkpoint.read_bytes()[: checkpoint.stat().st_size // 2])
    code, err = convert_cli(capsys, str(tmp_path / "joey"), str(tmp_path / "out"), "--trust_pickle")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "truncated or corrupt" in err
    assert not (tmp_path / "out").exists()


def test_vocabulary_that_does_not_fit_the_weights_is_refused(tmp_path, capsys):
    save_joey_folder(tmp_path / "joey", joey_config("post", False, "relu", True))
    vocab = tmp_path / "joey" / "trg_vocab.txt"
    size = len(vocab.read_text(encoding="utf-8").splitlines())
    vocab.write_text(vocab.read_text(encoding="utf-8") + "extra1\nextra2\n", encoding="utf-8")
    code, err = convert_cli(capsys, str(tmp_path / "joey"), str(tmp_path / "out"), "--trust_pickle")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert f"trg vocabulary is {size + 2} but the weights have {size}" in err
    assert not (tmp_path / "out").exists()
