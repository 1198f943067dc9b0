"""The `vanilla-transformer` command: one subcommand per job, each a module of `vanilla_transformer.commands` with
``main(argv) -> exit status`` and its own complete ``--help``.

    vanilla-transformer --help
    vanilla-transformer train --help
    python -m vanilla_transformer translate --model outputs/default < src.txt
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Mapping

from vanilla_transformer.commands.extras import require_extras

# subcommand -> (module of vanilla_transformer.commands, one line for the command list)
COMMANDS = {
    "train": ("train", "train a model (default: the small preset on the shipped zh->en corpus, 25 minutes)"),
    "translate": ("translate", "translate lines of text with a saved, exported or Hub model"),
    "translate-corpus": (
        "translate_corpus",
        "translate a corpus column to JSONL/Parquet (sharded, resumable; accelerate or Ray)",
    ),
    "score": ("score", "score given translations without decoding (forced decoding; jsonl or tsv)"),
    "evaluate": ("evaluate", "BLEU/chrF of a saved model on a corpus or the test split of its run"),
    "shortlist": ("shortlist", "build a model's vocabulary shortlist from its training corpus (--shortlist)"),
    "export": ("export", "export a saved model for CTranslate2 or ONNX Runtime (--engine ct2|onnx)"),
    "convert": ("convert", "convert a Marian, GPT-2 or BERT checkpoint into our format (--from)"),
    "push": ("push", "upload an exported model folder to the Hugging Face Hub"),
    "train-tokenizer": ("train_tokenizer", "train the joint BPE tokenizer on a corpus"),
    "average": ("average", "average the weights of a run's last checkpoints"),
    "plot-attention": ("plot_attention", "draw a sentence's cross-attention map"),
    "serve": ("serve", "serve a model over HTTP (dynamic batching, streaming; --engine torch|ct2|onnx)"),
    "demo": ("demo", "open a demo page: translation, beam alternatives, cross-attention"),
    "bench": ("bench", "benchmarks against peers run in the same process (speed, serve)"),
}
# subcommand -> the extras of pyproject.toml it needs beyond the core install (commands/extras.py checks them before
# the command's module is imported); writing a model card (export.model_card) reads the corpus package (datasets), so
# the commands that write one, or save into a folder through `export`, need 'train'
NEEDS = {
    "train": ("train",),
    "translate-corpus": ("train",),
    "evaluate": ("train",),
    "export": ("train",),
    "convert": ("train",),
    "push": ("train",),
    "train-tokenizer": ("train",),
    "average": ("train",),
    "shortlist": ("train",),
    "plot-attention": ("plot",),
    "serve": ("serve",),
    "demo": ("demo",),
}


def dispatch(
    prog: str,
    commands: Mapping[str, tuple[str, str]],
    argv: list[str],
    summary: str,
    needs: Mapping[str, tuple[str, ...]] | None = None,
) -> int:
    """Run ``commands[argv[0]]``'s module's ``main(argv[1:])`` once the extras ``needs`` names for it are installed
    (else one line that says which to install, exit status 2); ``--help`` (or nothing) lists the commands."""
    listing = "\n".join(f"  {name:<16} {line}" for name, (_, line) in commands.items())
    usage = f"usage: {prog} COMMAND [options]\n\n{summary}\n\ncommands:\n{listing}\n\n'{prog} COMMAND --help' for a command's options."
    if not argv or argv[0] in ("-h", "--help"):
        print(usage, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in commands:
        close = difflib.get_close_matches(name, list(commands), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        print(
            f"{prog}: error: unknown command {name!r}{hint}; choose from {', '.join(commands)}",
            file=sys.stderr,
        )
        return 2
    if needs and name in needs:
        require_extras(f"{prog} {name}", *needs[name])
    module = importlib.import_module(f"vanilla_transformer.commands.{commands[name][0]}")
    return module.main(rest)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--version"]:
        from vanilla_transformer import __version__

        print(f"vanilla-transformer {__version__}")
        return 0
    summary = (
        "The encoder-decoder Transformer of 'Attention Is All You Need': train, translate, evaluate, export."
    )
    return dispatch("vanilla-transformer", COMMANDS, argv, summary, NEEDS)


if __name__ == "__main__":
    sys.exit(main())
