#!/usr/bin/env python
"""How many in-batch negatives a guide (``--guide``, GISTEmbed) leaves out, without training.

Data: Flickr30k train, ``--batches`` batches of ``--batch-size`` images drawn with ``--seed``:
(caption 1, caption 2) of one image as (anchor, positive). Each guide embeds the anchors with its
query prompt and the positives with its document prompt (as training does), and
:func:`anglekit.losses.guide.guide_mask` says which in-batch candidates it scores above the row's
positive. The share is masked candidates / (B * (B - 1)) per batch, at each ``--margins`` value.

    .venv/bin/python benchmarks/bench_guide_mask.py --guides pypi:all-mpnet-base-v2 pypi:all-minilm-l6-v2

Results: a table, and benchmarks/results/guide_mask/guide_mask.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402

import torch  # noqa: E402

from anglekit.losses.guide import guide_mask  # noqa: E402
from anglekit.model import Embedder  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "flickr30k" / "Train"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guides", nargs="+", default=["pypi:all-mpnet-base-v2", "pypi:all-minilm-l6-v2"])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--margins", type=float, nargs="+", default=[0.0, 0.05])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "guide_mask" / "guide_mask.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    first = (DATA / "train.1").read_text(encoding="utf-8").splitlines()
    second = (DATA / "train.2").read_text(encoding="utf-8").splitlines()
    size = args.batch_size
    picked = random.Random(args.seed).sample(range(len(first)), size * args.batches)
    anchors, positives = [first[i] for i in picked], [second[i] for i in picked]
    rows = []
    for name in args.guides:
        began = time.perf_counter()
        model = Embedder.from_pretrained(name, device="cpu")
        queries = torch.as_tensor(model.encode_query(anchors, batch_size=64))
        documents = torch.as_tensor(model.encode_document(positives, batch_size=64))
        seconds = time.perf_counter() - began
        for margin in args.margins:
            shares = []
            for k in range(args.batches):
                batch = slice(size * k, size * (k + 1))
                mask = guide_mask(queries[batch], documents[batch], torch.arange(size), margin=margin)
                shares.append(mask.sum().item() / (size * (size - 1)))
            rows.append(
                {
                    "guide": name,
                    "margin": margin,
                    "masked_share_mean": statistics.fmean(shares),
                    "masked_share_min": min(shares),
                    "masked_share_max": max(shares),
                    "per_batch": shares,
                    "embed_seconds": round(seconds, 2),
                }
            )
            print(
                f"{name:28s} margin {margin:<5} masked {100 * rows[-1]['masked_share_mean']:.2f}% (per batch {100 * min(shares):.2f}-{100 * max(shares):.2f}%)",
                flush=True,
            )
    result = {
        "command": common.invocation(),
        "date": time.strftime("%Y-%m-%d"),
        "data": f"Flickr30k train (caption 1, caption 2), {args.batches} batches of {size}, seed {args.seed}",
        "threads": args.threads,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
