#!/usr/bin/env bash
# Same result before and after "one shape for a run" (issue 58, item 3): the seeded quick start,
# shortened to 30 steps, and a seeded two-dataset run, each trained by the code before the change
# (BEFORE: a tree whose src/ is main at the branch point) and after it (AFTER: this tree), on the
# CPU with 2 threads. The saved weights must be equal bit for bit (sha256 of model.safetensors)
# and the test scores, steps and loss logs equal to the last digit; same.json records the figures.
# COMPARE=quickstart compares that run alone.
# Usage, from the repository root: benchmarks/results/run-shape-same-result/run.sh BEFORE_TREE [AFTER_TREE]
# (BEFORE_TREE made with: git archive 3092e76 src | tar -x -C /tmp/rs-base)
set -euo pipefail
BEFORE=${1:?usage: run.sh BEFORE_TREE [AFTER_TREE]}
AFTER=${2:-$(pwd)}
HERE=benchmarks/results/run-shape-same-result
WORK=${WORK:-/tmp/run-shape-same-result}
PY=${PY:-.venv/bin/python}
export ANGLEKIT_DATA=${ANGLEKIT_DATA:-$(cd .. && pwd)/shared/data}  # the trees may lie outside the checkout
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
mkdir -p "$WORK"
for side in ${SIDES:-before after}; do  # SIDES=after reuses an earlier before
  rm -rf "$WORK/$side-quickstart" "$WORK/$side-two-datasets"
  tree=$BEFORE; [ "$side" = after ] && tree=$AFTER
  PYTHONPATH=$tree/src "$PY" -m anglekit.cli train --config configs/quickstart.yaml --max-steps 30 --device cpu --quiet \
    --output-dir "$WORK/$side-quickstart"
  PYTHONPATH=$tree/src "$PY" -m anglekit.cli train --config configs/quickstart.yaml --max-steps 30 --device cpu --quiet \
    --train-data 'stsb:train;name=sts' --train-data 'stsb:train;objective=cosine;weight=0.5;name=sts-cosine' \
    --output-dir "$WORK/$side-two-datasets"
done
"$PY" - "$WORK" "$HERE/same.json" ${COMPARE:-} <<'PY'
import hashlib, json, sys
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])
def facts(run):
    results = json.loads((run / "results.json").read_text())
    losses = [{k: v for k, v in json.loads(line).items() if k.startswith("loss")} for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {"weights_sha256": hashlib.sha256((run / "model" / "model.safetensors").read_bytes()).hexdigest(),
            "steps": results["steps"], "before": results["before"], "after": results["after"], "losses": [l for l in losses if l]}
report = {}
for name in sys.argv[3:] or ("quickstart", "two-datasets"):
    before, after = facts(work / f"before-{name}"), facts(work / f"after-{name}")
    report[name] = {"same": before == after, "before": before, "after": after}
    print(name, "same" if before == after else "DIFFERENT", "sha256", before["weights_sha256"][:16], after["weights_sha256"][:16], "test after", before["after"], after["after"])
out.write_text(json.dumps(report, indent=1) + "\n")
sys.exit(0 if all(r["same"] for r in report.values()) else 1)
PY
