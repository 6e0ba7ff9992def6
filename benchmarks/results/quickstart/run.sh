#!/usr/bin/env bash
# The README's quick start, timed with the machine's load, 2026-11-28 (docs/get-started.md: recorded
# by benchmarks/bench_quickstart.py, which runs `bash scripts/quickstart.sh`; quickstart.json's
# "command" field is that measured command). Whether the script ran the quick start itself (below) or
# recorded a run made by hand (--from-run runs/quickstart --load-log LOG) was not noted.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_quickstart.py
