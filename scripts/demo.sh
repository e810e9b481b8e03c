#!/usr/bin/env bash
# The main job on built-in defaults: emit the generated kernel source for both devices, compile
# the CPU one into the cache, run the built-in ALU_LOOP micro-ROM on the CPU backend for
# 64 envs x 60 frames on all cores, print env 0's final state and the kernel's cache entry.
# No ROM download, no GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
bin=${GBX_BUILD_DIR:-$root/build}/tools
cd "$root"
"$bin/gbx-synth" emit --stage full_step --device cpu --out artifacts/kernels
"$bin/gbx-synth" emit --stage full_step --device cuda --out artifacts/kernels
"$bin/gbx-synth" compile --stage full_step --device cpu
out=$("$bin/gbx-run" run --rom builtin:ALU_LOOP --backend cpu --envs 64 --frames 60 --print-state)
echo "$out"
key=$(awk '$1 == "kernel" && $2 ~ /^[0-9a-f]+$/ {print $2}' <<<"$out")
"$bin/gbx-synth" cache show "$key"
