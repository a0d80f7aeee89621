#!/usr/bin/env bash
# bench/serve.py on this machine's CPU: `longdoc serve` and `transformers serve
# --continuous-batching` on the default model (its GGUF converted once to a safetensors folder,
# fp32 on both), one after the other, the same client load against each. Smaller than the GPU
# load (a 135M model on a few cores): 1, 4 and 16 streams of 1K-token prompts, 64 new tokens.
# Usage: bash bench/serve_cpu.sh [OUT_DIR] [serve.py arguments...]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results}
shift || true
py=${PYTHON:-.venv/bin/python}
ckpt=$($py -c 'import sys
from pathlib import Path
from engine.gguf_convert import convert_gguf
from worker.model.source import find_default_gguf
print(convert_gguf(find_default_gguf(), Path(sys.argv[1])))' "${TMPDIR:-/tmp}/longdoc-serve-cpu") || exit 1
load=(--concurrency 1,4,16 --prompt-tokens 1024 --new-tokens 64 --rounds 2 "$@")

source bench/serve_wait.sh

data=$(mktemp -d)
LONGDOC_DATA_DIR=$data LONGDOC_MODEL=$ckpt LONGDOC_ENGINE_DEVICE=cpu LONGDOC_ENGINE_DTYPE=float32 \
    $py -c 'import sys; from worker.cli import main; sys.argv[0] = "longdoc"; main()' \
    serve --port 8010 --log-level warning >"$data/longdoc_serve.log" 2>&1 &
pid=$!
if wait_ready http://127.0.0.1:8010/health 300 $pid; then
    $py bench/serve.py --target longdoc=http://127.0.0.1:8010 --out-dir "$out" --label cpu.longdoc \
        "${load[@]}"
else
    echo "longdoc serve did not start"; tail -30 "$data/longdoc_serve.log"
fi
kill $pid; wait $pid 2>/dev/null

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$(dirname "$py")/transformers" serve "$ckpt" \
    --continuous-batching --device cpu --dtype float32 --port 8011 --host 127.0.0.1 \
    --log-level warning >"$data/transformers_serve.log" 2>&1 &
pid=$!
if wait_ready http://127.0.0.1:8011/health 300 $pid; then
    $py bench/serve.py --target transformers=http://127.0.0.1:8011 --out-dir "$out" \
        --label cpu.transformers --no-ignore-eos --model "$ckpt" "${load[@]}"
else
    echo "transformers serve did not start"; tail -30 "$data/transformers_serve.log"
fi
kill $pid; wait $pid 2>/dev/null
rm -rf "$data"
