#!/usr/bin/env python
"""anglekit's row of the training benchmark: one objective, one seed, the shared protocol.

Protocol (as the peers in benchmarks/peers): all-MiniLM-L6-v2 with mean pooling (last_avg),
STS-B train, 1 epoch, batch 32, constant LR 2e-5, no warmup, max length 64, the given seed;
STS-B test Spearman x 100 of cosine vs gold after training. Prints one JSON line.

Timed span (as every row of bench_train.py): from the pairs in memory to the trained weights,
tokenization included. anglekit tokenizes the whole set once before its training loop
(``tokenize_seconds``), the peers tokenize inside theirs, so ``train_pairs_per_s`` here is the
pairs trained over ``tokenize_seconds + train_seconds``; ``loop_pairs_per_s`` is the loop alone.

    .venv/bin/python benchmarks/anglekit_train.py --objective paper --seed 0 --out r.json
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import common  # noqa: E402  (sets the offline environment variables)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objective", required=True, help="objective preset (see anglekit train --help)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--max-steps", type=int, default=-1, help="stop early (smoke runs)")
    parser.add_argument("--no-group-by-length", action="store_true", help="plain random batches")
    parser.add_argument("--max-batch-tokens", type=int, default=None, help="anglekit's --max-batch-tokens (token-budget batches instead of batch_size)")
    parser.add_argument("--positive-threshold", type=float, default=None)
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default="auto",
        help="anglekit's --precision (auto: bf16 autocast on CPUs with avx512_bf16/amx_bf16, else fp32)",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train (default: cpu, the protocol's)")
    parser.add_argument("--no-compact-embeddings", action="store_true", help="train every input-embedding row (anglekit's compact_embeddings off)")
    parser.add_argument("--no-fast-dropout", action="store_true", help="torch's dropout masks (anglekit's fast_dropout off)")
    parser.add_argument("--no-pack-tokens", action="store_true", help="encoder layers over the padded batch (anglekit's pack_tokens off)")
    parser.add_argument("--unpad", action="store_true", help="anglekit's --unpad: attention over unpadded batches (CUDA: flash_attn or torch_varlen)")
    common.add_common_args(parser)
    args = parser.parse_args(argv)
    common.set_threads(args.threads)

    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    with tempfile.TemporaryDirectory(prefix="anglekit-bench-") as out, contextlib.redirect_stdout(sys.stderr):
        config = TrainConfig.from_dict(
            dict(
                model=str(common.minilm_dir(args.model_zip)),
                pooling="last_avg",
                max_length=common.TRAIN_MAX_LENGTH,
                train_data=str(common.stsb_dir()) + ":train",
                test_data=str(common.stsb_dir()) + ":test",
                objective=args.objective,
                positive_threshold=args.positive_threshold,
                epochs=float(common.EPOCHS),
                max_steps=args.max_steps,
                batch_size=common.BATCH_SIZE,
                learning_rate=common.LEARNING_RATE,
                scheduler="constant",
                warmup_steps=0,
                seed=args.seed,
                group_by_length=not args.no_group_by_length,
                eval_batch_size=common.EVAL_BATCH_SIZE,
                output_dir=out,
                quiet=True,
                device=args.device,
                precision=args.precision,
                max_batch_tokens=args.max_batch_tokens,
                compact_embeddings=not args.no_compact_embeddings,
                fast_dropout=not args.no_fast_dropout,
                pack_tokens=not args.no_pack_tokens,
                unpad=args.unpad,
            )
        )
        result = train(config)
    tokenize_seconds = result.tokenize_seconds or 0.0
    pairs = round(result.pairs_per_second * result.train_seconds)
    timed_seconds = tokenize_seconds + result.train_seconds
    common.write_result(
        {
            "peer": "anglekit",
            "loss": args.objective,
            "seed": args.seed,
            "protocol": common.TRAIN_PROTOCOL,
            "spearman": result.after["spearman"],
            "zero_shot_spearman": result.before["spearman"],
            "tokenize_seconds": round(tokenize_seconds, 3),
            "train_seconds": round(result.train_seconds, 3),
            "timed_seconds": round(timed_seconds, 3),
            "train_pairs_per_s": round(pairs / timed_seconds, 3),
            "loop_pairs_per_s": round(result.pairs_per_second, 3),
            "train_pairs": pairs,
            "steps": result.steps,
            "max_steps": args.max_steps if args.max_steps > 0 else None,
            "peak_rss_mb": common.peak_rss_mb(),
            "group_by_length": not args.no_group_by_length,
            "precision": result.precision,
            "precision_requested": args.precision,
            "batches": (
                "random (transformers RandomSampler)"
                if args.no_group_by_length
                else f"token budget {args.max_batch_tokens} (anglekit TokenBudgetBatchSampler)"
                if args.max_batch_tokens
                else "length-grouped (anglekit LengthGroupedSampler)"
            ),
            "max_batch_tokens": args.max_batch_tokens,
            "compact_embeddings": not args.no_compact_embeddings,
            "fast_dropout": not args.no_fast_dropout,
            "pack_tokens": not args.no_pack_tokens,
            "unpad": args.unpad,
            "peak_gpu_memory_mb": result.peak_gpu_memory_mb,
            "levers": {(False, False, False): "default", (False, False, True): "unpacked", (False, True, True): "compact-only", (True, True, True): "none"}.get(
                (args.no_compact_embeddings, args.no_fast_dropout, args.no_pack_tokens), "custom"
            ),  # fmt: skip
            "torch_threads": result.threads,
            "device": args.device,
            "max_length": common.TRAIN_MAX_LENGTH,
            "batch_size": common.BATCH_SIZE,
            "versions": common.versions("anglekit", "torch", "transformers", "tokenizers", "numpy", "scipy"),
            "timing": common.TIMING_NOTE,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
