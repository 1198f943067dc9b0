"""Soak test of batched translation: many sentences, random batch sizes and mixed lengths; memory must stay
flat and every input line must get exactly one output line.

    python -m studies.soak                           # 20,000 sentences, tiny random-weight model
    python -m studies.soak --count 2000 --model outputs/default

Sentences are drawn (seeded) from data/bible.zh-en.tsv.xz: single verses, verse fragments, runs of several
verses longer than the model maximum (truncated), and empty or whitespace-only lines. They are translated
in chunks, each through `inference.translate_lines` with a batch size drawn from 1-64. The resident
set size (RSS, from /proc/self/status) is printed at the start (model loaded), after each tenth, and at the
end, with the growth over the second half of the run, which is the leak indicator (the first chunks still
allocate allocator pools and caches). Exit code 1 if the output count differs from the input count or the
second-half growth exceeds --max_growth_mib.
"""

from __future__ import annotations

import lzma
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from studies import study_parser
from vanilla_transformer.corpus import DEFAULT_DATA


def rss_mib() -> float:
    """Current resident set size of this process in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_sentences(count: int, seed: int) -> list[str]:
    """`count` source lines of mixed length drawn from the shipped zh-en corpus (about 5% empty, 5% very long)."""
    with lzma.open(DEFAULT_DATA, "rt", encoding="utf-8") as f:
        verses = [line.split("\t", 1)[0] for line in f if "\t" in line]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.05:
            out.append(rng.choice(["", "   "]))
        elif kind < 0.10:
            out.append("".join(rng.choice(verses) for _ in range(rng.randint(3, 8))))
        elif kind < 0.40:
            verse = rng.choice(verses)
            out.append(verse[: rng.randint(1, max(1, len(verse)))])
        else:
            out.append(rng.choice(verses))
    return out


def tiny_random_model(folder: Path, seed: int) -> str:
    """Export a 2+2-layer random-weight model with a BPE tokenizer trained on 2,000 corpus lines."""
    import torch

    from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration, save_with_remote_code
    from vanilla_transformer.tokenizer.bpe import train_bpe_tokenizer
    from vanilla_transformer.training.presets import build_config

    ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=2000)
    tokenizer = train_bpe_tokenizer(list(ds["source"]) + list(ds["target"]), vocab_size=2000)
    torch.manual_seed(seed)
    config = build_config("tiny", len(tokenizer), max_position_embeddings=128)  # 2+2 layers of width 64
    model = VanillaTransformerForConditionalGeneration(config).eval()
    save_with_remote_code(model, folder, tokenizer)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    parser = study_parser("studies.soak", __doc__)
    parser.add_argument("--model", help="model folder or Hub id (default: a tiny random-weight model)")
    parser.add_argument("--count", type=int, default=20_000, help="sentences to translate")
    parser.add_argument("--max_new_tokens", type=int, default=16, help="cap on output length")
    parser.add_argument("--num_beams", type=int, default=1, help="beams (1 = greedy)")
    parser.add_argument("--chunk", type=int, default=500, help="sentences per translate_lines call")
    parser.add_argument("--seed", type=int, default=0, help="seed of sentences and batch sizes")
    parser.add_argument("--max_growth_mib", type=float, default=50.0, help="allowed RSS growth, second half")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = parser.parse_args(argv)
    if args.count < 1 or args.chunk < 1:
        parser.error(f"--count={args.count} and --chunk={args.chunk} must be >= 1")

    import logging

    import torch

    from vanilla_transformer.inference import load_model_and_tokenizer, translate_lines

    logging.basicConfig(level=logging.ERROR)  # the per-chunk truncation warnings are expected here
    with tempfile.TemporaryDirectory() as tmp:
        name = args.model or tiny_random_model(Path(tmp) / "model", args.seed)
        try:
            model, tokenizer = load_model_and_tokenizer(name, device=args.device, opt_in=None)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    sentences = make_sentences(args.count, args.seed)
    rng = random.Random(args.seed + 1)
    translate_lines(
        model, tokenizer, sentences[:64], batch_size=64, num_beams=args.num_beams, max_new_tokens=2
    )
    start_rss = rss_mib()
    print(
        f"model {name if args.model else 'tiny random (d_model 64, 2+2 layers)'}, {args.count} sentences, "
        f"threads {torch.get_num_threads()}; RSS at start {start_rss:.1f} MiB",
        flush=True,
    )
    outputs: list[str] = []
    samples = [(0, start_rss)]
    batch_sizes = set()
    started = time.monotonic()
    for begin in range(0, args.count, args.chunk):
        batch_size = rng.randint(1, 64)
        batch_sizes.add(batch_size)
        chunk = sentences[begin : begin + args.chunk]
        outputs += translate_lines(
            model,
            tokenizer,
            chunk,
            batch_size=batch_size,
            num_beams=args.num_beams,
            max_new_tokens=args.max_new_tokens,
        )
        done = len(outputs)
        if done * 10 // args.count != (done - len(chunk)) * 10 // args.count or done == args.count:
            samples.append((done, rss_mib()))
            print(
                f"{done:>7} sentences  RSS {samples[-1][1]:7.1f} MiB  {time.monotonic() - started:6.0f} s",
                flush=True,
            )
    end_rss = rss_mib()
    half = min(samples, key=lambda s: abs(s[0] - args.count / 2))
    growth = end_rss - half[1]
    empty_ok = all(out == "" for src, out in zip(sentences, outputs) if not src.strip())
    print(
        f"RSS start {start_rss:.1f} MiB, middle {half[1]:.1f} MiB, end {end_rss:.1f} MiB; growth over the "
        f"second half {growth:+.1f} MiB (limit {args.max_growth_mib}); batch sizes used: {min(batch_sizes)}-"
        f"{max(batch_sizes)} ({len(batch_sizes)} distinct); outputs {len(outputs)} for {len(sentences)} inputs; "
        f"empty inputs give empty outputs: {empty_ok}"
    )
    ok = len(outputs) == len(sentences) and empty_ok and growth <= args.max_growth_mib
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
