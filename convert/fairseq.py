"""Convert a fairseq `transformer` translation checkpoint into a vanilla-transformer folder, without fairseq.

The source is a fairseq checkpoint (`checkpoint_best.pt`, else `checkpoint_last.pt`, or the `.pt` file given)
with, beside it, its dictionaries `dict.SRC.txt` and `dict.TGT.txt` (the languages of the checkpoint's task) and
its SentencePiece model: `spm.model` / `sentencepiece.bpe.model` / `sentencepiece.model` for both sides, or
`spm.SRC.model` and `spm.TGT.model` (or `SRC.model` and `TGT.model`) per side, or the file its `--sentencepiece-model`
named. A checkpoint is a pickle, which can run code: it is read only with ``trust_pickle=True``
(``convert --trust_pickle``), first with ``torch.load(weights_only=True)``; a checkpoint whose config is an
`argparse.Namespace` or an omegaconf `DictConfig` (every fairseq checkpoint) then needs the full unpickler
(`common.load_pickled_checkpoint`), and for a `DictConfig` the `omegaconf` package.

What maps (fairseq option -> our field):
  * `encoder_normalize_before` = `decoder_normalize_before` -> `normalize_before` (with the final LayerNorm of
    each pre-LN stack);
  * `layernorm_embedding` -> `layernorm_embedding`; `no_scale_embedding` -> `scale_embedding`;
  * sinusoidal positions -> `sinusoidal_layout="tensor2tensor"`; learned positions (`*_learned_pos`) ->
    `position_encoding="learned"`; both start at the padding index + 1 -> `position_offset`;
    `no_token_positional_embeddings` -> `position_encoding="none"`; `max_source_positions` and
    `max_target_positions` -> `max_position_embeddings` (the smaller of the two);
  * `share_all_embeddings` -> `share_encoder_decoder_embeddings`; `share_decoder_input_output_embed` ->
    `tie_word_embeddings`; no output bias (`output_bias=False`);
  * `activation_fn` relu / gelu / gelu_accurate (= gelu_fast) -> relu / gelu / gelu_new;
  * the dictionary `<s> <pad> </s> <unk>` + dict.txt (+ the `madeupwordNNNN` padding of the embedding rows to a
    multiple of 8) -> the ids; decoding starts from `</s>` -> `decoder_start_token_id`; fairseq never emits pad
    -> `suppress_tokens`; the checkpoint's `--beam` and `--lenpen` -> generation_config.json.
Refused by name (`ValueError`): other architectures, encoder and decoder of different widths or orders, input or
output projections of the decoder, adaptive input or softmax, cross-self-attention, pruned layers
(`*_layers_to_keep`), NormFormer scalings (`scale_attn`, `scale_fc`, `scale_heads`, `scale_resids`), BASE layers,
a pre-LN decoder without its final LayerNorm, activations other than the above, BPE codes without a
SentencePiece model.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig

from vanilla_transformer.modeling import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    default_generation_config,
)

from .common import (
    SizeClaim,
    bounded_repr,
    build_checked,
    check_claimed_sizes,
    load_converted_weights,
    load_pickled_checkpoint,
    shapes_of,
    write_converted_folder,
)
from .vocabulary import write_sentencepiece_tokenizer

CHECKPOINT_NAMES = ("checkpoint_best.pt", "checkpoint_last.pt")
# the architectures of fairseq's `transformer` model (models/transformer/transformer_legacy.py)
ARCHITECTURES = (
    "transformer",
    "transformer_tiny",
    "transformer_iwslt_de_en",
    "transformer_wmt_en_de",
    "transformer_vaswani_wmt_en_de_big",
    "transformer_vaswani_wmt_en_fr_big",
    "transformer_wmt_en_de_big",
    "transformer_wmt_en_de_big_t2t",
)
# fairseq's Dictionary starts with these four symbols, in this order (ids 0..3)
SPECIAL_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")
# fairseq activation_fn -> ours; gelu_fast is the old name of gelu_accurate (the tanh approximation)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new"}
# options whose non-default value changes the network in a way our config cannot express -> that default
UNEXPRESSIBLE = {
    "cross_self_attention": False,
    "adaptive_input": False,
    "adaptive_softmax_cutoff": None,
    "encoder_layers_to_keep": None,
    "decoder_layers_to_keep": None,
    "scale_attn": False,
    "scale_fc": False,
    "scale_heads": False,
    "scale_resids": False,
    "base_layers": 0,
    "char_inputs": False,
}
SHARED_SPM_NAMES = ("spm.model", "sentencepiece.bpe.model", "sentencepiece.model")
BPE_CODE_NAMES = ("bpecodes", "codes", "code", "bpe.codes")


def find_checkpoint(src: Path) -> Path:
    """The checkpoint file `src`, or the first of `CHECKPOINT_NAMES` in the folder `src`."""
    if src.is_file():
        return src
    for name in CHECKPOINT_NAMES:
        if (src / name).is_file():
            return src / name
    raise FileNotFoundError(
        f"{src} has no fairseq checkpoint ({' or '.join(CHECKPOINT_NAMES)}); pass the checkpoint file or its folder"
    )


def read_checkpoint(path: Path, trust_pickle: bool) -> dict:
    """The checkpoint dictionary of `path` (see the module docstring for how it is unpickled). `ValueError` when
    `trust_pickle` is false, the file is truncated or corrupt, or it is not a fairseq checkpoint."""
    checkpoint = load_pickled_checkpoint(
        path,
        trust_pickle,
        "install the package its config objects come from (e.g. pip install omegaconf) to read it",
    )
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model"), dict):
        raise ValueError(
            f"{path} is not a fairseq checkpoint (no 'model' weights); pass a fairseq checkpoint"
        )
    return checkpoint


def _plain(value: Any) -> dict:
    """A config section (dict, omegaconf DictConfig or argparse Namespace; None: empty) as a dict."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if hasattr(value, "items"):
        return dict(value.items())
    return dict(vars(value))


def checkpoint_options(checkpoint: dict) -> tuple[dict, dict, dict]:
    """(model options, task options, generation options) of a fairseq checkpoint: its `cfg` (fairseq >= 0.10) or
    its `args` (older). The model's nested groups (`encoder.embed_dim`, ...) are flattened to fairseq's
    command-line names (`encoder_embed_dim`, ...), and `arch` is set."""
    cfg = checkpoint.get("cfg")
    if cfg is not None and cfg.get("model") is not None:
        model, task, generation = (_plain(cfg.get(name)) for name in ("model", "task", "generation"))
    elif checkpoint.get("args") is not None:
        model = task = generation = _plain(checkpoint["args"])
    else:
        raise ValueError(
            "the checkpoint has no config ('cfg' or 'args'): pass a checkpoint saved by fairseq-train"
        )
    options = {}
    for key, value in model.items():
        if key in ("encoder", "decoder") and value is not None and not isinstance(value, (str, int, float)):
            options.update({f"{key}_{name}": inner for name, inner in _plain(value).items()})
        else:
            options[key] = value
    options["arch"] = options.get("_name") or options.get("arch")
    return options, task, generation


def read_dictionary(path: Path, rows: int) -> list[str]:
    """The symbols of the fairseq dictionary file `path` in id order: `SPECIAL_SYMBOLS`, each line's word (lines
    "word count [#fairseq:overwrite]"), then the `madeupwordNNNN` symbols with which fairseq pads the vocabulary to
    a multiple of 8 up to `rows` (the embedding's rows). `ValueError` when the file does not give `rows`
    symbols."""
    symbols: list[str] = list(SPECIAL_SYMBOLS)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the dictionary {path} ({error})") from error
    for number, line in enumerate(lines, 1):
        parts = line.rstrip().rsplit(" ", 2 if line.rstrip().endswith(" #fairseq:overwrite") else 1)
        if len(parts) < 2 or not parts[1].lstrip("-").isdigit():
            raise ValueError(f"{path} line {number} is not '<token> <count> [flags]': {bounded_repr(line)}")
        symbols.append(parts[0])
    missing = rows - len(symbols)
    if missing and not (0 < missing < 8 and rows % 8 == 0):
        raise ValueError(
            f"{path} gives {len(symbols)} symbols ({len(SPECIAL_SYMBOLS)} special + {len(lines)} lines) but the "
            f"checkpoint's embedding has {rows} rows; pass the dictionary the model was trained with"
        )
    return symbols + [f"madeupword{i:04d}" for i in range(missing)]


def _refusals(options: dict) -> list[str]:
    """The options of a fairseq model config (flat names) that our config cannot express, with what they must be."""
    wrong = []
    if options["arch"] not in ARCHITECTURES:
        wrong.append(f"arch={bounded_repr(options['arch'])} (expected one of {', '.join(ARCHITECTURES)})")
    width = options.get("encoder_embed_dim")
    for name in ("decoder_embed_dim", "decoder_input_dim", "decoder_output_dim"):
        if options.get(name, width) not in (None, width):
            wrong.append(
                f"{name}={bounded_repr(options[name])} (expected encoder_embed_dim={bounded_repr(width)})"
            )
    for name in ("normalize_before", "learned_pos"):
        encoder, decoder = bool(options.get(f"encoder_{name}")), bool(options.get(f"decoder_{name}"))
        if encoder != decoder:
            wrong.append(f"encoder_{name}={encoder} with decoder_{name}={decoder} (expected the same value)")
    if options.get("decoder_normalize_before") and options.get("no_decoder_final_norm"):
        wrong.append("no_decoder_final_norm=True (a pre-LN decoder needs its final LayerNorm)")
    for name, default in UNEXPRESSIBLE.items():
        if options.get(name, default) not in (default, None, False, 0, ""):
            wrong.append(f"{name}={bounded_repr(options[name])} (expected {bounded_repr(default)})")
    if options.get("activation_fn", "relu") not in ACTIVATIONS:
        wrong.append(
            f"activation_fn={bounded_repr(options['activation_fn'])} (expected one of {', '.join(ACTIVATIONS)})"
        )
    return wrong


def config_from_fairseq(options: dict, vocab: list[str], target_vocab: list[str]) -> VanillaTransformerConfig:
    """Our config for the fairseq model options `options` (see `checkpoint_options`) and its source and target
    symbols; `ValueError` naming every option it cannot express."""
    wrong = _refusals(options)
    if wrong:
        raise ValueError(f"the fairseq model cannot be converted: {'; '.join(wrong)}")
    pad = vocab.index("<pad>")
    if options.get("no_token_positional_embeddings"):
        positions = "none"
    else:
        positions = "learned" if options.get("encoder_learned_pos") else "sinusoidal"
    activation_dropout = options.get("activation_dropout") or options.get("relu_dropout") or 0.0
    share = bool(options.get("share_all_embeddings"))
    return VanillaTransformerConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(target_vocab),
        d_model=options["encoder_embed_dim"],
        encoder_layers=options["encoder_layers"],
        decoder_layers=options["decoder_layers"],
        encoder_attention_heads=options.get("encoder_attention_heads", 8),
        decoder_attention_heads=options.get("decoder_attention_heads", 8),
        encoder_ffn_dim=options["encoder_ffn_embed_dim"],
        decoder_ffn_dim=options["decoder_ffn_embed_dim"],
        activation_function=ACTIVATIONS[options.get("activation_fn", "relu")],
        dropout=float(options.get("dropout") or 0.0),
        attention_dropout=float(options.get("attention_dropout") or 0.0),
        activation_dropout=float(activation_dropout),
        normalize_before=bool(options.get("encoder_normalize_before")),
        layer_norm_eps=1e-5,
        position_encoding=positions,
        sinusoidal_layout="tensor2tensor",
        position_offset=pad + 1,
        max_position_embeddings=min(
            options.get(f"max_{side}_positions", 1024) for side in ("source", "target")
        ),
        scale_embedding=not options.get("no_scale_embedding", False),
        layernorm_embedding=bool(options.get("layernorm_embedding")),
        share_encoder_decoder_embeddings=share,
        tie_word_embeddings=share or bool(options.get("share_decoder_input_output_embed")),
        output_bias=False,
        pad_token_id=pad,
        bos_token_id=target_vocab.index("<s>"),
        eos_token_id=target_vocab.index("</s>"),
        decoder_start_token_id=target_vocab.index("</s>"),
    )


def size_claims(options: dict) -> list[SizeClaim]:
    """The sizes the fairseq model options claim, with the tensors that show them (`check_claimed_sizes`)."""
    claims = []
    # fairseq's learned tables have a row for every position from the padding index + 1 on
    first_position = SPECIAL_SYMBOLS.index("<pad>") + 1
    for side, positions in (("encoder", "source"), ("decoder", "target")):
        width = options.get(f"{side}_embed_dim")
        claims.append(SizeClaim(f"{side}_embed_dim", width, ((f"{side}.embed_tokens.weight", 1),)))
        if options.get(f"{side}_learned_pos") and not options.get("no_token_positional_embeddings"):
            rows = options.get(f"max_{positions}_positions", 1024)
            claims.append(
                SizeClaim(
                    f"max_{positions}_positions + {first_position}",
                    rows + first_position if isinstance(rows, int) else rows,
                    ((f"{side}.embed_positions.weight", 0),),
                )
            )
        layers = options.get(f"{side}_layers")
        claims.append(SizeClaim(f"{side}_layers", layers, ((f"{side}.layers.", None),)))
        if isinstance(layers, int) and layers > 0:
            claims.append(
                SizeClaim(
                    f"{side}_ffn_embed_dim",
                    options.get(f"{side}_ffn_embed_dim"),
                    ((f"{side}.layers.0.fc1.weight", 0),),
                )
            )
    return claims


def _our_name(name: str) -> str | None:
    """fairseq parameter name -> ours (None: not a parameter here: the version counters and the fixed sinusoidal
    tables)."""
    if name.endswith((".version", "._float_tensor", "embed_positions.weights")):
        return None
    if name == "decoder.output_projection.weight":
        return "lm_head.weight"
    for sub in ("fc1", "fc2"):
        name = name.replace(f".{sub}.", f".ffn.{sub}.")
    return f"model.{name}"


def convert_fairseq_state(
    state: dict[str, torch.Tensor], config: VanillaTransformerConfig
) -> VanillaTransformerForConditionalGeneration:
    """Our model with the fairseq weights `state` (the checkpoint's "model"); `ValueError` when they do not fit
    `config`, or when `config` asks for a model far larger than they are (`common.check_allocation`)."""
    model = build_checked(
        VanillaTransformerForConditionalGeneration,
        config,
        shapes_of(state),
        "the fairseq checkpoint's config",
    )
    rows = config.max_position_embeddings + config.position_offset
    ours = {}
    for name, tensor in state.items():
        target = _our_name(name)
        if target is None:
            continue
        if target.endswith("embed_positions.weight"):
            # the shorter of the source and target tables: keep the rows of positions both sides have
            tensor = tensor[:rows]
        if config.share_encoder_decoder_embeddings and target.endswith("embed_tokens.weight"):
            target = "model.shared.weight"
        if config.tie_word_embeddings and target == "lm_head.weight":
            continue
        ours[target] = tensor.float()
    if config.share_encoder_decoder_embeddings and not torch.equal(
        state["encoder.embed_tokens.weight"], state["decoder.embed_tokens.weight"]
    ):
        raise ValueError("share_all_embeddings=True but the encoder and decoder embeddings differ")
    try:
        return load_converted_weights(model, ours, "fairseq")
    except RuntimeError as error:
        # load_state_dict's size mismatches
        raise ValueError(
            f"the fairseq weights do not fit the model their config describes: {error}"
        ) from error


def generation_config(config: VanillaTransformerConfig, generation: dict) -> GenerationConfig:
    """Our decoding defaults with fairseq's: its beam size and length penalty (from the checkpoint's generation
    options, fairseq's defaults 5 and 1.0 otherwise), stopping when `num_beams` hypotheses are finished, never
    emitting pad (fairseq emits `<s>` if the model says so), at least `min_len` tokens before `</s>`, and at most
    `max_len_b` + 1 tokens (fairseq forces `</s>` as the last of them; the exported engines cannot, so a hypothesis
    that reaches the limit ends without it here)."""
    defaults = default_generation_config(config)
    beam, lenpen = generation.get("beam") or 5, generation.get("lenpen")
    defaults.num_beams = int(beam)
    defaults.length_penalty = float(1.0 if lenpen is None else lenpen)
    defaults.suppress_tokens = [config.pad_token_id]
    # fairseq forbids </s> for its first min_len steps
    defaults.min_new_tokens = int(generation.get("min_len") or 1)
    max_new = int(generation.get("max_len_b") or 200) + 1
    defaults.max_new_tokens = min(max_new, defaults.max_new_tokens or max_new)
    return defaults


def _dictionaries(folder: Path, task: dict, checkpoint: Path) -> tuple[Path, Path]:
    """The source and target dictionary files beside the checkpoint: dict.SRC.txt and dict.TGT.txt, with the
    languages of the checkpoint's task."""
    source, target = task.get("source_lang"), task.get("target_lang")
    if not (source and target):
        raise ValueError(
            f"{checkpoint} names no source and target languages (task.source_lang, task.target_lang); pass a "
            "checkpoint of fairseq's translation task"
        )
    paths = folder / f"dict.{source}.txt", folder / f"dict.{target}.txt"
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(
                f"{folder} has no {path.name}: put the dictionaries of the model (dict.{source}.txt and "
                f"dict.{target}.txt, from fairseq-preprocess) beside the checkpoint"
            )
    return paths


def _sentencepiece_models(folder: Path, task: dict, options: dict, bpe: dict) -> tuple[Path, Path]:
    """The source and target SentencePiece models beside the checkpoint (see the module docstring); refuses BPE
    codes (subword-nmt / fastBPE), which the tokenizer layout cannot reproduce exactly."""
    source, target = task.get("source_lang"), task.get("target_lang")
    for pair in ((f"spm.{source}.model", f"spm.{target}.model"), (f"{source}.model", f"{target}.model")):
        if source and target and all((folder / name).is_file() for name in pair):
            return folder / pair[0], folder / pair[1]
    named = bpe.get("sentencepiece_model") or options.get("sentencepiece_model")
    for name in ((Path(named).name,) if named else ()) + SHARED_SPM_NAMES:
        if (folder / name).is_file():
            return folder / name, folder / name
    codes = [name for name in BPE_CODE_NAMES if (folder / name).is_file()]
    kind = bpe.get("_name") or options.get("bpe")
    if codes or kind in ("subword_nmt", "fastbpe"):
        raise ValueError(
            f"the model's subwords are BPE codes ({codes[0] if codes else kind}), which are not "
            "converted: only SentencePiece models map exactly onto the converted tokenizer; retrain the "
            "subwords with SentencePiece, or tokenize with your BPE codes and pass the model's ids"
        )
    raise FileNotFoundError(
        f"{folder} has no SentencePiece model: put the model's {' or '.join(SHARED_SPM_NAMES)} (or "
        "spm.SRC.model and spm.TGT.model) beside the checkpoint"
    )


def convert_fairseq_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert a fairseq transformer checkpoint (a `.pt` file or its folder, with its dictionaries and
    SentencePiece model beside it: see the module docstring) into a vanilla-transformer folder with remote code,
    generation_config.json and the tokenizer (the OPUS-MT layout of `vocabulary.py`, which
    `AutoTokenizer` loads as `MarianTokenizer` with fairseq's ids). Nothing is written unless every check
    passes."""
    checkpoint_path = find_checkpoint(Path(src_dir))
    folder, out_dir = checkpoint_path.parent, Path(out_dir)
    checkpoint = read_checkpoint(checkpoint_path, trust_pickle)
    options, task, generation = checkpoint_options(checkpoint)
    state = checkpoint["model"]
    shapes = {name: tuple(tensor.shape) for name, tensor in state.items() if isinstance(tensor, torch.Tensor)}
    check_claimed_sizes(
        checkpoint_path, size_claims(options), shapes, config_name=f"{checkpoint_path}'s config"
    )
    source_file, target_file = _dictionaries(folder, task, checkpoint_path)
    vocab = read_dictionary(source_file, shapes["encoder.embed_tokens.weight"][0])
    target_vocab = read_dictionary(target_file, shapes["decoder.embed_tokens.weight"][0])
    if options.get("share_all_embeddings") and vocab != target_vocab:
        raise ValueError(
            f"share_all_embeddings=True needs one dictionary, but {source_file.name} and {target_file.name} differ; "
            "pass the dictionaries the model was trained with"
        )
    source_spm, target_spm = _sentencepiece_models(
        folder, task, options, _plain((checkpoint.get("cfg") or {}).get("bpe"))
    )
    config = config_from_fairseq(options, vocab, target_vocab)
    model = convert_fairseq_state(state, config)
    model.generation_config = generation_config(config, generation)
    write_converted_folder(model, None, out_dir)
    try:
        write_sentencepiece_tokenizer(
            out_dir,
            source_spm,
            vocab,
            target_spm,
            target_vocab,
            model_max_length=config.max_position_embeddings,
        )
    except (ValueError, OSError):
        # write_converted_folder wrote into a new or empty folder: leave nothing of a failed conversion
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return out_dir
