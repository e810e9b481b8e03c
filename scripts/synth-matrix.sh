#!/usr/bin/env bash
# Writes every generated kernel source and cache key of the synthesis matrix (gbx-synth matrix)
# into OUT, from this checkout's templates: run it before and after a change, then
# `diff -r BEFORE AFTER` shows every kernel and key the change altered (none for a refactor).
#   scripts/synth-matrix.sh OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
out=${1:?usage: scripts/synth-matrix.sh OUT}
export GBX_TEMPLATE_DIR=$root/templates
export GBX_CACHE_DIR=${GBX_CACHE_DIR:-$build/matrix-cache}
"$build/tools/gbx-synth" matrix --out "$out"
(cd "$out" && ls | wc -l | xargs echo "files:" && sha256sum keys.tsv)
