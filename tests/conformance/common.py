"""What the conformance testers of the three families share: the upstream tests that do not apply, each with its
reason (listed in docs/reliability.md)."""

from __future__ import annotations

import pytest

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
