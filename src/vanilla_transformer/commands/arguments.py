"""What the subcommands' parsers share: the parser itself (``vanilla-transformer COMMAND``, the module docstring as
its --help, examples kept as written) and the options that mean the same in every command that takes them: the
model to load (--model, --device, --trust_remote_code, --dtype), the decoding settings that default to the
model's generation config (--num_beams, --length_penalty, --max_new_tokens) and the BPE to train (--vocab_size,
--kind)."""

from __future__ import annotations

import argparse

# decoding option -> (type, help); None by default = the model's generation_config.json (the paper's beam 4, 0.6)
DECODING_OPTIONS = {
    "num_beams": (int, "1 = greedy (default: the model's generation config, the paper's 4)"),
    "length_penalty": (float, "beam score = log p / length**alpha (default: the model's generation config)"),
    "max_new_tokens": (int, "cap on generated tokens (default: the model's generation config)"),
}
DTYPES = ("auto", "float32", "bfloat16", "int8")  # int8: --engine torch (CPU) and onnx
# what --dtype means for --engine torch: `inference.loading.resolve_dtype`
TORCH_DTYPE_HELP = (
    "weights and computation (--engine torch): the saved precision by default (float32 for this project's models); "
    "auto = bfloat16 where the hardware computes bf16 (CUDA with bf16; CPUs with AMX-BF16 or AVX512-BF16; "
    "VANILLA_TRANSFORMER_CPU_BF16=0|1 forces the CPU's answer), else float32"
)


def command_parser(command: str, doc: str) -> argparse.ArgumentParser:
    """The parser of ``vanilla-transformer COMMAND``; --help prints ``doc`` (the command module's docstring)."""
    return argparse.ArgumentParser(
        prog=f"vanilla-transformer {command}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_model_arguments(
    parser: argparse.ArgumentParser, model_help: str, *, dtype_help: str | None = None
) -> None:
    """--model (required), --device and --trust_remote_code: the arguments of `inference.load_model_and_tokenizer`;
    with ``dtype_help``, also --dtype (auto, float32, bfloat16, int8; default None: the command's choice)."""
    parser.add_argument("--model", required=True, help=model_help)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    parser.add_argument(
        "--trust_remote_code", action="store_true", help="allow a Hub repo's own model code to run"
    )
    if dtype_help is not None:
        parser.add_argument("--dtype", choices=DTYPES, default=None, help=dtype_help)


def add_decoding_arguments(parser: argparse.ArgumentParser, *names: str) -> None:
    """The named options of `DECODING_OPTIONS` (all of them by default), each None unless given."""
    for name in names or DECODING_OPTIONS:
        kind, help_text = DECODING_OPTIONS[name]
        parser.add_argument(f"--{name}", type=kind, default=None, help=help_text)


def add_tokenizer_arguments(parser: argparse.ArgumentParser) -> None:
    """--vocab_size and --kind: the joint BPE that `tokenizer.train_bpe_tokenizer` trains."""
    from vanilla_transformer.tokenizer import DEFAULT_VOCAB_SIZE

    parser.add_argument(
        "--vocab_size", type=int, default=DEFAULT_VOCAB_SIZE, help=f"default {DEFAULT_VOCAB_SIZE}"
    )
    parser.add_argument(
        "--kind",
        choices=["char", "byte"],
        default="char",
        help="char BPE + byte fallback (default) or byte-level",
    )
