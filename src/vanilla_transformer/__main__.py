"""``python -m vanilla_transformer ...`` is the `vanilla-transformer` command."""

import sys

from .cli import main

sys.exit(main())
