#!/usr/bin/env bash
# Documents in, retriever out (issue 59, "Measured"): queries SmolLM2-135M-Instruct writes for 5000
# Flickr30k train captions, a teacher (all-mpnet-base-v2), all-MiniLM-L6-v2 trained with each
# objective, the labelled-pairs reference, merges at W = 0.25/0.5/0.75 and sentence-transformers'
# losses on the same data; 3 seeds, every row its own process (benchmarks/bench_adapt.py's docstring).
# Cells are reused across invocations (runs/*.json); the smoke file is the script's end-to-end check
# (the second command), not a result. Not run in full yet.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_adapt.py --threads 2
.venv/bin/python benchmarks/bench_adapt.py --smoke --threads 2
