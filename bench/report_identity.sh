#!/usr/bin/env bash
# Render the reports of stored run directories into OUT (one folder per run), so a restructuring can
# be checked byte for byte: run it before and after, then `diff -r BEFORE AFTER`.
#   bash bench/report_identity.sh OUT RUN_DIR [RUN_DIR ...]
# Each run directory is copied first (report writes into RUN/report), so the originals are not touched.
set -euo pipefail
out=$1; shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
for run in "$@"; do
  name=$(basename "$run")
  work=$(mktemp -d)
  cp -a "$run" "$work/$name"
  rm -rf "$work/$name/report"
  "$here/.venv/bin/specbench" report "$work/$name" >/dev/null
  "$here/.venv/bin/specbench" summary "$work/$name" > "$work/$name/report/summary.txt" 2>&1 || true
  rm -rf "${out:?}/$name"
  cp -a "$work/$name/report" "$out/$name"
  rm -rf "$work"
done
