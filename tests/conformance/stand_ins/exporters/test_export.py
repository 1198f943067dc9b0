"""Our stand-in for transformers' tests/exporters/test_export.py, which transformers' source distribution does not
ship: `ModelTesterMixin` derives from `ExportTesterMixin`. This class holds none of upstream's `torch.export`
tests."""


class ExportTesterMixin:
    """Base class of `ModelTesterMixin`; upstream's export tests are not run."""
