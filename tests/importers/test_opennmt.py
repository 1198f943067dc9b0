"""`convert --from opennmt` against CTranslate2's own OpenNMT-py converter (OpenNMT-py 3.5 pins torch < 2.3 and
cannot be installed here): a random small checkpoint is written in OpenNMT-py 3.x's saved format (its parameter
names, its sinusoidal tables, its vocabulary and an `argparse.Namespace` of options), converted by
`ctranslate2.converters.OpenNMTPyConverter` and by ours; CTranslate2's greedy and beam-4 tokens equal our
generate()'s on a batch of sentences, its `score_batch` log-probs equal our forward's within 1e-3, and the converted
folder loads with the Auto classes and exports to CTranslate2 with the same tokens. OpenNMT-py 3.x has no post-LN
transformer: every variant is pre-LN. Bad input is one `error:` line, exit 2, nothing written."""

from __future__ import annotations

import math
from argparse import Namespace
from pathlib import Path

import pytest
import sentencepiece
import torch

from vanilla_transformer.commands.convert import main as convert_main
from vanilla_transformer.convert.opennmt import convert_opennmt_checkpoint

ctranslate2 = pytest.importorskip("ctranslate2")

MAX_LENGTH = 12
# OpenNMT-py 3.x's specials, in the order its vocabulary builder puts them
SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]
UNK, PAD, BOS, EOS = range(4)
WORDS = "the a cat dog house tree runs sleeps big small red blue over under quickly slowly and or near far".split()
SENTENCES = ["the cat runs quickly", "big dog", "a red house near the tree and a blue dog", "far cat sleeps"]
TRAINING_TEXT = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 5

# the OpenNMT-py options of each variant, and whether its text is cut by SentencePiece
VARIANTS = {
    "interleaved, separate embeddings, untied, ffn biases, relu, words": (
        dict(position_encoding_type="SinusoidalInterleaved", add_ffnbias=True),
        False,
    ),
    "concat, shared tied embeddings, all biases, gelu, sentencepiece": (
        dict(
            position_encoding_type="SinusoidalConcat",
            share_embeddings=True,
            share_decoder_embeddings=True,
            add_qkvbias=True,
            add_ffnbias=True,
            pos_ffn_activation_fn="gelu",
        ),
        True,
    ),
}


def onmt_sinusoids(max_len: int, dim: int, kind: str) -> torch.Tensor:
    """OpenNMT-py 3.x's PositionalEncoding table (onmt/modules/embeddings.py), as its buffer `pe` stores it."""
    if kind == "SinusoidalInterleaved":
        pe = torch.zeros(max_len, dim)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim))
        pe[:, 0::2] = torch.sin(position.float() * div_term)
        pe[:, 1::2] = torch.cos(position.float() * div_term)
    else:
        half = dim // 2
        frequencies = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
        angles = torch.arange(max_len, dtype=torch.float).unsqueeze(1) * frequencies.unsqueeze(0)
        pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).view(max_len, -1)
    return pe.unsqueeze(1)


def spm_vocabulary(folder: Path) -> tuple[Path, list[str]]:
    """A unigram SentencePiece model trained on the test text, and OpenNMT-py's vocabulary of its pieces."""
    (folder / "train.txt").write_text("\n".join(TRAINING_TEXT) + "\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(folder / "train.txt"),
        model_prefix=str(folder / "spm"),
        vocab_size=40,
        model_type="unigram",
        minloglevel=2,
    )
    processor = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spm.model"))
    pieces = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
    return folder / "spm.model", SPECIALS + [
        piece for piece in pieces if piece not in ("<unk>", "<s>", "</s>")
    ]


def write_checkpoint(folder: Path, name: str, seed: int = 0, **overrides) -> Path:
    """A random small OpenNMT-py 3.x checkpoint of variant `name` (options changed by `overrides`), saved as
    onmt_train saves it (onmt/models/model_saver.py) into `folder`/model_step_10.pt."""
    options, with_spm = VARIANTS[name]
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    d_model, ffn, heads, layers = 32, 64, 4, 2
    if with_spm:
        spm_file, vocab = spm_vocabulary(folder)
        transforms = ["sentencepiece", "filtertoolong"]
    else:
        spm_file, vocab, transforms = None, SPECIALS + WORDS, ["filtertoolong"]
    opt = Namespace(
        model_task="seq2seq",
        encoder_type="transformer",
        decoder_type="transformer",
        enc_layers=layers,
        dec_layers=layers,
        hidden_size=d_model,
        word_vec_size=d_model,
        transformer_ff=ffn,
        heads=heads,
        position_encoding=True,
        position_encoding_type="SinusoidalInterleaved",
        max_relative_positions=0,
        self_attn_type="scaled-dot",
        pos_ffn_activation_fn="relu",
        layer_norm="standard",
        norm_eps=1e-6,
        num_kv=0,
        parallel_residual=False,
        share_embeddings=False,
        share_decoder_embeddings=False,
        add_qkvbias=False,
        add_ffnbias=False,
        copy_attn=False,
        generator_function="softmax",
        lambda_align=0.0,
        transforms=transforms,
        src_subword_model=str(spm_file) if spm_file else None,
        tgt_subword_model=str(spm_file) if spm_file else None,
        decoder_start_token="<s>",
    )
    for key, value in {**options, **overrides}.items():
        setattr(opt, key, value)

    def rand(*shape: int, scale: float = 0.3) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * scale

    def linear(prefix: str, rows: int, cols: int, bias: bool) -> dict[str, torch.Tensor]:
        return {
            f"{prefix}.weight": rand(rows, cols),
            **({f"{prefix}.bias": rand(rows, scale=0.1)} if bias else {}),
        }

    def norm(prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": 1 + rand(d_model, scale=0.1), f"{prefix}.bias": rand(d_model, scale=0.1)}

    def attention(prefix: str) -> dict[str, torch.Tensor]:
        state = {}
        for part in ("linear_keys", "linear_values", "linear_query", "final_linear"):
            state.update(linear(f"{prefix}.{part}", d_model, d_model, opt.add_qkvbias))
        return state

    def feed_forward(prefix: str) -> dict[str, torch.Tensor]:
        return {
            **linear(f"{prefix}.w_1", ffn, d_model, opt.add_ffnbias),
            **linear(f"{prefix}.w_2", d_model, ffn, opt.add_ffnbias),
            **norm(f"{prefix}.layer_norm"),
        }

    pe = onmt_sinusoids(5000, d_model, opt.position_encoding_type)
    source_embeddings = rand(len(vocab), d_model)
    target_embeddings = source_embeddings if opt.share_embeddings else rand(len(vocab), d_model)
    model = {
        "encoder.embeddings.make_embedding.emb_luts.0.weight": source_embeddings,
        "encoder.embeddings.make_embedding.pe.pe": pe,
        "decoder.embeddings.make_embedding.emb_luts.0.weight": target_embeddings,
        "decoder.embeddings.make_embedding.pe.pe": pe,
        **norm("encoder.layer_norm"),
        **norm("decoder.layer_norm"),
    }
    for i in range(layers):
        layer = f"encoder.transformer.{i}"
        model.update(
            {
                **attention(f"{layer}.self_attn"),
                **feed_forward(f"{layer}.feed_forward"),
                **norm(f"{layer}.layer_norm"),
            }
        )
        layer = f"decoder.transformer_layers.{i}"
        model.update(
            {
                **attention(f"{layer}.self_attn"),
                **attention(f"{layer}.context_attn"),
                **feed_forward(f"{layer}.feed_forward"),
                **norm(f"{layer}.layer_norm_1"),
                **norm(f"{layer}.layer_norm_2"),
            }
        )
    bias = rand(len(vocab), scale=0.5)
    # a trained model gives <unk>, <blank> and <s> almost no probability (CTranslate2 never generates <s>)
    bias[[UNK, PAD, BOS]] = -20.0
    generator_state = {
        "weight": target_embeddings if opt.share_decoder_embeddings else rand(len(vocab), d_model),
        "bias": bias,
    }
    checkpoint = {
        "model": model,
        "generator": generator_state,
        "vocab": {"src": vocab, "tgt": vocab, "decoder_start_token": "<s>", "data_task": "seq2seq"},
        "opt": opt,
        "optim": None,
    }
    path = folder / "model_step_10.pt"
    torch.save(checkpoint, path)
    return path


def source_tokens(folder: Path, sentences: list[str]) -> list[list[str]]:
    """OpenNMT-py's source tokens: the SentencePiece pieces where the folder has its model, else the words."""
    if (folder / "spm.model").is_file():
        processor = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spm.model"))
        return [processor.EncodeAsPieces(text) for text in sentences]
    return [text.split() for text in sentences]


@pytest.fixture(scope="module", params=list(VARIANTS))
def converted(request, tmp_path_factory) -> tuple[Path, Path, object]:
    """(the checkpoint, our converted folder, CTranslate2's translator of its own conversion)."""
    folder = tmp_path_factory.mktemp("onmt")
    path = write_checkpoint(folder / "onmt", request.param)
    ct2_dir = folder / "ct2"
    ctranslate2.converters.OpenNMTPyConverter(str(path), unsafe_deserialization=True).convert(str(ct2_dir))
    ours = convert_opennmt_checkpoint(path, folder / "ours", trust_pickle=True)
    return path, ours, ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=1)


def load(folder: Path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def until_eos(row: list[int]) -> list[int]:
    """generate()'s tokens after the start token, up to (without) </s>."""
    row = row[1:]
    return row[: row.index(EOS)] if EOS in row else row


def test_tokenizer_greedy_and_beam_equal_ctranslate2(converted):
    path, ours, translator = converted
    model, tokenizer = load(ours)
    tokens = source_tokens(path.parent, SENTENCES)
    vocab = tokenizer.get_vocab()
    # OpenNMT-py's source ids: its tokens looked up in its vocabulary, no </s>
    assert tokenizer(SENTENCES)["input_ids"] == [[vocab[token] for token in row] for row in tokens]
    inputs = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    for beams in (1, 4):
        out = model.generate(
            **inputs, num_beams=beams, max_new_tokens=MAX_LENGTH, length_penalty=0.0, do_sample=False
        )
        got = [tokenizer.convert_ids_to_tokens(until_eos(row)) for row in out.tolist()]
        results = translator.translate_batch(
            tokens, beam_size=beams, max_decoding_length=MAX_LENGTH, length_penalty=0.0
        )
        assert got == [result.hypotheses[0] for result in results], beams


def test_log_probs_equal_ctranslate2_score_batch(converted):
    path, ours, translator = converted
    model, tokenizer = load(ours)
    sources = source_tokens(path.parent, SENTENCES)
    targets = source_tokens(path.parent, list(reversed(SENTENCES)))
    expected = [result.log_probs for result in translator.score_batch(sources, targets)]
    inputs = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    labels = [tokenizer.convert_tokens_to_ids(row) + [EOS] for row in targets]
    width = max(map(len, labels))
    decoder_input = torch.tensor([[BOS] + row[:-1] + [PAD] * (width - len(row)) for row in labels])
    with torch.no_grad():
        logits = model(**inputs, decoder_input_ids=decoder_input).logits
    log_probs = logits.log_softmax(-1)
    for i, row in enumerate(labels):
        got = log_probs[i, torch.arange(len(row)), torch.tensor(row)]
        torch.testing.assert_close(got, torch.tensor(expected[i]), atol=1e-3, rtol=0)


def test_converted_folder_exports_to_ctranslate2_with_the_same_tokens(converted, tmp_path):
    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.inference.engine_ct2 import CT2Translator

    _, ours, _ = converted
    model, tokenizer = load(ours)
    ids = [tokenizer(text)["input_ids"] for text in SENTENCES]
    inputs = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    exported = CT2Translator(export_ct2(ours, tmp_path / "ct2"), num_threads=1)
    for beams in (1, 4):
        out = model.generate(**inputs, num_beams=beams, max_new_tokens=MAX_LENGTH, do_sample=False)
        expected = [[until_eos(row) + ([EOS] if EOS in row[1:] else [])] for row in out.tolist()]
        assert exported.generate_ids(ids, num_beams=beams, max_new_tokens=MAX_LENGTH) == expected, beams


def cli(capsys, *argv: str) -> tuple[int, list[str]]:
    code = convert_main(["--from", "opennmt", *argv])
    return code, capsys.readouterr().err.strip().splitlines()


def test_cli_converts_with_trust_pickle(tmp_path, capsys):
    path = write_checkpoint(tmp_path / "onmt", next(iter(VARIANTS)))
    code, err = cli(capsys, "--trust_pickle", str(path), str(tmp_path / "out"))
    assert code == 0, err
    assert (tmp_path / "out" / "model.safetensors").is_file() and (
        tmp_path / "out" / "tokenizer.json"
    ).is_file()


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def extend_vocabulary(path: Path) -> None:
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["vocab"]["tgt"] = checkpoint["vocab"]["tgt"] + ["extra"]
    torch.save(checkpoint, path)


def add_a_decoder_layer_norm(path: Path) -> None:
    """A tensor with no place: "layer_norm" is the encoder's name, the decoder's norms are layer_norm_1 / _2."""
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["model"]["decoder.transformer_layers.0.layer_norm.weight"] = torch.ones(32)
    torch.save(checkpoint, path)


def untie_the_generator(path: Path) -> None:
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["generator"]["weight"] = checkpoint["generator"]["weight"] + 1
    torch.save(checkpoint, path)


@pytest.mark.parametrize(
    "break_it,flags,overrides,message",
    [
        (None, [], {}, "--trust_pickle"),
        (truncate, ["--trust_pickle"], {}, "truncated or corrupt"),
        (extend_vocabulary, ["--trust_pickle"], {}, "25 tgt tokens but the tgt embeddings have 24 rows"),
        (
            None,
            ["--trust_pickle"],
            dict(position_encoding=False, max_relative_positions=20),
            "max_relative_positions=20",
        ),
        (
            None,
            ["--trust_pickle"],
            dict(position_encoding=False, max_relative_positions=-1),
            "max_relative_positions=-1",
        ),
        (None, ["--trust_pickle"], dict(layer_norm="rms"), "layer_norm='rms'"),
        (None, ["--trust_pickle"], dict(num_kv=2), "num_kv=2"),
        (None, ["--trust_pickle"], dict(self_attn_type="average"), "self_attn_type='average'"),
        (None, ["--trust_pickle"], dict(enc_layers=3), "enc_layers=3 but the weights have 2"),
        (
            add_a_decoder_layer_norm,
            ["--trust_pickle"],
            {},
            "cannot place: decoder.transformer_layers.0.layer_norm.weight",
        ),
        (
            untie_the_generator,
            ["--trust_pickle"],
            dict(share_decoder_embeddings=True),
            "generator.weight (share_decoder_embeddings=True but it differs from the decoder embeddings)",
        ),
    ],
    ids=[
        "no-trust-pickle",
        "truncated",
        "vocabulary-not-the-weights",
        "relative-positions",
        "rotary",
        "rms-norm",
        "grouped-query",
        "average-attention",
        "claimed-layers",
        "tensor-without-a-place",
        "tied-generator-differs",
    ],
)
def test_bad_checkpoints_fail_with_one_line_and_write_nothing(
    break_it, flags, overrides, message, tmp_path, capsys
):
    path = write_checkpoint(tmp_path / "onmt", next(iter(VARIANTS)), **overrides)
    if break_it is not None:
        break_it(path)
    code, err = cli(capsys, *flags, str(path), str(tmp_path / "out"))
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
    assert not (tmp_path / "out").exists()
