"""`vanilla-transformer plot-attention` from a checkout: `python scripts/plot_attention.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["plot-attention", *sys.argv[1:]]))
