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

from .links import check_links

try:
    from . import modeling  # noqa: F401  (registers the Auto classes and the pipeline)
finally:
    # a checkout whose symbolic links became plain files fails here with one line that says how to clone
    check_links(Path(__file__).parent)

# the package only imports installed (an editable install is a path entry for src/)
__version__ = version("vanilla-transformer")
