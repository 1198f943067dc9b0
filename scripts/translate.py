"""`vanilla-transformer translate` from a checkout: `python scripts/translate.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["translate", *sys.argv[1:]]))
