#!/usr/bin/env bash
# Same speed before and after "one shape for a run" (issue 58, item 3), measured where the change
# could show: the run machinery around the model (stages, routing each batch, the loader), on a
# random 2-layer BERT (hidden 32, tests/helpers.build_tiny_bert) over 64 pairs for 60 steps, so that
# the model's own arithmetic is small beside that machinery. CPU, 2 threads, seed 0; the code before
# the change (BEFORE: a tree whose src/ is main at the branch point, made with
# git archive 3092e76 src | tar -x -C /tmp/rs-base) and after it (AFTER), interleaved
# before then after 3 times, then runs 4 to 9 in turn after-first (even) and before-first (odd),
# so that the order's own effect under a changing load shows; times.txt: train_seconds (the training loop) of each run, in the order they ran.
# benchmarks/bench_train.py's MiniLM row was not run: at the load this machine had (15 on 2 cores,
# shared with other work) one 3-step run took over 15 minutes, most of it the STS-B evaluation.
# Usage, from the repository root: benchmarks/results/run-shape-same-result/speed/run.sh BEFORE_TREE [AFTER_TREE]
set -euo pipefail
BEFORE=${1:?usage: run.sh BEFORE_TREE [AFTER_TREE]}
AFTER=${2:-$(pwd)}
HERE=benchmarks/results/run-shape-same-result/speed
WORK=${WORK:-/tmp/run-shape-speed}
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
rm -rf "$WORK" && mkdir -p "$WORK"
PYTHONPATH=$AFTER/src:tests "$PY" -c "import sys, helpers; from pathlib import Path; w = Path(sys.argv[1]); helpers.build_tiny_bert(w / 'model'); helpers.write_pairs(w / 'pairs.jsonl', 64, seed=0)" "$WORK"
: > "$HERE/times.txt"
for n in 1 2 3 4 5 6 7 8 9; do
  order="before after"; [ "$n" -ge 4 ] && [ $((n % 2)) = 0 ] && order="after before"
  for side in $order; do
    tree=$BEFORE; [ "$side" = after ] && tree=$AFTER
    PYTHONPATH=$tree/src "$PY" -m anglekit.cli train --model "$WORK/model" --train-data "$WORK/pairs.jsonl" --positive-threshold 3 \
      --batch-size 8 --max-steps 60 --device cpu --precision fp32 --seed 0 --quiet --output-dir "$WORK/$side-$n" > /dev/null 2>&1
    "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], r['steps'], 'steps', f\"{r['train_seconds']:.2f} s\")" \
      "$WORK/$side-$n/results.json" "$side-$n" | tee -a "$HERE/times.txt"
  done
done
