#!/usr/bin/env bash
# The main job on built-in defaults: emit the kernel source, compile it into the cache, run the
# built-in ALU_LOOP micro-ROM on the CPU backend for 64 envs x 60 frames, print env 0's final
# state and the kernel cache entry. No ROM download, no GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
bin=${GBX_BUILD_DIR:-$root/build}/tools
cd "$root"
"$bin/gbx-synth" emit --stage full_step --device cpu --out artifacts/kernels
"$bin/gbx-synth" emit --stage full_step --device cuda --out artifacts/kernels
"$bin/gbx-synth" compile --stage full_step --device cpu
"$bin/gbx-run" run --rom builtin:ALU_LOOP --backend cpu --envs 64 --frames 60 --print-state
key=$("$bin/gbx-run" run --rom builtin:ALU_LOOP --envs 1 --frames 1 | awk '/^kernel /{print $2}')
echo "cache entry: $("$bin/gbx-synth" cache path 2>/dev/null || echo "${GBX_CACHE_DIR:-$HOME/.cache/gbx}")/kernels/v1/${key:0:2}/$key"
ls -l "${GBX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gbx}/kernels/v1/${key:0:2}/$key"
