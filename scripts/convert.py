"""`vanilla-transformer convert` from a checkout: `python scripts/convert.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["convert", *sys.argv[1:]]))
