"""The training objectives (``--objective``), one module each behind the `Objective` protocol (`base`), found by
name in the registry (`registry`).

Adding an objective is one module whose `Objective` subclass is decorated with ``@register_objective``, and one
import line below (the order of the lines is the order of ``--objective``'s choices).
"""

from __future__ import annotations

from .base import Objective, seq2seq_loss, teacher_forced
from .registry import OBJECTIVES, get_objective, objective_for, objective_names, register_objective

# the registration order is the order of --objective's choices
# isort: off
from .translation import Translation
from .causal_lm import CausalLM
from .masked_lm import MaskedLM
from .span_corruption import SpanCorruption
# isort: on

__all__ = [
    "OBJECTIVES",
    "CausalLM",
    "MaskedLM",
    "Objective",
    "SpanCorruption",
    "Translation",
    "get_objective",
    "objective_for",
    "objective_names",
    "register_objective",
    "seq2seq_loss",
    "teacher_forced",
]
