"""Our stand-in for transformers' tests/generation/test_utils.py, which transformers' source distribution does not
ship: `test_modeling_common` imports `GenerationTesterMixin` from here and asks every tester of a model that can
generate to inherit it. This class holds none of upstream's generation tests (our own suite tests generation)."""


class GenerationTesterMixin:
    """Marks a tester whose models can `generate()`; upstream's generation tests are not run."""
