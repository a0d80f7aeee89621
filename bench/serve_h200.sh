#!/usr/bin/env bash
# bench/serve.py on a lent GPU machine (no network): `longdoc serve` and `transformers serve
# --continuous-batching` on one random-weight Llama-3-8B checkpoint (bf16), one after the other
# (each alone on the GPU), the same client load against each. The image lacks the app's packages:
# carry them as wheels in .whl-serve/ (bench/results/README.md says which).
# Usage: [KV_GIB=72] [LABEL=h200] [ONLY=longdoc|transformers] bash bench/serve_h200.sh OUT_DIR [serve.py arguments...]
set -uo pipefail
out=${1:?OUT_DIR}
shift
ckpt=/tmp/serve-ckpt
python3 bench/serve_checkpoint.py "$ckpt" || exit 1
# The KV cache: 72 GiB on an H200 (141 GB); KV_GIB=30 on an 80 GB H100.
kv_gib=${KV_GIB:-72}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader

source bench/serve_wait.sh

export LONGDOC_DATA_DIR=/tmp/longdoc-data LONGDOC_MODEL=$ckpt LONGDOC_ENGINE_DEVICE=cuda \
    LONGDOC_ENGINE_DTYPE=bfloat16 LONGDOC_ENGINE_MAX_KV_CACHE_BYTES=$((kv_gib * 1024 ** 3)) \
    LONGDOC_ENGINE_MAX_NUM_SEQS=64
if [ "${ONLY:-}" != transformers ]; then
    python3 -c 'import sys; from worker.cli import main; sys.argv[0] = "longdoc"; main()' \
        serve --port 8000 --log-level warning >"$out/longdoc_serve.log" 2>&1 &
    pid=$!
    if wait_ready http://127.0.0.1:8000/v1/models 300 $pid; then
        python3 bench/serve.py --target longdoc=http://127.0.0.1:8000 --out-dir "$out" \
            --label "${LABEL:-h200}.longdoc" "$@"
    else
        echo "longdoc serve did not start"; tail -30 "$out/longdoc_serve.log"
    fi
    kill $pid; wait $pid 2>/dev/null
fi

if [ "${ONLY:-}" != longdoc ]; then
    # transformers serve lists models from the hub cache, which a bare machine lacks (GET /v1/models fails).
    export HF_HUB_CACHE=${HF_HUB_CACHE:-/tmp/hf-hub}
    mkdir -p "$HF_HUB_CACHE"
    transformers serve "$ckpt" --continuous-batching --device cuda --dtype bfloat16 --port 8001 \
        --host 127.0.0.1 >"$out/transformers_serve.log" 2>&1 &
    pid=$!
    if wait_ready http://127.0.0.1:8001/v1/models 300 $pid; then
        python3 bench/serve.py --target transformers=http://127.0.0.1:8001 --out-dir "$out" \
            --label "${LABEL:-h200}.transformers" --no-ignore-eos --model "$ckpt" "$@"
    else
        echo "transformers serve did not start"; tail -30 "$out/transformers_serve.log"
    fi
    kill $pid; wait $pid 2>/dev/null
fi
