#!/usr/bin/env bash
# The GPU measurements still open, in one call on a lent machine (each step under its own time
# limit, so one that hangs leaves the rest their time). Carry .whl-serve/ (bench/results/README.md).
# Usage: bash bench/device_pending.sh OUT_DIR [LABEL]   (LABEL: h200 or h100; KV_GIB=30 on an H100)
set -uo pipefail
out=${1:?OUT_DIR}
label=${2:-h200}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl-serve/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
step() {  # step SECONDS NAME COMMAND...
    local limit=$1 name=$2
    shift 2
    echo "== $name ($(date -u +%H:%M:%S))"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    echo "   rc=$? ($(date -u +%H:%M:%S))"
    tail -4 "$out/$name.log"
}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
# Issue 24: the tiers' tests on the GPU (the copy path by runs), the disk reads by threads, the bench.
step 90 tiers-tests python3 -m pytest tests/engine/kv_tiers -q -o addopts= -x
step 60 kv-disk-read python3 bench/kv_disk_read.py --blocks 4096 --threads 1 8 16 \
    --label "$label" --out-dir "$out"
step 200 kv-tiers python3 bench/kv_tiers.py --device cuda --label "$label" --out-dir "$out"
# Issue 22: longdoc serve warm, with the client-side "all decoding" rate (--rounds 1).
step 220 serve env ONLY=longdoc LABEL="$label" bash bench/serve_h200.sh "$out" --rounds 1 --warmup 16
