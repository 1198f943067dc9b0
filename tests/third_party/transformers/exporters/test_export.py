"""Stand-in for transformers' tests/exporters/test_export.py, which transformers' PyPI source distribution does not
ship (see ../README.md): `ModelTesterMixin` derives from `ExportTesterMixin`. This class holds none of upstream's
`torch.export` tests."""


class ExportTesterMixin:
    """Base class of `ModelTesterMixin`; upstream's export tests are not vendored."""
