#!/usr/bin/env bash
# The share of in-batch negatives a guide leaves out on Flickr30k train pairs, no training
# (docs/retrieval.md "A guide against false negatives"), 2026-12-07.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_guide_mask.py --guides pypi:all-mpnet-base-v2 pypi:all-minilm-l6-v2
