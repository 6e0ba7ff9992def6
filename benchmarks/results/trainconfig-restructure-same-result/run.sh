#!/usr/bin/env bash
# A/B check of the TrainConfig restructure (commit 6e9323d, 2026-11-23: "Same result: paper preset
# seed 0, STS-B test 85.607 before and after"): ab_old_* before, ab_new_* after, two runs each. The
# command that produced these files was not recorded (each holds peer, loss, seed, spearman,
# train_pairs_per_s, steps, versions).
# command: not recorded
echo "benchmarks/results/trainconfig-restructure-same-result: the command that produced these files was not recorded (see the comments in this run.sh)" >&2
exit 1
