"""Open a demo page for a model: type a sentence, see its translation, the beam's alternatives with their
scores and the cross-attention heat map; the model card's example sentences are one click away.

    vanilla-transformer demo --model outputs/default            # then open http://127.0.0.1:7860
    vanilla-transformer demo --model alice/zh-en-base --trust_remote_code --port 7861

A Gradio app (the demo extra: pip install 'vanilla-transformer[demo]'), for a model folder or a Hub id with
its tokenizer. Exit code 2 for a model that cannot be loaded.
"""

from __future__ import annotations

import os
import sys

from vanilla_transformer.commands.arguments import add_decoding_arguments, add_model_arguments, command_parser


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("demo", __doc__)
    add_model_arguments(parser, "model folder or Hub id (with its tokenizer)")
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="default 7860")
    add_decoding_arguments(parser, "num_beams")
    args = parser.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # read when gradio is imported
    try:
        from vanilla_transformer.serving.demo import load_demo

        demo = load_demo(
            args.model,
            device=args.device,
            trust_remote_code=True if args.trust_remote_code else None,
            num_beams=args.num_beams,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    demo.launch(server_name=args.host, server_port=args.port, share=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
