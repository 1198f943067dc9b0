#!/usr/bin/env python
"""Convert a transformers GPT2LMHeadModel folder (e.g. a downloaded gpt2 checkpoint) into our decoder-only format.

    python scripts/convert_gpt2.py SRC_DIR OUT_DIR

OUT_DIR keeps GPT-2's tokenizer files and loads with
AutoModelForCausalLM.from_pretrained(OUT_DIR, trust_remote_code=True).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

# the repository root replaces scripts/ on the import path (scripts/evaluate.py would shadow the `evaluate` library)
SCRIPTS = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != SCRIPTS]
sys.path.insert(0, str(SCRIPTS.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src_dir", type=Path, help="folder of a saved GPT2LMHeadModel")
    parser.add_argument("out_dir", type=Path, help="folder to write the converted model to")
    args = parser.parse_args(argv)
    from modeling.convert_gpt2 import convert_gpt2_checkpoint

    try:
        out = convert_gpt2_checkpoint(args.src_dir, args.out_dir)
    except (FileNotFoundError, ValueError, OSError, pickle.UnpicklingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"converted {args.src_dir} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
