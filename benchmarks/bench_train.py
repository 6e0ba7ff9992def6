#!/usr/bin/env python
"""Training benchmark: anglekit's objectives next to sentence-transformers and angle-emb.

Protocol, every row: all-MiniLM-L6-v2 (mean pooling), STS-B train (5749 pairs), 1 epoch, batch 32,
constant LR 2e-5, no warmup, max length 64; STS-B test Spearman x 100 of cosine vs gold after
training. Every row runs seeds 0, 1 and 2, each in its own process (so peak memory is per run).
Batches: each library's own way ("grouped": length-grouped, anglekit's default; "random": the
peers' default) and the other way, so that grouping is compared like with like.

Timed span, every row: from the training pairs in memory to the trained weights, tokenization
included. anglekit tokenizes the whole set before its training loop, the peers tokenize each batch
inside theirs (and the peers' grouped rows tokenize once up front for the lengths); so pairs/s is
the pairs trained over tokenize_seconds + train_seconds. Reading the CSV, loading the model, saving
and evaluating are outside it. Peak memory is the process's peak RSS (evaluation included). Runs are
meant for an otherwise idle machine: nothing here can tell whether other work overlapped them.

    .venv/bin/python benchmarks/bench_train.py                 # every row x 3 seeds (hours on 2 cores)
    .venv/bin/python benchmarks/bench_train.py --only anglekit:paper --seeds 0 --max-steps 20
    .venv/bin/python benchmarks/bench_train.py --new-rows      # issue 27's rows: bf16/auto, fp32 baselines, token budget

Per-run JSON lands in benchmarks/results/train/; a finished one (same protocol tag, seed, batches
and --max-steps) is reused, so an interrupted benchmark continues where it stopped (--force runs
again). The summary (mean ± std over seeds of quality and throughput) is printed as a table and
written to benchmarks/results/bench_train.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
ANGLE_EMB_PYTHON = ROOT / ".venv-angle-emb" / "bin" / "python"

sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (protocol constants; stdlib + numpy only)

SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Row:
    """One line of the table: a library, its loss (anglekit: objective preset) and how it batches."""

    peer: str
    loss: str
    batches: str
    """``grouped`` (length-grouped), ``random`` or ``tokens`` (anglekit's ``--max-batch-tokens``
    MAX_BATCH_TOKENS: length-sorted batches by a token budget)."""
    precision: str = "fp32"
    """``fp32``; ``auto`` (anglekit's default: bf16 autocast on CPUs with avx512_bf16/amx_bf16) or
    ``bf16`` (sentence-transformers' ``bf16=True``). Named in the row only when not fp32."""
    levers: str = "default"
    """anglekit's loop levers (issues 27, 41): ``default`` (compact embeddings, fast dropout and
    packed tokens, as ``anglekit train`` runs), ``unpacked`` (``--no-pack-tokens``: the default
    before issue 41), ``compact-only`` (compact embeddings alone) or ``none`` (none of them: the
    training loop before them). Named in the row only when not default."""

    @property
    def name(self) -> str:
        tail = "" if self.precision == "fp32" else f":{self.precision}"
        levers = "" if self.levers == "default" else f":levers-{self.levers}"
        return f"{self.peer}:{self.loss}:{self.batches}{tail}{levers}"

    def matches(self, selector: str) -> bool:
        """Whether ``selector`` (``peer``, ``peer:loss``, ...) begins this row's name, field by field."""
        parts = selector.split(":")
        return parts == self.name.split(":")[: len(parts)]


ROWS: tuple[Row, ...] = (
    Row("anglekit", "paper", "grouped"),
    Row("anglekit", "paper", "random"),
    Row("sentence-transformers", "cosent", "random"),
    Row("sentence-transformers", "cosent", "grouped"),
    Row("sentence-transformers", "angle", "random"),
    Row("sentence-transformers", "angle", "grouped"),
    Row("angle-emb", "paper", "random"),
    Row("angle-emb", "paper", "grouped"),
    Row("angle-emb", "defaults", "random"),
    Row("anglekit", "official-defaults", "grouped"),
    Row("anglekit", "paper-phase", "grouped"),
    Row("anglekit", "cosine", "grouped"),
    Row("anglekit", "angle", "grouped"),
    Row("anglekit", "angle-phase", "grouped"),
    # issue 27: anglekit's new default (--precision auto) and the peers at their best on this CPU
    Row("anglekit", "paper", "grouped", "auto"),
    Row("anglekit", "paper", "random", "auto"),
    Row("sentence-transformers", "cosent", "grouped", "bf16"),
    Row("angle-emb", "paper", "grouped", "bf16"),
    Row("anglekit", "paper", "tokens", "auto"),
    Row("anglekit", "paper", "grouped", "auto", "none"),
    Row("anglekit", "paper", "grouped", "auto", "compact-only"),
    Row("anglekit", "paper", "grouped", "auto", "unpacked"),
)
LEVER_FLAGS = {
    "default": [],
    "unpacked": ["--no-pack-tokens"],
    "compact-only": ["--no-fast-dropout", "--no-pack-tokens"],
    "none": ["--no-fast-dropout", "--no-compact-embeddings", "--no-pack-tokens"],
}
"""anglekit_train.py's flags for each ``Row.levers``."""
NEW_ROWS = (
    Row("anglekit", "paper", "grouped", "auto"),
    Row("anglekit", "paper", "grouped", "auto", "none"),
    Row("anglekit", "paper", "grouped", "auto", "compact-only"),
    Row("anglekit", "paper", "grouped"),
    Row("sentence-transformers", "cosent", "random"),
    Row("sentence-transformers", "cosent", "grouped", "bf16"),
    Row("angle-emb", "paper", "grouped"),
    Row("angle-emb", "paper", "grouped", "bf16"),
    Row("anglekit", "paper", "tokens", "auto"),
)
"""``--new-rows``: the rows of issue 27's comparison."""
FP32_BASELINE = Row("anglekit", "paper", "grouped")
"""Spearman deltas are paired by seed against this row (anglekit in fp32)."""
MAX_BATCH_TOKENS = 512
"""The ``tokens`` row's budget: on STS-B train (MiniLM's tokenizer, max length 64) it makes 180
batches, 31.9 pairs each on average, as the protocol's 180 batches of 32 (the mean longest side of a
pair is 15.6 tokens); the batches are smaller where the texts are long and larger where short."""
REFERENCE = Row("sentence-transformers", "cosent", "random")
"""Throughput ratios are against this row (the issue's peer, as it runs by default)."""


def command(row: Row, seed: int, out: Path, max_steps: int | None, threads: int) -> list[str]:
    extra = ["--threads", str(threads)]
    if max_steps:
        extra += ["--max-steps", str(max_steps)]
    grouped = row.batches != "random"
    if row.peer == "anglekit":
        script, python, flags = HERE / "anglekit_train.py", MAIN_PYTHON, ["--objective", row.loss]
        flags += ([] if grouped else ["--no-group-by-length"]) + ["--precision", row.precision]
        flags += ["--max-batch-tokens", str(MAX_BATCH_TOKENS)] if row.batches == "tokens" else []
        flags += LEVER_FLAGS[row.levers]
    elif row.peer == "sentence-transformers":
        script, python, flags = HERE / "peers" / "st_train.py", MAIN_PYTHON, ["--loss", row.loss]
        flags += (["--group-by-length"] if grouped else []) + (["--bf16"] if row.precision == "bf16" else [])
    elif row.peer == "angle-emb":
        script, python, flags = HERE / "peers" / "angle_emb_train.py", ANGLE_EMB_PYTHON, ["--weights", row.loss]
        flags += (["--group-by-length"] if grouped else []) + (["--bf16"] if row.precision == "bf16" else [])
    else:
        raise ValueError(f"unknown peer {row.peer}")
    return [str(python), str(script), *flags, "--seed", str(seed), "--out", str(out), *extra]


def run_path(results: Path, row: Row, seed: int, max_steps: int | None) -> Path:
    suffix = f"-steps{max_steps}" if max_steps else ""
    precision = "" if row.precision == "fp32" else f"-{row.precision}"
    levers = "" if row.levers == "default" else f"-levers-{row.levers}"
    return results / "train" / f"{row.peer}-{row.loss}-{row.batches}{precision}{levers}-seed{seed}{suffix}.json"


def finished_run(path: Path, row: Row, seed: int, max_steps: int | None) -> dict[str, Any] | None:
    """The run's result when ``path`` holds a finished run of this protocol, row, seed and length."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = (
        isinstance(result, dict)
        and result.get("protocol") == common.TRAIN_PROTOCOL
        and result.get("seed") == seed
        and result.get("group_by_length") == (row.batches != "random")
        and result.get("max_batch_tokens") == (MAX_BATCH_TOKENS if row.batches == "tokens" else None)
        and (result.get("max_steps") or None) == (max_steps or None)
        and result.get("eval_limit") is None
        and result.get("precision_requested", result.get("precision", "fp32")) == row.precision
        and (row.peer != "anglekit" or result.get("levers") == row.levers)
        # runs from before pack_tokens have no such key and ran unpacked: never the default row's
        and (row.peer != "anglekit" or result.get("pack_tokens", False) == (row.levers == "default"))
    )
    return result if same else None


def _run_teeing_stderr(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``argv``: its stderr streams through live; returns (exit code, stdout, last stderr line)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = [""]

    def tee() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            if line.strip():
                last[0] = line.strip()

    thread = threading.Thread(target=tee, daemon=True)
    thread.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    returncode = proc.wait()
    thread.join()
    return returncode, stdout, last[0]


def run_one(row: Row, seed: int, *, results: Path, force: bool, max_steps: int | None, threads: int) -> dict[str, Any] | str:
    """The run's result, or why there is none (one line)."""
    out = run_path(results, row, seed, max_steps)
    if not force:
        done = finished_run(out, row, seed, max_steps)
        if done is not None:
            print(f"--- {row.name} seed {seed}: reusing {out}", file=sys.stderr, flush=True)
            return done
    if row.peer == "angle-emb" and not ANGLE_EMB_PYTHON.exists():
        print(f"skip {row.name}: run benchmarks/peers/setup_angle_emb.sh first", file=sys.stderr)
        return "skipped: no .venv-angle-emb (run benchmarks/peers/setup_angle_emb.sh)"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"--- {row.name} seed {seed}", file=sys.stderr, flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    returncode, stdout, last = _run_teeing_stderr(command(row, seed, out, max_steps, threads), env)
    if returncode != 0:
        print(f"FAILED {row.name} seed {seed} (exit {returncode})", file=sys.stderr)
        return f"failed (exit {returncode}): {last[:300] if last else 'no message'}"
    result = json.loads(stdout.strip().splitlines()[-1])
    print(
        f"    spearman {result['spearman']:.2f}, {result['train_pairs_per_s']:.1f} pairs/s "
        f"(tokenize {result['tokenize_seconds']:.1f} s + train {result['train_seconds']:.1f} s), "
        f"{time.perf_counter() - started:.0f} s wall",
        file=sys.stderr,
        flush=True,
    )
    return result


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _distinct(results: Sequence[dict[str, Any]], key: str) -> Any:
    """The one value of ``key`` across runs, or the sorted distinct values when they differ."""
    values = {json.dumps(r.get(key), sort_keys=True) for r in results}
    decoded = sorted((json.loads(v) for v in values), key=lambda v: json.dumps(v, sort_keys=True))
    return decoded[0] if len(decoded) == 1 else decoded


def _paired_delta(results: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> tuple[float, float] | None:
    """Mean ± std over the seeds both rows ran of (this row's Spearman - the fp32 baseline's)."""
    base = {r["seed"]: r["spearman"] for r in baseline}
    deltas = [r["spearman"] - base[r["seed"]] for r in results if r["seed"] in base]
    return _mean_std(deltas) if deltas else None


def tokens_per_pair() -> float | None:
    """Non-padding tokens of both sides of a training pair, on average over STS-B train: each side
    tokenized alone by all-MiniLM-L6-v2's tokenizer (special tokens included, truncated at the
    protocol's max length). The same count for every row, whichever library trained it."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(common.minilm_dir()))
        text1, text2, _ = common.read_stsb("train")
    except Exception as exc:  # noqa: BLE001 (the column is optional: say why it is missing)
        print(f"no tokens/s column: {exc}", file=sys.stderr)
        return None
    total = 0
    for texts in (text1, text2):
        ids = tokenizer(list(texts), truncation=True, max_length=common.TRAIN_MAX_LENGTH)["input_ids"]
        total += sum(len(row) for row in ids)
    return total / len(text1)


def summarise(runs: dict[Row, list[dict[str, Any]]], per_pair: float | None = None) -> list[dict[str, Any]]:
    reference = runs.get(REFERENCE, [])
    ref_speed = statistics.fmean(r["train_pairs_per_s"] for r in reference) if reference else None
    table = []
    for row, results in runs.items():
        if not results:
            continue
        results = sorted(results, key=lambda r: r["seed"])
        scores = [r["spearman"] for r in results]
        speeds = [r["train_pairs_per_s"] for r in results]
        spearman_mean, spearman_std = _mean_std(scores)
        speed_mean, speed_std = _mean_std(speeds)
        table.append(
            {
                "row": row.name,
                "peer": row.peer,
                "loss": row.loss,
                "batches": row.batches,
                "levers": row.levers if row.peer == "anglekit" else None,
                "batching": _distinct(results, "batches"),
                "seeds": [r["seed"] for r in results],
                "spearman_mean": spearman_mean,
                "spearman_std": spearman_std,
                "spearman_runs": scores,
                "train_pairs_per_s_mean": speed_mean,
                "train_pairs_per_s_std": speed_std,
                "train_pairs_per_s_runs": speeds,
                "loop_pairs_per_s_mean": statistics.fmean(r["loop_pairs_per_s"] for r in results),
                "tokenize_seconds_mean": statistics.fmean(r["tokenize_seconds"] for r in results),
                "throughput_ratio_vs_reference": speed_mean / ref_speed if ref_speed else None,
                "train_tokens_per_s_mean": speed_mean * per_pair if per_pair else None,
                "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
                "precision": _distinct(results, "precision"),
                "spearman_delta_vs_fp32": _paired_delta(results, runs.get(FP32_BASELINE, [])),
                "steps": _distinct(results, "steps"),
                "torch_threads": _distinct(results, "torch_threads"),
                "max_length": _distinct(results, "max_length"),
                "versions": _distinct(results, "versions"),
            }
        )
    return table


def _spread(mean: float, std: float, n: int, digits: int) -> str:
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if n > 1 else f"{mean:.{digits}f}"


def _loss_column(row: dict[str, Any]) -> str:
    levers = row.get("levers")
    return row["loss"] if levers in (None, "default") else f"{row['loss']} [levers {levers}]"


def print_table(table: list[dict[str, Any]]) -> None:
    header = (
        f"{'peer':<22} {'loss':<24} {'batches':<8} {'prec':<5} {'seeds':<5} {'spearman':>13} {'pairs/s':>12} "
        f"{'tokens/s':>8} {'ratio':>5} {'tok s':>5} {'threads':>7} {'peak MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in table:
        n = len(row["seeds"])
        ratio = row["throughput_ratio_vs_reference"]
        tokens = row["train_tokens_per_s_mean"]
        print(
            f"{row['peer']:<22} {_loss_column(row):<24} {row['batches']:<8} {str(row['precision']):<5} {n:<5} "
            f"{_spread(row['spearman_mean'], row['spearman_std'], n, 2):>13} "
            f"{_spread(row['train_pairs_per_s_mean'], row['train_pairs_per_s_std'], n, 1):>12} "
            f"{f'{tokens:.0f}' if tokens else '-':>8} {f'{ratio:.2f}' if ratio else '-':>5} {row['tokenize_seconds_mean']:>5.1f} "
            f"{str(row['torch_threads']):>7} {row['peak_rss_mb']:>7.0f}"
        )
    print(
        f"ratio: pairs/s against {REFERENCE.name}; pairs/s and tok s: see the timed span in bench_train.py's doc; "
        "tokens/s: pairs/s x the mean non-padding tokens of a pair's two sides (same tokenizer, every row)"
    )


def main(argv: list[str] | None = None) -> int:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PEER[:LOSS[:BATCHES[:PRECISION]]]",
        help="run only the rows these name (repeatable): a row's whole name picks that row alone "
        "(sentence-transformers:cosent:grouped: not its :bf16 row), a shorter one every row it begins (anglekit:paper)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="seeds of every row (default 0 1 2)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop each run early (smoke test; kept apart by file name)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads of every run (0: torch's default)")
    parser.add_argument("--force", action="store_true", help="run again even where a finished per-run JSON exists")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="where train/ and bench_train.json go")
    parser.add_argument("--list", action="store_true", help="print the rows (those --only picks) and exit")
    parser.add_argument(
        "--new-rows",
        action="store_true",
        help="run only issue 27's rows: anglekit's default (auto: bf16 on CPUs with avx512_bf16/amx_bf16), anglekit fp32, "
        "sentence-transformers CoSENT at its defaults and with bf16=True + grouped batches, angle-emb paper weights grouped "
        "in fp32 and bf16, anglekit auto with --max-batch-tokens",
    )
    args = parser.parse_args(argv)
    if args.new_rows:
        args.only += [r.name for r in NEW_ROWS]
    # a selector that is a row's whole name picks that row alone (sentence-transformers:cosent:grouped is
    # the fp32 row, not also its :bf16 one); any other selector picks the rows it is a prefix of
    exact = {row.name for row in ROWS}
    selected = [row for row in ROWS if not args.only or any(row.name == s if s in exact else row.matches(s) for s in args.only)]
    if not selected:
        parser.error(f"--only matched no row; rows: {', '.join(row.name for row in ROWS)}")
    if args.list:
        print("\n".join(row.name for row in selected))
        return 0
    runs: dict[Row, list[dict[str, Any]]] = {row: [] for row in selected}
    # Seed by seed across every row: an interrupted benchmark still covers every row.
    plan = [(row, seed) for seed in args.seeds for row in selected]
    failed = []
    for row, seed in plan:
        result = run_one(row, seed, results=args.results_dir, force=args.force, max_steps=args.max_steps, threads=args.threads)
        if isinstance(result, str):
            failed.append(f"{row.name}:seed{seed}: {result}")
        else:
            runs[row].append(result)
    per_pair = tokens_per_pair()
    table = summarise(runs, per_pair)
    print_table(table)
    suffix = f"-steps{args.max_steps}" if args.max_steps else ""
    out = args.results_dir / f"bench_train{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    paragraphs = doc.split("\n\n")
    summary = {
        "protocol": paragraphs[1],
        "timing": paragraphs[2],
        "protocol_tag": common.TRAIN_PROTOCOL,
        "reference": REFERENCE.name,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "threads_argument": args.threads, "cpu_flags": common.cpu_flags()},
        "max_steps": args.max_steps,
        "failed": failed,
        "tokens_per_pair": per_pair,
        "rows": table,
    }
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"command": common.invocation(), **summary}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    print(f"wrote {out}")
    if failed:
        print("failed or skipped:\n  " + "\n  ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
