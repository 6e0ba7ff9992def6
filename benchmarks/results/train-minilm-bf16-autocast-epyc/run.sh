#!/usr/bin/env bash
# MiniLM training rows of issue 27 (bf16 autocast as anglekit's default on CPUs with native bf16),
# 2026-11-25, AMD EPYC with avx512_bf16, no AMX, seeds interleaved row by row, nothing else running
# (benchmarks/README.md, "Issue 27's rows, measured 2026-11-25"). The run's log is bench_train-run.log.
# bench_llm-laptop.log is the log of an LLM laptop-recipe run that the lab notes do not name; its
# command was not recorded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_train.py --new-rows --threads 2 --force --results-dir benchmarks/results/train-minilm-bf16-autocast-epyc
