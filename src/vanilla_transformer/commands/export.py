"""Export a saved model folder for another inference engine.

    vanilla-transformer export --engine ct2 MODEL OUT                      # CTranslate2, float32 weights
    vanilla-transformer export --engine ct2 MODEL OUT --quantization int8  # int8 weights (fastest on CPU)
    vanilla-transformer export --engine onnx MODEL OUT                     # ONNX: float32 and int8 graphs

MODEL is a folder saved by training (or `vanilla_transformer.modeling.save_with_remote_code`). A CTranslate2 folder
loads in `ctranslate2.Translator`; an ONNX folder is in optimum's / transformers.js' layout (onnx/encoder_model.onnx,
onnx/decoder_model_merged.onnx and their int8 *_quantized.onnx variants, a Marian config.json) and loads in
transformers.js. Both carry the tokenizer, the generation config and a README, and run with
`vanilla-transformer translate --engine ct2|onnx --model OUT` (--dtype int8 for the ONNX int8 graphs). Needs the export extras: pip install
'vanilla-transformer[export]'.
"""

from __future__ import annotations

import logging
import sys

from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.commands.extras import require_extras
from vanilla_transformer.inference.engines import ENGINES


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("export", __doc__)
    parser.add_argument("--engine", choices=tuple(ENGINES), required=True, help="the engine to export for")
    parser.add_argument(
        "model",
        type=path_argument("folder"),
        help="saved model folder (config.json, model.safetensors, tokenizer)",
    )
    parser.add_argument("out", type=path_argument("output folder"), help="folder to write the export to")
    parser.add_argument(
        "--quantization",
        choices=sorted({q for engine in ENGINES.values() for q in engine.quantizations}),
        default=None,
        help="weight type (default float32): "
        + "; ".join(
            f"{name}: {', '.join(e.quantizations)}" for name, e in ENGINES.items() if e.quantizations
        ),
    )
    args = parser.parse_args(argv)
    engine = ENGINES[args.engine]
    if args.quantization is not None and args.quantization not in engine.quantizations:
        takes = [name for name, e in ENGINES.items() if args.quantization in e.quantizations]
        parser.error(f"--quantization {args.quantization} applies to --engine {' / '.join(takes)} only")
    require_extras("vanilla-transformer export", engine.extra)
    # the exporter's notes on optional torchvision ops
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    try:
        from vanilla_transformer.export import exporter

        options = {"quantization": args.quantization} if engine.quantizations else {}
        out = exporter(args.engine)(args.model, args.out, **options)
    except (ValueError, OSError) as error:
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    suffix = f" ({args.quantization or 'float32'})" if engine.quantizations else ""
    print(f"exported {args.model} -> {out}{suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
