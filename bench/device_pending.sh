#!/usr/bin/env bash
# The GPU measurements still open, in one call on a lent machine (each step under its own time
# limit, so one that hangs leaves the rest their time). Carry .whl-serve/ (bench/results/README.md).
# Usage: [ONLY=24] bash bench/device_pending.sh OUT_DIR   (the device tool returns 8 files: tar OUT_DIR)
# The label and the KV cache follow the card: h200 (72 GiB of KV) or h100 (40 GiB: 64 streams of
# 4K prompts need about 35). KV_GIB overrides.
set -uo pipefail
out=${1:?OUT_DIR}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    label=h200 kv_gib=${KV_GIB:-72}
else
    label=h100 kv_gib=${KV_GIB:-40}
fi
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
# A short chunk after a long prefix (a question after its document): the cuDNN backend's keys
# split against one call, and its tests on the card (issue 24's follow-up prefill).
step 60 cudnn-split-tests python3 -m pytest tests/engine/test_cudnn_split.py -q -o addopts= -x
step 120 short-chunk python3 bench/short_chunk_attention.py --label "$label" --out-dir "$out"
step 120 cudnn-plan-cost python3 bench/cudnn_plan_cost.py --label "$label" --out-dir "$out"
# Issue 24: the disk reads by threads (checked as the tiers read, as a reader that knows no
# shape, and bare), then the tiers' bench and their GPU tests. ONLY=24 stops there.
step 90 kv-disk-read python3 bench/kv_disk_read.py --blocks 4096 --threads 8 16 --sync \
    --label "$label" --out-dir "$out"
step 260 kv-tiers python3 bench/kv_tiers.py --device cuda --label "$label" --busy-profile \
    --out-dir "$out"
# The files checked on the GPU (kv_device_checksums, off by default until this is measured).
step 160 kv-tiers-device-sums python3 bench/kv_tiers.py --device cuda --tokens 131072 \
    --device-checksums --label "$label.device-sums" --out-dir "$out"
step 90 tiers-tests python3 -m pytest tests/engine/kv_tiers -q -o addopts= -x
[ "${ONLY:-}" = 24 ] && exit 0
# Issue 22: the engine in-process on this card (64 streams while all decode), then longdoc serve
# with the same KV cache: together (1, 16, 64) and 16 streams spread as users at work.
step 150 generate python3 bench/generate.py --device cuda --kv-gib "$kv_gib" --parts concurrent \
    --label "$label.serve-inprocess" --out-dir "$out"
step 260 serve env ONLY=longdoc LABEL="$label" KV_GIB="$kv_gib" bash bench/serve_h200.sh "$out" \
    --rounds 1 --warmup 16 --steady 16 --steady-rounds 4
