"""vanilla-transformer: the encoder-decoder Transformer of "Attention Is All You Need", from scratch and Hugging
Face-native, with the decoder-only and encoder-only models built from the same blocks.

Importing the package registers the configs and models with transformers' Auto classes and the "translation"
pipeline (`vanilla_transformer.modeling`); the rest loads on first use.

Subpackages, in the order data flows:
    corpus      parallel corpora into `datasets`, the held-out split
    tokenizer   the joint BPE tokenizer
    modeling    configs, models, pipeline, converters (flat: it travels with every saved model as remote code)
    training    the paper's recipe through accelerate
    inference   safe loading, batched translation, scoring, engines (CTranslate2, ONNX Runtime)
    export      engine exports, model cards, the Hub
    benchmarks  measurements against peers in the same run
    commands    the `vanilla-transformer` command line (`vanilla_transformer.cli`)
"""

from importlib.metadata import version
from pathlib import Path

# the symbolic links of a checkout (docs/design.md, "Layout"); an installed wheel holds real folders and files there
LINKS = (
    "modeling",
    "tokenizer",
    "corpus",
    "training",
    "inference",
    "export",
    "serving",
    "benchmarks",
    "corpus/data",
    "export/model_card.md",
)


def check_links(package: Path) -> None:
    """Raise `ImportError` (one line: how to clone) when one of `LINKS` under ``package`` is a plain file that holds
    its link's target, as a clone without symbolic links (Windows without ``core.symlinks``) leaves it."""
    for name in LINKS:
        path = package / name
        # a link's stand-in is a few bytes of text ("../../modeling"); the model-card template is kilobytes
        if path.is_file() and path.stat().st_size < 256 and path.read_bytes().startswith(b".."):
            raise ImportError(
                f"{path} is a plain file, not a symbolic link: this checkout was made without symbolic links; clone "
                "it again with them: git clone -c core.symlinks=true URL (on Windows with Developer Mode on)"
            )


check_links(Path(__file__).parent)

from . import modeling  # noqa: E402, F401  (registers the Auto classes and the pipeline)

# the package only imports installed (an editable install is a path entry for src/)
__version__ = version("vanilla-transformer")
