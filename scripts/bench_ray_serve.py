"""Ray Serve throughput, 1 replica against 2 (`benchmarks.ray_serving`), each replica with 1 CPU, in one run:

    python scripts/bench_ray_serve.py --model outputs/default
    python scripts/bench_ray_serve.py --preset small --tokenizer /tmp/tokenizer-zh-en --max_new_tokens 20

Without --model, a randomly initialised --preset model with the tokenizer of --tokenizer is served (as
`vanilla-transformer bench serve` does). Needs the serve and ray extras. Exit status 1 when a request is not
answered or a reply differs between the replica counts.
"""

import argparse
import os
import sys
import tempfile

from transformers import AutoTokenizer, GenerationConfig

from vanilla_transformer.benchmarks.ray_serving import run_replicas, table
from vanilla_transformer.benchmarks.serving import corpus_sentences
from vanilla_transformer.commands.bench_serve import random_model
from vanilla_transformer.commands.serve import app_builder
from vanilla_transformer.commands.serve import parse_args as serve_options

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--model", default=None, help="model folder (default: a random --preset model)")
parser.add_argument("--preset", default="small", help="without --model: the preset to build (small)")
parser.add_argument("--tokenizer", default=None, help="without --model: a folder with the tokenizer")
parser.add_argument("--max_new_tokens", default=None, help="the server's decoding default")
parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2], help="replica counts (1 2)")
parser.add_argument("--cpus_per_replica", type=float, default=1.0, help="CPUs (and threads) per replica (1)")
parser.add_argument("--clients", type=int, default=16, help="concurrent clients (16)")
parser.add_argument("--sentences", type=int, default=128, help="sentences per round (128)")
parser.add_argument("--port", type=int, default=8000, help="Ray Serve's proxy port (8000)")
args = parser.parse_args()

folder = args.model or random_model(args.preset, args.tokenizer, tempfile.mkdtemp(prefix="bench-ray-"))
if args.max_new_tokens is not None and args.model is None:
    config = GenerationConfig.from_pretrained(folder)
    config.max_new_tokens = int(args.max_new_tokens)
    config.save_pretrained(folder)
options = serve_options(
    [
        "--model",
        folder,
        "--dtype",
        "float32",
        "--ray_replicas",
        "1",
        "--ray_cpus_per_replica",
        str(args.cpus_per_replica),
    ]
)
sentences = corpus_sentences(args.sentences, AutoTokenizer.from_pretrained(folder), 48, skip=20000)
print(
    f"model {args.model or f'random {args.preset} preset'}, {os.cpu_count()} CPUs, load average "
    f"{os.getloadavg()[0]:.1f}; {args.cpus_per_replica:g} CPU(s) per replica, {args.clients} clients, "
    f"{len(sentences)} sentences of the shipped corpus per round"
)
rounds, differ = run_replicas(
    app_builder(options),
    sentences,
    tuple(args.replicas),
    clients=args.clients,
    cpus_per_replica=args.cpus_per_replica,
    port=args.port,
    progress=print,
)
print()
print("\n".join(table(rounds)))
print(f"\nreplies that differ between the replica counts: {differ}")
sys.exit(0 if differ == 0 and all(r.sentences == len(sentences) for r in rounds) else 1)
