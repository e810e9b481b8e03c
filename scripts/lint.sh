#!/usr/bin/env bash
# Formatting and lint over the tree: clang-format (.clang-format) on every C/C++/CUDA file git
# tracks, ruff format and ruff check (pyproject.toml's [tool.ruff]) on the Python. Read-only:
# prints what differs and fails; `scripts/lint.sh --fix` rewrites the files instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=${GBX_LINT_VENV:-$root/build/lint-venv}
[ -x "$venv/bin/ruff" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q -r scripts/lint-requirements.txt; }
mapfile -t cxx < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${cxx[@]}"
  "$venv/bin/ruff" format .
  "$venv/bin/ruff" check --fix .
  exit
fi
rc=0
clang-format --dry-run -Werror "${cxx[@]}" || { echo "lint: clang-format differs (scripts/lint.sh --fix)" >&2; rc=1; }
"$venv/bin/ruff" format --check . || rc=1
"$venv/bin/ruff" check . || rc=1
[ $rc -eq 0 ] && echo "lint: ${#cxx[@]} C++ files and the Python tree are clean"
exit $rc
