"""The translation server with continuous batching, with request-level batching and one request at a time
(`benchmarks.serving`): sentences per second and p50 / p95 request latency at 1, 8 and 32 concurrent clients, the
three servers measured in this run, through the server's own API and/or LibreTranslate's (--api), every request
answered and every batched reply checked against the one-at-a-time reply. With --rates, also an open-loop load
(requests arriving as a Poisson process at each rate, --long_share of them long sentences, --long_clauses clauses
joined for each, the others short) on
the request-level and the continuous server: sentences per second and the p50 / p95 latency of short and of long
requests.

    vanilla-transformer bench serve --model outputs/default                 # the model's decoding (beam 4)
    vanilla-transformer bench serve --model outputs/default --num_beams 1   # greedy
    vanilla-transformer bench serve --model outputs/default --api own libretranslate
    vanilla-transformer bench serve --preset small --tokenizer outputs/default --max_new_tokens 40
    vanilla-transformer bench serve --model outputs/default --rates 2 4 8 --requests 80   # and open loop
    vanilla-transformer bench serve --model outputs/default --rates 8 16 --long_clauses 4  # long = paragraphs

Without --model, a randomly initialised model of --preset with the tokenizer of the folder --tokenizer is served
(untrained: its outputs run to --max_new_tokens, so set that to a translation's length).
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from vanilla_transformer.commands.arguments import add_decoding_arguments, command_parser, path_argument


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("bench serve", __doc__)
    parser.add_argument(
        "--model",
        default=None,
        type=path_argument("file or folder", text=True),
        help="model folder (default: a random --preset model)",
    )
    parser.add_argument("--preset", default="small", help="without --model: the preset to build (small)")
    parser.add_argument(
        "--tokenizer",
        default=None,
        type=path_argument("file or folder", text=True),
        help="without --model: a folder with the tokenizer",
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrent clients")
    parser.add_argument("--per_client", type=int, default=4, help="requests per client per round (4)")
    parser.add_argument("--max_wait_ms", type=float, default=10.0, help="the batching server's wait (10)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--api",
        nargs="+",
        choices=("own", "libretranslate"),
        default=["own"],
        help="the APIs to send the requests through, each measured in both servers (default own)",
    )
    parser.add_argument(
        "--rates", type=float, nargs="*", default=[], help="open-loop rates in requests/s (default: none)"
    )
    parser.add_argument("--requests", type=int, default=60, help="open-loop requests per rate (60)")
    parser.add_argument(
        "--long_share", type=float, default=0.25, help="open loop: the share of long sentences (0.25)"
    )
    parser.add_argument(
        "--long_clauses",
        type=int,
        default=1,
        help="open loop: clauses joined into each long request, within the model's source limit (1: one clause)",
    )
    add_decoding_arguments(parser)
    args = parser.parse_args(argv)
    if min(args.clients) < 1 or args.per_client < 1 or args.requests < 1:
        print("error: --clients, --per_client and --requests must be >= 1", file=sys.stderr)
        return 2
    if any(rate <= 0 for rate in args.rates) or not 0 <= args.long_share <= 1 or args.long_clauses < 1:
        print(
            "error: --rates must be > 0, --long_share between 0 and 1 and --long_clauses >= 1",
            file=sys.stderr,
        )
        return 2

    import torch

    from vanilla_transformer.benchmarks.serving import (
        corpus_sentences,
        joined_clauses,
        open_loop_table,
        run_open_loop,
        run_serving,
        table,
    )
    from vanilla_transformer.serving import load_served

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        folder = args.model or random_model(
            args.preset, args.tokenizer, tempfile.mkdtemp(prefix="bench-serve-")
        )
        served = load_served(folder, "torch", dtype="float32")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    options = {
        name: getattr(args, name)
        for name in ("num_beams", "length_penalty", "max_new_tokens")
        if getattr(args, name) is not None
    }
    from vanilla_transformer.modeling import max_source_length

    # what the server accepts
    longest = min(48, max_source_length(served.model.config, served.tokenizer) or 48)
    sentences = corpus_sentences(max(args.clients) * args.per_client, served.tokenizer, longest, skip=20000)
    config = served.model.generation_config
    print(
        f"model {args.model or f'random {args.preset} preset'}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"decoding num_beams={options.get('num_beams', config.num_beams)}, "
        f"max_new_tokens={options.get('max_new_tokens', config.max_new_tokens)}; "
        f"{len(sentences)} sentences of the shipped corpus"
    )
    rounds, differ = run_serving(
        served,
        sentences,
        tuple(args.clients),
        options,
        max_wait_ms=args.max_wait_ms,
        per_client=args.per_client,
        apis=tuple(dict.fromkeys(args.api)),
        progress=print,
    )
    sent = sum(r.clients * args.per_client for r in rounds)
    answered = sum(r.sentences for r in rounds)
    print()
    print("\n".join(table(rounds)))
    if args.rates:
        # short: the shortest third of the sentences, long: the longest third
        ordered = sorted(sentences, key=lambda text: len(served.tokenizer(text)["input_ids"]))
        third = max(1, len(ordered) // 3)
        long = ordered[-third:]
        if args.long_clauses > 1:
            limit = max_source_length(served.model.config, served.tokenizer) or 512
            long = joined_clauses(long, args.long_clauses, served.tokenizer, limit)

        def span(texts: list[str]) -> str:
            lengths = sorted(len(served.tokenizer(text)["input_ids"]) for text in texts)
            return f"{lengths[0]}-{lengths[-1]}"

        print(f"\nopen loop: short requests {span(ordered[:third])} source tokens, long {span(long)}")
        open_rounds, open_differ = run_open_loop(
            served,
            ordered[:third],
            long,
            tuple(args.rates),
            args.requests,
            options,
            long_share=args.long_share,
            max_wait_ms=args.max_wait_ms,
            progress=print,
        )
        sent += len(open_rounds) * args.requests
        answered += sum(r.sentences for r in open_rounds)
        print()
        print("\n".join(open_loop_table(open_rounds)))
        print(
            f"\nopen loop: replies that differ between request-level and continuous batching: {open_differ}"
        )
    print(f"\nrequests answered: {answered} of {sent}")
    print(
        "replies that differ from one-at-a-time serving: "
        + ", ".join(f"{mode} {count}" for mode, count in differ.items())
    )
    return 0 if differ["continuous"] == 0 and answered == sent else 1


def random_model(preset: str, tokenizer_folder: str | None, folder: str) -> str:
    """A randomly initialised `preset` model with the tokenizer of `tokenizer_folder`, saved in `folder`."""
    if tokenizer_folder is None:
        raise ValueError("without --model, pass --tokenizer FOLDER (a folder holding tokenizer.json)")
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration, save_with_remote_code
    from vanilla_transformer.tokenizer.loading import load_tokenizer
    from vanilla_transformer.training.presets import build_config

    tokenizer = load_tokenizer(tokenizer_folder)
    model = VanillaTransformerForConditionalGeneration(build_config(preset, len(tokenizer)))
    return str(save_with_remote_code(model, folder, tokenizer))


if __name__ == "__main__":
    sys.exit(main())
