"""Speed of our model against transformers' `MarianMTModel` (same architecture, same weights) and, when the
`ctranslate2` package is installed, against a CTranslate2 conversion of the same Marian weights; our own model
exported with `export.ct2` (fp32 and int8) and with `export.onnx` (ONNX Runtime) are further contenders, each
with its token agreement against our `generate()`.

Every figure is measured in interleaved rounds (each round runs every contender once, in alternating order)
and reported as the median of the per-round ratios against Marian, so that the noise of a shared machine
cancels. With `Settings.bf16`, ours and Marian also run in bf16 in the same rounds (training under
`torch.autocast`, generation with bf16 weights), so that each system's bf16/fp32 ratio, ours/Marian at the same
precision and each system's best precision on this machine come from the same rounds. Same-round probes (a large fp32 GEMM and a large memory copy) turn throughputs into training MFU and
into the decode step's distance to the memory-bandwidth floor.

The logic lives here; `vanilla-transformer bench speed` parses arguments and prints.
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel
from vanilla_transformer.modeling import cpu_inference_gemm, set_cpu_inference_gemm
from vanilla_transformer.modeling.convert_marian import convert_marian_model

from .marian import marian_config

# The benchmark presets: `training.presets`' architecture sizes with this vocabulary size (the output layer
# matters for speed; ``tiny`` keeps the tests fast).
VOCAB_SIZES: dict[str, int] = {"tiny": 97, "small": 8000, "base": 32000}


@dataclass
class Contenders:
    """The models of one preset: Marian, ours converted from it, and optionally a CTranslate2 translator.
    ``hp`` holds the sizes the FLOP and byte models read (`sizes`)."""

    preset: str
    marian: MarianMTModel
    ours: torch.nn.Module
    ct2: object | None = None
    ct2_note: str = ""
    hp: dict = field(default_factory=dict)
    engines: dict[str, object] = field(default_factory=dict)  # deployed exports of ours: name -> translator
    engine_notes: list[str] = field(default_factory=list)
    bf16: dict[str, torch.nn.Module] = field(
        default_factory=dict
    )  # "marian", "ours" with bf16 weights (decoding)

    @property
    def pad(self) -> int:
        return self.hp["vocab"] - 1


def sizes(config: MarianConfig) -> dict:
    """The sizes the FLOP and byte models read: d_model, encoder/decoder layers, heads, ffn, vocab."""
    return dict(
        d_model=config.d_model,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        heads=config.encoder_attention_heads,
        ffn=config.encoder_ffn_dim,
        vocab=config.vocab_size,
    )


def generation_config(pad: int, num_beams: int, new_tokens: int, use_cache: bool = True) -> GenerationConfig:
    """Identical decoding settings for every contender: exactly `new_tokens` tokens, pad never generated."""
    return GenerationConfig(
        decoder_start_token_id=pad,
        pad_token_id=pad,
        eos_token_id=0,
        bos_token_id=None,
        num_beams=num_beams,
        do_sample=False,
        min_new_tokens=new_tokens,
        max_new_tokens=new_tokens,
        length_penalty=1.0,
        early_stopping=False,
        suppress_tokens=[pad],
        use_cache=use_cache,
    )


def build_contenders(
    preset: str,
    seed: int = 0,
    with_ct2: bool = True,
    dropout: float = 0.1,
    with_engines: bool = False,
    new_tokens: int = 32,
    with_bf16: bool = True,
) -> Contenders:
    """Marian with random weights (non-trivial LayerNorms and output bias), ours converted from it, and the
    CTranslate2 conversion when the package is installed. Both PyTorch models use sdpa attention and OPUS-MT's
    special ids (pad and decoder start = the last id, eos 0). `with_engines`: also ours exported to CTranslate2
    fp32 and int8 and to ONNX Runtime (`export_engines`), decoding exactly `new_tokens` tokens. `with_bf16`: also
    copies of Marian and ours with bf16 weights, for the bf16 generation columns."""
    if preset not in VOCAB_SIZES:
        raise ValueError(
            f"Unknown benchmark preset {preset!r}; choose one of {list(VOCAB_SIZES)} (--preset)."
        )
    vocab = VOCAB_SIZES[preset]
    config = marian_config(
        preset,
        vocab,
        dropout,
        pad_token_id=vocab - 1,
        bos_token_id=None,
        decoder_start_token_id=vocab - 1,
        eos_token_id=0,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    marian = MarianMTModel(config).eval()
    with torch.no_grad():
        marian.final_logits_bias.normal_(0, 0.1)
        for module in marian.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.05)
                module.bias.normal_(0.0, 0.05)
    ours = convert_marian_model(marian)  # copies dropout: both train with the same p
    ours.set_attn_implementation("sdpa")
    result = Contenders(preset, marian, ours.eval(), hp=sizes(config))
    if with_bf16:
        result.bf16 = {
            name: copy.deepcopy(model).to(torch.bfloat16).eval()
            for name, model in (("marian", marian), ("ours", result.ours))
        }
    if with_ct2:
        result.ct2, result.ct2_note = convert_to_ctranslate2(marian)
    if with_engines:
        result.engines, result.engine_notes = export_engines(result.ours, new_tokens)
    return result


ENGINES = ("ct2_fp32", "ct2_int8", "onnx")


def export_engines(ours: torch.nn.Module, new_tokens: int) -> tuple[dict[str, object], list[str]]:
    """Ours exported to CTranslate2 (fp32, int8) and ONNX Runtime, each loaded as its translator
    (`CT2Translator`, `OnnxTranslator`), with a generation config that decodes exactly `new_tokens` tokens; an
    engine whose package is missing or whose export fails is left out with a note saying why."""
    import importlib

    model = copy.copy(ours)  # the exported generation config must not change the PyTorch contender's
    model.generation_config = generation_config(ours.config.pad_token_id, 4, new_tokens)
    # every hypothesis has exactly new_tokens tokens: early stopping changes nothing, and CT2Translator needs it
    model.generation_config.early_stopping = True
    tokenizer = word_level_tokenizer(ours.config.vocab_size)
    root = Path(tempfile.mkdtemp(prefix="bench_engines_"))
    threads = torch.get_num_threads()
    plans = {
        "ct2_fp32": (
            "vanilla_transformer.export.ct2",
            "export_ct2",
            {},
            "vanilla_transformer.inference.engine_ct2",
            "CT2Translator",
        ),
        "ct2_int8": (
            "vanilla_transformer.export.ct2",
            "export_ct2",
            {"quantization": "int8"},
            "vanilla_transformer.inference.engine_ct2",
            "CT2Translator",
        ),
        "onnx": (
            "vanilla_transformer.export.onnx",
            "export_onnx",
            {},
            "vanilla_transformer.inference.engine_onnx",
            "OnnxTranslator",
        ),
    }
    engines, notes = {}, []
    for name, (export_module, export_name, options, engine_module, engine_name) in plans.items():
        try:
            export = getattr(importlib.import_module(export_module), export_name)
            engine = getattr(importlib.import_module(engine_module), engine_name)
            folder = export(model, root / name, tokenizer=tokenizer, **options)
            engines[name] = engine(folder, num_threads=threads)
        except ImportError as error:
            notes.append(f"{name}: - ({error}; pip install -e '.[export]')")
        except Exception as error:  # report, never abort the PyTorch benchmark
            notes.append(f"{name}: export failed: {type(error).__name__}: {error}")
    return engines, notes


def convert_to_ctranslate2(marian: MarianMTModel) -> tuple[object | None, str]:
    """A CTranslate2 fp32 translator with `marian`'s weights, or (None, why not).

    CTranslate2's converter reads the vocabulary from a tokenizer in the saved folder; a word-level
    `tokenizers` tokenizer whose tokens are `</s>`, `<unk>`, `t2` ... `<pad>` (pad last, as in OPUS-MT) is
    enough and needs no download."""
    try:
        import ctranslate2
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        return None, "ctranslate2 not installed (pip install ctranslate2)"
    tokenizer = word_level_tokenizer(marian.config.vocab_size)
    root = Path(tempfile.mkdtemp(prefix="bench_ct2_"))
    marian.save_pretrained(root / "marian")
    tokenizer.save_pretrained(root / "marian")
    try:
        TransformersConverter(str(root / "marian")).convert(str(root / "ct2"), force=True)
    except Exception as error:  # report, never abort the PyTorch benchmark
        return None, f"CTranslate2 conversion failed: {type(error).__name__}: {error}"
    translator = ctranslate2.Translator(
        str(root / "ct2"),
        device="cpu",
        compute_type="float32",
        intra_threads=torch.get_num_threads(),
        inter_threads=1,
    )
    return translator, f"CTranslate2 {ctranslate2.__version__} fp32, {torch.get_num_threads()} threads"


def word_level_tokenizer(vocab_size: int):
    """A word-level `tokenizers` tokenizer over `ct2_tokens(vocab_size)` (no download needed)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(ct2_tokens(vocab_size))}
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )


def ct2_tokens(vocab_size: int) -> list[str]:
    """Token strings of id 0 .. vocab_size-1 for the CTranslate2 vocabulary (eos 0, unk 1, pad last)."""
    return ["</s>", "<unk>"] + [f"t{i}" for i in range(2, vocab_size - 1)] + ["<pad>"]


# ------------------------------------------------------------------------------------------------------------
# Workloads: each returns a zero-argument callable that runs once (the timed unit)
# ------------------------------------------------------------------------------------------------------------


def source_batch(vocab: int, batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) ids ending with eos (0) and an all-ones mask; ids avoid eos, unk and pad."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab - 1, (batch, length), generator=g)
    ids[:, -1] = 0
    return ids, torch.ones_like(ids)


def train_step(
    model: torch.nn.Module, batch: int, length: int, vocab: int, seed: int = 0, bf16: bool = False
) -> Callable[[], float]:
    """One training step (forward with labels, backward, Adam step) on a (batch, length) -> (batch, length)
    batch, the forward under bf16 autocast when `bf16` (as the trainer's mixed precision runs it); the callable
    returns the loss."""
    src, mask = source_batch(vocab, batch, length, seed)
    labels, _ = source_batch(vocab, batch, length, seed + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)

    def step() -> float:
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=src, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach().item()

    return step


def generate_call(
    model: torch.nn.Module, src: torch.Tensor, mask: torch.Tensor, config: GenerationConfig
) -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        model.eval()
        with torch.inference_mode():
            return model.generate(input_ids=src, attention_mask=mask, generation_config=config)

    return run


def ct2_call(
    translator, src: torch.Tensor, vocab_size: int, num_beams: int, new_tokens: int
) -> Callable[[], list[list[int]]]:
    """Translate the (B, S) ids with CTranslate2; the callable returns the generated ids (eos kept)."""
    tokens = ct2_tokens(vocab_size)
    batch = [[tokens[i] for i in row] for row in src.tolist()]
    index = {t: i for i, t in enumerate(tokens)}

    def run() -> list[list[int]]:
        results = translator.translate_batch(
            batch,
            beam_size=num_beams,
            min_decoding_length=new_tokens,
            max_decoding_length=new_tokens,
            max_batch_size=0,
            num_hypotheses=1,
            return_end_token=True,
        )
        return [[index[t] for t in r.hypotheses[0]] for r in results]

    return run


def engine_call(engine, src: torch.Tensor, num_beams: int, new_tokens: int) -> Callable[[], list[list[int]]]:
    """Decode the (B, S) ids with an exported engine (`generate_ids`); the callable returns the best hypotheses."""
    sources = src.tolist()

    def run() -> list[list[int]]:
        return [
            hyps[0] for hyps in engine.generate_ids(sources, num_beams=num_beams, max_new_tokens=new_tokens)
        ]

    return run


def gemm_probe(n: int = 1024) -> tuple[Callable[[], None], float]:
    """A square fp32 GEMM and its FLOP count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)

    def run() -> None:
        torch.mm(a, b, out=out)

    return run, 2.0 * n**3


def copy_probe(megabytes: int = 128) -> tuple[Callable[[], None], float]:
    """A large memory copy (well beyond the caches) and the bytes it moves (read + write)."""
    numel = megabytes * 2**20 // 4
    a, b = torch.randn(numel), torch.empty(numel)

    def run() -> None:
        b.copy_(a)

    return run, 2.0 * numel * 4


# ------------------------------------------------------------------------------------------------------------
# Interleaved timing
# ------------------------------------------------------------------------------------------------------------


def interleaved(cases: dict[str, Callable], rounds: int, warmup: int = 1, repeat: dict | None = None) -> dict:
    """Seconds per call of each case, `rounds` values each; every round runs every case once, the order
    reversed every other round. `repeat[name]` runs a (fast) case several times per round and averages."""
    repeat = repeat or {}
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            n = repeat.get(name, 1)
            start = time.perf_counter()
            for _ in range(n):
                cases[name]()
            times[name].append((time.perf_counter() - start) / n)
    return times


@dataclass
class Stat:
    """Median and range of a list of values."""

    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def fmt(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f} ({min(self.values):.{digits}f}-{max(self.values):.{digits}f})"


def per_round_ratio(numerator: list[float], denominator: list[float]) -> Stat:
    return Stat([a / b for a, b in zip(numerator, denominator)])


# ------------------------------------------------------------------------------------------------------------
# FLOP and byte models
# ------------------------------------------------------------------------------------------------------------


def training_flops(hp: dict, batch: int, src_len: int, tgt_len: int) -> float:
    """Matmul FLOPs of one training step (3x the forward: forward, input grads, weight grads)."""
    c, f, v = hp["d_model"], hp["ffn"], hp["vocab"]
    s_tok, t_tok = batch * src_len, batch * tgt_len
    encoder = hp["encoder_layers"] * (2 * s_tok * (4 * c * c + 2 * c * f) + 4 * batch * src_len * src_len * c)
    decoder = hp["decoder_layers"] * (
        2 * t_tok * (6 * c * c + 2 * c * f)
        + 2 * s_tok * 2 * c * c
        + 4 * batch * tgt_len * tgt_len * c
        + 4 * batch * tgt_len * src_len * c
    )
    return 3.0 * (encoder + decoder + 2 * t_tok * c * v)


def decode_step_bytes(hp: dict, rows: int, src_len: int, mean_cached: float) -> float:
    """Bytes one cached decode step must read at least: decoder weights, output projection, and the self- and
    cross-attention caches of `rows` = batch x beams hypotheses (fp32)."""
    c, f, v, layers = hp["d_model"], hp["ffn"], hp["vocab"], hp["decoder_layers"]
    weights = layers * (8 * c * c + 2 * c * f) + c * v
    caches = layers * rows * 2 * c * (src_len + mean_cached)
    return 4.0 * (weights + caches)


def peak_step_memory(step: Callable[[], object]) -> int:
    """Peak bytes allocated by PyTorch's CPU allocator during one call, above the level at its start (after a
    warm-up step, so Adam's state already exists): activations, gradients and temporaries."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return peak


# ------------------------------------------------------------------------------------------------------------
# The benchmark
# ------------------------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One measured workload: throughputs (units/s) per contender and per-round ratios against Marian."""

    name: str
    unit: str
    throughput: dict[str, Stat]
    ratio: dict[str, Stat]
    notes: list[str] = field(default_factory=list)


@dataclass
class Settings:
    rounds: int = 5
    new_tokens: int = 32
    src_len: int = 32
    train_batch: int = 32
    budget_tokens: int = 4096
    gen_batches: tuple[int, ...] = (1, 16)
    beams: tuple[int, ...] = (1, 4)
    no_cache: bool = True
    budget_training: bool = True
    peak_memory: bool = True
    bf16: bool = (
        True  # bf16 columns for ours and Marian (training under autocast, generation in bf16 weights)
    )


def quick_settings() -> Settings:
    return Settings(rounds=3, budget_training=False, gen_batches=(1, 16), beams=(1, 4), no_cache=True)


def _ratios(times: dict[str, list[float]], work: float, names: list[str]) -> tuple[dict, dict]:
    throughput = {n: Stat([work / t for t in times[n]]) for n in names}
    ratio = {n: per_round_ratio(times["marian"], times[n]) for n in names if n != "marian"}
    return throughput, ratio


def bench_training(c: Contenders, s: Settings, batch: int, label: str) -> Row:
    hp = c.hp
    gemm, gemm_flops = gemm_probe()
    # copies: the optimizer steps (and the two models' different dropout draws) must not move the weights that
    # the generation workloads compare token for token
    marian, ours = copy.deepcopy(c.marian), copy.deepcopy(c.ours)
    cases = {
        "marian": train_step(marian, batch, s.src_len, hp["vocab"]),
        "ours": train_step(ours, batch, s.src_len, hp["vocab"]),
        "gemm": gemm,
    }
    if s.bf16:
        for name, model in (("marian", c.marian), ("ours", c.ours)):
            cases[f"{name}_bf16"] = train_step(copy.deepcopy(model), batch, s.src_len, hp["vocab"], bf16=True)
    times = interleaved(cases, s.rounds, repeat={"gemm": 5})
    tokens = batch * s.src_len
    throughput, ratio = _ratios(times, tokens, [k for k in cases if k != "gemm"])
    flops = training_flops(hp, batch, s.src_len, s.src_len)
    notes = []
    for name in ("marian", "ours"):
        mfu = Stat([(flops / t) / (gemm_flops / g) for t, g in zip(times[name], times["gemm"])])
        notes.append(f"{name} MFU vs same-round GEMM {mfu.fmt(2)}")
    notes.append(f"GEMM {Stat([gemm_flops / g / 1e9 for g in times['gemm']]).fmt(1)} GFLOP/s")
    row = Row(f"train {label} ({batch}x{s.src_len})", "target tok/s", throughput, ratio, notes)
    for model in (marian, ours):
        model.zero_grad(set_to_none=True)
        model.eval()
    if s.peak_memory:
        peaks = {
            name: peak_step_memory(train_step(model, batch, s.src_len, hp["vocab"]))
            for name, model in (("marian", marian), ("ours", ours))
        }
        row.notes.append(
            "peak step memory MiB: "
            + ", ".join(f"{n} {v / 2**20:.0f}" for n, v in peaks.items())
            + f" (ours/marian {peaks['ours'] / max(peaks['marian'], 1):.2f})"
        )
    return row


def _with_default_gemm(call: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """`call` run with PyTorch's default GEMM for our model's decoding, restoring the current choice after."""

    def run() -> torch.Tensor:
        current = cpu_inference_gemm()
        set_cpu_inference_gemm("default")
        try:
            return call()
        finally:
            set_cpu_inference_gemm(current)

    return run


def bench_generation(
    c: Contenders, s: Settings, batch: int, beams: int, use_cache: bool = True
) -> tuple[Row, bool]:
    """Throughput of generate() (and CTranslate2) for exactly `new_tokens` tokens; returns the row and whether
    Marian and ours produced the same tokens."""
    hp, n = c.hp, s.new_tokens
    src, mask = source_batch(hp["vocab"], batch, s.src_len, seed=7)
    config = generation_config(c.pad, beams, n, use_cache)
    cases = {
        "marian": generate_call(c.marian, src, mask, config),
        "ours": generate_call(c.ours, src, mask, config),
    }
    if c.ct2 is not None and use_cache:
        cases["ct2"] = ct2_call(c.ct2, src, hp["vocab"], beams, n)
    if use_cache:
        cases.update({name: engine_call(engine, src, beams, n) for name, engine in c.engines.items()})
    if use_cache:
        cases.update(
            {f"{name}_bf16": generate_call(model, src, mask, config) for name, model in c.bf16.items()}
        )
    copy_run, copy_bytes = copy_probe()
    cases["copy"] = copy_run
    reference = cases["marian"]()
    notes = []
    if "ours_bf16" in cases:
        agree = {
            name: sum(torch.equal(a, b) for a, b in zip(cases[name](), cases[f"{name}_bf16"]()))
            for name in ("marian", "ours")
        }
        notes.append(
            "bf16 output = the same system's fp32 output for: "
            + ", ".join(f"{name} {n}/{batch}" for name, n in agree.items())
        )
    if cpu_inference_gemm() == "onednn":
        # parity is checked with the GEMM Marian uses (oneDNN's float rounding differs from MKL's, ~1e-7 relative,
        # which can flip near-tied argmaxes of random weights, as CTranslate2's does), and that variant is timed
        # in the same rounds: the A/B of the GEMM choice
        cases["ours_default"] = _with_default_gemm(cases["ours"])
        agree = sum(torch.equal(a, b) for a, b in zip(reference, cases["ours"]()))
        notes.append(f"ours with the oneDNN GEMM: output = Marian's for {agree}/{batch} sentences")
        same = torch.equal(reference, cases["ours_default"]())
    else:
        same = torch.equal(reference, cases["ours"]())
    if "ct2" in cases:
        ref = reference[:, 1:].tolist()
        agree = sum(a == b for a, b in zip(ref, cases["ct2"]()))
        notes.append(f"CTranslate2 output = Marian's for {agree}/{batch} sentences")
    engines = [name for name in ENGINES if name in cases]
    if engines:
        ours_tokens = _with_default_gemm(cases["ours"])()[:, 1:].tolist()  # PyTorch's default GEMM, as Marian
        agreement = [
            f"{name} {sum(a == b for a, b in zip(ours_tokens, cases[name]()))}/{batch}" for name in engines
        ]
        notes.append("sentences equal to ours (generate()): " + ", ".join(agreement))
    times = interleaved(cases, s.rounds, repeat={"copy": 5})
    names = [k for k in cases if k not in ("copy", "ours_default")]
    throughput, ratio = _ratios(times, batch * n, names)
    if "ours_default" in times:
        notes.append(
            f"ours with PyTorch's default GEMM, same rounds: {per_round_ratio(times['marian'], times['ours_default']).fmt()}"
            f" x Marian; oneDNN / default: {per_round_ratio(times['ours_default'], times['ours']).fmt()}"
        )
    if use_cache:
        bandwidth = [copy_bytes / t for t in times["copy"]]
        floor_bytes = decode_step_bytes(hp, batch * beams, s.src_len, n / 2)
        for name in ("marian", "ours"):
            # the whole generate() call divided by the steps: encoder, search and Python overhead included
            distance = Stat([(t / n) / (floor_bytes / bw) for t, bw in zip(times[name], bandwidth)])
            notes.append(f"{name} step time / memory-bandwidth floor {distance.fmt(1)}")
        notes.append(f"copy bandwidth {Stat([b / 1e9 for b in bandwidth]).fmt(1)} GB/s")
    kind = "greedy" if beams == 1 else f"beam {beams}"
    label = f"{kind} b{batch}" + ("" if use_cache else " no-cache")
    return Row(label, "new tok/s", throughput, ratio, notes), same


def cache_speedups(with_cache: Row, without: Row, new_tokens: int) -> str:
    """Measured KV-cache speedup of each model next to the theoretical ones."""
    parts = [
        f"{name} {Stat([a / b for a, b in zip(with_cache.throughput[name].values, without.throughput[name].values)]).fmt(1)}"
        for name in ("marian", "ours")
    ]
    return (
        f"KV-cache speedup ({with_cache.name}): "
        + ", ".join(parts)
        + f"; theory ~T/2 = {new_tokens / 2:.0f} for projections and FFN, ~T/3 = {new_tokens / 3:.0f} for"
        " self-attention scores (cross-attention K/V are recomputed every step without a cache)"
    )


def run_preset(
    c: Contenders, s: Settings, log: Callable[[str], None] = lambda _: None
) -> tuple[list[Row], list[str]]:
    """All workloads of one preset. Returns the rows and a list of summary lines (parity, cache speedups)."""
    rows: list[Row] = []
    summary: list[str] = []
    log(f"[{c.preset}] training {s.train_batch}x{s.src_len}")
    rows.append(bench_training(c, s, s.train_batch, c.preset))
    if s.budget_training:
        batch = max(1, s.budget_tokens // s.src_len)
        log(f"[{c.preset}] training {batch}x{s.src_len}")
        rows.append(bench_training(c, s, batch, c.preset))
    mismatches = []
    for beams in s.beams:
        for batch in s.gen_batches:
            log(f"[{c.preset}] generation beams={beams} batch={batch}")
            row, same = bench_generation(c, s, batch, beams)
            rows.append(row)
            if not same:
                mismatches.append(row.name)
            if s.no_cache and beams == 1:
                log(f"[{c.preset}] generation beams={beams} batch={batch} without cache")
                slow, same = bench_generation(c, s, batch, beams, use_cache=False)
                rows.append(slow)
                if not same:
                    mismatches.append(slow.name)
                summary.append(cache_speedups(row, slow, s.new_tokens))
    summary.extend(precision_summary(rows))
    summary.insert(
        0,
        "ours and Marian generate identical tokens in every workload"
        + (
            " (ours checked with PyTorch's default GEMM, as Marian)"
            if cpu_inference_gemm() == "onednn"
            else ""
        )
        if not mismatches
        else f"OUTPUT MISMATCH ours vs Marian in: {', '.join(mismatches)}",
    )
    return rows, summary


PRECISION_COLUMNS = {  # header -> (numerator, denominator): per-round throughput ratios of the same rounds
    "Marian bf16/fp32": ("marian_bf16", "marian"),
    "ours bf16/fp32": ("ours_bf16", "ours"),
    "ours/Marian bf16": ("ours_bf16", "marian_bf16"),
}


def same_round_ratio(row: Row, numerator: str, denominator: str) -> Stat | None:
    """Per-round throughput ratio of two contenders of a row (None when either did not run)."""
    if numerator not in row.throughput or denominator not in row.throughput:
        return None
    return Stat([a / b for a, b in zip(row.throughput[numerator].values, row.throughput[denominator].values)])


def best_precision(row: Row, system: str) -> str | None:
    """ "bf16" or "fp32": the precision in which ``system`` ("ours", "marian") ran the row's workload faster (median
    of the per-round bf16/fp32 ratios); None without a bf16 measurement."""
    ratio = same_round_ratio(row, f"{system}_bf16", system)
    return None if ratio is None else "bf16" if ratio.median > 1.0 else "fp32"


def best_of_each(row: Row) -> Stat | None:
    """Per-round ratio of ours in its best precision to Marian in its best precision (`best_precision`)."""
    ours, marian = best_precision(row, "ours"), best_precision(row, "marian")
    if ours is None or marian is None:
        return None
    suffix = {"bf16": "_bf16", "fp32": ""}
    return same_round_ratio(row, "ours" + suffix[ours], "marian" + suffix[marian])


def precision_summary(rows: list[Row]) -> list[str]:
    """One line per system: its best precision on this machine for each workload that ran in both."""
    lines = []
    for system, label in (("ours", "ours"), ("marian", "Marian")):
        parts = [
            f"{row.name} {best_precision(row, system)} ({same_round_ratio(row, system + '_bf16', system).median:.2f})"
            for row in rows
            if best_precision(row, system)
        ]
        if parts:
            lines.append(
                f"best precision of {label} on this machine (bf16/fp32 throughput): " + ", ".join(parts)
            )
    return lines


def format_rows(rows: list[Row]) -> list[str]:
    """A text table: throughput medians and, per contender, the median (min-max) of per-round ratios
    (contender throughput / Marian throughput; > 1 is faster than Marian). "CT2" is Marian's weights converted
    by CTranslate2's converter; "ct2_fp32", "ct2_int8" and "onnx" are ours exported (`export_engines`). With bf16
    measurements: each system's bf16/fp32 ratio, ours/Marian both in bf16, and "best": ours in its best precision /
    Marian in its best precision (`best_precision`), e.g. "bf16/fp32 1.30"."""
    engines = [name for name in ENGINES if any(name in row.ratio for row in rows)]
    precisions = any("ours_bf16" in row.throughput for row in rows)
    header = f"{'workload':<28}{'unit':<14}{'Marian median':>14}{'ours/Marian':>22}{'CT2/Marian':>22}{'ours/CT2':>10}"
    header += "".join(f"{name + '/Marian':>22}" for name in engines)
    if precisions:
        header += "".join(f"{name:>22}" for name in PRECISION_COLUMNS) + f"{'best ours/Marian':>26}"
    lines = [header]
    for row in rows:
        ours, ct2 = row.ratio.get("ours"), row.ratio.get("ct2")
        ours_vs_ct2 = ""
        if ct2 is not None:
            ours_vs_ct2 = f"{statistics.median(a / b for a, b in zip(ours.values, ct2.values)):.2f}"
        line = (
            f"{row.name:<28}{row.unit:<14}{row.throughput['marian'].median:>14.1f}"
            f"{ours.fmt():>22}{ct2.fmt() if ct2 else '-':>22}{ours_vs_ct2:>10}"
            + "".join(f"{row.ratio[name].fmt() if name in row.ratio else '-':>22}" for name in engines)
        )
        if precisions:
            for numerator, denominator in PRECISION_COLUMNS.values():
                ratio = same_round_ratio(row, numerator, denominator)
                line += f"{ratio.fmt() if ratio else '-':>22}"
            best = best_of_each(row)
            line += (
                f"{best_precision(row, 'ours')}/{best_precision(row, 'marian')} {best.median:.2f}".rjust(26)
                if best
                else f"{'-':>26}"
            )
        lines.append(line)
        lines.extend(f"{'':<4}{note}" for note in row.notes)
    return lines
