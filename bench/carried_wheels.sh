#!/usr/bin/env bash
# On a lent GPU machine with no network: install the Python packages carried in .whl/ into a
# folder (default /tmp/site) and print the PYTHONPATH that finds them. .whl/ holds wheels, and
# unpacked wheels packed as *.tar.xz where the zipped wheel is over the carry limit (CUTLASS's
# CuTe DSL compiler for flash-attn 4). Usage: export PYTHONPATH=$(bash bench/carried_wheels.sh)
set -euo pipefail
site=${1:-/tmp/site}
mkdir -p "$site"
shopt -s nullglob
for archive in .whl/*.tar.xz; do tar -xJf "$archive" -C "$site"; done
wheels=(.whl/*.whl)
if ((${#wheels[@]})); then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "${wheels[@]}" >&2
fi
# Unpacked wheels' .pth files are not read from PYTHONPATH: add the folders they name.
paths=$site
for pth in "$site"/*.pth; do
    while read -r line || [[ -n $line ]]; do
        [[ -n $line && $line != import* && -d $site/$line ]] && paths=$paths:$site/$line
    done <"$pth"
done
echo "$paths"
