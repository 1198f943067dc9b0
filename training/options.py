"""The options of a training run (the flags of `vanilla-transformer train`, same names) and their checks.

`TrainConfig` is what the user asked for; nothing here decides a hyperparameter. Options left unset (None)
are filled from the preset's recipe once, by `training.recipe.resolve_recipe`. The data and split options are
`corpus.DataOptions`' (shared with evaluation and the benchmarks).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vanilla_transformer.corpus import DataOptions
from vanilla_transformer.export.ct2 import QUANTIZATIONS
from vanilla_transformer.inference.engines import ENGINE_NAMES
from vanilla_transformer.modeling import DEFAULT_LENGTH_PENALTY
from vanilla_transformer.tokenizer import DEFAULT_VOCAB_SIZE
from vanilla_transformer.tokenizer.loading import load_tokenizer
from vanilla_transformer.tokenizer.prepare import (
    given_tokenizer_problem,
    has_tokenizer,
    tokenizer_fit_problem,
)

from .cli import float_list
from .lora import rank_problem
from .objectives import OBJECTIVES, get_objective, objective_names
from .objectives.causal_lm import CAUSAL_LM_DATA
from .presets import FINE_TUNING, preset_names, recipe_defaults
from .schedule import LR_SCHEDULES

MIXED_PRECISIONS = ("no", "bf16", "fp16")
TRACKERS = ("tensorboard", "wandb", "mlflow", "comet_ml", "aim", "clearml", "dvclive", "swanlab", "trackio")
# --report_to's default: TensorBoard where it is installed (no extra installs it), else no tracker
DEFAULT_REPORT_TO = "tensorboard" if importlib.util.find_spec("tensorboard") is not None else "none"


def report_to_trackers(report_to: str) -> list[str]:
    """The accelerate trackers ``--report_to`` names (module docstring of accelerate.tracking): [] for 'none',
    every installed one for 'all'. Raises `ValueError` for an unknown name or a tracker that is not installed."""
    from accelerate.tracking import get_available_trackers

    names = [n.strip().lower() for n in report_to.split(",") if n.strip()]
    installed = [str(getattr(t, "value", t)) for t in get_available_trackers()]
    if names in ([], ["none"]):
        return []
    if names == ["all"]:
        return installed
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ValueError(
            f"--report_to {report_to!r}: unknown tracker(s) {unknown}; choose among {', '.join(TRACKERS)}, "
            "'all' or 'none'."
        )
    missing = [n for n in names if n not in installed]
    if missing:
        raise ValueError(
            f"--report_to {report_to!r}: {', '.join(missing)} is not installed here; pip install "
            f"{' '.join(missing)}, or pass --report_to none."
        )
    return list(dict.fromkeys(names))


def _f(default: Any, help: str, **kw) -> Any:
    return field(default=default, metadata={"help": help, **kw})


def _from_preset(help: str, **kw) -> Any:
    """An option that None leaves to the preset's recipe (`training.recipe.resolve_recipe` fills it in)."""
    return _f(None, help, **kw)


def _override(help: str, **kw) -> Any:
    """A model override: a `TrainConfig` field that `model_overrides` passes to the model's configuration."""
    return _f(None, help, model_override=True, **kw)


@dataclass
class TrainConfig(DataOptions):
    """Every option of a training run (the command-line flags of vanilla-transformer train, same names)."""

    max_length: int = _f(
        256, "drop (and count) training/validation pairs with more tokens than this on a side", ge=2
    )
    mix_data: str | None = _f(
        None,
        "general-domain pairs (read and split as --data is, with the same column and split options) mixed into the "
        "training pairs against forgetting, a seeded sample of them making up --mix_ratio of the training split; "
        "the run reports BLEU on --data's test split and on this corpus's test split, before (the --init_from "
        "model) and after, in the log and the model card",
        path="file or folder",
    )
    mix_ratio: float = _f(
        0.5, "with --mix_data: the fraction of the training pairs that are general-domain pairs", gt=0, lt=1
    )
    distill_from: str | None = _f(
        None,
        "sequence-level knowledge distillation (Kim and Rush, 2016): this teacher (an exported model folder, or "
        "its CTranslate2 / ONNX export with --distill_engine) translates the training split's sources with its own "
        "decoding (beam search) and the run trains on those translations; validation and test keep their "
        "references. The translations are kept in OUTPUT_DIR/checkpoints/distill/ (a killed run resumes them; --resume "
        "reuses them); a source the teacher cannot translate (empty, over its length limit) keeps its reference",
        path="folder",
    )
    distill_engine: str = _f(
        "torch",
        "the engine --distill_from runs on: torch (a model folder), ct2 or onnx (a vanilla-transformer export "
        "folder; ct2 is the fastest on a CPU)",
        choices=ENGINE_NAMES,
    )
    distill_beams: int | None = _f(
        None, "with --distill_from: the teacher's beams (default: its generation config's)", ge=1
    )
    # tokenizer
    tokenizer: str | None = _f(
        None,
        "tokenizer folder; default: train a joint BPE on the training split (or reuse it)",
        path="file or folder",
    )
    vocab_size: int = _f(
        DEFAULT_VOCAB_SIZE,
        "joint BPE vocabulary size when the tokenizer is trained here (not with --tokenizer)",
    )
    han_characters: bool = _f(
        False,
        "when the tokenizer is trained here: every Han (Chinese) character is a piece of its own, so BPE learns "
        "no multi-character Chinese tokens and spends the vocabulary on the other language (not with --tokenizer)",
    )
    bpe_dropout: float = _f(
        0.0,
        "BPE-dropout (Provilkov et al., 2020): every epoch re-segments the training pairs (both sides), each merge "
        "dropped with this probability (the paper's 0.1); validation, test and the exported tokenizer stay "
        "deterministic; 0 = off; --objective translation only",
        ge=0,
        lt=1,
    )
    # model
    preset: str = _f("small", "architecture preset", choices=tuple(preset_names()))
    objective: str = _f(
        "translation",
        "what the run trains: "
        + "; ".join(f"'{name}' ({get_objective(name).help})" for name in objective_names()),
        # the registry itself: an objective registered later is a choice too
        choices=OBJECTIVES,
    )
    init_from: str | None = _f(
        None,
        "start from the weights of this exported model folder (e.g. a span_corruption run's OUTPUT_DIR): its "
        "architecture and, unless --tokenizer is given, its tokenizer; a new optimizer and schedule",
        path="folder",
    )
    lora: int | None = _f(
        None,
        "with --init_from: train rank-R LoRA adapters (peft) on the attention projections instead of every weight "
        "(the rest frozen; the trainable parameters are logged); the exported model has them merged into its "
        "weights and loads without peft; needs pip install '.[finetune]'",
        ge=1,
    )
    lora_ffn: bool = _f(False, "with --lora: adapters on the feed-forward layers (fc1, fc2) too")
    causal_lm_data: str = _f(
        "pairs",
        "causal_lm sequences: 'pairs' ('source </s> target </s>', loss on the target only: supervised fine-tuning "
        "of translation) or 'text' (every source and every target text alone, loss on every token)",
        choices=CAUSAL_LM_DATA,
    )
    mlm_probability: float = _f(
        0.15,
        "masked_lm: fraction of tokens chosen (80% of them masked, 10% random, 10% kept; BERT's)",
        gt=0,
        lt=1,
    )
    noise_density: float = _f(
        0.15, "span_corruption: fraction of each text's tokens replaced (T5's 0.15)", gt=0, lt=1
    )
    mean_noise_span_length: float = _f(
        3.0, "span_corruption: mean length of the replaced spans (T5's 3)", ge=1
    )
    dropout: float | None = _from_preset(
        "override the preset's dropout (default: the preset's; small: 0.0, or 0.1 when the budget allows at least "
        "12 epochs, where no dropout overfits: --max_minutes is converted with a measured batch time)",
        ge=0,
        lt=1,
    )
    # model overrides: each replaces the preset's model field of the same name in a new model (None: the preset's)
    init_std: float | None = _override(
        "std of the normal initialisation of the embeddings (default: the preset's, else d_model**-0.5)", gt=0
    )
    linear_init_std: float | None = _override(
        "std of the normal initialisation of linear layers (default: the preset's, else Xavier-uniform)", gt=0
    )
    normalize_before: bool | None = _override(
        "pre-LN: LayerNorm before each sublayer, x + Sublayer(LN(x)), and after each stack (default: the preset's; "
        "every preset is the paper's post-LN, LN(x + Sublayer(x)))"
    )
    encoder_layers: int | None = _override("encoder layers (default: the preset's; small: 3)", ge=1)
    decoder_layers: int | None = _override("decoder layers (default: the preset's; small: 3)", ge=1)
    alignment_layer: int | None = _override(
        "the decoder layer whose cross-attention gives word alignments (translate --alignments) and is trained by "
        "--alignment_data (negative counts from the last; default: the penultimate)"
    )
    alignment_heads: int | None = _override(
        "how many heads of --alignment_layer, from the first, are averaged into the alignment attention (0: all; "
        "default: 1 with --alignment_data, as in Garg et al. 2019, else all)",
        ge=0,
    )
    alignment_data: str | None = _f(
        None,
        "guided alignment (Garg et al. 2019): a file with one Pharaoh word alignment ('0-0 1-2 ...', source word - "
        "target word; words are space-separated, each Chinese character one word) per pair of --data's training "
        "split as read (held-out pairs' lines are unused); the alignment head learns them through a cross-entropy "
        "loss weighted by --alignment_loss_weight; --objective translation, not with --bpe_dropout, --streaming "
        "or --mix_data",
        path="file",
    )
    alignment_loss_weight: float = _f(
        0.05,
        "with --alignment_data: the weight of the guided-alignment loss (fairseq's alignment_lambda)",
        ge=0,
    )
    # batching and optimisation
    max_tokens: int | None = _from_preset(
        "token budget per batch (batch size x longest side); default: the preset's", ge=1
    )
    skip_too_long: bool = _f(False, "skip (and count) pairs longer than --max_tokens instead of failing")
    grad_accum: int = _f(1, "batches accumulated per optimizer update (per process)", ge=1)
    lr_schedule: str | None = _from_preset(
        "learning-rate schedule: 'paper' (the paper's warm-up from zero, then inverse square root, scaled by "
        "--lr_scale), 'constant' (a linear warm-up to --learning_rate, then constant) or 'inverse_sqrt' (a linear "
        "warm-up to --learning_rate, then lr * sqrt(warmup / step)); default: 'paper' for a new model, 'constant' "
        "with --init_from (fine-tuning)",
        choices=LR_SCHEDULES,
    )
    learning_rate: float | None = _from_preset(
        "peak learning rate of the 'constant' and 'inverse_sqrt' schedules; default: "
        f"{FINE_TUNING['learning_rate']}",
        gt=0,
    )
    lr_scale: float | None = _from_preset(
        "scale of the paper's learning-rate formula (--lr_schedule paper); default: the preset's", gt=0
    )
    warmup_steps: int | None = _from_preset(
        f"warm-up updates of the schedule; default: the preset's, {FINE_TUNING['warmup_steps']} with --init_from",
        ge=1,
    )
    label_smoothing: float = _f(0.1, "label smoothing epsilon", ge=0, lt=1)
    weight_decay: float = _f(0.0, "AdamW weight decay (0 = Adam, as in the paper)", ge=0)
    clip_norm: float | None = _from_preset(
        "clip the gradient norm to this value (0 = off); default: the preset's", ge=0
    )
    cooldown: float | None = _from_preset(
        "fraction of the budget at its end over which the learning rate decays linearly to 0 (the budget that stops "
        "the run first: --max_minutes of this invocation, --max_steps or --max_epochs); 0 = off; default: the "
        "preset's",
        ge=0,
        lt=1,
    )
    # budget
    max_steps: int | None = _f(
        None,
        "stop after this many optimizer updates (in total, across resumes); the default --max_minutes 25 "
        "still applies: add --max_minutes 0 for a budget in updates only",
        ge=1,
    )
    max_epochs: int | None = _f(None, "stop after this many epochs", ge=1)
    max_minutes: float | None = _f(
        25.0, "wall-clock budget of the training loop of this invocation (0/None = none)", ge=0
    )
    seed: int = _f(1, "seed of model initialisation, dropout and batch order")
    # hardware
    mixed_precision: str | None = _f(
        None,
        "no, bf16 (autocast; GPU or CPU) or fp16 (autocast and a gradient scaler; GPU only); default: accelerate's "
        "configuration (`accelerate launch --mixed_precision`, `accelerate config`), else automatic: bf16 on GPUs "
        "with bf16 and on CPUs with AMX-BF16 or AVX512-BF16 where a short timing finds it faster, fp16 on GPUs "
        "without bf16, no elsewhere (the choice and its reason are logged and saved in the recipe)",
        choices=MIXED_PRECISIONS,
    )
    cpu: bool = _f(False, "force the CPU even if a GPU is present")
    num_threads: int | None = _f(None, "torch CPU threads per process (default: available cores / processes)")
    tune_cpu_allocator: bool = _f(
        True,
        "on CPU, keep freed memory mapped for reuse (glibc mallopt; ~13% faster small-model steps; "
        "training.allocator)",
    )
    # logging, validation, checkpoints
    output_dir: str = _f(
        "outputs/default", "where checkpoints, logs and the final model go", path="output folder"
    )
    cache_dir: str | None = _f(None, "tokenisation cache (default: OUTPUT_DIR/cache)", path="output folder")
    log_every: int = _f(10, "log training loss every N updates", ge=1)
    eval_every: int = _f(500, "validate and save a checkpoint every N updates (and at the end)", ge=1)
    keep_last: int = _f(3, "keep the newest K checkpoints (plus the best)", ge=1)
    average_last: int | None = _from_preset(
        "export the average of the weights at the last N snapshots (one every --average_every updates, the final "
        "weights included) when it lowers the validation loss; 0 or 1 = off; default: the preset's",
        ge=0,
    )
    average_every: int | None = _from_preset(
        "updates between the snapshots that are averaged; default: the preset's", ge=1
    )
    export_at_minutes: str = _f(
        "",
        "comma-separated training minutes at which to also export the model as if the run stopped there (averaging "
        "included) to OUTPUT_DIR/minute-M/, e.g. '25,60' in a 120-minute run; training is not changed (the run's "
        "dropout is the run's: the small preset's long-budget dropout applies to the whole run)",
        separator=",",
    )
    bleu_samples: int = _f(
        200, "validation pairs translated (greedy) for the periodic BLEU/chrF; 0 = loss only"
    )
    valid_beams: int = _f(1, "beams for the periodic validation BLEU", ge=1)
    test_beams: int | None = _f(
        None,
        "beams for the final test evaluation; default: the model's generation config (the paper's 4)",
        ge=1,
    )
    length_penalty: float | None = _f(
        None,
        "length penalty alpha (transformers': log-prob / length**alpha) of the test translation and of the exported "
        f"generation config; default {DEFAULT_LENGTH_PENALTY} (the average log-probability per token)",
    )
    eval_batch_size: int = _f(64, "sentences per generate() batch", ge=1)
    sacrebleu_tokenize: str | None = _f(
        None, "sacreBLEU tokeniser (default: 'zh' for Chinese targets, else '13a')"
    )
    report_to: str = _f(
        DEFAULT_REPORT_TO,
        "experiment trackers, through accelerate: comma-separated names among "
        + ", ".join(TRACKERS)
        + " (local ones write to OUTPUT_DIR/runs), 'all' (every installed one) or 'none'; default tensorboard where "
        "it is installed (pip install tensorboard), else none",
        separator=",",
    )
    num_samples: int = _f(3, "sample test translations returned (and printed by the script)")
    sample_sentences: str | None = _f(
        None,
        "extra source sentences to translate at the end, separated by '|' (default for zh: 我爱机器翻译)",
        separator="|",
    )
    model_card: str | None = _f(
        None, "model card template (default: the repository's model_card.md)", path="file"
    )
    resume: bool = _f(False, "continue from OUTPUT_DIR/checkpoints/latest")
    allow_changed_data: bool = _f(
        False,
        "with --resume, when the data's content differs from the checkpoint's (refused without this flag): keep the "
        "weights, optimizer, schedule and step, split the new data again (validation and test may differ), start its "
        "batch order over at epoch 0 and forget the best validation loss so far (measured on the old split)",
    )
    overwrite: bool = _f(False, "start from scratch even if OUTPUT_DIR has checkpoints (they are deleted)")
    export: bool = _f(True, "evaluate on the test split and export the final model to OUTPUT_DIR")
    export_ct2: str | None = _f(
        None,
        "also export the final model for CTranslate2 to OUTPUT_DIR/ct2: 'float32' or a quantization ("
        + ", ".join(QUANTIZATIONS)
        + "); needs pip install '.[export]'",
        choices=("float32", *QUANTIZATIONS),
    )


# `--help` groups: each title applies from the option it names to the next named one (in field order)
TrainConfig.help_groups = {
    "max_length": "training data options",
    "tokenizer": "tokenizer options",
    "preset": "model options",
    "max_tokens": "batching and optimisation options",
    "max_steps": "budget options",
    "mixed_precision": "hardware options",
    "output_dir": "output, logging and checkpoint options",
    "bleu_samples": "validation and test options",
    "resume": "run folder options",
}


def train_option(name: str) -> Any:
    """A dataclass field with the default and help of `TrainConfig`'s option ``name``, for another command's
    option of the same meaning (the quality benchmark's scoring options)."""
    option = next(f for f in fields(TrainConfig) if f.name == name)
    return field(default=option.default, metadata=option.metadata)


# the model overrides, in field order (`_override`)
MODEL_OVERRIDES = tuple(f.name for f in fields(TrainConfig) if f.metadata.get("model_override"))


def model_overrides(cfg: TrainConfig) -> dict:
    """The model overrides ``cfg`` sets (not None), by name: what a new model's configuration replaces."""
    values = {name: getattr(cfg, name) for name in MODEL_OVERRIDES if getattr(cfg, name) is not None}
    if cfg.alignment_data is not None and cfg.init_from is None:
        # guided alignment trains one head (Garg et al. 2019) unless --alignment_heads says otherwise
        values.setdefault("alignment_heads", 1)
    return values


# options that must not change when a run is resumed
RESUME_KEYS = (
    "data",
    "max_lines",
    "valid_size",
    "test_size",
    "split_by",
    "split_groups",
    "split_block_size",
    "split_seed",
    "max_length",
    "alignment_data",
    "alignment_loss_weight",
    "mix_data",
    "mix_ratio",
    "distill_from",
    "distill_engine",
    "distill_beams",
    "preset",
    "dropout",
    *MODEL_OVERRIDES,
    "seed",
    "grad_accum",
    "label_smoothing",
    "source_column",
    "target_column",
    "source_lang",
    "target_lang",
    "has_header",
    "hub_config",
    "train_split",
    "valid_split",
    "test_split",
    "on_bad_line",
    "max_tokens",
    "objective",
    "init_from",
    "lora",
    "lora_ffn",
    "causal_lm_data",
    "mlm_probability",
    "noise_density",
    "mean_noise_span_length",
    "bpe_dropout",
    "vocab_size",
    "han_characters",
)


def given_tokenizer(cfg: TrainConfig) -> str | None:
    """The tokenizer folder the run uses as it is: ``--tokenizer``, else ``--init_from``'s when that folder holds a
    tokenizer of any kind `AutoTokenizer` loads (`has_tokenizer`); None when the run trains its own."""
    if cfg.tokenizer is None and cfg.init_from is not None and has_tokenizer(cfg.init_from):
        return cfg.init_from
    return cfg.tokenizer


def init_from_problems(cfg: TrainConfig) -> list[str]:
    """What makes ``--init_from`` unusable before anything is written: a ``--lora`` rank above the model's layer
    widths (`lora.rank_problem`), a model folder without a tokenizer (a new
    one would feed unrelated ids to the trained embeddings), or a tokenizer that does not fit the model (its
    vocabulary or its pad/eos ids, `tokenizer_fit_problem`); ``--bpe_dropout`` with a tokenizer that is not a
    ``tokenizer.json`` (BPE-dropout re-segments with its merges)."""
    from transformers import AutoConfig

    from vanilla_transformer.inference.loading_policy import remote_code_rule

    folder = cfg.init_from
    if folder is None or not (Path(folder) / "config.json").is_file():
        return []
    try:
        saved = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
        remote_code_rule(saved, folder, trust_remote_code=False, opt_in=None)
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    except (OSError, ValueError) as error:
        return [str(error).rstrip(".")]
    problems = []
    if cfg.lora is not None and (problem := rank_problem(config, cfg.lora, cfg.lora_ffn)) is not None:
        problems.append(problem)
    given = given_tokenizer(cfg)
    if given is None:
        return problems + [
            f"--init_from {folder!r} has no tokenizer; pass --tokenizer with the tokenizer this model was "
            "trained with (a new one would give its trained embeddings unrelated ids)"
        ]
    try:
        tokenizer = load_tokenizer(given)
    except (OSError, ValueError) as error:
        return problems + [str(error).splitlines()[0].rstrip(".")]
    which = f"--tokenizer {given!r}" if cfg.tokenizer is not None else f"--init_from {folder!r}'s tokenizer"
    if (problem := tokenizer_fit_problem(tokenizer, config)) is not None:
        problems.append(f"{which}: {problem}")
    if cfg.bpe_dropout > 0 and not getattr(tokenizer, "is_fast", False):
        problems.append(
            f"--bpe_dropout re-segments with a tokenizer.json's BPE merges; {which} is a "
            f"{type(tokenizer).__name__}: drop --bpe_dropout"
        )
    return problems


def schedule_problems(cfg: TrainConfig) -> list[str]:
    """A learning-rate option the run's schedule does not read: ``--learning_rate`` with the paper's schedule
    (scaled by ``--lr_scale``), ``--lr_scale`` with 'constant' or 'inverse_sqrt' (from ``--learning_rate``)."""
    schedule = cfg.lr_schedule or recipe_defaults(cfg.preset, cfg.init_from is not None)["lr_schedule"]
    if schedule == "paper" and cfg.learning_rate is not None:
        return [
            "--learning_rate sets the peak of --lr_schedule constant or inverse_sqrt; this run's schedule is the "
            "paper's, scaled by --lr_scale: pass --lr_schedule constant, or --lr_scale instead"
        ]
    if schedule != "paper" and cfg.lr_scale is not None:
        return [
            f"--lr_scale scales the paper's schedule; this run's is --lr_schedule {schedule}, from "
            "--learning_rate: pass --learning_rate instead, or --lr_schedule paper"
        ]
    return []


def distill_problems(cfg: TrainConfig) -> list[str]:
    """A distillation option that cannot apply: the teacher options without ``--distill_from``, a teacher that is
    not a folder, an objective that does not translate, or ``--mix_data`` (distillation replaces the training
    targets; mixing references in is fine-tuning's guard against forgetting)."""
    if cfg.distill_from is None:
        given = ["--distill_engine"] if cfg.distill_engine != "torch" else []
        given += ["--distill_beams"] if cfg.distill_beams is not None else []
        return (
            [f"{' and '.join(given)}: options of --distill_from's teacher; pass --distill_from too"]
            if given
            else []
        )
    problems = []
    if not Path(cfg.distill_from).is_dir():
        problems.append(
            f"--distill_from {cfg.distill_from!r} is not a folder: pass a trained model's OUTPUT_DIR or its "
            "vanilla-transformer export folder"
        )
    if cfg.objective != "translation":
        problems.append(
            f"--distill_from trains a translation student; --objective {cfg.objective} does not translate"
        )
    if cfg.mix_data is not None:
        problems.append(
            "--distill_from replaces the training targets with the teacher's translations and --mix_data mixes "
            "references in against forgetting: pass one"
        )
    return problems


def minute_marks(cfg: TrainConfig) -> list[float]:
    return sorted(float_list(cfg.export_at_minutes, "export_at_minutes", "positive minutes", positive=True))


def alignment_data_problems(cfg: TrainConfig) -> list[str]:
    """The options ``--alignment_data`` cannot go with: its lines follow the training pairs as read and tokenised
    once, in memory."""
    if cfg.alignment_data is None:
        return []
    problems = (
        []
        if Path(cfg.alignment_data).is_file()
        else [f"--alignment_data {cfg.alignment_data!r} is not a file"]
    )
    clashes = {
        "--objective translation": cfg.objective != "translation",
        "--bpe_dropout 0 (BPE-dropout re-segments the aligned pairs)": cfg.bpe_dropout > 0,
        "--streaming false (the aligned pairs are kept in memory)": bool(cfg.streaming),
        "no --mix_data (the general-domain pairs have no alignment lines)": cfg.mix_data is not None,
    }
    problems += [f"--alignment_data needs {need}" for need, clash in clashes.items() if clash]
    return problems


def check_options(cfg: TrainConfig) -> None:
    """Raise one `ValueError` naming every invalid option: each option's own range and choices (`cfg.check()`, from
    the fields' metadata), then the options that contradict each other or the machine (the list parsers raise
    their own)."""
    problems = cfg.check()
    if cfg.export_ct2 is not None:
        if not cfg.export:
            problems.append("--export_ct2 needs --export (it converts the exported model)")
        elif importlib.util.find_spec("ctranslate2") is None:
            problems.append("--export_ct2 needs CTranslate2: pip install '.[export]'")
    try:
        report_to_trackers(cfg.report_to)
    except ValueError as error:
        problems.append(str(error).rstrip("."))
    minute_marks(cfg)
    if cfg.tokenizer is not None and (problem := given_tokenizer_problem(cfg.tokenizer)) is not None:
        problems.append(problem)
    if (given := given_tokenizer(cfg)) is not None:
        shaping = [f"--vocab_size {cfg.vocab_size}"] if cfg.vocab_size != DEFAULT_VOCAB_SIZE else []
        shaping += ["--han_characters"] if cfg.han_characters else []
        if shaping:
            source = (
                f"--tokenizer {given!r}"
                if cfg.tokenizer is not None
                else f"--init_from {given!r}'s tokenizer"
            )
            verb = "shape" if len(shaping) > 1 else "shapes"
            problems.append(
                f"{' and '.join(shaping)} {verb} a tokenizer trained by the run; {source} is used as it "
                "is: drop one or the other"
            )
    problems += alignment_data_problems(cfg)
    overrides = [f"--{name}" for name in model_overrides(cfg)]
    if overrides and cfg.init_from is not None:
        problems.append(
            f"{', '.join(overrides)} shape a new model; --init_from's architecture is used as it is: drop "
            "one or the other"
        )
    if cfg.objective in OBJECTIVES:
        problems += get_objective(cfg.objective).conflicts(cfg)
    if cfg.init_from is not None and not (Path(cfg.init_from) / "config.json").is_file():
        problems.append(
            f"--init_from {cfg.init_from!r} is not a model folder (no config.json); pass the OUTPUT_DIR "
            "of a finished run"
        )
    problems += init_from_problems(cfg)
    if cfg.lora is not None and cfg.init_from is None:
        problems.append("--lora adapts a trained model: pass --init_from with its folder, or drop --lora")
    elif cfg.lora is not None and importlib.util.find_spec("peft") is None:
        problems.append("--lora needs peft: pip install '.[finetune]'")
    problems += distill_problems(cfg)
    if cfg.lora_ffn and cfg.lora is None:
        problems.append("--lora_ffn adds feed-forward adapters to --lora: pass --lora R too, or drop it")
    if cfg.preset in preset_names():
        problems += schedule_problems(cfg)
    if not (cfg.max_steps or cfg.max_epochs or cfg.max_minutes):
        problems.append("no stopping rule: pass --max_steps, --max_epochs or --max_minutes")
    if cfg.resume and cfg.overwrite:
        problems.append("--resume and --overwrite contradict each other; pass one")
    if cfg.allow_changed_data and not cfg.resume:
        problems.append("--allow_changed_data applies to a resumed run only; pass --resume, or drop it")
    if problems:
        raise ValueError("Invalid training options: " + "; ".join(problems) + ".")
