"""transformers' common test mixins of the installed release, as the conformance testers import them, and what the
testers of the three families share: the upstream tests that do not apply, each with its reason (listed in
docs/reliability.md).

The mixins are the installed release's own `tests/test_modeling_common.py` and `tests/test_configuration_common.py`,
fetched from its source distribution at test time (`sdist.py`); where they cannot be fetched, the importing test
module is skipped with the reason, or fails in CI."""

from __future__ import annotations

import importlib

import pytest
import transformers

from .sdist import fetch_or_skip

RELEASE = transformers.__version__
_package = fetch_or_skip(RELEASE)
_modeling = importlib.import_module(f"{_package.__name__}.test_modeling_common")
_configuration = importlib.import_module(f"{_package.__name__}.test_configuration_common")

ConfigTester = _configuration.ConfigTester
GenerationTesterMixin = _modeling.GenerationTesterMixin
ModelTesterMixin = _modeling.ModelTesterMixin
ids_tensor = _modeling.ids_tensor
random_attention_mask = _modeling.random_attention_mask

__all__ = [
    "ConfigTester",
    "ConformanceMixin",
    "GenerationTesterMixin",
    "ModelTesterMixin",
    "RELEASE",
    "ids_tensor",
    "random_attention_mask",
]

# test_bc_cache_name_forward (upstream since 5.25): transformers 5.24 renamed the cache argument `past_key_values`
# to `cache` and deprecates the old name
NOT_DEPRECATED = (
    "`past_key_values` is not deprecated here: the same modeling code serves transformers 5.23, where it is the "
    "only name of the cache; both names are accepted"
)


class ConformanceMixin:
    """The upstream tests that do not apply to any family, skipped with their reasons. Put before
    `ModelTesterMixin` in a test class's bases."""

    # upstream runs its `_init_weights` check on models whose file's copyright line says 2023 or later; our files
    # carry no such line, and the check applies to them
    test_can_init_all_missing_weights_before_2023 = True

    if hasattr(ModelTesterMixin, "test_bc_cache_name_forward"):

        @pytest.mark.skip(reason=NOT_DEPRECATED)
        def test_bc_cache_name_forward(self):
            pass
