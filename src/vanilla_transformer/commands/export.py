"""Export a saved model folder for another inference engine.

    vanilla-transformer export --engine ct2 MODEL OUT                      # CTranslate2, float32 weights
    vanilla-transformer export --engine ct2 MODEL OUT --quantization int8  # int8 weights (fastest on CPU)
    vanilla-transformer export --engine onnx MODEL OUT                     # ONNX Runtime

MODEL is a folder saved by training (or `vanilla_transformer.modeling.save_with_remote_code`). A CTranslate2 folder
loads in `ctranslate2.Translator`; an ONNX folder holds the encoder, the decoder and the decoder with cache. Both
carry the tokenizer, the generation config and a README, and run with
`vanilla-transformer translate --engine ct2|onnx --model OUT`. Needs the export extras: pip install
'vanilla-transformer[export]'.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from vanilla_transformer.export.ct2 import QUANTIZATIONS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vanilla-transformer export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--engine", choices=("ct2", "onnx"), required=True, help="the engine to export for")
    parser.add_argument(
        "model", type=Path, help="saved model folder (config.json, model.safetensors, tokenizer)"
    )
    parser.add_argument("out", type=Path, help="folder to write the export to")
    parser.add_argument(
        "--quantization", choices=QUANTIZATIONS, default=None, help="ct2 only: weight type (default float32)"
    )
    args = parser.parse_args(argv)
    if args.engine == "onnx" and args.quantization is not None:
        parser.error("--quantization applies to --engine ct2 only")
    logging.getLogger("torch.onnx").setLevel(
        logging.ERROR
    )  # the exporter's notes on optional torchvision ops
    try:
        if args.engine == "ct2":
            from vanilla_transformer.export.ct2 import export_ct2

            out = export_ct2(args.model, args.out, quantization=args.quantization)
        else:
            from vanilla_transformer.export.onnx import export_onnx

            out = export_onnx(args.model, args.out)
    except ImportError as error:
        print(f"error: {error}: pip install 'vanilla-transformer[export]'", file=sys.stderr)
        return 2
    except (ValueError, OSError) as error:
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    suffix = f" ({args.quantization or 'float32'})" if args.engine == "ct2" else ""
    print(f"exported {args.model} -> {out}{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
