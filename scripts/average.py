"""`vanilla-transformer average` from a checkout: `python scripts/average.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["average", *sys.argv[1:]]))
