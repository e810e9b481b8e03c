#!/usr/bin/env bash
# Builds the docs site (MkDocs + Material + mkdocstrings) into build/docs-site, strict: a broken
# link or anchor, a page missing from the nav, or a public Python name without a docstring
# fails it. The CLI reference is generated from the built tools' --help, the options page from
# the option declaration (gbx-synth options; scripts/build.sh first).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GBX_BUILD_DIR:-$root/build}
venv=${GBX_DOCS_VENV:-$build/docs-venv}
[ -x "$venv/bin/mkdocs" ] || {
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$root/scripts/docs-requirements.txt"
}
python3 "$root/scripts/check_readme.py"
"$venv/bin/python" "$root/scripts/check_docstrings.py"
"$venv/bin/python" "$root/scripts/gen_cli_docs.py" "$build" "$root/docs/cli/reference.md"
"$build/tools/gbx-synth" options >"$root/docs/cli/options.md"
cd "$root"
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --site-dir "$build/docs-site" "$@"
echo "docs: $build/docs-site/index.html"
