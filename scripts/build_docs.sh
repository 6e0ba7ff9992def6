#!/usr/bin/env bash
# The strict documentation build (the `docs` extra), as CI runs it: any warning (a broken link or
# anchor, an API reference that does not resolve) fails it. Only the warnings and errors are printed
# (mkdocs' INFO lines are dropped; `--quiet` is not used because mkdocs 1.6 then counts no warning and
# strict mode passes anything). The site goes to a temporary folder, removed afterwards.
# MKDOCS names the mkdocs to run (default: the project's .venv/bin/mkdocs).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdocs="${MKDOCS:-.venv/bin/mkdocs}"
site_dir="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 "$mkdocs" build --strict --site-dir "$site_dir" 2>&1 | grep -v '^INFO'
status=${PIPESTATUS[0]}
rm -rf "$site_dir"
exit "$status"
