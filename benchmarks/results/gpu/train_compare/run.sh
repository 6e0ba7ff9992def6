#!/usr/bin/env bash
# Training speed against sentence-transformers on the same H100, 2026-11-26 (docs/gpu.md, "Training
# speed against sentence-transformers"): each row its own process of benchmarks/anglekit_train.py
# --device cuda or benchmarks/peers/st_train.py --device cuda, over two calls of the device tool
# (call3, call4 in the file names). The rows' other flags were not recorded; each JSON records its
# settings (precision_requested, compact_embeddings, seed; for sentence-transformers precision and
# batches). train_compare_unpad/run_on_device.sh is the recorded successor of this comparison.
# command: not recorded
echo "benchmarks/results/gpu/train_compare: the command that produced these files was not recorded (see the comments in this run.sh)" >&2
exit 1
