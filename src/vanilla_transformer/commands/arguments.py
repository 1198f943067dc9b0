"""What the subcommands' parsers share: the parser itself (``vanilla-transformer COMMAND``, the module docstring as
its --help, examples kept as written) and the options that mean the same in every command that takes them: the
model to load (--model, --device, --trust_remote_code, --dtype), the decoding settings that default to the
model's generation config (--num_beams, --length_penalty, --max_new_tokens, and the other options of
`modeling.DECODING_OPTIONS`, the one table of their rules that the server's requests follow too) and the BPE to train
(--vocab_size, --kind). Every path argument is parsed by `path_argument`: a link loop, a device, a FIFO, a file where a
folder is expected (or the reverse) is refused as it is parsed, exit 2 and one line naming the argument and the
path (`paths.path_problem`, which the options dataclasses' ``path`` fields use too)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vanilla_transformer.paths import PATH_KINDS, path_problem

# the decoding options a command takes unless it names others; None by default = the model's generation_config.json
# (the paper's beam 4, modeling.DEFAULT_LENGTH_PENALTY)
DEFAULT_DECODING_OPTIONS = ("num_beams", "length_penalty", "max_new_tokens")
DTYPES = ("auto", "float32", "bfloat16", "int8")  # int8: --engine torch (CPU) and onnx
# what --dtype means for --engine torch: `inference.loading.resolve_dtype`
TORCH_DTYPE_HELP = (
    "weights and computation (--engine torch): the saved precision by default (float32 for this project's models); "
    "auto = bfloat16 where the hardware computes bf16 (CUDA with bf16; CPUs with AMX-BF16 or AVX512-BF16; "
    "VANILLA_TRANSFORMER_CPU_BF16=0|1 forces the CPU's answer), else float32"
)


def command_parser(command: str, doc: str | None, options: type | None = None) -> argparse.ArgumentParser:
    """The parser of ``vanilla-transformer COMMAND``; --help prints ``doc`` (the command module's docstring, None
    under ``python -OO``, which strips docstrings). With ``options`` (a dataclass), every field of it is a flag
    too (`training.cli.OptionParser`)."""
    kwargs: dict[str, Any] = dict(
        prog=f"vanilla-transformer {command}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if options is None:
        return argparse.ArgumentParser(**kwargs)
    from vanilla_transformer.training.cli import OptionParser

    return OptionParser(options, **kwargs)


def path_argument(kind: str, text: bool = False) -> Callable[[str], Any]:
    """The argparse ``type`` of a path argument that takes a `kind` (one of `paths.PATH_KINDS`: "file",
    "folder", "file or folder", "output file", "output folder"): the `Path` (with `text`, the string as given: a
    Hub id, a path with a suffix the command reads), or argparse's exit 2 with one ``error: argument NAME: PATH
    is ...`` line when `paths.path_problem` refuses it."""
    if kind not in PATH_KINDS:
        raise ValueError(f"path kind {kind!r} is not one of {', '.join(PATH_KINDS)}")

    def parse(value: str) -> Any:
        problem = path_problem(value, kind)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value if text else Path(value)

    parse.__name__ = kind
    return parse


def add_model_arguments(
    parser: argparse.ArgumentParser,
    model_help: str,
    *,
    dtype_help: str | None = None,
    repeatable: bool = False,
) -> None:
    """--model (required; with ``repeatable``, a list of each one given), --device and --trust_remote_code: the
    arguments of `inference.load_model_and_tokenizer`; with ``dtype_help``, also --dtype (auto, float32, bfloat16,
    int8; default None: the command's choice)."""
    parser.add_argument(
        "--model",
        required=True,
        action="append" if repeatable else "store",
        type=path_argument("file or folder", text=True),
        help=model_help,
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    parser.add_argument(
        "--trust_remote_code",
        action="store_true",
        help="allow a model of another type to run its own code (its auto_map), from a folder or a Hub repo",
    )
    if dtype_help is not None:
        parser.add_argument("--dtype", choices=DTYPES, default=None, help=dtype_help)


def load_model_from_args(args: argparse.Namespace) -> tuple[Any, Any]:
    """(model, tokenizer) of the arguments `add_model_arguments` adds (with --dtype) and --engine:
    `inference.engines.load_engine`; raises its `ValueError` / `ImportError`."""
    from vanilla_transformer.inference.engines import load_engine

    return load_engine(
        args.engine,
        args.model,
        device=args.device,
        trust_remote_code=True if args.trust_remote_code else None,
        dtype=args.dtype,
    )


def decoding_value(name: str) -> Callable[[str], Any]:
    """The argparse ``type`` of the decoding option ``name``: parses a string into its kind and checks it against
    its rule in `modeling.DECODING_OPTIONS` (argparse then exits with 2 and one ``error:`` line giving the rule's
    message, the one the server's 422 gives)."""
    from vanilla_transformer.modeling import DECODING_OPTIONS

    option = DECODING_OPTIONS[name]

    def parse(text: str) -> Any:
        try:
            value = option.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name}={text!r} is invalid: expected {option.expected}; {option.fix.format(value=text)}"
            ) from None
        try:
            option.check(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return value

    parse.__name__ = name
    return parse


def add_decoding_arguments(parser: argparse.ArgumentParser, *names: str) -> None:
    """The named options of `modeling.DECODING_OPTIONS` (default: `DEFAULT_DECODING_OPTIONS`), each None unless
    given and checked by its rule as it is parsed; ``do_sample`` is a flag (--do_sample)."""
    from vanilla_transformer.modeling import DECODING_OPTIONS

    for name in names or DEFAULT_DECODING_OPTIONS:
        option = DECODING_OPTIONS[name]
        if option.kind is bool:
            parser.add_argument(f"--{name}", action="store_true", help=option.help)
        else:
            parser.add_argument(f"--{name}", type=decoding_value(name), default=None, help=option.help)


def add_language_arguments(parser: argparse.ArgumentParser) -> None:
    """--src_lang and --tgt_lang: the languages of a multilingual model (translate, translate-corpus, evaluate,
    score)."""
    parser.add_argument(
        "--src_lang",
        default=None,
        help="a multilingual model's source language, in its codes (NLLB-200: FLORES-200 such as eng_Latn; M2M100: "
        "ISO 639 such as en); default: its tokenizer's. OPUS-MT multi-target models do not mark the source",
    )
    parser.add_argument(
        "--tgt_lang",
        default=None,
        help="a multilingual model's target language (NLLB-200: fra_Latn; M2M100: fr; OPUS-MT multi-target: fra or "
        ">>fra<<); default: its tokenizer's",
    )


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
