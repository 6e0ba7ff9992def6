#!/usr/bin/env python
"""Peer training benchmark: sentence-transformers (5.x, 6.x) CoSENTLoss / AnglELoss on STS-B.

Protocol (same for every row): all-MiniLM-L6-v2 (mean pooling), STS-B train, 1 epoch,
batch 32, constant LR 2e-5, no warmup, max_seq_length 64, given seed; then STS-B test
Spearman(cosine, gold) x 100 (encode batch 64, same max_seq_length 64).

Labels: the raw STS-B scores (0..5) are passed as the ``score`` column. Both CoSENTLoss
and AnglELoss only use them through ``labels[:, None] < labels[None, :]`` (pairwise
ranking), so rescaling to 0..1 would give the identical loss.

Batches: random by default (sentence-transformers' DefaultBatchSampler over a RandomSampler).
``--group-by-length`` gives it the nearest equivalent of anglekit's length-grouped batches.
sentence-transformers has no such option of its own: its training arguments reject
``group_by_length=True`` (transformers 5 renamed it), and they accept
``train_sampling_strategy="group_by_length"`` but ignore it (its trainer builds the DataLoader from
its own ``batch_sampler`` and never calls transformers' ``_get_train_sampler``). So the flag passes
``batch_sampler=`` a DefaultBatchSampler subclass whose batches are consecutive runs of
transformers' own ``get_length_grouped_indices`` (random permutation, mega-batches of up to 50
batches sorted by length, the longest batch first): what ``group_by_length`` does in plain
transformers. The length key is a pair's longer side in tokens, as anglekit's; computing it
tokenizes the training set once more, and that time (``tokenize_seconds``) is part of the timed span.

Timing: ``train_seconds`` is ``trainer.train()``, which tokenizes every batch in its collator;
``train_pairs_per_s`` is over ``tokenize_seconds + train_seconds`` (see common.TIMING_NOTE).

Run with anglekit's main venv, e.g.:
    .venv/bin/python benchmarks/peers/st_train.py --loss cosent --seed 1 --out r.json
Prints one JSON line to stdout (all library chatter is routed to stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE on import)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loss", choices=["cosent", "angle"], required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--max-steps", type=int, default=None, help="stop after K optimizer steps (smoke runs); default: the full epoch")
    p.add_argument("--eval-limit", type=int, default=None, help="evaluate on only the first N test pairs (smoke runs)")
    p.add_argument("--max-seq-length", type=int, default=common.TRAIN_MAX_LENGTH)
    p.add_argument("--group-by-length", action="store_true", help="length-grouped batches (transformers' grouping, see the module doc)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train (default: cpu, the protocol's)")
    p.add_argument(
        "--bf16",
        action="store_true",
        help="bf16=True in its training arguments (bf16 autocast; on the CPU with use_cpu=True): its best setting on a CPU with avx512_bf16",
    )
    common.add_common_args(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    return common.run_cli(parse_args, run, argv)


def length_grouped_batch_sampler(lengths: list[int]) -> type:
    """A sentence-transformers batch sampler class yielding transformers' length-grouped batches."""
    import torch
    from transformers.trainer_pt_utils import get_length_grouped_indices

    from sentence_transformers.base.sampler import DefaultBatchSampler  # 5.4+; the old path is deprecated

    class LengthGroupedBatchSampler(DefaultBatchSampler):
        batches_yielded = 0

        def __iter__(self):
            generator = torch.Generator().manual_seed(int(self.seed) + int(self.epoch))
            order = get_length_grouped_indices(lengths, self.batch_size, generator=generator)
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                if len(batch) == self.batch_size or not self.drop_last:
                    type(self).batches_yielded += 1
                    yield batch

    return LengthGroupedBatchSampler


def run(args) -> dict:
    common.set_threads(args.threads)
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )

    from sentence_transformers.sentence_transformer import losses  # 5.4+; the top-level alias is deprecated
    from transformers import set_seed

    model_dir = common.minilm_dir(args.model_zip)
    tr1, tr2, tr_scores = common.read_stsb("train")
    te1, te2, te_scores = common.read_stsb("test", limit=args.eval_limit)
    n_train = len(tr_scores)

    set_seed(args.seed)
    model = SentenceTransformer(str(model_dir), device=args.device)
    model.max_seq_length = args.max_seq_length
    modules = [type(m).__name__ for m in model]
    pooling_mode = common.st_pooling_mode(model)

    train_ds = Dataset.from_dict(
        {
            "sentence1": tr1,
            "sentence2": tr2,
            "score": [float(s) for s in tr_scores],  # raw 0..5; ranking-only use (see module doc)
        }
    )
    tokenize_seconds = 0.0
    sampler_options: dict = {}
    sampler = None
    if args.group_by_length:
        t0 = time.perf_counter()
        lengths = common.pair_lengths(model.tokenizer, tr1, tr2, args.max_seq_length)
        tokenize_seconds = time.perf_counter() - t0
        sampler = length_grouped_batch_sampler(lengths)
        sampler_options["batch_sampler"] = sampler
    loss = losses.CoSENTLoss(model) if args.loss == "cosent" else losses.AnglELoss(model)

    with tempfile.TemporaryDirectory(prefix="st_train_") as tmp:
        targs = SentenceTransformerTrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=common.BATCH_SIZE,
            learning_rate=common.LEARNING_RATE,
            lr_scheduler_type="constant",
            warmup_steps=0,
            num_train_epochs=common.EPOCHS,
            max_steps=args.max_steps if args.max_steps else -1,
            seed=args.seed,
            eval_strategy="no",
            save_strategy="no",
            report_to="none",
            logging_steps=50,
            disable_tqdm=True,
            bf16=args.bf16,
            use_cpu=args.device == "cpu",
            **sampler_options,
        )
        trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=train_ds, loss=loss)
        t0 = time.perf_counter()
        train_out = trainer.train()
        train_seconds = time.perf_counter() - t0
        steps = int(trainer.state.global_step)
        lr_end = None
        sched = getattr(trainer, "lr_scheduler", None)
        if sched is not None:
            lr_end = float(sched.get_last_lr()[0])

    pairs_trained = min(steps * common.BATCH_SIZE, n_train * common.EPOCHS) if args.max_steps else n_train * common.EPOCHS
    if sampler is not None and sampler.batches_yielded < steps:
        raise RuntimeError(f"the length-grouped batch sampler gave {sampler.batches_yielded} batches for {steps} steps: sentence-transformers did not use it")

    model.eval()
    e1 = model.encode(te1, batch_size=common.EVAL_BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
    e2 = model.encode(te2, batch_size=common.EVAL_BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
    spearman = common.cosine_spearman_x100(e1, e2, te_scores)

    return {
        "peer": "sentence-transformers",
        "loss": {"cosent": "CoSENTLoss", "angle": "AnglELoss"}[args.loss],
        "seed": args.seed,
        "protocol": common.TRAIN_PROTOCOL,
        "spearman": round(spearman, 4),
        "tokenize_seconds": round(tokenize_seconds, 3),
        "train_seconds": round(train_seconds, 3),
        "timed_seconds": round(tokenize_seconds + train_seconds, 3),
        "train_pairs_per_s": round(pairs_trained / (tokenize_seconds + train_seconds), 3),
        "loop_pairs_per_s": round(pairs_trained / train_seconds, 3),
        "group_by_length": args.group_by_length,
        "precision": "bf16" if args.bf16 else "fp32",
        "batches": (
            "length-grouped (transformers get_length_grouped_indices via batch_sampler)"
            if args.group_by_length
            else "random (DefaultBatchSampler over RandomSampler)"
        ),
        "steps": steps,
        "peak_rss_mb": round(common.peak_rss_mb(), 1),
        "versions": common.versions("sentence-transformers", "transformers", "tokenizers", "torch", "datasets", "accelerate", "numpy", "scipy"),
        "loss_params": loss.get_config_dict(),
        "train_loss": float(train_out.training_loss),
        "train_pairs": pairs_trained,
        "n_train_pairs": n_train,
        "n_test_pairs": len(te_scores),
        "max_steps": args.max_steps,
        "eval_limit": args.eval_limit,
        "max_seq_length": args.max_seq_length,
        "max_length": args.max_seq_length,
        "batch_size": common.BATCH_SIZE,
        "learning_rate": common.LEARNING_RATE,
        "lr_scheduler": "constant",
        "lr_at_end": lr_end,
        "warmup_steps": 0,
        "epochs": common.EPOCHS,
        "labels": "raw STS-B scores 0..5 (loss uses pairwise ranking only)",
        "modules": modules,
        "pooling_mode": pooling_mode,
        "torch_threads": torch.get_num_threads(),
        "device": str(model.device),
        "timing": common.TIMING_NOTE,
        "notes": "train_seconds times trainer.train() (tokenizing each batch in the collator); eval encodes STS-B test at "
        f"max_seq_length={args.max_seq_length}, batch {common.EVAL_BATCH_SIZE}; model ends "
        "with a Normalize module (cosine/angle-invariant).",
    }


if __name__ == "__main__":
    sys.exit(main())
