#!/usr/bin/env bash
# The GPU measurements still open, in one call on a lent machine (each step under its own time
# limit, so one that hangs leaves the rest their time). Carry .whl-serve/ (bench/results/README.md).
# Usage: [ONLY=23|24] bash bench/device_pending.sh OUT_DIR   (the device tool returns 8 files: tar OUT_DIR)
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
if [ "${ONLY:-24}" = 24 ]; then  # both sections when ONLY is unset
    # Issue 24: the KV tiers at 128K with the load while 8 requests decode (the engine's thread
    # sampled in its longest step; no profiler, whose stop would be that step), the tests that
    # nothing compiles after the engine's prebuild, then the tiers' GPU tests.
    step 200 kv-tiers python3 bench/kv_tiers.py --device cuda --tokens 131072 \
        --label "$label" --out-dir "$out"
    step 90 prebuild-tests python3 -m pytest tests/engine/test_paged_decode.py \
        tests/engine/test_fp8_small_batch.py -q -o addopts= -k "nothing_compiles or prebuild"
    step 90 tiers-tests python3 -m pytest tests/engine/kv_tiers -q -o addopts= -x
fi
if [ "${ONLY:-23}" = 23 ]; then
    # Issue 23: FP8 on this card, most wanted first (the call's 600 s cuts the last steps: a
    # second call gets them). The kernels' tests (the fused FP8 KV write's first run on a GPU),
    # the engine end to end, the 128K prompt in 24 GiB (the fused read of FP8 pages), bf16
    # compiled, the FP8 decode tiles, FP8 compiled, then against _scaled_mm, where a step goes,
    # the products at 32 and 64 rows.
    step 120 fp8-tests python3 -m pytest tests/engine/test_fp8_small_batch.py \
        tests/engine/test_fp8_weights.py tests/engine/test_fp8_kv.py \
        tests/engine/test_paged_decode.py -q -o addopts= -x
    fp8=(python3 bench/generate.py --device cuda --weights fp8 --kv-dtype fp8 --kv-gib 30
        --parts single concurrent --out-dir "$out")
    step 90 gen-fp8 "${fp8[@]}" --label "$label.fp8"
    # 8B, FP8 weights and KV, a 128K prompt within an A10G's 24 GiB (and its prefill time).
    step 120 prefill-fp8-24gib python3 bench/prefill.py --device cuda --weights fp8 \
        --kv-dtype fp8 --tokens 131072 --memory-cap-gib 24 --runs 1 --out "$out" \
        --label "$label.fp8-24gib"
    step 150 gen-bf16-compile python3 bench/generate.py --device cuda --kv-gib "$kv_gib" --compile \
        --parts single concurrent --label "$label.bf16.compile" --out-dir "$out"
    step 100 paged-decode-fp8 python3 bench/paged_decode_fp8.py --out "$out/paged_decode_fp8_$label.json"
    step 150 gen-fp8-compile "${fp8[@]}" --compile --label "$label.fp8.compile"
    step 90 gen-fp8-scaled-mm "${fp8[@]}" --no-fp8-small-batch-kernel --label "$label.fp8-scaled-mm"
    step 60 decode-profile-fp8 python3 bench/decode_profile.py --weights fp8 --kv-dtype fp8 \
        --kernels --batches 1 64 --steps 20
    step 120 fp8-sweep python3 bench/fp8_matmul_sweep.py --rows 32 64 --budget-s 100 \
        --out "$out/fp8_matmul_sweep_$label.json"
fi
