"""`vanilla-transformer push` from a checkout: `python scripts/push.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["push", *sys.argv[1:]]))
