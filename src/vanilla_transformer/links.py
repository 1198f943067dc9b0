"""The checkout's symbolic links (docs/design.md, "Layout") and the check, at import, that they are links."""

from __future__ import annotations

from pathlib import Path

# the symbolic links of a checkout (docs/design.md, "Layout"); an installed wheel holds real folders and files there
LINKS = (
    "modeling",
    "convert",
    "tokenizer",
    "corpus",
    "training",
    "inference",
    "export",
    "serving",
    "benchmarks",
    "corpus/data",
    "export/model_card.md",
)


def check_links(package: Path) -> None:
    """Raise `ImportError` (one line: how to clone) when one of `LINKS` under ``package`` is a plain file that holds
    its link's target, as a clone without symbolic links (Windows without ``core.symlinks``) leaves it."""
    for name in LINKS:
        path = package / name
        # a link's stand-in is a few bytes of text ("../../modeling"); the model-card template is kilobytes
        if path.is_file() and path.stat().st_size < 256 and path.read_bytes().startswith(b".."):
            raise ImportError(
                f"{path} is a plain file, not a symbolic link: this checkout was made without symbolic links; clone "
                "it again with them: git clone -c core.symlinks=true URL (on Windows with Developer Mode on)"
            ) from None
