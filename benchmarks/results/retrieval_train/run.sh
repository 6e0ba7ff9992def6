#!/usr/bin/env bash
# Retrieval training on mined negatives (issue 41), 5000 Flickr30k pairs, 3 seeds (benchmarks/README.md,
# "Retrieval training on mined negatives"): the selection, then the rows; runs are reused across
# invocations, so the summary holds rows of several sessions (each row's "dates"). The later
# same-session re-timings were `--rerun sentence-transformers:mnrl:mined` and
# `--rerun anglekit:paper:mined`; the exploratory rows anglekit:paper[ibn_weight=4]:mined and
# [ibn_weight=8] were added on 2026-11-29; the other arguments of those invocations were not recorded.
# The smoke file is the script's end-to-end check (its second command), not a result.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_retrieval_train.py --threads 2
.venv/bin/python benchmarks/bench_retrieval_train.py --rows 200 --seeds 0 --smoke
