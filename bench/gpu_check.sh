#!/usr/bin/env bash
# The GPU check of issue 34, on the lent GPU machine (no network). Two calls, back to back on the
# same warm machine, each stopping itself before ~9.5 minutes (GPU_CHECK_BUDGET_S, default 555):
#
#   bench/gpu_check.sh build OUTDIR   # wheels, untar the trimmed llama.cpp, cmake + ninja (CUDA)
#   bench/gpu_check.sh run OUTDIR     # lab pairs, matrices, predict --calibrate, summary
#
# Both are resumable: rerun the same verb after a timeout (exit 75). GPU_CHECK_CPU=1 is the CPU
# rehearsal (configure only, the cached CPU llama-server, tiny models). Prepare the kit first,
# with network: bench/gpu_prepare.sh. See docs/gpu.md.
set -euo pipefail
verb=${1:?usage: gpu_check.sh build|run OUTDIR}
out=${2:?usage: gpu_check.sh build|run OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
kit=${GPU_KIT:-$here/../gpu-kit}
py=${PYTHON:-python3}
cpu=()
[[ "${GPU_CHECK_CPU:-0}" == 1 ]] && cpu=(--cpu)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [[ "$verb" == build && ${#cpu[@]} == 0 ]]; then
    { date -u; nvidia-smi || true; nvcc --version || true; cmake --version | head -1; ninja --version
      "$py" --version; ls /usr/local/cuda*/include/cublas_v2.h 2>&1 || true; } >"$out/nvidia-smi.txt" 2>&1
fi
case "$verb" in
    build) exec "$py" "$here/gpu_kit.py" build "$out" --kit "$kit" "${cpu[@]}" ;;
    run) exec "$py" "$here/gpu_run.py" "$out" --kit "$kit" "${cpu[@]}" ;;
    *) echo "gpu_check.sh: unknown verb '$verb' (build or run)" >&2; exit 2 ;;
esac
