"""`vanilla-transformer demo` from a checkout: `python scripts/demo.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["demo", *sys.argv[1:]]))
