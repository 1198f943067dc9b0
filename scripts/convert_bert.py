#!/usr/bin/env python
"""Convert a transformers BertForMaskedLM or BertForSequenceClassification folder into our encoder-only format.

    python scripts/convert_bert.py SRC_DIR OUT_DIR

The head follows the folder's config.json "architectures" (BertForMaskedLM and BertForPreTraining: masked LM;
BertForSequenceClassification: classification). OUT_DIR keeps BERT's tokenizer files and loads with
AutoModelForMaskedLM / AutoModelForSequenceClassification.from_pretrained(OUT_DIR, trust_remote_code=True).
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
    parser.add_argument(
        "src_dir", type=Path, help="folder of a saved BertForMaskedLM or BertForSequenceClassification"
    )
    parser.add_argument("out_dir", type=Path, help="folder to write the converted model to")
    args = parser.parse_args(argv)
    from modeling.convert_bert import convert_bert_checkpoint

    try:
        out = convert_bert_checkpoint(args.src_dir, args.out_dir)
    except (FileNotFoundError, ValueError, OSError, pickle.UnpicklingError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"converted {args.src_dir} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
