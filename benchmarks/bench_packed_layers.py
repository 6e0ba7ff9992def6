#!/usr/bin/env python
"""Packed tokens, one forward and backward pass at a time: MiniLM on STS-B's length-grouped batches.

Times the encoder's forward and backward pass (last-layer mean pooling, a fixed linear loss) on the
protocol's batches (STS-B train, 32 pairs = 64 texts, anglekit's LengthGroupedSampler, max length
64), padded and with ``anglekit.training.speed.packed_layers`` swapped in, alternating per batch and
swapping the order every round, in train mode with fast dropout as the loop runs it. It isolates the
layer swap from the rest of the training loop (optimizer, loss, embeddings), which
``bench_train.py``'s ``levers-unpacked`` row measures end to end.

    .venv/bin/python benchmarks/bench_packed_layers.py --batches 24 --rounds 3 --threads 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

import common  # noqa: E402

RESULTS = HERE / "results" / "packed_layers"


def grouped_batches(tokenizer: Any, count: int, seed: int) -> list[dict[str, Any]]:
    """The first ``count`` length-grouped batches of STS-B train, tokenized and padded."""
    from anglekit.training.sampler import LengthGroupedSampler

    text1, text2, _ = common.read_stsb("train")
    lengths = common.pair_lengths(tokenizer, text1, text2, common.TRAIN_MAX_LENGTH)
    order = list(LengthGroupedSampler(lengths, common.BATCH_SIZE, seed=seed))
    rows = [order[i : i + common.BATCH_SIZE] for i in range(0, len(order), common.BATCH_SIZE)][:count]
    return [
        tokenizer([t for i in row for t in (text1[i], text2[i])], padding=True, truncation=True, max_length=common.TRAIN_MAX_LENGTH,
                  return_tensors="pt")
        for row in rows
    ]  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    common.set_threads(args.threads)
    import torch

    from anglekit.model.embedder import Embedder
    from anglekit.training.speed.fast_dropout import faster_dropout
    from anglekit.training.speed.packed_layers import packed_layers

    torch.manual_seed(0)
    embedder = Embedder.from_pretrained(str(common.minilm_dir()), device="cpu", pooling="last_avg")
    model = embedder.backbone
    model.train()
    batches = grouped_batches(embedder.tokenizer, args.batches, args.seed)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    slots = sum(b["attention_mask"].numel() for b in batches)

    def step(batch: dict[str, Any]) -> float:
        start = time.perf_counter()
        states = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
        pooled = (states * mask).sum(1) / mask.sum(1)
        (pooled * torch.linspace(-1, 1, pooled.shape[-1])).sum().backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    seconds = {"padded": [], "packed": []}
    with faster_dropout(model, enabled=True, device="cpu"):
        for batch in batches[:2]:  # warm-up, untimed
            step(batch)
            with packed_layers(model, enabled=True, device="cpu"):
                step(batch)
        for r in range(args.rounds):
            totals = {"padded": 0.0, "packed": 0.0}
            for batch in batches:
                for kind in ("padded", "packed") if r % 2 == 0 else ("packed", "padded"):
                    if kind == "packed":
                        with packed_layers(model, enabled=True, device="cpu") as count:
                            if count == 0:
                                raise RuntimeError("no encoder layer was packed")
                            totals[kind] += step(batch)
                    else:
                        totals[kind] += step(batch)
            for kind, total in totals.items():
                seconds[kind].append(round(total, 3))
            print(f"round {r + 1}: padded {totals['padded']:.2f} s, packed {totals['packed']:.2f} s, x{totals['padded'] / totals['packed']:.3f}",
                  file=sys.stderr)  # fmt: skip
    ratios = [round(p / q, 4) for p, q in zip(seconds["padded"], seconds["packed"], strict=True)]
    return {
        "bench": "bench_packed_layers",
        "model": common.MODEL_NAME,
        "batches": len(batches),
        "texts_per_batch": 2 * common.BATCH_SIZE,
        "max_length": common.TRAIN_MAX_LENGTH,
        "padded_over_real_tokens": round(slots / real, 4),
        "rounds": args.rounds,
        "seconds": seconds,
        "ratio_per_round": ratios,
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "torch_threads": torch.get_num_threads(),
        "machine": common.cpu_flags(),
        "versions": common.versions("anglekit", "torch", "transformers"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=24, help="length-grouped batches timed per round (default: 24)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the batches, the order of the two swapped each round (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the grouping (default: 0)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_packed_layers.json", help="where the JSON goes")
    args = parser.parse_args(argv)
    for name in ("batches", "rounds", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    result = run(args)
    print(f"{'padded/real tokens':<20} {result['padded_over_real_tokens']:.3f}")
    print(f"{'padded s per round':<20} {', '.join(f'{s:.2f}' for s in result['seconds']['padded'])}")
    print(f"{'packed s per round':<20} {', '.join(f'{s:.2f}' for s in result['seconds']['packed'])}")
    print(f"{'padded/packed':<20} {', '.join(f'{r:.3f}' for r in result['ratio_per_round'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"date": datetime.date.today().isoformat(), **result}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
