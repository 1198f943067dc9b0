"""`vanilla-transformer train-tokenizer` from a checkout: `python scripts/train_tokenizer.py --help` lists its options."""

import sys

from vanilla_transformer.cli import main

sys.exit(main(["train-tokenizer", *sys.argv[1:]]))
