"""Push an exported model folder (weights, config, remote code, pipeline, tokenizer, model card) to the Hub.

    vanilla-transformer push --model outputs/default --repo_id alice/zh-en-small [--private]

A training output folder's checkpoints (optimizer and RNG state), TensorBoard logs, data cache, plots and
--export_at_minutes models stay local unless --include_training_state is given.

The token comes from HF_TOKEN or the `hf auth login` cache and is never printed. Exit codes: 0 pushed,
2 bad input (folder, repo id, no token), 1 the Hub refused or could not be reached.
"""

from __future__ import annotations

import logging
import sys

from huggingface_hub.errors import HfHubHTTPError

from vanilla_transformer.commands.arguments import command_parser, path_argument
from vanilla_transformer.export import push_folder


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("push", __doc__)
    parser.add_argument(
        "--model",
        required=True,
        type=path_argument("folder", text=True),
        help="exported model folder: a training output folder or save_with_remote_code's",
    )
    parser.add_argument("--repo_id", required=True, help="USER/NAME or ORG/NAME on the Hub")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--commit_message", default=None)
    parser.add_argument(
        "--include_training_state",
        action="store_true",
        help="also upload checkpoints/, runs/, cache/, plots/, minute-*/ and optimizer/RNG state files",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("export").setLevel(logging.INFO)
    try:
        url = push_folder(
            args.model,
            args.repo_id,
            private=args.private,
            commit_message=args.commit_message,
            include_training_state=args.include_training_state,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (HfHubHTTPError, OSError) as err:
        status = getattr(getattr(err, "response", None), "status_code", None)
        fix = (
            "; check that HF_TOKEN (or the `hf auth login` cache) holds a valid token with write access to "
            f"{args.repo_id.split('/')[0]!r}"
            if status in (401, 403)
            else ""
        )
        print(f"error: pushing to {args.repo_id} failed: {err}{fix}", file=sys.stderr)
        return 1
    except Exception as err:  # transport errors of huggingface_hub's HTTP client (not OSError subclasses)
        print(
            f"error: could not reach the Hub ({type(err).__name__}: {err}); check the network and HF_ENDPOINT",
            file=sys.stderr,
        )
        return 1
    print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
