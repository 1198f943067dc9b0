#!/usr/bin/env python
"""Export a saved model folder to CTranslate2 (a folder that `ctranslate2.Translator` and
`inference.engine_ct2.CT2Translator` load; it carries the tokenizer, generation config and a README).

    python scripts/export_ct2.py MODEL OUT                      # float32 weights
    python scripts/export_ct2.py MODEL OUT --quantization int8  # int8 weights (fastest on CPU)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# the repository root replaces scripts/ on the import path (scripts/evaluate.py would shadow the `evaluate` library)
SCRIPTS = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != SCRIPTS]
sys.path.insert(0, str(SCRIPTS.parent))

from export.ct2 import QUANTIZATIONS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", help="saved model folder (config.json, model.safetensors, tokenizer)")
    parser.add_argument("out", type=Path, help="folder to write the CTranslate2 model to")
    parser.add_argument(
        "--quantization", choices=QUANTIZATIONS, default=None, help="weight type (default float32)"
    )
    args = parser.parse_args(argv)
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        print("error: ctranslate2 is not installed: pip install -e '.[export]'", file=sys.stderr)
        return 2
    from export.ct2 import export_ct2

    try:
        out = export_ct2(args.model, args.out, quantization=args.quantization)
    except (ValueError, OSError) as error:
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    print(f"exported {args.model} -> {out} ({args.quantization or 'float32'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
