"""`vanilla-transformer export` from a checkout: `python scripts/export.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["export", *sys.argv[1:]]))
