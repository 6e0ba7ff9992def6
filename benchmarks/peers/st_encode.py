#!/usr/bin/env python
"""Peer encode benchmark: sentence-transformers 5.x inference throughput on STS-B test.

Encodes the unique STS-B test sentences (both columns, order-preserving de-duplication)
with all-MiniLM-L6-v2 (untrained), at the model's own max_seq_length (256 for this model)
unless --max-length is given. One untimed warm-up pass, then --repeats timed passes;
sentences_per_s is from the best (fastest) pass. Also reports the zero-shot STS-B test
Spearman(cosine, gold) x 100, computed from the same embeddings.

    .venv/bin/python benchmarks/peers/st_encode.py --out enc.json
Prints one JSON line to stdout (all library chatter is routed to stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE on import)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=common.EVAL_BATCH_SIZE)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-length", type=int, default=None, help="override model.max_seq_length (default: the model's own, 256)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N test pairs (smoke runs)")
    common.add_common_args(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    return common.run_cli(parse_args, run, argv)


def run(args) -> dict:
    common.set_threads(args.threads)
    import torch
    from sentence_transformers import SentenceTransformer

    if args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    model_dir = common.minilm_dir(args.model_zip)
    te1, te2, gold = common.read_stsb("test", limit=args.limit)
    sentences = common.unique_sentences(te1, te2)

    model = SentenceTransformer(str(model_dir), device="cuda" if torch.cuda.is_available() else "cpu")
    default_max = model.max_seq_length
    if args.max_length:
        model.max_seq_length = args.max_length
    model.eval()

    def encode():
        return model.encode(sentences, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    t0 = time.perf_counter()
    emb = encode()  # warm-up (untimed for throughput)
    sync()
    warmup_seconds = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        emb = encode()
        sync()
        times.append(time.perf_counter() - t0)
    best = min(times)

    index = {s: i for i, s in enumerate(sentences)}
    e1 = emb[[index[s] for s in te1]]
    e2 = emb[[index[s] for s in te2]]
    spearman = common.cosine_spearman_x100(e1, e2, gold)

    return {
        "peer": "sentence-transformers",
        "loss": None,
        "seed": None,
        "spearman": round(spearman, 4),
        "train_seconds": None,
        "train_pairs_per_s": None,
        "steps": None,
        "peak_rss_mb": round(common.peak_rss_mb(), 1),
        "versions": common.versions("sentence-transformers", "transformers", "torch", "numpy", "scipy"),
        "task": "encode",
        "sentences_per_s": round(len(sentences) / best, 3),
        "encode_seconds_best": round(best, 4),
        "encode_seconds_all": [round(t, 4) for t in times],
        "warmup_seconds": round(warmup_seconds, 4),
        "n_sentences": len(sentences),
        "n_test_pairs": len(gold),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "max_seq_length": model.max_seq_length,
        "model_default_max_seq_length": default_max,
        "embedding_dim": int(emb.shape[1]),
        "pooling_mode": common.st_pooling_mode(model),
        "modules": [type(m).__name__ for m in model],
        "limit": args.limit,
        "torch_threads": torch.get_num_threads(),
        "device": str(model.device),
        "notes": "unique STS-B test sentences from both columns; best of repeats after one "
        "untimed warm-up pass; ST sorts by length internally; spearman is zero-shot "
        "(untrained model), from the same embeddings",
    }


if __name__ == "__main__":
    sys.exit(main())
