#!/usr/bin/env bash
# The paper's Table 4 from all-MiniLM-L6-v2, seeds 0 1 2, 2026-11-23 (benchmarks/README.md,
# "Reproducing the paper's Table 4"): objectives, ibn-duplicates (reusing the "all" cells) and pooling
# (reusing them as last_avg). The lab notes' commands write to runs/repro; the committed cells and
# tables are this folder, which report.md names as the output folder (report.md was then rewritten
# with --report-only, the command report.md quotes).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export ANGLEKIT_DATA="${ANGLEKIT_DATA:-../shared/data}"
out=benchmarks/results/reproduce
.venv/bin/python -m anglekit reproduce objectives --seeds 0 1 2 --output-dir $out
.venv/bin/python -m anglekit reproduce ibn-duplicates --seeds 0 1 2 --output-dir $out
.venv/bin/python -m anglekit reproduce pooling --seeds 0 1 2 --output-dir $out
.venv/bin/python -m anglekit reproduce objectives ibn-duplicates pooling --seeds 0 1 2 --output-dir $out --data-root "$ANGLEKIT_DATA" --report-only --quiet
