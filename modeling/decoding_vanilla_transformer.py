"""The decoding options' rules, in one table (`DECODING_OPTIONS`), and the check of `generate()` arguments.

Every entry point takes these options by the same rule: `generate()` (`check_generation_arguments`), the command
line's parsers (built from the table) and the translation server's request schema. A refusal is a `ValueError`
whose message names the option, the bad value, what was expected and the fix.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import GenerationConfig

# The length penalty every entry point decodes with unless told otherwise (the models' default generation config,
# and through it translate, evaluate, the engines, the server and the pipeline; training's test score and exports):
# transformers' alpha, a finished hypothesis scores sum(log p) / length ** alpha, so 1.0 is the average
# log-probability per token. On held-out books it beat the paper's 0.6 in 7 of 7 runs, whose outputs were 4-8 %
# short (docs/quality.md, "Length penalty").
DEFAULT_LENGTH_PENALTY = 1.0


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _invalid(name: str, value: Any, expected: str, fix: str) -> ValueError:
    return ValueError(f"{name}={value!r} is invalid: expected {expected}; {fix}")


@dataclass(frozen=True)
class DecodingOption:
    """One decoding option as every entry point takes it (`generate()` arguments, the command line's options, the
    server's request fields): its ``kind`` (int, float or bool; a float option takes integers too), its range
    (``minimum``/``maximum`` inclusive, None = unbounded; floats must also be finite), what a refusal says is
    ``expected`` and its ``fix`` (``{value!r}`` is filled in), and the ``help`` of the option."""

    name: str
    kind: type
    help: str
    minimum: float | None = None
    maximum: float | None = None
    expected: str = ""
    fix: str = ""

    def check(self, value: Any) -> None:
        """Raise `ValueError` (the value, what is expected, the fix) unless ``value`` is of the kind and in range."""
        if self.kind is bool:
            valid = isinstance(value, bool)
        elif self.kind is int:
            valid = _is_int(value)
        else:
            valid = _is_real(value) and math.isfinite(value)
        if valid and self.minimum is not None:
            valid = value >= self.minimum
        if valid and self.maximum is not None:
            valid = value <= self.maximum
        if not valid:
            raise _invalid(self.name, value, self.expected, self.fix.format(value=value))


# The one table of the decoding options' rules: `check_generation_arguments` applies it to `generate()` arguments,
# the command line builds its options from it and the server its request fields. top_p's open lower end is the
# smallest positive float. temperature's range keeps logits / temperature finite and meaningful: below 0.001
# sampling is greedy decoding in all but name (and tiny values overflow the scaled logits), above 1000 it is
# uniform noise. length_penalty: length ** length_penalty must stay a finite float for any length (the paper's
# 0.6; beyond +-10 one term decides every ranking). seed: the range of numpy's seed, which transformers'
# `set_seed` sets.
DECODING_OPTIONS: dict[str, DecodingOption] = {
    option.name: option
    for option in (
        DecodingOption(
            "num_beams",
            int,
            "1 = greedy (default: the model's generation config, the paper's 4)",
            minimum=1,
            expected="an integer >= 1",
            fix="use 1 for greedy decoding or e.g. 4 for beam search (num_beams={value!r} must be a positive integer)",
        ),
        DecodingOption(
            "length_penalty",
            float,
            "beam score = log p / length**alpha (default: the model's generation config)",
            minimum=-10.0,
            maximum=10.0,
            expected="a number from -10 to 10",
            fix="e.g. 0.6 (1.0 = average log-probability per token)",
        ),
        DecodingOption(
            "max_new_tokens",
            int,
            "cap on generated tokens (default: the model's generation config)",
            minimum=1,
            expected="an integer >= 1",
            fix="e.g. 256",
        ),
        DecodingOption(
            "min_new_tokens",
            int,
            "generate at least this many tokens",
            minimum=0,
            expected="an integer >= 0",
            fix="use 0 for no minimum length",
        ),
        DecodingOption(
            "num_return_sequences",
            int,
            "n-best: hypotheses per text (at most num_beams with beam search)",
            minimum=1,
            expected="an integer >= 1",
            fix="use 1 for one sequence per input",
        ),
        DecodingOption(
            "do_sample",
            bool,
            "sample instead of searching",
            expected="true or false",
            fix="use true to sample",
        ),
        DecodingOption(
            "temperature",
            float,
            "sampling: logits / temperature (default: the model's generation config, 1.0)",
            minimum=0.001,
            maximum=1000.0,
            expected="a finite number from 0.001 to 1000",
            fix="use 1.0 to sample from the model's distribution; for deterministic output use do_sample=False "
            "and leave temperature unset",
        ),
        DecodingOption(
            "top_k",
            int,
            "sampling: keep the k most likely tokens (0 = all)",
            minimum=0,
            expected="an integer >= 0",
            fix="use 0 to disable top-k filtering",
        ),
        DecodingOption(
            "top_p",
            float,
            "sampling: keep the most likely tokens up to this probability mass (1.0 = all)",
            minimum=math.ulp(0.0),
            maximum=1.0,
            expected="0 < top_p <= 1",
            fix="use e.g. 0.9 (top_p={value!r} must be in (0, 1]; use 1.0 to disable nucleus sampling)",
        ),
        DecodingOption(
            "seed",
            int,
            "makes sampling reproducible",
            minimum=0,
            maximum=2**32 - 1,
            expected="an integer from 0 to 4294967295",
            fix="e.g. 0",
        ),
    )
}


def check_generation_arguments(
    kwargs: dict[str, Any], generation_config: GenerationConfig | None = None
) -> None:
    """Raise `ValueError` for `generate()` arguments that transformers would reject late or accept silently.

    The value of an option is `kwargs[name]` unless that is missing or None, else `generation_config`'s, else
    unknown (unknown values are not checked; call with `generation_config=None` to check command-line options
    before a model is loaded). Each value follows its rule in `DECODING_OPTIONS`, and num_return_sequences is,
    where num_beams is known, at most num_beams with beam search and 1 with greedy decoding (num_beams=1 without
    do_sample).
    """

    def value(name: str) -> Any:
        given = kwargs.get(name)
        return given if given is not None else getattr(generation_config, name, None)

    for name, option in DECODING_OPTIONS.items():
        if name != "seed" and value(name) is not None:
            option.check(value(name))
    beams = value("num_beams")
    returned = value("num_return_sequences")
    if returned is None or returned == 1:
        return
    if beams is not None and beams > 1 and returned > beams:
        raise ValueError(
            f"num_return_sequences={returned} is larger than num_beams={beams}: beam search returns at most "
            f"num_beams={beams} sequences; raise num_beams to at least {returned} or lower num_return_sequences"
        )
    if beams == 1 and not value("do_sample"):
        raise ValueError(
            f"num_return_sequences={returned} is larger than num_beams=1: greedy decoding (num_beams=1, no "
            f"sampling) returns one sequence; raise num_beams to at least {returned} or sample (do_sample=True)"
        )
