#!/usr/bin/env bash
# The GPU measurements still open, in one call on a lent machine (each step under its own time
# limit, so one that hangs leaves the rest their time). Carry .whl-serve/ (bench/results/README.md).
# Usage: [ONLY=23|23a|23b|23c|23d|23e|23f|23g|23h|23i|23j|23k|23l|23m|23n|23o|24] [WHEELS=DIR] bash bench/device_pending.sh OUT_DIR
# (the device tool returns 8 files: tar OUT_DIR). WHEELS (default .whl-serve) holds the wheels to
# install; the engine's steps need only the test fixtures' (SQLAlchemy, greenlet, Alembic, Mako,
# MarkupSafe) and cuDNN's frontend.
# The label and the KV cache follow the card: h200 (72 GiB of KV) or h100 (40 GiB: 64 streams of
# 4K prompts need about 35). KV_GIB overrides.
set -uo pipefail
out=${1:?OUT_DIR}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    label=h200 kv_gib=${KV_GIB:-72}
else
    label=h100 kv_gib=${KV_GIB:-40}
fi
python3 -m pip install -q --no-index --no-deps --target /tmp/site "${WHEELS:-.whl-serve}"/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
step() {  # step SECONDS NAME COMMAND...
    local limit=$1 name=$2
    shift 2
    echo "== $name ($(date -u +%H:%M:%S))"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "   rc=$rc ($(date -u +%H:%M:%S))"
    tail -4 "$out/$name.log"
    return $rc
}
ab_pdl() {  # ab_pdl SECONDS NAME COMMAND...: step without, then with --pdl; {pdl} in an
    # argument becomes no-pdl or pdl, and NAME gets the same suffix
    local limit=$1 name=$2 pdl
    shift 2
    for pdl in no-pdl pdl; do
        local args=("${@//\{pdl\}/$pdl}")
        args+=("--$pdl")  # --no-pdl or --pdl
        step "$limit" "$name-$pdl" "${args[@]}"
    done
}
# One stream without, then with PDL (ab_pdl), each under LIMIT seconds: the 8B in FP8 compiled,
# the 70B in FP8 eager (on an H200 only: it does not fit an H100 beside its cache), the 8B in
# bf16 compiled.
ab_fp8_compile() {  # ab_fp8_compile LIMIT
    ab_pdl "$1" gen-fp8-compile python3 bench/generate.py --device cuda --weights fp8 \
        --kv-dtype fp8 --kv-gib 30 --compile --parts single --out-dir "$out" \
        --label "$label.fp8.compile.{pdl}"
}
ab_70b() {  # ab_70b LIMIT
    [ "$label" = h200 ] || return 0
    ab_pdl "$1" gen-70b python3 bench/generate.py --device cuda \
        --shape llama3-70b-random --weights fp8 --kv-dtype fp8 --kv-gib 40 \
        --max-num-seqs 32 --parts single --out-dir "$out" \
        --label "$label.70b-fp8.{pdl}"
}
ab_bf16_compile() {  # ab_bf16_compile LIMIT
    ab_pdl "$1" gen-bf16-compile python3 bench/generate.py --device cuda \
        --kv-gib "$kv_gib" --compile --parts single --out-dir "$out" \
        --label "$label.bf16.compile.{pdl}"
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
    # Issue 23: FP8 activations in 2-64-row decode products (fp8_w8a8.py) and the FP8 decode
    # attention's dots transposed, most wanted first. The GPU tests (the new kernels, the FP8 KV
    # cache's consistency and its CUDA logits bound, the tiers with an FP8 cache), the products'
    # tiles on this card (every kind at 64, 1, 32 and 16 rows), the attention's, then the engine
    # end to end.
    step 130 fp8-tests python3 -m pytest tests/engine/test_fp8_small_batch.py \
        tests/engine/test_fp8_weights.py tests/engine/test_fp8_kv.py tests/engine/test_paged_decode.py \
        tests/engine/kv_tiers/test_engine_tiers.py -q -o addopts= -k "cuda or fp8 or compiles"
    step 170 fp8-sweep python3 bench/fp8_matmul_sweep.py --rows 64 1 32 16 --budget-s 150 \
        --kinds default default_bf16_activations w8a8 gemv scaled_mm \
        --out "$out/fp8_matmul_sweep_$label.json"
    step 110 paged-decode-fp8 python3 bench/paged_decode_fp8.py --out "$out/paged_decode_fp8_$label.json"
    step 100 gen-fp8 python3 bench/generate.py --device cuda --weights fp8 --kv-dtype fp8 \
        --kv-gib 30 --parts single concurrent --out-dir "$out" --label "$label.fp8"
fi
if [ "${ONLY:-}" = 23a ]; then
    # Issue 23 on whichever card comes: the GPU tests after the last fixes, the decode
    # attention's register caps, then FP8 end to end, eager.
    step 120 fp8-tests python3 -m pytest tests/engine/test_fp8_small_batch.py \
        tests/engine/test_fp8_kv.py tests/engine/test_fp8_weights.py tests/engine/test_paged_decode.py \
        tests/engine/kv_tiers/test_engine_tiers.py -q -o addopts= \
        -k "(cuda or compiles or nan or fp8 or register) and not interpreted"
    step 120 paged-decode-fp8 python3 bench/paged_decode_fp8.py --tiles 64 128 --warps 4 \
        --stages 2 3 --maxnreg 168 128 --out "$out/paged_decode_fp8_$label.json"
    step 70 gen-fp8 python3 bench/generate.py --device cuda --weights fp8 --kv-dtype fp8 \
        --kv-gib 30 --parts single concurrent --out-dir "$out" --label "$label.fp8"
fi
if [ "${ONLY:-}" = 23b ]; then
    # Issue 23 on an H200 (its targets): the 70B shape (70 GB of FP8 weights beside a 40 GiB
    # cache), the 128K prompt with FP8 weights and KV with and without FP8 attention (the
    # cuDNN frontend wheel carried), the one-row products' tiles for the 8B and the 70B, the
    # 8B in FP8 end to end (SHORT=1 leaves it out).
    if [ "$label" != h200 ]; then
        echo "ONLY=23b measures the H200's targets: this is $label"
        exit 0
    fi
    # First the FP8 attention's GPU tests (its review's changes had not run on a GPU).
    step 60 cudnn-fp8-tests python3 -m pytest tests/engine/test_cudnn_fp8.py -q -o addopts=
    # The 70B's parts, the latency table last (its log keeps each part's row if time runs out).
    step 200 gen-70b python3 bench/generate.py --device cuda --shape llama3-70b-random \
        --weights fp8 --kv-dtype fp8 --kv-gib 40 --max-num-seqs 32 --parts single long latency \
        --label "$label.70b-fp8" --out-dir "$out"
    for attn in fp8-attention no-fp8-attention; do
        step 80 "prefill-$attn" python3 bench/prefill.py --device cuda --tokens 131072 \
            --weights fp8 --kv-dtype fp8 --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none \
            --"$attn" --out "$out" --label "$label.fp8-24gib.$attn"
    done
    step 100 gemv-sweep python3 bench/fp8_matmul_sweep.py --rows 1 --budget-s 90 \
        --kinds default gemv --shapes gate_up_70b down_70b qkv_70b o_70b qkv o gate_up down \
        --out "$out/fp8_matmul_sweep_$label.gemv.json"
    [ -z "${SHORT:-}" ] && step 80 gen-fp8 python3 bench/generate.py --device cuda \
        --weights fp8 --kv-dtype fp8 --kv-gib 30 --parts single concurrent --out-dir "$out" \
        --label "$label.fp8"
fi
if [ "${ONLY:-}" = 23c ]; then
    # Issue 23: FP8 prefill attention through cuDNN's sdpa_fp8 (the frontend wheel carried in
    # .whl-serve): its GPU tests, a 128K prompt with FP8 weights and KV under 24 GiB with and
    # without it, then one 8K chunk after 8K and 120K keys through the split backend, bf16 and
    # FP8. On an H200 then the 70B one stream.
    step 60 cudnn-fp8-tests python3 -m pytest tests/engine/test_cudnn_fp8.py -q -o addopts=
    for attn in fp8-attention no-fp8-attention; do
        step 80 "prefill-$attn" python3 bench/prefill.py --device cuda --tokens 131072 \
            --weights fp8 --kv-dtype fp8 --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none \
            --"$attn" --out "$out" --label "$label.fp8-24gib.$attn"
    done
    step 60 cudnn-fp8 python3 bench/cudnn_fp8_attention.py --contexts 16384 131072 \
        --out "$out/cudnn_fp8_attention_$label.json"
    if [ "$label" = h200 ]; then
        step 100 gen-70b python3 bench/generate.py --device cuda --shape llama3-70b-random \
            --weights fp8 --kv-dtype fp8 --kv-gib 40 --max-num-seqs 32 --parts single \
            --label "$label.70b-fp8" --out-dir "$out"
    fi
fi
if [ "${ONLY:-}" = 23d ]; then
    # Issue 23: which sdpa_fp8 graphs cuDNN plans on this card (masks, padding, output type,
    # grouped heads, log-sum-exps), and a chunk's mask-free prefix part in FP8 against bf16.
    step 120 cudnn-fp8-variants python3 bench/cudnn_fp8_attention.py --hopper-variants \
        --out "$out/cudnn_fp8_variants_$label.json"
fi
if [ "${ONLY:-}" = 23e ]; then
    # Issue 23: FP8 attention's inputs rounded in one Triton pass: its GPU tests, the chunk after
    # 8K and 120K keys (bf16 and FP8), then the 128K prompt with it.
    step 90 cudnn-fp8-tests python3 -m pytest tests/engine/test_cudnn_fp8.py -q -o addopts=
    step 40 cudnn-fp8 python3 bench/cudnn_fp8_attention.py --contexts 16384 131072 \
        --out "$out/cudnn_fp8_attention_$label.json"
    step 70 prefill-fp8-attention python3 bench/prefill.py --device cuda --tokens 131072 \
        --weights fp8 --kv-dtype fp8 --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none \
        --fp8-attention --out "$out" --label "$label.fp8-24gib.fp8-attention"
fi
if [ "${ONLY:-}" = 23f ]; then
    # Issue 23: programmatic dependent launch (EngineConfig.pdl). Its GPU tests (the same tokens
    # with and without it, eager and compiled), then one stream A/B on this card: the 8B in FP8
    # compiled, the 70B in FP8 eager (H200 only), then the 128K FP8 prompt with FP8 attention
    # for calls of 16K keys and more.
    step 150 pdl-tests python3 -m pytest tests/engine/test_fp8_small_batch.py \
        tests/engine/test_paged_decode.py -q -o addopts= -k "programmatic or compiles or hopper"
    ab_fp8_compile 150
    ab_70b 90
    step 80 prefill-fp8-attention python3 bench/prefill.py --device cuda --tokens 131072 \
        --weights fp8 --kv-dtype fp8 --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none \
        --fp8-attention --out "$out" --label "$label.fp8-24gib.fp8-attention"
fi
if [ "${ONLY:-}" = 23g ]; then
    # Issue 23, after 23f on the same machine: the FP8 step's graph replay with and without PDL
    # (1 and 64 rows), bf16 one stream compiled with and without it, the 8B in FP8 at 64
    # streams (compiled), the 70B's 32K prompt and latency table. PDL=1 turns it on in the last
    # two (off otherwise: these steps were its "without" side before it was the default).
    pdl_flag=--no-pdl
    [ -n "${PDL:-}" ] && pdl_flag=--pdl
    ab_pdl 120 decode-profile-fp8 python3 bench/decode_profile.py --weights fp8 \
        --kv-dtype fp8 --compile --batches 1 64 --steps 40
    ab_bf16_compile 150
    step 150 gen-fp8-compile-concurrent python3 bench/generate.py --device cuda --weights fp8 \
        --kv-dtype fp8 --kv-gib 30 --compile --parts concurrent --out-dir "$out" \
        --label "$label.fp8.compile.concurrent" "$pdl_flag"
    if [ "$label" = h200 ]; then
        step 170 gen-70b-latency python3 bench/generate.py --device cuda \
            --shape llama3-70b-random --weights fp8 --kv-dtype fp8 --kv-gib 40 \
            --max-num-seqs 32 --parts long latency --out-dir "$out" \
            --label "$label.70b-fp8.latency" "$pdl_flag"
    fi
fi
if [ "${ONLY:-}" = 23h ]; then
    # Issue 23, PDL in a short call: its GPU tests (the late producer; the same tokens, eager),
    # then one stream of the 8B in FP8, compiled, without and with it.
    step 60 pdl-tests python3 -m pytest tests/engine/test_fp8_small_batch.py -q -o addopts= \
        -k "waits_for_a_late or (writes_the_same and False)"
    ab_fp8_compile 105
fi
if [ "${ONLY:-}" = 23i ]; then
    # Issue 23, PDL in one call of a short device budget, most wanted first: its GPU tests (the
    # late producer; the same tokens, eager and compiled), then one stream without and with it:
    # the 8B in FP8 compiled, the 70B in FP8 eager (H200 only), the 8B in bf16 compiled.
    step 150 pdl-tests python3 -m pytest tests/engine/test_fp8_small_batch.py -q -o addopts= \
        -k "programmatic"
    ab_fp8_compile 130
    ab_70b 90
    step 90 l2-prefetch-probe python3 bench/l2_prefetch_probe.py \
        --out "$out/l2_prefetch_probe_$label.json"
    ab_bf16_compile 130
fi
if [ "${ONLY:-}" = 23j ]; then
    # Issue 23 on an H100 when no H200 comes: the PDL tests (the late producer first), then where
    # the 128K prefill's time goes, FP8 weights, KV and attention, then bf16.
    step 150 pdl-tests python3 -m pytest tests/engine/test_fp8_small_batch.py -q -o addopts= \
        -k "programmatic"
    step 90 l2-prefetch-probe python3 bench/l2_prefetch_probe.py \
        --out "$out/l2_prefetch_probe_$label.json"
    step 200 prefill-profile-fp8 python3 bench/prefill_profile.py --tokens 131072 \
        --weights fp8 --kv-dtype fp8 --fp8-attention
    step 150 prefill-profile-bf16 python3 bench/prefill_profile.py --tokens 131072
fi
if [ "${ONLY:-}" = 23k ]; then
    # Issue 23: the prefill products' activations rounded in one Triton pass (fp8_tokens.py) and
    # PDL on by default. Their GPU tests, then the 128K FP8 prompt (FP8 attention, 24 GiB cap)
    # at .ab-old (an export of engine/ and bench/ before the change, carried) and at this tree,
    # one after the other on this card, then compiled, then where the eager run's time goes;
    # on an H200 the 70B one stream without and with PDL last.
    step 150 fp8-tokens-tests python3 -m pytest tests/engine/test_fp8_weights.py \
        tests/engine/test_fp8_small_batch.py -q -o addopts= -k "cuda"
    prefill_fp8=(bench/prefill.py --device cuda --tokens 131072 --weights fp8 --kv-dtype fp8
        --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none --fp8-attention --out "$out")
    step 100 prefill-fp8-before bash -c 'cd .ab-old && PYTHONPATH=/tmp/site:$PWD:$OLDPWD exec python3 "$@"' \
        _ "${prefill_fp8[@]}" --label "$label.fp8-24gib.before-fused-quant"
    step 100 prefill-fp8-after python3 "${prefill_fp8[@]}" --label "$label.fp8-24gib.fused-quant"
    step 200 prefill-fp8-compile python3 "${prefill_fp8[@]}" --compile \
        --label "$label.fp8-24gib.fused-quant.compile"
    step 100 prefill-profile-fp8 python3 bench/prefill_profile.py --tokens 131072 \
        --weights fp8 --kv-dtype fp8 --fp8-attention
    ab_70b 90
fi
if [ "${ONLY:-}" = 23l ]; then
    # Issue 23 on an H200 (its targets), PDL on by default since call M: the 70B one stream
    # compiled (target 45 tokens/s), the 128K FP8 prompt compiled (target 7.0 s; 7.68 s on an
    # H100, call N), the 8B FP8 and bf16 one stream compiled (targets 400 and 225), then the
    # 70B's latency table and long prompt.
    step 150 gen-70b-single python3 bench/generate.py --device cuda \
        --shape llama3-70b-random --weights fp8 --kv-dtype fp8 --kv-gib 40 --compile \
        --max-num-seqs 32 --parts single --out-dir "$out" --label "$label.70b-fp8.compile.pdl"
    step 120 prefill-fp8-compile python3 bench/prefill.py --device cuda --tokens 131072 \
        --weights fp8 --kv-dtype fp8 --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none \
        --fp8-attention --compile --out "$out" --label "$label.fp8-24gib.compile"
    step 100 gen-fp8-compile python3 bench/generate.py --device cuda --weights fp8 \
        --kv-dtype fp8 --kv-gib 30 --compile --parts single concurrent --out-dir "$out" \
        --label "$label.fp8.compile.pdl"
    step 100 gen-bf16-compile python3 bench/generate.py --device cuda --kv-gib "$kv_gib" \
        --compile --parts single --out-dir "$out" --label "$label.bf16.compile.pdl"
    step 200 gen-70b-latency python3 bench/generate.py --device cuda \
        --shape llama3-70b-random --weights fp8 --kv-dtype fp8 --kv-gib 40 \
        --compile --max-num-seqs 32 --parts latency long --out-dir "$out" \
        --label "$label.70b-fp8.compile.latency"
fi
if [ "${ONLY:-}" = 23m ]; then
    # Issue 23 on an H200: the split kernel's own merge and an FP8 cache's V read as pairs (on by
    # default since an H100's call O) checked on this card, then the 8B FP8 compiled at one and
    # 64 streams (400 and 7,000 tokens/s) with them and without them (FUSED_MERGE_ROWS and
    # FP8_V_PAIRS turned off in the device's copy), then the 70B one stream compiled (45).
    step 150 gpu-tests python3 -m pytest tests/engine/test_paged_decode.py \
        tests/engine/test_fp8_small_batch.py tests/engine/test_fp8_kv.py -q -o addopts= \
        -k "cuda or nothing_compiles or no_kernel_compiles" || exit 1
    gen_fp8=(bench/generate.py --device cuda --weights fp8 --kv-dtype fp8 --kv-gib 30 --compile
        --out-dir "$out" --parts single concurrent)
    step 100 gen-fp8-compile python3 "${gen_fp8[@]}" --label "$label.fp8.compile"
    sed -i 's/^FUSED_MERGE_ROWS = 4096$/FUSED_MERGE_ROWS = 0/' engine/attention/decode.py
    sed -i 's/^FP8_V_PAIRS = True$/FP8_V_PAIRS = False/' engine/attention/paged_decode.py
    step 100 gen-fp8-before python3 "${gen_fp8[@]}" --label "$label.fp8.compile.two-kernel-merge.bytes"
    sed -i 's/^FUSED_MERGE_ROWS = 0$/FUSED_MERGE_ROWS = 4096/' engine/attention/decode.py
    sed -i 's/^FP8_V_PAIRS = False$/FP8_V_PAIRS = True/' engine/attention/paged_decode.py
    [ "$label" = h200 ] && step 150 gen-70b-single python3 bench/generate.py --device cuda \
        --shape llama3-70b-random --weights fp8 --kv-dtype fp8 --kv-gib 40 --compile \
        --max-num-seqs 32 --parts single --out-dir "$out" --label "$label.70b-fp8.compile"
fi
if [ "${ONLY:-}" = 23n ]; then
    # Issue 23, the rest on an H200: the one-row GEMV's fusions against the compiled kernels
    # they replace (FP8 weights; bf16 weights against cuBLAS), the greedy argmax, bf16 one
    # stream compiled (225), the GEMV's tiles on this card (prefetch among them, the 8B's and
    # the 70B's shapes).
    step 120 gemv-fusion python3 bench/fp8_gemv_fusion.py --weights fp8 bf16 \
        --out "$out/fp8_gemv_fusion_$label.json"
    step 40 argmax python3 bench/argmax_micro.py --out "$out/argmax_micro_$label.json"
    step 80 gen-bf16-compile python3 bench/generate.py --device cuda --kv-gib "$kv_gib" \
        --compile --parts single --out-dir "$out" --label "$label.bf16.compile"
    step 150 gemv-sweep python3 bench/fp8_matmul_sweep.py --rows 1 --budget-s 130 \
        --kinds gemv default --shapes qkv o gate_up down qkv_70b o_70b gate_up_70b down_70b \
        --out "$out/fp8_matmul_sweep_$label.gemv.json"
fi
if [ "${ONLY:-}" = 23o ]; then
    # Issue 23: the 128K FP8 prompt compiled (7.0 s), the 70B's latency table (H200).
    step 120 prefill-fp8-compile python3 bench/prefill.py --device cuda --tokens 131072 \
        --weights fp8 --kv-dtype fp8 --memory-cap-gib 24 --runs 1 --warmup 1 --hf-modes none \
        --fp8-attention --compile --out "$out" --label "$label.fp8-24gib.compile"
    [ "$label" = h200 ] && step 200 gen-70b-latency python3 bench/generate.py --device cuda \
        --shape llama3-70b-random --weights fp8 --kv-dtype fp8 --kv-gib 40 \
        --compile --max-num-seqs 32 --parts latency long --out-dir "$out" \
        --label "$label.70b-fp8.compile.latency"
fi
