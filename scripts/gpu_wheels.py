"""The wheels that carry the GPU check (`python -m studies.gpu`) to the GPU machine, which has no package registry: checks
that a folder of wheels completes the machine's image (scripts/gpu_check.sh runs it on both sides).

    python scripts/gpu_wheels.py check .whl        # here: every Requires-Dist of every carried wheel is met by
                                                   # another carried wheel or by the image (`IMAGE`), one
                                                   # version of each, under `MAX_MIB`; exit 1 with the list if not
    python3 scripts/gpu_wheels.py installed .whl   # there, after the install: every requirement of the carried
                                                   # distributions is met by what python3 imports; versions
"""

from __future__ import annotations

import argparse
import email.parser
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

# The GPU machine's image (python3 is Python 3.12 at /opt/torch/.venv/bin/python3): the distributions it holds,
# with the version where the machine's package list gives one (None: present, version not listed).
IMAGE_VERSIONS = {
    "accelerate": "1.15.0",
    "huggingface-hub": "1.33.0",
    "numpy": "2.5.2",
    "onnx": "1.23.1",
    "onnxruntime": "1.30.0",
    "safetensors": "0.8.0",
    "sentencepiece": "0.2.2",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "triton": "3.6.0",
}
IMAGE = {
    **dict.fromkeys(
        """absl-py aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
        charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
        cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
        flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
        humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
        jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
        llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
        multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpyro
        nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
        nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
        nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx-ir onnxscript
        opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas
        pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow
        pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov
        pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich
        sacrebleu scikit-build-core scikit-image scikit-learn scipy seaborn sentence-transformers setuptools
        shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
        tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm toolz torchaudio torchdiffeq
        torch-geometric torchmetrics torchvision tqdm treescope typer typing-extensions typing-inspect urllib3
        uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
    ),
    **IMAGE_VERSIONS,
}
# the markers' environment there: CPython 3.12 on Linux x86-64
MACHINE = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
MAX_MIB = 50  # the working tree and the carried paths travel together, 64 MiB at most


@dataclass
class Wheel:
    """One carried wheel's name (canonical), version and Requires-Dist lines."""

    name: str
    version: str
    requires: list[str]
    file: str


def read_wheel(path: Path) -> Wheel:
    with zipfile.ZipFile(path) as archive:
        member = next(
            n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1
        )
        meta = email.parser.Parser().parsestr(archive.read(member).decode("utf-8"))
    return Wheel(
        canonicalize_name(meta["Name"]), meta["Version"], meta.get_all("Requires-Dist") or [], path.name
    )


# the GPU check trains: this project's wheel counts with the extras it needs there
OWN_EXTRAS = {"vanilla-transformer": ("train",)}


def applies(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    """Whether a requirement holds on the machine for a distribution installed with ``extras``."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**MACHINE, "extra": e}) for e in extras or ("",))


def check(wheels: list[Wheel], image: dict[str, str | None] = IMAGE) -> tuple[list[str], list[str]]:
    """Problems (a requirement no wheel and not the image meets, a version that does not match, two versions of
    one name) and the requirements met by an image distribution whose version is not listed here (confirmed on the
    machine by ``installed``)."""
    problems, unconfirmed = [], []
    carried: dict[str, Wheel] = {}
    for wheel in wheels:
        if wheel.name in carried:
            problems.append(f"two versions of {wheel.name}: {carried[wheel.name].file} and {wheel.file}")
        carried[wheel.name] = wheel
    todo, seen = [(w, OWN_EXTRAS.get(w.name, ())) for w in carried.values()], set()
    while todo:
        wheel, extras = todo.pop()
        if (wheel.name, extras) in seen:
            continue
        seen.add((wheel.name, extras))
        for line in wheel.requires:
            req = Requirement(line)
            if not applies(req, extras):
                continue
            name, need = canonicalize_name(req.name), f"{wheel.name} {wheel.version} needs {req}"
            if name in carried:
                if not req.specifier.contains(carried[name].version, prereleases=True):
                    problems.append(f"{need}: carried {carried[name].file}")
                if req.extras:
                    todo.append((carried[name], tuple(sorted(req.extras))))
            elif name not in image:
                problems.append(f"{need}: not in the image, carry its wheel")
            elif (version := image[name]) is not None and not req.specifier.contains(
                version, prereleases=True
            ):
                problems.append(f"{need}: the image has {name} {version}, carry a wheel that fits")
            elif image[name] is None and (req.specifier or req.extras):
                unconfirmed.append(need)
    return problems, sorted(set(unconfirmed))


def installed(folder: Path) -> list[str]:
    """On the machine, with the wheels installed first on the path: each carried distribution's requirements
    against the versions that import (`importlib.metadata` finds the first on ``sys.path``)."""
    problems = []
    for wheel in map(read_wheel, sorted(folder.glob("*.whl"))):
        found = metadata.version(wheel.name)
        if found != wheel.version:
            problems.append(
                f"{wheel.name}: {found} imports, not the carried {wheel.version} (is it on PYTHONPATH?)"
            )
        for line in wheel.requires:
            req = Requirement(line)
            if not applies(req, OWN_EXTRAS.get(wheel.name, ())):
                continue
            try:
                version = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                problems.append(f"{wheel.name} needs {req}: not installed")
                continue
            if not req.specifier.contains(Version(version), prereleases=True):
                problems.append(f"{wheel.name} needs {req}: {version} installed")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["check", "installed"])
    p.add_argument("folder", type=Path, help="the folder of wheels (.whl)")
    args = p.parse_args(argv)
    files = sorted(args.folder.glob("*.whl"))
    if not files:
        print(f"error: no wheels in {args.folder}: run scripts/gpu_check.sh prepare", file=sys.stderr)
        return 1
    if args.mode == "installed":
        problems = installed(args.folder)
        names = [
            "torch",
            "transformers",
            "tokenizers",
            "huggingface-hub",
            "accelerate",
            "datasets",
            "evaluate",
        ]
        print("versions: " + ", ".join(f"{n} {metadata.version(n)}" for n in names))
    else:
        mib = sum(f.stat().st_size for f in files) / 2**20
        problems, unconfirmed = check([read_wheel(f) for f in files])
        if mib > MAX_MIB:
            problems.append(f"the wheels take {mib:.1f} MiB, more than {MAX_MIB}: carry fewer")
        print(f"{len(files)} wheels, {mib:.1f} MiB: " + ", ".join(f.name for f in files))
        for need in unconfirmed:
            print(f"met by the image if its version fits (checked there): {need}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
