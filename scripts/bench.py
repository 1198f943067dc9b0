"""`vanilla-transformer bench` from a checkout: `python scripts/bench.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
