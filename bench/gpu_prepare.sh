#!/usr/bin/env bash
# Prepare the GPU check kit here, with network (issue 34; docs/gpu.md): the pinned llama.cpp source
# (the cached llama-cpp-python sdist specbench builds from), trimmed to what a CUDA llama-server
# build reads, and the wheels the device's Python lacks, into gpu-kit/dist (ignored by git).
# Prints the sizes; the device call may carry 64 MiB in all.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-$here/../.venv/bin/python}
exec "$py" "$here/gpu_kit.py" prepare --kit "${GPU_KIT:-$here/../gpu-kit}" "$@"
