"""transformers' common test mixins, as the conformance testers import them, and what the testers of the three
families share: the upstream tests that do not apply, each with its reason (listed in docs/reliability.md).

The mixins are vendored under tests/third_party at one release and import that release's testing helpers, so they
run only on that release: on another one the importing test module is skipped with the reason (re-vendor: see the
README there)."""

from __future__ import annotations

import pytest
import transformers

# the release whose tests/ the files under tests/third_party/transformers come from
VENDORED_RELEASE = "5.25.0"

if transformers.__version__ != VENDORED_RELEASE:
    pytest.skip(
        f"the vendored transformers test mixins are {VENDORED_RELEASE}'s; installed: {transformers.__version__}",
        allow_module_level=True,
    )

from third_party.transformers.generation.test_utils import GenerationTesterMixin  # noqa: E402
from third_party.transformers.test_configuration_common import ConfigTester  # noqa: E402
from third_party.transformers.test_modeling_common import (  # noqa: E402
    ModelTesterMixin,
    ids_tensor,
    random_attention_mask,
)

__all__ = [
    "ConfigTester",
    "ConformanceMixin",
    "GenerationTesterMixin",
    "ModelTesterMixin",
    "ids_tensor",
    "random_attention_mask",
]

# test_bc_cache_name_forward: transformers 5.24 renamed the cache argument `past_key_values` to `cache` and
# deprecates the old name
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

    @pytest.mark.skip(reason=NOT_DEPRECATED)
    def test_bc_cache_name_forward(self):
        pass
