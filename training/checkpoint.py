"""Atomic, verifiable training checkpoints; keeping the last K and the best; loading weights safely.

Layout under a checkpoint root (``<output_dir>/checkpoints``)::

    checkpoint-<step>/     accelerate's save_state (model.safetensors, optimizer.bin, scheduler.bin,
                           random_states_<rank>.pkl) + trainer_state.json + config.json + manifest.json
    latest                 a text file naming the newest complete checkpoint directory
    .tmp-checkpoint-<step> a checkpoint being written (never read; removed when seen)
    .del-checkpoint-<step> a checkpoint being deleted by pruning (never read; removed when seen)

A checkpoint is written into a temporary directory; ``manifest.json`` (size and sha256 of every file) is
written last, then the directory is renamed into place with `os.replace` and ``latest`` is rewritten with
`os.replace`. A crash at any moment leaves either the old ``latest`` or the new one, never a half-written
directory behind the name. Pruning renames a checkpoint to a hidden
name before deleting it, so a kill during deletion never leaves a half-deleted ``checkpoint-<step>``. A failed
save (e.g. disk full) removes its temporary directory and raises `OSError` saying that the previous checkpoint
is intact. `verify_checkpoint` checks the manifest before anything is loaded, so a truncated or altered file is
a clear `CheckpointError` instead of a confusing unpickling error. `load_checkpoint` also refuses a checkpoint
without ``model.safetensors`` (model weights are only read from safetensors), one whose weights have other
names or shapes than the model being trained (another architecture or vocabulary), and any pickled state
(optimizer, scheduler, RNG) that ``torch.load(weights_only=True)`` rejects: nothing is ever unpickled with
arbitrary code execution. Our own state is JSON.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

logger = logging.getLogger(__name__)

PREFIX = "checkpoint-"
MANIFEST = "manifest.json"
TRAINER_STATE = "trainer_state.json"
LATEST = "latest"
MODEL_FILE = "model.safetensors"
_STEP_RE = re.compile(rf"^{PREFIX}(\d+)$")


class CheckpointError(ValueError):
    """A checkpoint is missing, incomplete or corrupted."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to ``path`` via a temporary file and `os.replace` (readers see the old or new file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_manifest(folder: Path) -> None:
    """Record size and sha256 of every file in ``folder`` (written last: its presence marks completion)."""
    files = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != MANIFEST:
            files[str(p.relative_to(folder))] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    write_json_atomic(folder / MANIFEST, {"files": files})


def verify_checkpoint(folder: str | os.PathLike) -> None:
    """Raise `CheckpointError` unless ``folder`` is a complete checkpoint whose files match its manifest."""
    folder = Path(folder)
    hint = "Delete it and resume from an earlier checkpoint (or start without --resume)."
    if not folder.is_dir():
        raise CheckpointError(f"Checkpoint {str(folder)!r} does not exist. {hint}")
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
    except FileNotFoundError:
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} is incomplete: it has no {MANIFEST}. {hint}"
        ) from None
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"Checkpoint {str(folder)!r} has a corrupted {MANIFEST} ({e}). {hint}") from e
    for name, meta in files.items():
        p = folder / name
        if not p.is_file():
            raise CheckpointError(f"Checkpoint {str(folder)!r} is missing {name}. {hint}")
        size = p.stat().st_size
        if size != meta["size"]:
            raise CheckpointError(
                f"Checkpoint {str(folder)!r} is truncated or corrupted: {name} has {size} bytes, expected "
                f"{meta['size']}. {hint}"
            )
        if _sha256(p) != meta["sha256"]:
            raise CheckpointError(
                f"Checkpoint {str(folder)!r} is corrupted: the sha256 of {name} does not match its manifest. {hint}"
            )


def checkpoint_step(folder: str | os.PathLike) -> int | None:
    m = _STEP_RE.match(Path(folder).name)
    return int(m.group(1)) if m else None


def list_checkpoints(root: str | os.PathLike) -> list[Path]:
    """Complete-looking checkpoint directories (with a manifest) under ``root``, oldest step first."""
    root = Path(root)
    if not root.is_dir():
        return []
    steps = {
        p: step
        for p in root.iterdir()
        if p.is_dir() and (step := checkpoint_step(p)) is not None and (p / MANIFEST).exists()
    }
    return sorted(steps, key=steps.__getitem__)


def latest_checkpoint(root: str | os.PathLike) -> Path | None:
    """The checkpoint named by ``root/latest`` (or, if that file is missing, the highest step); None if none."""
    root = Path(root)
    pointer = root / LATEST
    if pointer.exists():
        name = pointer.read_text(encoding="utf-8").strip()
        path = root / name
        if checkpoint_step(path) is None:
            raise CheckpointError(
                f"{str(pointer)!r} names {name!r}, which is not a checkpoint directory name."
            )
        return path
    found = list_checkpoints(root)
    return found[-1] if found else None


@contextmanager
def _without_tied_weight_warning() -> Iterator[None]:
    """accelerate's ``save_state`` writes one copy of tensors that share storage (our tied embeddings and output
    projection) to model.safetensors and warns "Removed shared tensor ... while saving" at every checkpoint;
    ``load_state`` loads into the tied model, so a resumed run is exact (tests/training/test_training_resume.py) and the
    warning is noise. It is dropped while saving, and only it."""

    def keep(record: logging.LogRecord) -> bool:
        return "Removed shared tensor" not in record.getMessage()

    source = logging.getLogger("accelerate.utils.other")
    source.addFilter(keep)
    try:
        yield
    finally:
        source.removeFilter(keep)


def save_checkpoint(
    accelerator, root: str | os.PathLike, step: int, trainer_state: dict, config_json: str | None = None
) -> Path:
    """Save the accelerator's state plus ``trainer_state`` atomically as ``root/checkpoint-<step>``.

    Must be called on every process (each saves its own RNG state); the main process finalises.
    """
    root = Path(root)
    final = root / f"{PREFIX}{step}"
    tmp = root / f".tmp-{PREFIX}{step}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    try:
        with _without_tied_weight_warning():
            accelerator.save_state(str(tmp))
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            write_json_atomic(tmp / TRAINER_STATE, trainer_state)
            if config_json is not None:
                (tmp / "config.json").write_text(config_json, encoding="utf-8")
            write_manifest(tmp)
            _fsync_dir(tmp)
            if final.exists():  # re-saving the same step (e.g. after a resume): replace the old copy
                old = root / f".old-{PREFIX}{step}"
                if old.exists():
                    shutil.rmtree(old)
                os.replace(final, old)
                os.replace(tmp, final)
                shutil.rmtree(old)
            else:
                os.replace(tmp, final)
            _fsync_dir(root)
            tmp_pointer = root / f".{LATEST}.tmp"
            tmp_pointer.write_text(final.name + "\n", encoding="utf-8")
            os.replace(tmp_pointer, root / LATEST)
            logger.info("Saved checkpoint %s", final)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)  # free the space the partial copy took
        try:
            previous = latest_checkpoint(root)
        except CheckpointError:
            previous = None
        kept = (
            f"the previous checkpoint {previous.name} is intact"
            if previous is not None and previous.is_dir()
            else "no earlier checkpoint exists"
        )
        fix = "free disk space (or use another --output_dir) and resume with --resume"
        if err.errno != errno.ENOSPC:
            fix = "fix the cause and resume with --resume"
        raise OSError(
            err.errno, f"Could not save checkpoint {str(final)!r} ({err.strerror or err}); {kept}; {fix}"
        ) from err
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(accelerator, folder: str | os.PathLike) -> dict:
    """Verify ``folder``, restore model/optimizer/scheduler/RNG into ``accelerator``'s prepared objects and
    return the trainer state (JSON).

    Raises `CheckpointError` for a checkpoint that fails verification, has no ``model.safetensors``, holds
    weights of another architecture or vocabulary, or holds pickled state that is not plain tensors and
    numbers (``torch.load(weights_only=True)`` refuses it; nothing in it is executed)."""
    from accelerate.utils import load as safe_torch_load  # torch.load(weights_only=True) + numpy RNG types

    folder = Path(folder)
    verify_checkpoint(folder)
    try:
        state = json.loads((folder / TRAINER_STATE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError) as e:
        raise CheckpointError(f"Checkpoint {str(folder)!r} has no readable {TRAINER_STATE} ({e}).") from e
    if not (folder / MODEL_FILE).is_file():
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} has no {MODEL_FILE}; model weights are only read from safetensors, "
            "never from pickle files. Resume from a checkpoint written by training/ (or start without --resume)."
        )
    rng_file = folder / f"random_states_{accelerator.process_index}.pkl"
    if not rng_file.exists():
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} has no random state for process {accelerator.process_index}; it was "
            f"written by {state.get('num_processes', '?')} process(es). Resume with the same number of processes."
        )
    _check_same_architecture(accelerator, folder)
    # accelerate ignores an unreadable RNG file (resuming with other random numbers): check it first
    try:
        safe_torch_load(rng_file, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, ValueError) as err:
        raise _unsafe_pickle_error(folder, rng_file.name, err) from None
    try:
        accelerator.load_state(str(folder))
    except pickle.UnpicklingError as err:
        culprit = "its optimizer/scheduler state"
        for p in sorted(folder.glob("*.bin")):  # name the file (only on this failure path: no double loading)
            try:
                safe_torch_load(p, map_location="cpu")
            except pickle.UnpicklingError:
                culprit = p.name
                break
        raise _unsafe_pickle_error(folder, culprit, err) from None
    except (RuntimeError, ValueError) as err:
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} does not fit this run ({str(err).splitlines()[0]}). Resume with the "
            "options of the run that wrote it, or start a new --output_dir."
        ) from err
    return state


def _unsafe_pickle_error(folder: Path, what: str, err: Exception) -> CheckpointError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return CheckpointError(
        f"Checkpoint {str(folder)!r}: {what} is not plain tensors and numbers, so it was not loaded "
        f"(torch.load(weights_only=True) refused it: {first[:200]}). It is corrupted or was tampered with; "
        "nothing in it was executed. Delete this checkpoint and resume from an earlier one, or start without --resume."
    )


def _check_same_architecture(accelerator, folder: Path) -> None:
    """`CheckpointError` if the checkpoint's weights have other names or shapes than the prepared model's."""
    models = getattr(accelerator, "_models", None) or []
    if not models:
        return
    own = {k: tuple(v.shape) for k, v in accelerator.unwrap_model(models[0]).state_dict().items()}
    with safe_open(str(folder / MODEL_FILE), framework="pt") as f:
        saved = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    problem = None
    for key, shape in saved.items():
        if key not in own:
            problem = f"it has a weight {key!r} that this model lacks"
        elif own[key] != shape:
            problem = f"{key} has shape {list(shape)} there but {list(own[key])} in this model"
        if problem:
            break
    if problem is None:
        return
    details = ""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        fields = ("d_model", "encoder_layers", "decoder_layers", "encoder_ffn_dim", "vocab_size")
        details = " (checkpoint config: " + ", ".join(f"{k}={config.get(k)}" for k in fields) + ")"
    except (OSError, ValueError):
        pass
    raise CheckpointError(
        f"Checkpoint {str(folder)!r} was written for a different architecture or vocabulary: {problem}{details}. "
        "Resume with the --preset and --tokenizer of the run that wrote it, or start a new --output_dir."
    )


def prune_checkpoints(
    root: str | os.PathLike, keep_last: int, keep: Sequence[str | os.PathLike] = ()
) -> list[Path]:
    """Delete all but the newest ``keep_last`` checkpoints, never those in ``keep`` (e.g. the best) nor the
    one ``latest`` names; also remove leftover temporary and half-deleted directories. Returns the deleted
    paths."""
    root = Path(root)
    keep_names = {Path(k).name for k in keep}
    latest = latest_checkpoint(root)
    if latest is not None:
        keep_names.add(latest.name)
    found = list_checkpoints(root)
    deleted = []
    for p in found[: max(0, len(found) - keep_last)]:
        if p.name not in keep_names:
            doomed = root / f".del-{p.name}"
            if doomed.exists():
                shutil.rmtree(doomed)
            os.replace(p, doomed)  # atomic: a kill below never leaves a half-deleted checkpoint-<step>
            shutil.rmtree(doomed)
            deleted.append(p)
    for pattern in (f".tmp-{PREFIX}*", f".del-{PREFIX}*"):
        for p in root.glob(pattern):
            shutil.rmtree(p, ignore_errors=True)
    return deleted


def load_model_weights(folder: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The model weights of a verified checkpoint (safetensors; no pickle)."""
    folder = Path(folder)
    verify_checkpoint(folder)
    path = folder / MODEL_FILE
    if not path.exists():
        raise CheckpointError(f"Checkpoint {str(folder)!r} has no {MODEL_FILE}.")
    return load_file(str(path))


def load_weights_into(model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """Load ``state_dict`` into ``model`` strictly, except that keys of tied parameters (stored once, e.g.
    ``lm_head.weight`` = ``model.shared.weight``) may be absent when a tensor they share is present."""
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    if unexpected:
        raise ValueError(
            f"Weights have keys the model does not know: {sorted(unexpected)[:5]}; wrong config?"
        )
    own = model.state_dict()
    present = {own[k].data_ptr() for k in state_dict if k in own}
    untied = [k for k in missing if own[k].data_ptr() not in present]
    if untied:
        raise ValueError(
            f"Weights lack {sorted(untied)[:5]} (not tied to any loaded tensor); wrong checkpoint?"
        )
