"""`vanilla-transformer train` from a checkout: `python scripts/train.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["train", *sys.argv[1:]]))
