"""Average the model weights of the last N checkpoints of a run (the paper averaged the last 5) and save the
result as a model folder that loads and evaluates like any other (with the run's tokenizer).

    vanilla-transformer average --run outputs/default --num 5 --output outputs/default-avg5
    vanilla-transformer average --checkpoints A/checkpoint-400 A/checkpoint-500 --output OUT
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.training.averaging import export_averaged_model
from vanilla_transformer.training.checkpoint import list_checkpoints


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = command_parser("average", __doc__)
    parser.add_argument(
        "--run", type=path_argument("folder", text=True), help="training output dir (uses RUN/checkpoints)"
    )
    parser.add_argument(
        "--num", type=int, default=5, help="average the newest N checkpoints of --run (default 5)"
    )
    parser.add_argument(
        "--checkpoints",
        nargs="+",
        type=path_argument("folder", text=True),
        help="explicit checkpoint directories instead of --run",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=path_argument("output folder", text=True),
        help="folder to write the averaged model to",
    )
    parser.add_argument(
        "--tokenizer",
        type=path_argument("folder", text=True),
        help="tokenizer folder to save with the model (default: RUN/checkpoints/tokenizer)",
    )
    args = parser.parse_args(argv)
    if bool(args.run) == bool(args.checkpoints):
        parser.error("pass exactly one of --run or --checkpoints")
    if args.num < 1:
        parser.error(f"--num {args.num} is invalid: pass the number of newest checkpoints to average (>= 1)")
    if args.run:
        found = list_checkpoints(Path(args.run) / "checkpoints")
        if not found:
            parser.error(f"no checkpoints in {Path(args.run) / 'checkpoints'}")
        if len(found) < args.num:
            print(
                f"warning: only {len(found)} checkpoint(s) available, averaging all of them", file=sys.stderr
            )
        folders = found[-args.num :]
    else:
        folders = [Path(c) for c in args.checkpoints]
    tok_dir = args.tokenizer or (Path(args.run) / "checkpoints" / "tokenizer" if args.run else None)
    tokenizer = None
    try:
        if tok_dir is not None and Path(tok_dir).exists():
            from vanilla_transformer.tokenizer.loading import load_tokenizer

            tokenizer = load_tokenizer(tok_dir)
        out = export_averaged_model(folders, args.output, tokenizer)
    except (ValueError, OSError) as error:  # CheckpointError is a ValueError: one line, exit 2
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    print(f"Averaged {len(folders)} checkpoints ({', '.join(f.name for f in folders)}) -> {out}")
    if tokenizer is None:
        print("warning: no tokenizer saved with the model; pass --tokenizer", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
