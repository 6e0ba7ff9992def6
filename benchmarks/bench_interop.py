#!/usr/bin/env python
"""Interoperability benchmark: one trained model, four runtimes, one score.

all-MiniLM-L6-v2 is trained one epoch on STS-B train with the AnglE paper preset (the quickstart's
protocol: configs/quickstart.yaml), exported with ``anglekit export --format sentence-transformers``,
and STS-B test Spearman x 100 is measured through:

1. anglekit (``Embedder.from_pretrained(run/model)``);
2. sentence-transformers (the installed version) loading the exported folder, and the folder
   ``train`` wrote, directly (no export step: every saved folder is a sentence-transformers one);
3. anglekit loading sentence-transformers' own re-save of that folder (its current layout, no
   anglekit_config.json);
4. infinity (PyPI ``infinity-emb``, CPU, torch engine, in ``.venv-infinity``) serving the exported
   folder and the folder ``train`` wrote on 127.0.0.1, through ``benchmarks/peers/infinity_peer.py``.

All must agree to 0.01 (Spearman x 100); the largest difference of the normalised vectors from
anglekit's is reported too. When infinity cannot run (its venv or helper missing, or the server
does not start), its row says exactly why.

    .venv/bin/python benchmarks/bench_interop.py                           # full run (~3 min of training on 2 cores)
    .venv/bin/python benchmarks/bench_interop.py --max-steps 5 --eval-limit 64   # smoke test

Writes ``benchmarks/results/bench_interop.json`` (``bench_interop-smoke.json`` for smoke runs) and
prints a table. The run's folders stay in ``benchmarks/results/interop/`` (``--work-dir``).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (the command a results file records)

REPO = HERE.parent
AGREEMENT = 0.01
"""Largest allowed difference of Spearman x 100 between any runtime and anglekit."""


def data_root(given: str | None) -> Path:
    for candidate in (given, os.environ.get("ANGLEKIT_DATA"), REPO.parent / "shared" / "data"):
        if candidate and (Path(candidate) / "stsb").is_dir():
            return Path(candidate)
    raise SystemExit("STS-B not found: pass --data-dir (the folder holding stsb/) or set ANGLEKIT_DATA")


def write_subset(pairs: Any, limit: int, path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(["text1", "text2", "label"])
        for a, b, label in list(zip(pairs.text1, pairs.text2, pairs.labels, strict=False))[:limit]:
            writer.writerow([a, b, float(label)])
    return path


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("anglekit", "torch", "transformers", "sentence-transformers"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not-installed"
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--config", default=str(REPO / "configs" / "quickstart.yaml"), help="training config (default: configs/quickstart.yaml)")
    parser.add_argument("--max-steps", type=int, default=0, help="stop training after N steps (smoke runs; default: the full epoch)")
    parser.add_argument("--eval-limit", type=int, default=None, help="evaluate on the first N test pairs only (smoke runs)")
    parser.add_argument("--data-dir", default=None, help="folder holding stsb/ (default: $ANGLEKIT_DATA or ../shared/data)")
    parser.add_argument("--work-dir", default=str(HERE / "results" / "interop"), help="where the run, the export and the re-save go")
    parser.add_argument("--reuse", action="store_true", help="reuse a trained model already in --work-dir")
    parser.add_argument("--no-infinity", action="store_true", help="skip the infinity row")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per encode call / HTTP request")
    parser.add_argument("--threads", type=int, default=0, help="torch threads for every runtime (0 = default)")
    parser.add_argument("--out", default=None, help="JSON result path")
    args = parser.parse_args(argv)
    if args.eval_limit is not None and args.eval_limit < 3:
        parser.error("--eval-limit must be at least 3")
    if args.max_steps < 0 or args.batch_size < 1:
        parser.error("--max-steps must be >= 0 and --batch-size >= 1")
    return args


def unique_texts(test: Any) -> list[str]:
    return list(dict.fromkeys([*test.text1, *test.text2]))


def score(vectors: dict[str, Any], test: Any) -> dict[str, float]:
    """Spearman x 100 of cosine similarity vs gold, from a text -> vector table."""
    import numpy as np

    from anglekit.metrics.similarity import evaluate_pairs

    def lookup(texts: Any) -> np.ndarray:
        return np.stack([vectors[t] for t in texts])

    return evaluate_pairs(lookup, test.text1, test.text2, test.labels).as_dict()


def as_table(texts: list[str], matrix: Any) -> dict[str, Any]:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float64)
    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return dict(zip(texts, matrix, strict=False))


def infinity_vectors(folder: Path, texts: list[str], batch_size: int, threads: int) -> tuple[dict[str, Any] | None, str]:
    """(text -> vector, note) from infinity serving ``folder``; (None, exact reason) when it cannot run."""
    helper = HERE / "peers" / "infinity_peer.py"
    if not helper.is_file():
        return None, f"{helper.relative_to(REPO)} is missing"
    sys.path.insert(0, str(helper.parent))
    try:
        import infinity_peer
    except Exception as exc:  # noqa: BLE001 - report any import failure as the reason
        return None, f"cannot import {helper.name}: {type(exc).__name__}: {exc}"
    finally:
        sys.path.remove(str(helper.parent))
    log = folder.parent / "infinity.log"
    try:
        with infinity_peer.serve_with_infinity(folder, "torch", threads=threads or None, log_file=log) as base_url:
            out: list[Any] = []
            for start in range(0, len(texts), batch_size):
                body = json.dumps({"input": texts[start : start + batch_size], "model": folder.name}).encode()
                request = urllib.request.Request(f"{base_url}/embeddings", data=body, headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=600) as response:
                    data = json.loads(response.read())["data"]
                out.extend(item["embedding"] for item in sorted(data, key=lambda d: d["index"]))
    except infinity_peer.InfinityUnavailable as exc:
        return None, f"infinity could not start: {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure of the peer is its row's reason
        return None, f"infinity failed: {type(exc).__name__}: {exc} (log: {log})"
    peer_versions = ""
    try:
        import subprocess

        done = subprocess.run(
            [str(infinity_peer.VENV / "bin" / "python"), "-c",
             "from importlib.metadata import version as v; print(v('infinity-emb'), v('sentence-transformers'))"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        infinity_version, st_version = done.stdout.split()
        peer_versions = f"infinity-emb {infinity_version}, sentence-transformers {st_version}, torch engine, CPU"
    except Exception:  # noqa: BLE001 - versions are informative only
        peer_versions = "torch engine, CPU"
    return as_table(texts, out), peer_versions


def _train(args: argparse.Namespace, run_dir: Path) -> float:
    """Train the model of ``args.config`` into ``run_dir`` (replaced); the seconds it took."""
    import yaml

    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    settings = yaml.safe_load(Path(args.config).read_text())
    settings.update(output_dir=str(run_dir), overwrite_output_dir=True, quiet=True, test_data=None)
    if args.max_steps:
        settings["max_steps"] = args.max_steps
    if run_dir.exists():
        shutil.rmtree(run_dir)
    started = time.perf_counter()
    train(TrainConfig.from_dict(settings))
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import numpy as np
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)

    from anglekit.data.catalog import resolve_dataset
    from anglekit.export import export
    from anglekit.model.embedder import Embedder

    root = data_root(args.data_dir)
    os.environ["ANGLEKIT_DATA"] = str(root)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    smoke = bool(args.eval_limit or args.max_steps)
    out_path = Path(args.out) if args.out else HERE / "results" / f"bench_interop{'-smoke' if smoke else ''}.json"

    test = resolve_dataset("stsb:test", default_split="test")
    if args.eval_limit:
        test = resolve_dataset(str(write_subset(test, args.eval_limit, work / "test-subset.tsv")))
    texts = unique_texts(test)

    run_dir = work / "run"
    trained = run_dir / "model"
    train_seconds = None
    if not (args.reuse and (trained / "anglekit_config.json").is_file()):
        train_seconds = _train(args, run_dir)

    rows: list[dict[str, Any]] = []

    def add(name: str, table: dict[str, Any] | None, seconds: float | None, note: str) -> None:
        row: dict[str, Any] = {"runtime": name, "note": note, "seconds": seconds}
        if table is not None:
            row.update(score(table, test))
            row["max_vector_difference"] = max(float(np.abs(table[t] - reference[t]).max()) for t in texts) if rows else 0.0
        rows.append(row)

    started = time.perf_counter()
    model = Embedder.from_pretrained(trained, device="cpu")
    reference = as_table(texts, model.encode(texts, batch_size=args.batch_size))
    add("anglekit", reference, time.perf_counter() - started, f"Embedder.from_pretrained({trained.relative_to(work)})")

    exported_dir = work / "exported"
    result = export(model, output_dir=exported_dir, overwrite=True)
    export_note = f"{result.check}: max difference {result.max_difference:.1e}" if result.max_difference is not None else result.check

    try:
        from sentence_transformers import SentenceTransformer, __version__ as st_version
    except ImportError:
        add("sentence-transformers (exported folder)", None, None, "sentence-transformers is not installed")
        add("anglekit (sentence-transformers' re-save)", None, None, "sentence-transformers is not installed")
    else:
        started = time.perf_counter()
        st_model = SentenceTransformer(str(exported_dir), device="cpu", trust_remote_code=result.trust_remote_code)
        st_table = as_table(texts, st_model.encode(texts, batch_size=args.batch_size))
        add("sentence-transformers (exported folder)", st_table, time.perf_counter() - started, f"sentence-transformers {st_version}")
        started = time.perf_counter()
        try:  # the folder train wrote, with no export step (issue 28)
            direct = SentenceTransformer(str(trained), device="cpu")
        except Exception as exc:  # noqa: BLE001 - a refused folder is this row's result
            add("sentence-transformers (train's folder)", None, None, f"refused: {type(exc).__name__}: {exc}")
        else:
            add("sentence-transformers (train's folder)", as_table(texts, direct.encode(texts, batch_size=args.batch_size)),
                time.perf_counter() - started, f"sentence-transformers {st_version}, {trained.relative_to(work)} as train wrote it")  # fmt: skip
            del direct
        resaved = work / "resaved"
        if resaved.exists():
            shutil.rmtree(resaved)
        st_model.save(str(resaved))
        started = time.perf_counter()
        again = Embedder.from_pretrained(resaved, device="cpu")
        add("anglekit (sentence-transformers' re-save)", as_table(texts, again.encode(texts, batch_size=args.batch_size)),
            time.perf_counter() - started, f"re-saved by sentence-transformers {st_version}; read with pooling {again.config.pooling}, "
            f"max length {again.config.max_length}, normalize {again.config.normalize}")  # fmt: skip
        del st_model, again

    for label, folder in (("exported folder", exported_dir), ("train's folder", trained)):
        if args.no_infinity:
            add(f"infinity ({label})", None, None, "skipped (--no-infinity)")
        else:
            started = time.perf_counter()
            table, note = infinity_vectors(folder, texts, args.batch_size, args.threads)
            add(f"infinity ({label})", table, time.perf_counter() - started if table is not None else None, note)

    anglekit_score = rows[0]["spearman"]
    measured = [r for r in rows if "spearman" in r]
    agree = all(abs(r["spearman"] - anglekit_score) <= AGREEMENT for r in measured)
    summary = {
        "benchmark": "interop",
        "protocol": f"{Path(args.config).name}" + (f", max_steps {args.max_steps}" if args.max_steps else ", one epoch"),
        "test_pairs": len(test),
        "texts": len(texts),
        "train_seconds": train_seconds,
        "export": {"folder": str(exported_dir), "check": export_note, "trust_remote_code": result.trust_remote_code},
        "agreement": AGREEMENT,
        "all_agree": agree,
        "rows": rows,
        "versions": versions(),
        "smoke": smoke,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(
        json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **summary}, indent=2, default=float) + "\n", encoding="utf-8"
    )

    print(f"STS-B test ({len(test)} pairs) Spearman x 100, model trained with {summary['protocol']}")
    print(f"{'runtime':<44} {'spearman':>9} {'diff':>8} {'max |dv|':>9}  note")
    for row in rows:
        if "spearman" in row:
            print(f"{row['runtime']:<44} {row['spearman']:>9.4f} {row['spearman'] - anglekit_score:>+8.4f} {row['max_vector_difference']:>9.1e}  {row['note']}")
        else:
            print(f"{row['runtime']:<44} {'-':>9} {'':>8} {'':>9}  {row['note']}")
    print(f"export: {export_note}")
    print(f"all measured runtimes agree to {AGREEMENT}: {agree}; written to {out_path}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
