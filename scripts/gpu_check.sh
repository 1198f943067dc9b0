#!/usr/bin/env bash
# The GPU check (`python -m studies.gpu`) on a GPU machine that has no package registry, in two steps
# (docs/benchmarks.md, "GPU"):
#
#   scripts/gpu_check.sh prepare   # here, with a registry: the wheels the machine's image lacks, for CPython 3.12
#                                  # on manylinux x86-64, and this project's own wheel, into .whl/ (ignored by git);
#                                  # checks that they complete the image (scripts/gpu_wheels.py check) and prints
#                                  # the device command
#   scripts/gpu_check.sh device    # there, from the repository root with .whl/ beside it: installs the wheels into
#                                  # /tmp/site (no index, no dependencies), checks them against what imports
#                                  # (printing what does not fit, then going on), and runs the check into
#                                  # $OUT/gpu_check (or outputs/gpu_check); more arguments go to `studies.gpu`
set -euo pipefail
cd "$(dirname "$0")/.."

# what the image lacks (datasets, evaluate and theirs) or holds at a version below this project's floor
# (transformers); fsspec at the version datasets' upper bound was tested with, since the image's is not listed
WHEELS=(transformers==5.24.0 datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.9.0)
# the run's 270 s budget (the check's default), the install, imports and CUDA start-up
TIMEOUT_S=330

case "${1:-}" in
prepare)
    rm -rf .whl && mkdir .whl
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}"
    log=$(mktemp)
    python3 -m build --wheel --no-isolation -o .whl . >"$log" 2>&1 || { cat "$log"; exit 1; }
    python3 scripts/gpu_wheels.py check .whl
    # what travels: tracked and untracked-not-ignored files, and the carried .whl/
    mib=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
        awk -v whl="$(du -sb .whl | cut -f1)" '{s += $1} END {printf "%.1f", (s + whl) / 2^20}')
    echo "the working tree with .whl/: ${mib} MiB (64 MiB travel at most)"
    awk -v m="$mib" 'BEGIN {exit !(m < 64)}' || { echo "error: too large to travel" >&2; exit 1; }
    cat <<EOF
The device command (the device tool's run; the working tree travels, .whl/ is carried):
  command:   bash scripts/gpu_check.sh device
  carry:     [".whl"]
  timeout_s: ${TIMEOUT_S}
EOF
    ;;
device)
    shift
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
    out="${OUT:-outputs}/gpu_check"
    mkdir -p "$out"
    python3 --version
    # a requirement that does not fit is printed; the check still runs (an import that fails shows in its report)
    python3 scripts/gpu_wheels.py installed .whl || echo "warning: the versions above do not all fit; running anyway"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    # the installed package lives in /tmp/site; the study and the gpu tests are this checkout's
    python3 -m studies.gpu --output_dir "$out" "$@" 2>&1 | tee "$out/run.log"
    ;;
*)
    echo "usage: scripts/gpu_check.sh prepare | device [studies.gpu arguments]" >&2
    exit 2
    ;;
esac
