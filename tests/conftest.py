"""Shared fixtures: tiny configs and models that build in milliseconds on CPU, a tiny exported model folder,
and short `tiny`-preset training runs with their BPE tokenizers."""

from __future__ import annotations

import importlib
import lzma
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The test session's process-wide settings, made here once and put back when the session ends: tiny test models
# run fastest on one thread, and tests that start subprocesses (accelerate launch, CLIs) would otherwise
# oversubscribe the cores with OpenMP threads; no test reaches the Hub; training runs in fp32 unless a test chooses
# (the automatic precision would depend on the machine's bf16 speed). Set before torch is imported.
SESSION_ENV = {
    "OMP_NUM_THREADS": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "ACCELERATE_MIXED_PRECISION": "no",
}
_ENV_BEFORE_SESSION = {name: os.environ.get(name) for name in SESSION_ENV}
for _name, _value in SESSION_ENV.items():
    os.environ.setdefault(_name, _value)

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_THREADS_BEFORE_SESSION = torch.get_num_threads()
torch.set_num_threads(1)

# Property tests draw the same examples on every run (no flaky CI) and have no per-example deadline (2 shared
# cores make timings meaningless); no example database is written into the checkout.
settings.register_profile(
    "ci", derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from vanilla_transformer.modeling import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration  # noqa: E402

# Packages that set environment variables when first imported, which some tests import indirectly: imported once
# here, before any test's process-state check. MarianTokenizer imports sacremoses (its optional punctuation
# normaliser), which imports joblib (KMP_INIT_AT_FORK); scikit-learn (installed for the fairseq tests, and imported
# where installed by a dataset loading path of tests/corpus) sets KMP_DUPLICATE_LIB_OK.
for _name in ("sacremoses", "sklearn"):
    try:
        importlib.import_module(_name)
    except ImportError:
        pass

if TYPE_CHECKING:
    from vanilla_transformer.training import TrainConfig


def pytest_sessionfinish(session, exitstatus) -> None:
    """Put back the process-wide settings this file made for the session."""
    torch.set_num_threads(_THREADS_BEFORE_SESSION)
    for name, value in _ENV_BEFORE_SESSION.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# the test files that take longest (a minute or more of one CPU each), in that order: they start first, so that with
# one worker per core (`-n auto --dist loadfile`) no long file starts when the other worker has nothing left to run
LONGEST_FILES = (
    "inference/test_corpus_translation.py",
    "export/test_export_onnx.py",
    "training/test_training_distributed.py",
    "package/test_static.py",
    "serving/test_ray_serve.py",
    "package/test_dependencies.py",
    "export/test_hub.py",
    "commands/test_translate_cli.py",
    "study/test_data_study.py",
    "reliability/test_fault_tolerance.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    """The files of `LONGEST_FILES` first (each file's tests in their order, the other files in theirs). Tests marked
    ``gpu`` are skipped without a CUDA device, unless the GPU check's dry run asks for their bodies on the CPU
    (``studies.gpu.DEVICE_ENV`` = cpu)."""
    from studies.gpu import DEVICE_ENV

    tests = Path(__file__).parent

    def rank(item) -> int:
        try:
            name = Path(str(item.fspath)).relative_to(tests).as_posix()
        except ValueError:
            return len(LONGEST_FILES)
        return LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)

    items.sort(key=rank)
    if torch.cuda.is_available() or os.environ.get(DEVICE_ENV) == "cpu":
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def _process_state() -> dict:
    # PYTEST_CURRENT_TEST is pytest's own, rewritten in every phase of a test
    environment = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return {
        "torch threads": torch.get_num_threads(),
        "torch default dtype": torch.get_default_dtype(),
        "environment": environment,
    }


SESSION_STATE = _process_state()  # the thread count and default dtype every test starts and ends with


@pytest.fixture(autouse=True)
def process_state_is_restored():
    """Every test leaves the process as it found it, so that no test depends on the order of the others: the
    session's thread count and default dtype (also after module- and session-scoped fixtures, which run before
    this check) and the environment the test started with. A test (or its fixtures) that does not is an error
    naming what changed, and the state is put back."""
    expected = {**SESSION_STATE, "environment": _process_state()["environment"]}
    yield
    after = _process_state()
    if after == expected:
        return
    torch.set_num_threads(expected["torch threads"])
    torch.set_default_dtype(expected["torch default dtype"])
    for key in set(os.environ) - set(expected["environment"]) - {"PYTEST_CURRENT_TEST"}:
        del os.environ[key]
    os.environ.update(expected["environment"])
    changed = [
        f"{name} {expected[name]} -> {after[name]}"
        for name in ("torch threads", "torch default dtype")
        if expected[name] != after[name]
    ]
    env_before, env_after = expected["environment"], after["environment"]
    changed += [
        f"${key}"
        for key in sorted(set(env_before) | set(env_after))
        if env_before.get(key) != env_after.get(key)
    ]
    pytest.fail(
        f"the test changed process-wide state without restoring it: {', '.join(changed)} (use monkeypatch "
        "or a fixture that restores it)"
    )


def tiny_family_config(
    config_class: type, side: str, max_position_embeddings: int, attn: str = "sdpa", **overrides
):
    """A small config of a one-stack family, `config_class` with the `side` ("encoder" or "decoder") field names:
    2 layers of width 32, 4 heads, feed-forward width 48, no dropout, `attn` as the attention implementation;
    `overrides` (which include the vocabulary size) replace any of them."""
    values = {
        "d_model": 32,
        f"{side}_layers": 2,
        f"{side}_attention_heads": 4,
        f"{side}_ffn_dim": 48,
        "max_position_embeddings": max_position_embeddings,
        "dropout": 0.0,
    }
    values.update(overrides)
    config = config_class(**values)
    config._attn_implementation = attn
    return config


def tiny_config(**overrides) -> VanillaTransformerConfig:
    """A small encoder-decoder config (the stacks differ in depth, heads and width, so that no field is read for
    the other stack unnoticed); `overrides` replace any of its values."""
    values: dict[str, Any] = dict(vocab_size=97, d_model=32, max_position_embeddings=64, dropout=0.0)
    values.update(encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=48)
    values.update(decoder_layers=3, decoder_attention_heads=2, decoder_ffn_dim=40)
    values.update(overrides)
    return VanillaTransformerConfig(**values)


def tiny_model(seed: int = 0, attn: str = "sdpa", **overrides) -> VanillaTransformerForConditionalGeneration:
    torch.manual_seed(seed)
    config = tiny_config(**overrides)
    config._attn_implementation = attn
    model = VanillaTransformerForConditionalGeneration(config).eval()
    perturb_bias_and_layer_norms(model, logits_bias_std=0.5)
    return model


def perturb_bias_and_layer_norms(model: torch.nn.Module, logits_bias_std: float) -> None:
    """Draw a non-zero output bias (`final_logits_bias`, where the model has one) and non-trivial LayerNorm
    weights and biases, in place, so that tests exercise every parameter (fresh ones are zeros and ones)."""
    with torch.no_grad():
        final_logits_bias = getattr(model, "final_logits_bias", None)
        if final_logits_bias is not None:
            final_logits_bias.normal_(0, logits_bias_std)
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.1)
                module.bias.normal_(0.0, 0.1)


def perturb_biases_and_norms(model: torch.nn.Module, std: float = 0.1) -> None:
    """Draw every bias from N(0, std) and every LayerNorm weight from N(1, std), in place, so that a parity test
    covers every parameter of a reference model (fresh ones are zeros and ones)."""
    with torch.no_grad():
        for module in model.modules():
            for name, parameter in module.named_parameters(recurse=False):
                if name == "bias" or (name == "weight" and isinstance(module, torch.nn.LayerNorm)):
                    parameter.normal_(1.0 if name == "weight" else 0.0, std)


def random_batch(vocab: int, batch: int, length: int, seed: int = 0, pad_id: int = 0, min_id: int = 4):
    """(ids, mask) with right padding of random lengths (every row keeps at least one token)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(min_id, vocab, (batch, length), generator=g)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    lengths[0] = length
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return ids.masked_fill(mask == 0, pad_id), mask


def step_by_step_logits(model, src, mask, tgt, cache=None) -> tuple[torch.Tensor, object]:
    """Encode the source once, then feed the target one token per call through `cache` (None: the model makes
    one): the (B, T, V) logits of every step and the cache after the last one."""
    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=src, attention_mask=mask)
        steps = []
        for t in range(tgt.shape[1]):
            out = model(
                encoder_outputs=encoder_outputs,
                attention_mask=mask,
                decoder_input_ids=tgt[:, t : t + 1],
                cache=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            steps.append(out.logits)
    return torch.cat(steps, dim=1), cache


@pytest.fixture
def model():
    return tiny_model()


# ---- a tiny exported model folder (tokenizer included), shared by the CLI, bad-input and Hub tests ----------
MAX_POSITIONS = 24


def tiny_tokenizer(
    num_lines: int = 300, vocab_size: int = 400, texts: list[str] | None = None
) -> PreTrainedTokenizerFast:
    """Character BPE over both sides of the first `num_lines` Bible verses (or over `texts`); <pad>=0 <unk>=1
    <s>=2 </s>=3."""
    if texts is None:
        with lzma.open(ROOT / "data" / "bible.zh-en.tsv.xz", "rt", encoding="utf-8") as f:
            texts = [text for _, line in zip(range(num_lines), f) for text in line.rstrip("\n").split("\t")]
    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<unk>", "<s>", "</s>"], show_progress=False
    )
    backend.train_from_iterator(texts, trainer)
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_input_names=["input_ids", "attention_mask"],
    )


def han_characters_per_token(tokenizer) -> list[int]:
    """How many Han characters each vocabulary entry of ``tokenizer`` spells, for the entries with at least one
    (1 everywhere: a tokenizer trained with ``han_characters``)."""
    counts = [sum("\u4e00" <= ch <= "\u9fff" for ch in token) for token in tokenizer.get_vocab()]
    return [c for c in counts if c]


def export_tiny_model(folder: Path, tokenizer: PreTrainedTokenizerFast | None = None, seed: int = 0) -> Path:
    """A tiny random model (drawn with `seed`) + tokenizer (default `tiny_tokenizer()`) written with
    save_with_remote_code (greedy by default, short outputs)."""
    from vanilla_transformer.modeling import save_with_remote_code

    tokenizer = tiny_tokenizer() if tokenizer is None else tokenizer
    model = tiny_model(seed, vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    model.generation_config.max_new_tokens = 6
    return save_with_remote_code(model, folder, tokenizer)


def export_scoring_model(folder: Path, eos_token_id: int = 3) -> Path:
    """A tiny exported model (`export_tiny_model`'s tokenizer) whose output bias is pushed towards </s> so that most
    hypotheses finish within 12 new tokens, with a generation config that alters no logits (generate() then
    decodes from the distribution forced decoding scores with, `inference.forced_decoding`)."""
    from transformers import AutoTokenizer

    from vanilla_transformer.modeling import save_with_remote_code

    path = export_tiny_model(folder)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=MAX_POSITIONS)
    with torch.no_grad():
        model.final_logits_bias[eos_token_id] += 5.0
    model.generation_config.max_new_tokens = 12
    model.generation_config.suppress_tokens = None
    return save_with_remote_code(model, path, tokenizer)


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """A tiny exported model folder (see export_tiny_model), one per test module."""
    return export_tiny_model(tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def loaded(export):
    """(model, tokenizer) loaded from the `export` folder the way translate.py loads them."""
    from vanilla_transformer.inference import load_model_and_tokenizer

    return load_model_and_tokenizer(str(export))


# ---- short training runs on the first 300 lines of the shipped corpus --------------------------------------
SMALL_RUN_LINES = 300


def small_run_options(**overrides) -> dict:
    """The options of a short `tiny`-preset run on the first 300 lines of the shipped corpus (20 validation
    and 6 test pairs, 512-token batches, no time limit, one thread, no allocator tuning (mallopt cannot be undone
    in the test process), no validation BLEU, TensorBoard or export), with `overrides` on top. There is no default
    stopping rule: pass max_steps."""
    from vanilla_transformer.corpus import DEFAULT_DATA

    values = {
        "data": str(DEFAULT_DATA),
        "max_lines": SMALL_RUN_LINES,
        "valid_size": 20,
        "test_size": 6,
        "preset": "tiny",
        "max_tokens": 512,
        "max_minutes": None,
        "eval_every": 100,
        "bleu_samples": 0,
        "report_to": "none",
        "num_threads": 1,
        "tune_cpu_allocator": False,
        "export": False,
    }
    values.update(overrides)
    return values


def small_run(out: str | Path, **overrides) -> TrainConfig:
    """A `TrainConfig` for the run of `small_run_options(**overrides)` that writes to `out`."""
    from vanilla_transformer.training import TrainConfig

    return TrainConfig(**small_run_options(output_dir=str(out), **overrides))


@pytest.fixture(scope="session")
def bpe_tokenizer_dir(tmp_path_factory) -> Callable[[int], str]:
    """`bpe_tokenizer_dir(vocab_size)`: the folder of a joint BPE tokenizer trained on both sides of the first
    300 lines of the shipped corpus, trained once per vocabulary size for the whole test run (read-only)."""
    from vanilla_transformer.corpus import DEFAULT_DATA, load_parallel_corpus
    from vanilla_transformer.tokenizer.bpe import train_bpe_tokenizer

    folders: dict[int, str] = {}

    def build(vocab_size: int) -> str:
        if vocab_size not in folders:
            ds, _ = load_parallel_corpus(DEFAULT_DATA, max_lines=SMALL_RUN_LINES)
            tokenizer = train_bpe_tokenizer(list(ds["source"]) + list(ds["target"]), vocab_size=vocab_size)
            folder = tmp_path_factory.mktemp(f"bpe{vocab_size}")
            tokenizer.save_pretrained(folder)
            folders[vocab_size] = str(folder)
        return folders[vocab_size]

    return build


@pytest.fixture(scope="session")
def tokenizer_dir(bpe_tokenizer_dir) -> str:
    """The 1200-token BPE tokenizer folder that the short runs train with."""
    return bpe_tokenizer_dir(1200)


# ---- the serving tests (tests/serving): a tiny folder, a server over it, sources that fit its positions ------
@pytest.fixture(scope="session")
def served_folder(tmp_path_factory) -> Path:
    """A tiny exported model folder (see export_tiny_model) for the serving tests, one per test run."""
    return export_tiny_model(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="session")
def served_sources(served_folder) -> list[str]:
    """Twenty Chinese clauses of the shipped corpus (verses cut at their commas and full stops) that fit the tiny
    model's 24 positions."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(served_folder)
    with lzma.open(ROOT / "data" / "bible.zh-en.tsv.xz", "rt", encoding="utf-8") as f:
        lines = [line.split("\t")[0] for _, line in zip(range(3000), f)]
    fitting = []
    for line in lines:
        for part in line.replace("。", "。\n").replace("，", "，\n").splitlines():
            if part.strip() and len(tokenizer(part)["input_ids"]) <= MAX_POSITIONS and part not in fitting:
                fitting.append(part)
    assert len(fitting) >= 20
    return fitting[:20]


@pytest.fixture(scope="module")
def tiny_server(served_folder):
    """The URL of a torch server over `served_folder` on a loopback port, in a thread of the test process
    (batching on, 20 ms wait), one per test module."""
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app(served_folder, max_wait_ms=20)) as running:
        yield running.url
