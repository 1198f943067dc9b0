"""Studies that back the docs: each module measures one question against a peer or a model of its cost and is run
from a checkout as ``python -m studies.NAME`` (``--help`` for its options). They import the installed
``vanilla_transformer`` only and are not part of the wheel; what a user runs on their own hardware is
``vanilla-transformer bench``.

- ``studies.quality``: BLEU/chrF of ours against Marian + Seq2SeqTrainer with the same budget (docs/quality.md)
- ``studies.terminology``: glossary term use, BLEU and speed with and without constraints (docs/control.md)
- ``studies.sentences``: paragraphs translated whole, sentence by sentence or in chunks (docs/control.md)
- ``studies.decoding_loop``: the torch engine's decoding loop against our generate() and Marian's (docs/benchmarks.md)
- ``studies.kv_cache``: decoding with and without the key/value cache, measured and in closed form (docs/families.md)
- ``studies.tokenizer``: our BPE against SentencePiece: speed, vocabulary use (docs/tokenizer.md)
- ``studies.data``: the data pipeline at corpus scale: peak memory and start-up (docs/benchmarks.md)
- ``studies.soak``: many translate calls: memory stays flat, every reply is right (docs/reliability.md)
- ``studies.language_detection``: py3langid against the vocabulary-share guess on 5-100 characters (docs/deploy.md)
- ``studies.gpu``: on a CUDA device, the gpu tests, speed, memory and MFU against Marian (docs/benchmarks.md)
"""

from __future__ import annotations

import argparse

from vanilla_transformer.commands.arguments import command_parser


def study_parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of ``python -m MODULE``: `command_parser`'s, with the study's own program name."""
    parser = command_parser(module, doc)
    parser.prog = f"python -m {module}"
    return parser
