"""The GPU check's tests: a package, so that its conftest.py is ``gpu.conftest`` and not the suite's ``conftest``."""
