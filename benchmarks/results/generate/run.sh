#!/usr/bin/env bash
# LLM-supervised pairs (the paper's Table 5 setting at CPU scale): 500 STS-B train sentences,
# SmolLM2-135M-Instruct's synonyms and antonyms, then MiniLM trained on them against SimCSE on the same
# sentences, seeds 0 1 2 (benchmarks/README.md, "LLM-supervised pairs"). The generation throughput
# was measured by the first run; the 3-seed rerun read the answers from the cache (same command).
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_generate.py --n-sentences 500 --train-seeds 0 1 2
