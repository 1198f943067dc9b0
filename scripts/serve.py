"""`vanilla-transformer serve` from a checkout: `python scripts/serve.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["serve", *sys.argv[1:]]))
