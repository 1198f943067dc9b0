#!/usr/bin/env python
"""Export a trained model folder to ONNX (encoder, decoder, decoder with cache) for ONNX Runtime / transformers.js.

    python scripts/export_onnx.py MODEL OUT

MODEL is a folder saved by training (or `modeling.save_with_remote_code`). OUT receives encoder_model.onnx,
decoder_model.onnx, decoder_with_past_model.onnx, config.json, generation_config.json, the tokenizer and a
README (see export/onnx.py). Run it with `python scripts/translate.py --engine onnx OUT` or
`inference.engine_onnx.OnnxTranslator(OUT)`. Needs the export extras: pip install '.[export]'.
"""

from __future__ import annotations

import argparse
import logging
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
        "model", type=Path, help="folder of a saved model (config.json, model.safetensors, tokenizer)"
    )
    parser.add_argument("out", type=Path, help="folder to write the ONNX export to")
    args = parser.parse_args(argv)
    logging.getLogger("torch.onnx").setLevel(
        logging.ERROR
    )  # the exporter's notes on optional torchvision ops
    try:
        from export.onnx import export_onnx

        out = export_onnx(args.model, args.out)
    except ImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as error:
        print(f"error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    print(f"exported {args.model} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
