#!/usr/bin/env bash
# MiniLM training on an AMD EPYC with AVX2 only (no bf16: both libraries train fp32), issue 41's
# check, 2026-11-28, seeds interleaved row by row, nothing else running (benchmarks/README.md, "An AMD
# EPYC with AVX2 only"). The two profiles (profile-*.txt, 40 steps each) came from
# benchmarks/profile_train_step.py; the lab notes give only "40 steps each", so the two profile
# commands below are that script's own documented invocations with those files as OUT; the JSON each
# wrote (--out) was not kept and its path was not recorded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_train.py --only anglekit:paper:grouped:auto --only sentence-transformers:cosent:grouped \
    --seeds 0 1 2 --threads 2 --force --results-dir benchmarks/results/train-minilm-epyc-avx2
out=benchmarks/results/train-minilm-epyc-avx2
.venv/bin/python benchmarks/profile_train_step.py benchmarks/anglekit_train.py $out/profile-anglekit-paper-40steps.txt \
    --objective paper --seed 0 --max-steps 40 --threads 2 --out "$(mktemp)"
.venv/bin/python benchmarks/profile_train_step.py benchmarks/peers/st_train.py $out/profile-st-cosent-grouped-40steps.txt \
    --loss cosent --seed 0 --max-steps 40 --group-by-length --eval-limit 50 --threads 2 --out "$(mktemp)"
