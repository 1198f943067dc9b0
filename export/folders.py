"""The one rule for the folders that the writers (export --engine ct2/onnx, average, convert) write to.

An output folder is written only when it is absent, empty, or a complete earlier output of the same kind: a
folder that holds the manifest `MANIFEST` which the writer of that kind wrote last, and no file that the
manifest does not list. Re-writing such a folder removes exactly the listed files, nothing else. Any other
folder is refused with a `ValueError` that names the files in the way, and so is an output that is an input
folder or contains one. An output inside an input folder is allowed (a run keeps its CTranslate2 export in
`ct2/` of its model folder): a writer touches nothing outside its output. A writer calls `claim_output_folder` before it writes and
`write_output_manifest` when everything is written (an interrupted write leaves no manifest, so its folder is
refused, never wiped).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

MANIFEST = ".vanilla_transformer_output.json"  # {"kind": ..., "files": [relative paths, "/"-separated]}
_SHOWN = 5  # files named in a refusal


def _files(folder: Path) -> list[str]:
    """Every file under `folder` (also links and other non-folders), as sorted "/"-separated relative paths."""
    found = []
    for root, _, names in os.walk(folder):
        found += [(Path(root) / name).relative_to(folder).as_posix() for name in names]
    return sorted(found)


def _manifest(folder: Path) -> tuple[str | None, set[str]]:
    """The kind and the files that the manifest of `folder` records ((None, set()) without a readable one)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, set()
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        return None, set()
    return str(manifest.get("kind")), {f for f in manifest["files"] if isinstance(f, str)}


def _check_inputs(out: Path, inputs: Iterable[str | os.PathLike]) -> None:
    resolved = out.resolve()
    for given in inputs:
        folder = Path(given).resolve()
        if resolved == folder:
            where = "is the input folder"
        elif resolved in folder.parents:
            where = "contains the input folder"
        else:
            continue
        raise ValueError(f"output folder {str(out)!r} {where} {str(given)!r}: choose a new output folder")


def claim_output_folder(
    out: str | os.PathLike, kind: str, inputs: Iterable[str | os.PathLike] = (), clear: bool = False
) -> Path:
    """Check that `out` may receive an output of `kind` (see the module docstring) and return it as a Path;
    with `clear`, also remove the files of the earlier output, leaving an empty folder (or none).

    Raises `ValueError` for a file, for a non-empty folder that is not a complete earlier output of `kind`
    (naming the files in the way) and for an output that is or contains one of `inputs`."""
    out = Path(out)
    _check_inputs(out, inputs)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output folder {str(out)!r} is a file: pass a new or empty folder")
    files = _files(out) if out.is_dir() else []
    if not files:
        return out
    found, listed = _manifest(out)
    if found is not None and found != kind:
        raise ValueError(
            f"output folder {str(out)!r} holds an earlier {found}; only an earlier {kind} is replaced: "
            "pass a new or empty folder"
        )
    in_the_way = [f for f in files if f not in listed and (found is None or f != MANIFEST)]
    if in_the_way:
        shown = ", ".join(in_the_way[:_SHOWN]) + (
            f" and {len(in_the_way) - _SHOWN} more" if len(in_the_way) > _SHOWN else ""
        )
        raise ValueError(
            f"output folder {str(out)!r} holds files that are not part of an earlier {kind} ({shown}); "
            "nothing was changed: pass a new or empty folder"
        )
    if clear:
        for name in files:
            (out / name).unlink()
        for root, _, _ in sorted(os.walk(out), key=lambda entry: -len(entry[0])):
            if Path(root) != out and not any(Path(root).iterdir()):
                Path(root).rmdir()
    return out


def write_output_manifest(out: str | os.PathLike, kind: str) -> Path:
    """Record every file now under `out` as the complete output of `kind` (the last step of a writer)."""
    out = Path(out)
    files = [f for f in _files(out) if f != MANIFEST]
    (out / MANIFEST).write_text(json.dumps({"kind": kind, "files": files}, indent=1) + "\n", encoding="utf-8")
    return out
