#!/usr/bin/env python
"""Peer training benchmark: the official AnglE implementation (PyPI angle-emb==0.6.1).

Must run in its own venv (angle-emb pins transformers==5.3.0):
    bash benchmarks/peers/setup_angle_emb.sh
    .venv-angle-emb/bin/python benchmarks/peers/angle_emb_train.py --weights defaults --seed 1

Protocol: all-MiniLM-L6-v2 loaded with ``AnglE.from_pretrained(dir, max_length=64,
pooling_strategy='avg', train_mode=True)``; STS-B train as angle-emb "format A"
(text1, text2, label = raw 0..5 score, exactly as angle-emb's own STS-B README example);
``AnglE.fit(batch_size=32, epochs=1, learning_rate=2e-5, warmup_steps=0,
argument_kwargs={'lr_scheduler_type': 'constant', 'seed': N, ...})``.

--weights defaults : loss_kwargs=None -> angle_emb.AngleLoss() defaults
                     (0.6.1: cosine_w=0.0, ibn_w=1.0, cln_w=1.0, angle_w=0.02,
                      cosine_tau=20, ibn_tau=20, angle_tau=20; cln_w is unused for format A)
--weights paper    : cosine_w=1, ibn_w=1, angle_w=1, cosine_tau=20, ibn_tau=20, angle_tau=1

Evaluation: angle-emb's own ``AnglE.encode`` (its Pooler, 'avg' = attention-masked mean
pooling, max_length 64, unnormalised) in chunks of 64, then Spearman(cosine, gold) x 100.

Batches: random by default (transformers' RandomSampler). ``--group-by-length`` passes
``train_sampling_strategy='group_by_length'`` through ``argument_kwargs`` with a precomputed
``length`` column (a pair's longer side in tokens, as anglekit's key; the collator ignores the
column): transformers' LengthGroupedSampler, the nearest equivalent of anglekit's grouping.

Timing: ``fit()`` also writes its config/tokenizer before and the model weights after
training, so ``AngleTrainer.train`` is wrapped with a timer (train_seconds; its collator
tokenizes every batch); the whole ``fit()`` call is reported as fit_seconds. The lengths of
``--group-by-length`` cost one extra tokenization, ``tokenize_seconds``; ``train_pairs_per_s`` is
over ``tokenize_seconds + train_seconds`` (see common.TIMING_NOTE).
Prints one JSON line to stdout (all library chatter is routed to stderr).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE on import)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("WANDB_DISABLED", "true")

PAPER_LOSS_KWARGS = {
    "cosine_w": 1.0,
    "ibn_w": 1.0,
    "angle_w": 1.0,
    "cosine_tau": 20.0,
    "ibn_tau": 20.0,
    "angle_tau": 1.0,
}
_LOSS_FIELDS = ("cosine_w", "ibn_w", "cln_w", "angle_w", "cosine_tau", "ibn_tau", "angle_tau", "angle_pooling_strategy", "dataset_format")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--weights",
        choices=["defaults", "paper"],
        required=True,
        help="'defaults' = AngleLoss() defaults; 'paper' = cosine/ibn/angle weights 1 with taus 20/20/1",
    )
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--max-steps", type=int, default=None, help="stop after K optimizer steps (smoke runs); default: the full epoch")
    p.add_argument("--eval-limit", type=int, default=None, help="evaluate on only the first N test pairs (smoke runs)")
    p.add_argument("--max-length", type=int, default=common.TRAIN_MAX_LENGTH)
    p.add_argument("--group-by-length", action="store_true", help="length-grouped batches (transformers' LengthGroupedSampler, see the module doc)")
    p.add_argument(
        "--bf16",
        action="store_true",
        help="AnglE.fit(bf16=True) with use_cpu=True in its TrainingArguments (transformers refuses "
        "bf16 without a GPU unless use_cpu is set): angle-emb's best setting on a CPU with bf16 "
        "instructions",
    )
    p.add_argument(
        "--filter-duplicate",
        type=int,
        choices=[0, 1],
        default=1,
        help="AnglE.fit(filter_duplicate=...); 1 is fit()'s default (its CLI angle-trainer defaults to 0)",
    )
    common.add_common_args(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    return common.run_cli(parse_args, run, argv)


def run(args) -> dict:
    common.set_threads(args.threads)
    import numpy as np
    import torch
    from datasets import Dataset

    import angle_emb
    import angle_emb.angle as angle_mod
    from angle_emb import AnglE

    model_dir = common.minilm_dir(args.model_zip)
    tr1, tr2, tr_scores = common.read_stsb("train")
    te1, te2, te_scores = common.read_stsb("test", limit=args.eval_limit)
    n_train = len(tr_scores)

    # Seed the way angle-emb's own CLI (angle_trainer.py) does, plus TrainingArguments.seed.
    os.environ["PYTHONHASHSEED"] = str(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    angle = AnglE.from_pretrained(str(model_dir), max_length=args.max_length, pooling_strategy="avg", train_mode=True)

    columns = {
        "text1": tr1,
        "text2": tr2,
        "label": [float(s) for s in tr_scores],  # raw 0..5, as in angle-emb's STS-B example
    }
    tokenize_seconds = 0.0
    if args.group_by_length:
        t0 = time.perf_counter()
        columns["length"] = common.pair_lengths(angle.tokenizer, tr1, tr2, args.max_length)
        tokenize_seconds = time.perf_counter() - t0
    train_ds = Dataset.from_dict(columns)
    loss_kwargs = None if args.weights == "defaults" else dict(PAPER_LOSS_KWARGS)

    argument_kwargs = {
        "lr_scheduler_type": "constant",  # fit() has no scheduler arg; HF default is 'linear'
        "seed": args.seed,
        "report_to": "none",
        "disable_tqdm": True,
    }
    if args.max_steps:
        argument_kwargs["max_steps"] = args.max_steps
    if args.bf16:
        argument_kwargs["use_cpu"] = True
    if args.group_by_length:
        argument_kwargs["train_sampling_strategy"] = "group_by_length"
        argument_kwargs["length_column_name"] = "length"

    # Time only the trainer's training loop: wrap AngleTrainer.train (fit() builds the
    # trainer internally and exposes neither it nor its TrainOutput).
    captured: dict = {}
    orig_train = angle_mod.AngleTrainer.train

    def timed_train(self, *a, **kw):
        captured["trainer"] = self
        captured["sampler"] = type(self._get_train_sampler()).__name__
        t0 = time.perf_counter()
        out = orig_train(self, *a, **kw)
        captured["train_seconds"] = time.perf_counter() - t0
        captured["train_output"] = out
        return out

    angle_mod.AngleTrainer.train = timed_train
    try:
        with tempfile.TemporaryDirectory(prefix="angle_emb_train_") as tmp:
            t0 = time.perf_counter()
            angle.fit(
                train_ds=train_ds,
                batch_size=common.BATCH_SIZE,
                output_dir=tmp,  # required: fit() writes config/tokenizer/weights there
                epochs=common.EPOCHS,
                learning_rate=common.LEARNING_RATE,
                warmup_steps=0,
                logging_steps=50,
                save_strategy="no",
                eval_strategy="no",
                fp16=False,
                bf16=bool(args.bf16),
                loss_kwargs=loss_kwargs,
                filter_duplicate=bool(args.filter_duplicate),
                argument_kwargs=argument_kwargs,
            )
            fit_seconds = time.perf_counter() - t0
    finally:
        angle_mod.AngleTrainer.train = orig_train

    trainer = captured["trainer"]
    train_seconds = captured["train_seconds"]
    steps = int(trainer.state.global_step)
    lr_end = float(trainer.lr_scheduler.get_last_lr()[0]) if trainer.lr_scheduler is not None else None
    targs = trainer.args
    effective_loss = {k: getattr(trainer.loss_fct, k) for k in _LOSS_FIELDS if hasattr(trainer.loss_fct, k)}
    pairs_trained = min(steps * common.BATCH_SIZE, n_train * common.EPOCHS) if args.max_steps else n_train * common.EPOCHS

    # Evaluate with angle-emb's own encode (Pooler 'avg' = masked mean pooling).
    def encode(texts):
        chunks = [angle.encode(texts[i : i + common.EVAL_BATCH_SIZE], to_numpy=True) for i in range(0, len(texts), common.EVAL_BATCH_SIZE)]
        return np.concatenate(chunks, axis=0)

    e1, e2 = encode(te1), encode(te2)
    spearman = common.cosine_spearman_x100(e1, e2, te_scores)

    notes = [
        "fit() builds transformers.TrainingArguments itself; lr_scheduler_type='constant', seed, report_to, max_steps passed via argument_kwargs (accepted)",
        "fit() warmup_steps default is 1000; passed warmup_steps=0",
        "fit() wraps self.backbone in torch.compile after building the trainer, so training and "
        "encode run the uncompiled module (the trainer/pooler hold the original)",
        "fit() requires output_dir (saves config+tokenizer before and weights after training): a "
        "temp dir is used; excluded from train_seconds, included in fit_seconds",
        f"filter_duplicate={bool(args.filter_duplicate)}: AngleDataCollator drops a pair whose "
        "tokenized text already occurred in the same batch (fit default True)",
        "labels are raw 0..5: cosine/angle losses use only the pairwise order; in_batch_negative_loss "
        "casts labels to int (score<1 -> negative pair, int(score)>=1 -> positive target)",
    ]

    return {
        "peer": "angle-emb",
        "loss": f"AngleLoss[{args.weights}]",
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
        "precision_requested": "bf16" if args.bf16 else "fp32",
        "batches": f"{'length-grouped' if args.group_by_length else 'random'} ({captured['sampler']})",
        "steps": steps,
        "peak_rss_mb": round(common.peak_rss_mb(), 1),
        "versions": common.versions("angle-emb", "transformers", "tokenizers", "torch", "datasets", "accelerate", "peft", "numpy", "scipy"),
        "weights": args.weights,
        "loss_kwargs": loss_kwargs,
        "effective_loss": effective_loss,
        "train_loss": float(captured["train_output"].training_loss),
        "fit_seconds": round(fit_seconds, 3),
        "train_pairs": pairs_trained,
        "n_train_pairs": n_train,
        "n_test_pairs": len(te_scores),
        "max_steps": args.max_steps,
        "eval_limit": args.eval_limit,
        "max_length": args.max_length,
        "pooling_strategy": "avg",
        "batch_size": targs.per_device_train_batch_size,
        "learning_rate": targs.learning_rate,
        "lr_scheduler": str(getattr(targs.lr_scheduler_type, "value", targs.lr_scheduler_type)),
        "lr_at_end": lr_end,
        "warmup_steps": targs.warmup_steps,
        "epochs": targs.num_train_epochs,
        "filter_duplicate": bool(args.filter_duplicate),
        "labels": "raw STS-B scores 0..5 (format A 'label')",
        "eval": f"angle_emb AnglE.encode (avg pooling, max_length={args.max_length:d}), cosine Spearman",
        "angle_emb_version": angle_emb.__version__,
        "torch_threads": torch.get_num_threads(),
        "timing": common.TIMING_NOTE,
        "notes": notes,
    }


if __name__ == "__main__":
    sys.exit(main())
