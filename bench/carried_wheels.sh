#!/usr/bin/env bash
# On a lent GPU machine with no network: install the Python packages carried in .whl/ into a
# folder (default /tmp/site) and print the PYTHONPATH that finds them. .whl/ holds wheels, and
# unpacked wheels packed as *.tar.xz where the zipped wheel is over the carry limit (CUTLASS's
# CuTe DSL compiler for flash-attn 4). Usage: export PYTHONPATH=$(bash bench/carried_wheels.sh)
# Packing a wheel (its .so files shrink most with xz's x86 branch filter: CUTLASS DSL 4.8.1's
# 92 MB CUDA 13 wheel becomes 52 MB): mkdir x && cd x && unzip ../W.whl &&
#   tar cf - . | xz --x86 --lzma2=preset=9e,dict=256MiB -T1 > ../.whl/W.tar.xz
set -euo pipefail
site=${1:-/tmp/site}
mkdir -p "$site"
shopt -s nullglob
wheels=(.whl/*.whl)
if ((${#wheels[@]})); then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "${wheels[@]}" >&2
fi
# After pip: pip --target replaces a top-level folder that is already there; tar merges into it.
for archive in .whl/*.tar.xz; do tar -xJf "$archive" -C "$site"; done
# .pth files are not read from PYTHONPATH: let site process them (path lines and import lines,
# such as CUTLASS DSL's, which puts its dsl_packages folder on sys.path) and print what they add.
python3 - "$site" <<'PY'
import site
import sys

folder = sys.argv[1]
before = set(sys.path)
site.addsitedir(folder)
print(":".join([folder] + [p for p in sys.path if p not in before and p != folder]))
PY
