"""`vanilla-transformer evaluate` from a checkout: `python scripts/evaluate_model.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["evaluate", *sys.argv[1:]]))
