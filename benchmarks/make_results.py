"""Write docs/results.md and its charts from the results JSON files under benchmarks/results/.

Every benchmarked claim is one :class:`Claim`: what was compared, the file that holds the run,
how its figure is read from that file, the hardware and the date of the run, and the command that
produced the file, read from the results folder (:func:`producing_command`: the ``run.sh`` of the
file's folder or of a folder above it, else the file's own ``command`` field). The page, the charts
and the figures quoted in README.md and docs/*.md (``<!--fig:KEY-->VALUE<!--/fig-->``, checked by
tests/test_docs_examples.py) all come from here, so a figure cannot drift from its run.

    .venv/bin/python benchmarks/make_results.py            # rewrite docs/results.md and docs/img/results/*.png
    .venv/bin/python benchmarks/make_results.py --check    # exit 1 when either would change (CI)

Errors (a missing, empty or malformed results file, a missing field, a results file that records
no command) print one line naming the file and the field and exit 2; nothing is written then.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
IMG = "img/results"
MARKER = re.compile(r"<!--fig:([A-Za-z0-9_.-]+)-->(.*?)<!--/fig-->", re.S)


class ResultsError(Exception):
    """A results file or field that cannot give its claim's figure (one line: the file and the field)."""


@dataclass(frozen=True)
class Claim:
    """One benchmarked figure: ``value`` reads it from ``source`` (relative to the results folder)."""

    key: str
    section: str
    what: str
    source: str
    value: Callable[[Results], str]
    hardware: str
    date: str
    """The run's date, or ``@FIELD``: the date field of ``source``. A literal date is only for results
    files from before the benchmarks recorded their date; one that records it must be read."""
    page: str

    def command(self, results: Results) -> str:
        """The command that produced ``source``, for the page (``not recorded: WHY`` where it was not)."""
        command, why = producing_command(results.root, self.source)
        return command if command is not None else f"not recorded: {why}"

    def run_date(self, results: Results) -> str:
        if not self.date.startswith("@"):
            recorded = results.load(self.source)
            if isinstance(recorded, dict) and "date" in recorded:  # a rerun benchmark: its claim must not keep an old date
                raise ResultsError(
                    f"{results.root / self.source}: records its run's date ({recorded['date']!r}); claim {self.key!r} gives "
                    f"{self.date!r} by hand: read it with date='@date'"
                )
            return self.date
        value = results.get(self.source, self.date[1:])
        if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ResultsError(f"{results.root / self.source}: field {self.date[1:]!r} is {value!r}, not a date YYYY-MM-DD")
        return value


class Results:
    """Reads results files once each; every failure names the file and the field."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, Any] = {}

    def load(self, source: str) -> Any:
        if source not in self._cache:
            path = self.root / source
            if not path.is_file():
                raise ResultsError(f"{path}: no such results file")
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ResultsError(f"{path}: cannot be read as UTF-8 text ({exc.__class__.__name__})") from None
            if not text.strip():
                raise ResultsError(f"{path}: empty file")
            try:
                self._cache[source] = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ResultsError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
        return self._cache[source]

    def get(self, source: str, field: str) -> Any:
        """``field`` is a dotted path; ``rows[row=NAME]`` picks the list item whose ``row`` is NAME, and
        ``pairs[a=X&b=Y]`` the one whose ``a`` is X and ``b`` is Y."""
        node = self.load(source)
        for part in re.findall(r"(?:[^.\[]|\[[^\]]*\])+", field):  # dots inside [...] are the value's
            if part.isdigit():
                if not isinstance(node, list) or int(part) >= len(node):
                    raise ResultsError(f"{self.root / source}: field {field!r}: no item {part}")
                node = node[int(part)]
                continue
            match = re.fullmatch(r"(\w+)\[(\w+=.+)\]", part, re.S)
            name = match.group(1) if match else part
            if not isinstance(node, dict) or name not in node:
                raise ResultsError(f"{self.root / source}: no field {field!r} (missing {name!r})")
            node = node[name]
            if match:
                wants = [tuple(condition.split("=", 1)) for condition in match.group(2).split("&")]
                if any(len(w) != 2 or not re.fullmatch(r"\w+", w[0]) for w in wants):
                    raise ResultsError(f"{self.root / source}: field {field!r}: a selector is KEY=VALUE[&KEY=VALUE...]")
                found = [item for item in node if isinstance(item, dict) and all(str(item.get(k)) == v for k, v in wants)] if isinstance(node, list) else []
                if len(found) != 1:
                    said = " and ".join(f"{k} = {v!r}" for k, v in wants)
                    raise ResultsError(f"{self.root / source}: field {field!r}: {len(found)} items with {said}, expected 1")
                node = found[0]
        return node

    def number(self, source: str, field: str) -> float:
        value = self.get(source, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ResultsError(f"{self.root / source}: field {field!r} is {value!r}, not a number")
        return float(value)


RUN_SCRIPTS = ("run.sh", "run_on_device.sh")
NOT_RECORDED = "# command: not recorded"
"""The line of a ``run.sh`` that says its folder's command was not recorded (its comments say what is known)."""


def _script_command(results_dir: Path, script: Path) -> tuple[str | None, str]:
    shown = f"benchmarks/results/{script.relative_to(results_dir).as_posix()}"
    if NOT_RECORDED in script.read_text(encoding="utf-8").splitlines():
        return None, f"see `{shown}`"
    return f"bash {shown}", shown


def producing_command(results_dir: Path, source: str) -> tuple[str | None, str]:
    """``(command, where)`` for the results file ``source``: the ``run.sh`` (or ``run_on_device.sh``) of
    its folder or the nearest folder above it inside ``results_dir``, else the file's own ``command``
    field; ``(None, why)`` where that says the command was not recorded (a ``run.sh`` holding
    :data:`NOT_RECORDED`, or ``"command": null`` beside a ``command_not_recorded`` reason). Raises
    ResultsError naming the file when it records no command at all."""
    path = results_dir / source
    folder = path.parent
    while folder != results_dir and results_dir in folder.parents:
        for name in RUN_SCRIPTS:
            if (folder / name).is_file():
                return _script_command(results_dir, folder / name)
        folder = folder.parent
    data: Any = None
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            raise ResultsError(f"{path}: cannot be read as JSON to find its command") from None
    if isinstance(data, dict) and isinstance(data.get("command"), str) and data["command"].strip():
        return data["command"], "its command field"
    if isinstance(data, dict) and "command" in data and data["command"] is None and isinstance(data.get("command_not_recorded"), str):
        return None, data["command_not_recorded"]
    raise ResultsError(
        f'{path}: records no command: add a run.sh to its folder, or a "command" field to the file '
        f'("command": null with "command_not_recorded": WHY where it cannot be determined)'
    )


def check_commands(results_dir: Path = RESULTS) -> list[str]:
    """One line per results file whose producing command is not recorded beside it (empty: all are).
    A JSON file needs a ``run.sh`` above it or its own ``command`` field; any other file in a folder
    needs a ``run.sh`` above it; a loose non-JSON file at the top (a log, a table) must be named
    after a top-level JSON file that records its command (``bench_serve-run.log``: ``bench_serve.json``)."""
    problems = []
    top = {path.stem for path in results_dir.glob("*.json")}
    for path in sorted(p for p in results_dir.rglob("*") if p.is_file()):
        name = path.relative_to(results_dir).as_posix()
        if path.name in RUN_SCRIPTS or path.name == ".gitignore":
            continue
        try:
            if path.suffix == ".json" or path.parent != results_dir:
                if path.suffix != ".json" and not any(
                    (folder / script).is_file() for folder in path.parents if results_dir in folder.parents for script in RUN_SCRIPTS
                ):
                    raise ResultsError(f"{path}: no run.sh in its folder or above it says what produced it")
                producing_command(results_dir, name)
            elif not any(path.name.startswith(stem) for stem in top):
                raise ResultsError(f"{path}: a loose file at the top is named after the JSON file whose command made it; none matches")
        except ResultsError as exc:
            problems.append(str(exc))
    return problems


def _numbers(values: Any) -> bool:
    return isinstance(values, list) and bool(values) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values)


def _range(values: list[float], digits: int = 2) -> str:
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}-{high}"


def _paired(source: str, row: str, metric: str | None = None) -> Callable[[Results], str]:
    """A reproduce row's paired difference from its table's reference row (on the table's primary
    metric, or ``metric``): mean ± std over the seeds, p of the paired t-test."""
    field = f"rows[row={row}]." + ("paired" if metric is None else f"paired_other.{metric}")

    def claim(r: Results) -> str:
        mean, std, p = (r.number(source, f"{field}.{name}") for name in ("mean_diff", "std_diff", "p"))
        seeds = r.get(source, f"{field}.seeds")
        if not (isinstance(seeds, list) and len(seeds) >= 3):
            raise ResultsError(f"{r.root / source}: field {field + '.seeds'!r} is {seeds!r}, not 3 seeds or more")
        shown = "< 0.001" if p < 0.001 else f"= {p:.3f}" if p < 0.01 else f"= {p:.2f}"
        return f"{mean:+.2f} ± {std:.2f} (p {shown})"

    return claim


def claims() -> list[Claim]:
    """Every benchmarked claim with its current figure's recipe, in the order of the page."""
    train = "train-minilm-numpy-masks-xeon-amx/bench_train.json"
    levers = "train-minilm-loop-levers-xeon-amx/bench_train.json"
    default, st_best, st_default = "anglekit:paper:grouped:auto", "sentence-transformers:cosent:grouped:bf16", "sentence-transformers:cosent:random"
    amx = "Intel Xeon (AMX), 2 threads"
    epyc = "AMD EPYC, 2 threads"
    quick = "quickstart/quickstart.json"

    def seed_ratios(source: str, best: str) -> Callable[[Results], str]:
        """anglekit's default over ``best``, pairs/s seed by seed: their range."""

        def claim(r: Results) -> str:
            ours = r.get(source, f"rows[row={default}].train_pairs_per_s_runs")
            theirs = r.get(source, f"rows[row={best}].train_pairs_per_s_runs")
            if not (_numbers(ours) and _numbers(theirs) and len(ours) == len(theirs) and 0 not in theirs):
                raise ResultsError(f"{r.root / source}: train_pairs_per_s_runs of {default} and {best} are not lists of one length of positive numbers")
            return _range([a / b for a, b in zip(ours, theirs, strict=False)])

        return claim

    def llm_recipe(r: Results) -> str:
        ratios = [
            r.number(f"llm-lora-numpy-masks/run{i}-default.json", "pairs_per_second")
            / r.number(f"llm-lora-numpy-masks/run{i}-fp32-reference.json", "pairs_per_second")
            for i in (1, 2, 3, 4)
        ]
        return _range(ratios)

    def serve_ratio(r: Results) -> str:
        cells = r.get("serve-vs-infinity-ov-pad8/summary.json", "cells")
        if not isinstance(cells, list) or not cells:
            raise ResultsError(f"{r.root / 'serve-vs-infinity-ov-pad8/summary.json'}: field 'cells' is not a non-empty list")
        ratios = [run["ratio"] for cell in cells for run in cell.get("runs", []) if isinstance(run, dict) and isinstance(run.get("ratio"), (int, float))]
        if not ratios:
            raise ResultsError(f"{r.root / 'serve-vs-infinity-ov-pad8/summary.json'}: no cell has runs with a numeric 'ratio'")
        return _range(ratios)

    def mean_std(source: str, method: str) -> Callable[[Results], str]:
        return lambda r: (
            f"{r.number(source, f'summary[method={method}].stsb_test_mean'):.2f} ± {r.number(source, f'summary[method={method}].stsb_test_std'):.2f}"
        )

    def fmt(source: str, field: str, spec: str, scale: float = 1.0) -> Callable[[Results], str]:
        return lambda r: format(r.number(source, field) * scale, spec)

    def ratio(source_a: str, field_a: str, source_b: str, field_b: str) -> Callable[[Results], str]:
        return lambda r: f"{r.number(source_a, field_a) / r.number(source_b, field_b):.2f}"

    quick_hw = "the project's 2-core AMD EPYC (AVX-512, native bf16), quiet (its load: last row)"
    retrieval = "retrieval_train/bench_retrieval_train-rows5000-dseed0-neg3-auto.json"
    mnrl = "comparison.like_with_like[st=sentence-transformers:mnrl:mined]"
    mnrl_ibn = "comparison.like_with_like_ibn[st=sentence-transformers:mnrl:mined]"
    w4 = "rows[row=anglekit:paper[ibn_weight=4]:mined]"
    mnrl_w4 = "comparison.like_with_like_more[anglekit=anglekit:paper[ibn_weight=4]:mined&st=sentence-transformers:mnrl:mined]"
    epyc_fp32 = "AMD EPYC (AVX2, no bf16: fp32), 2 threads"
    return [
        Claim(
            "quickstart.before",
            "Quick start",
            "STS-B test Spearman of all-MiniLM-L6-v2 before `scripts/quickstart.sh`",
            quick,
            fmt(quick, "before.spearman", ".2f"),
            quick_hw,
            "@date",
            "get-started.md",
        ),
        Claim(
            "quickstart.after",
            "Quick start",
            "STS-B test Spearman after one epoch of the paper preset (seeded: the same every run on one CPU and precision)",
            quick,
            fmt(quick, "after.spearman", ".2f"),
            quick_hw,
            "@date",
            "get-started.md",
        ),
        Claim(
            "quickstart.seconds",
            "Quick start",
            "training time, seconds (today's defaults; depends on the machine's load)",
            quick,
            fmt(quick, "train_seconds", ".0f"),
            quick_hw,
            "@date",
            "get-started.md",
        ),
        Claim(
            "quickstart.pairs_per_s",
            "Quick start",
            "training pairs/s over that time",
            quick,
            fmt(quick, "pairs_per_second", ".1f"),
            quick_hw,
            "@date",
            "get-started.md",
        ),
        Claim(
            "quickstart.precision",
            "Quick start",
            "the precision `--precision auto` chose on that CPU (bf16 only where it has bf16 instructions)",
            quick,
            lambda r: str(r.get(quick, "precision")),
            quick_hw,
            "@date",
            "get-started.md",
        ),
        Claim(
            "quickstart.load",
            "Quick start",
            "mean 1-minute load average of the 2-core machine during that run",
            quick,
            fmt(quick, "load.mean_1min", ".1f"),
            quick_hw,
            "@date",
            "get-started.md",
        ),
        Claim(
            "train.x_st_best",
            "Training (MiniLM, STS-B, 3 seeds)",
            "anglekit's default against sentence-transformers at its best (bf16, grouped), pairs/s per seed, x",
            train,
            seed_ratios(train, st_best),
            amx,
            "2026-11-27",
            "training.md",
        ),
        Claim(
            "train.x_st_best_epyc_avx2",
            "Training (MiniLM, STS-B, 3 seeds)",
            "the same on a CPU without bf16, where both train fp32 (sentence-transformers' best there: grouped, fp32), pairs/s per seed, x",
            "train-minilm-packed-tokens-epyc-avx2/bench_train.json",
            seed_ratios("train-minilm-packed-tokens-epyc-avx2/bench_train.json", "sentence-transformers:cosent:grouped"),
            epyc_fp32,
            "2026-11-29",
            "training.md",
        ),
        Claim(
            "train.packed_tokens",
            "Training (MiniLM, STS-B, 3 seeds)",
            "packed tokens: anglekit's default against the same loop with encoder layers over the padded batch, pairs/s per seed, x",
            "train-minilm-packed-tokens-epyc-avx2/bench_train.json",
            seed_ratios("train-minilm-packed-tokens-epyc-avx2/bench_train.json", f"{default}:levers-unpacked"),
            epyc_fp32,
            "2026-11-29",
            "training.md#speed",
        ),
        Claim(
            "train.default_pairs_per_s",
            "Training (MiniLM, STS-B, 3 seeds)",
            "anglekit's default: training pairs/s, mean over seeds (the quick start's loop on a quiet machine)",
            train,
            fmt(train, f"rows[row={default}].train_pairs_per_s_mean", ".1f"),
            amx,
            "2026-11-27",
            "training.md#speed",
        ),
        Claim(
            "train.default_spearman",
            "Training (MiniLM, STS-B, 3 seeds)",
            "anglekit's default: STS-B test Spearman, mean over seeds",
            train,
            fmt(train, f"rows[row={default}].spearman_mean", ".2f"),
            amx,
            "2026-11-27",
            "training.md",
        ),
        Claim(
            "train.st_best_spearman",
            "Training (MiniLM, STS-B, 3 seeds)",
            "sentence-transformers at its best: STS-B test Spearman, mean over seeds",
            train,
            fmt(train, f"rows[row={st_best}].spearman_mean", ".2f"),
            amx,
            "2026-11-27",
            "training.md",
        ),
        Claim(
            "train.x_st_default",
            "Training (MiniLM, STS-B, 3 seeds)",
            "anglekit's default against sentence-transformers' defaults (fp32, random batches), mean pairs/s, x",
            levers,
            ratio(levers, f"rows[row={default}].train_pairs_per_s_mean", levers, f"rows[row={st_default}].train_pairs_per_s_mean"),
            amx,
            "2026-11-26",
            "training.md",
        ),
        Claim(
            "gpu.unpad",
            "Training (MiniLM, STS-B, 3 seeds)",
            "`--unpad` on a GPU: pairs/s against the padded bf16 loop, x (300 steps of 64 pairs)",
            "gpu/varlen-4bit/train_bf16_unpad.json",
            ratio("gpu/varlen-4bit/train_bf16_unpad.json", "figures.pairs_per_second", "gpu/varlen-4bit/train_bf16.json", "figures.pairs_per_second"),
            "NVIDIA H100 80GB",
            "2026-11-26",
            "gpu.md",
        ),
        Claim(
            "gpu.unpad_lora",
            "Training (MiniLM, STS-B, 3 seeds)",
            "`--unpad` on a GPU, LoRA on a decoder of SmolLM2's architecture: pairs/s against padded, x",
            "gpu/varlen-4bit/lora_bf16_unpad.json",
            ratio("gpu/varlen-4bit/lora_bf16_unpad.json", "figures.pairs_per_second", "gpu/varlen-4bit/lora_bf16.json", "figures.pairs_per_second"),
            "NVIDIA H100 80GB",
            "2026-11-26",
            "gpu.md",
        ),
        Claim(
            "train.levers",
            "Training (MiniLM, STS-B, 3 seeds)",
            "compact embeddings and fast dropout together: anglekit's default against the same loop without them, mean pairs/s, x",
            train,
            ratio(train, f"rows[row={default}].train_pairs_per_s_mean", train, f"rows[row={default}:levers-none].train_pairs_per_s_mean"),
            amx,
            "2026-11-27",
            "training.md#speed",
        ),
        Claim(
            "llm.zero_shot",
            "Decoder LLM (SmolLM2-135M, LoRA)",
            "STS-B test Spearman, zero-shot with the paper's prompt",
            "bench_llm-paper-fp32-cpu.json",
            fmt("bench_llm-paper-fp32-cpu.json", "zero_shot.spearman", ".2f"),
            epyc,
            "2026-11-24",
            "llm.md",
        ),
        Claim(
            "llm.after",
            "Decoder LLM (SmolLM2-135M, LoRA)",
            "STS-B test Spearman after 200 LoRA steps (paper preset, fp32)",
            "bench_llm-paper-fp32-cpu.json",
            fmt("bench_llm-paper-fp32-cpu.json", "after.spearman", ".2f"),
            epyc,
            "2026-11-24",
            "llm.md",
        ),
        Claim(
            "llm.gguf_load",
            "Decoder LLM (SmolLM2-135M, LoRA)",
            "load time of the Q4_1 GGUF as an embedder: transformers' GGUF read against anglekit's float32 conversion of it, a fresh process each, median of 3 pairs, x",
            "bench_gguf_load.json",
            fmt("bench_gguf_load.json", "median_ratio", ".1f"),
            epyc_fp32,
            "2026-11-30",
            "llm.md",
        ),
        Claim(
            "llm.gguf_load_generator",
            "Decoder LLM (SmolLM2-135M, LoRA)",
            "the same, loaded as `anglekit generate`'s in-process generator, x",
            "bench_gguf_load-generator.json",
            fmt("bench_gguf_load-generator.json", "median_ratio", ".1f"),
            epyc_fp32,
            "2026-11-30",
            "llm.md",
        ),
        Claim(
            "llm.bf16_recipe",
            "Decoder LLM (SmolLM2-135M, LoRA)",
            "the bf16 recipe's pairs/s against the fp32 loop, four interleaved passes, x",
            "llm-lora-numpy-masks/run1-default.json",
            llm_recipe,
            amx,
            "2026-11-27",
            "llm.md",
        ),
        Claim(
            "unsup.simace",
            "Unsupervised (3 seeds)",
            "SimACE: STS-B test Spearman, mean ± std",
            "bench_unsup.json",
            mean_std("bench_unsup.json", "simace-unsup"),
            epyc,
            "2026-11-23",
            "unsupervised.md",
        ),
        Claim(
            "unsup.simcse",
            "Unsupervised (3 seeds)",
            "SimCSE on the same sentences: STS-B test Spearman, mean ± std",
            "bench_unsup.json",
            mean_std("bench_unsup.json", "simcse-unsup"),
            epyc,
            "2026-11-23",
            "unsupervised.md",
        ),
        Claim(
            "retrieval.ndcg_x_mnrl",
            "Retrieval training (Flickr30k, 3 seeds)",
            "anglekit's AnglE objective on its mined n-tuples minus sentence-transformers' MultipleNegativesRankingLoss on its own: "
            "test nDCG@10, mean ± std of the paired seeds",
            retrieval,
            lambda r: f"{r.number(retrieval, mnrl + '.ndcg_delta_mean'):+.2f} ± {r.number(retrieval, mnrl + '.ndcg_delta_std'):.2f}",
            epyc_fp32,
            "2026-11-29",
            "retrieval.md",
        ),
        Claim(
            "retrieval.speed_x_mnrl",
            "Retrieval training (Flickr30k, 3 seeds)",
            "the same pair: training rows/s (anchor, positive, 3 negatives), per seed, x",
            retrieval,
            lambda r: f"{_range([r.number(retrieval, mnrl + '.pairs_per_s_ratio_min'), r.number(retrieval, mnrl + '.pairs_per_s_ratio_max')])}",
            epyc_fp32,
            "2026-11-29",
            "retrieval.md",
        ),
        Claim(
            "retrieval.ndcg_ibn_x_mnrl",
            "Retrieval training (Flickr30k, 3 seeds)",
            "anglekit's in-batch negatives alone (`--objective ibn`) on its mined n-tuples minus MultipleNegativesRankingLoss: "
            "test nDCG@10, mean ± std of the paired seeds (a row added after the first table)",
            retrieval,
            lambda r: f"{r.number(retrieval, mnrl_ibn + '.ndcg_delta_mean'):+.2f} ± {r.number(retrieval, mnrl_ibn + '.ndcg_delta_std'):.2f}",
            epyc_fp32,
            "2026-11-29",
            "retrieval.md",
        ),
        Claim(
            "retrieval.stsb_cost_ibn",
            "Retrieval training (Flickr30k, 3 seeds)",
            "its STS-B cost against the untrained model, points (the limit is 0.5; the AnglE objective's is 0.29)",
            retrieval,
            fmt(retrieval, "rows[row=anglekit:ibn:mined].stsb_cost", ".2f"),
            epyc_fp32,
            "2026-11-29",
            "retrieval.md",
        ),
        Claim(
            "retrieval.ndcg_w4_x_mnrl",
            "Retrieval training (Flickr30k, 3 seeds)",
            "anglekit's AnglE objective with its in-batch-negative weight at 4 (`--ibn-weight 4`) on its mined n-tuples minus "
            "MultipleNegativesRankingLoss: test nDCG@10, mean ± std of the paired seeds (exploratory: added after the pre-registered pick failed)",
            retrieval,
            lambda r: f"{r.number(retrieval, mnrl_w4 + '.ndcg_delta_mean'):+.2f} ± {r.number(retrieval, mnrl_w4 + '.ndcg_delta_std'):.2f}",
            epyc_fp32,
            "2026-11-29",
            "retrieval.md",
        ),
        Claim(
            "retrieval.stsb_cost_w4",
            "Retrieval training (Flickr30k, 3 seeds)",
            "its STS-B cost against the untrained model, points (the limit is 0.5)",
            retrieval,
            fmt(retrieval, f"{w4}.stsb_cost", ".2f"),
            epyc_fp32,
            "2026-11-29",
            "retrieval.md",
        ),
        Claim(
            "retrieval.mining_x_st",
            "Retrieval training (Flickr30k, 3 seeds)",
            "`anglekit mine` against `mine_hard_negatives` on 5000 pairs, exact search (99.97% of rows: the same negatives in order), x",
            retrieval,
            fmt(retrieval, "comparison.mining_speedup", ".2f"),
            epyc_fp32,
            "2026-11-28",
            "retrieval.md",
        ),
        Claim(
            "encode.int8_x_st",
            "Encoding and serving",
            "encode, short texts: anglekit's ONNX int8 against sentence-transformers' torch fp32, x",
            "bench_encode-pad8.json",
            fmt("bench_encode-pad8.json", "targets[target=anglekit-onnx-int8 >= 2.5x st-torch (short)].value", ".2f"),
            amx,
            "2026-11-27",
            "onnx.md",
        ),
        Claim(
            "encode.torch_x_st",
            "Encoding and serving",
            "encode, short texts, like with like (torch fp32 both): anglekit against sentence-transformers, x",
            "bench_encode-pad8.json",
            fmt("bench_encode-pad8.json", "like_with_like.0.ratio_short", ".2f"),
            amx,
            "2026-11-27",
            "onnx.md",
        ),
        Claim(
            "serve.x_infinity",
            "Encoding and serving",
            "`anglekit serve` against infinity, each at its fastest: sentences/s over 8 cells x 3 runs, x",
            "serve-vs-infinity-ov-pad8/summary.json",
            serve_ratio,
            amx,
            "2026-11-27",
            "serve.md",
        ),
        Claim(
            "interop.spearman",
            "Encoding and serving",
            "one trained model through anglekit, sentence-transformers and infinity: STS-B Spearman (all agree within 0.01)",
            "bench_interop.json",
            fmt("bench_interop.json", "rows[runtime=anglekit].spearman", ".2f"),
            epyc,
            "2026-11-24",
            "export.md",
        ),
        Claim(
            "search.hnsw_qps",
            "Search at scale (1M sentences)",
            "HNSW search: queries/s (exact scan: see the file)",
            "bench_search.json",
            fmt("bench_search.json", "rows.hnsw.queries_per_s", ".0f"),
            epyc,
            "2026-11-25",
            "scale.md",
        ),
        Claim(
            "search.hnsw_recall",
            "Search at scale (1M sentences)",
            "HNSW search: recall@10 against exact search",
            "bench_search.json",
            fmt("bench_search.json", "rows.hnsw.recall_at_10", ".3f"),
            epyc,
            "2026-11-25",
            "scale.md",
        ),
        Claim(
            "scale.peak_rss",
            "Search at scale (1M sentences)",
            "streaming encode of 1M sentences: peak RSS, MB (flat as the corpus grows)",
            "bench_encode_scale.json",
            fmt("bench_encode_scale.json", "peak_rss_mb", ".0f"),
            epyc,
            "2026-11-25",
            "scale.md",
        ),
        *angle_term_claims(),
    ]


ANGLE_TERM_SECTION = "The angle term's worth and ESE (STS-B test, paired over 3 seeds)"


def angle_term_claims() -> list[Claim]:
    """Issue 42's answers: each a paired difference over 3 seeds from a reproduce table."""
    section = ANGLE_TERM_SECTION
    hardware, date = "AMD EPYC (AVX2, no bf16: fp32), 2 threads", "2026-11-30"
    tables = {start: (f"angle-term-worth/{start}/angle-weight.json", f"angle-term-worth/{start}/ese.json") for start in ("minilm", "smollm2")}
    names = {"minilm": "MiniLM", "smollm2": "SmolLM2 (LoRA, 200 steps)"}
    emb, unit = "AnglE + ESE (k = 128, T = 1.0)", "AnglE + ESE, unit target (k = 128, T = 1.0)"
    every = []
    for start, (weights, ese) in tables.items():
        name = names[start]
        every += [
            Claim(f"angle.paper_weight.{start}", section, f"the angle term at the paper's weight (w3 = 1 against 0), from {name} (paper: +0.96)",
                  weights, _paired(weights, "w3 = 1 (paper)"), hardware, date, "reproduce.md"),
            Claim(f"angle.w35_avg.{start}", section, f"w3 = 35 (angle-emb's LLaMA recipe) against 0, the average of STS12-16, STS-B and SICK-R, from {name}",
                  weights, _paired(weights, "w3 = 35 (official LLaMA recipe)", "Avg"), hardware, date, "reproduce.md"),
            Claim(f"ese.angle_emb_full.{start}", section, f"ESE with angle-emb's target (`--ese-target angle-emb`), the full vector, from {name}",
                  ese, _paired(ese, emb, "STS-B test"), hardware, date, "reproduce.md"),
            Claim(f"ese.unit_full.{start}", section, f"ESE with the unit target (the default), the full vector, from {name}",
                  ese, _paired(ese, unit, "STS-B test"), hardware, date, "reproduce.md"),
            Claim(f"ese.unit_64.{start}", section, f"ESE with the unit target, the first 64 coordinates, from {name}",
                  ese, _paired(ese, unit), hardware, date, "reproduce.md"),
        ]  # fmt: skip
    return every + table4_claims()


def table4_claims() -> list[Claim]:
    """Table 4 (left) from both starts: each row against "all" (cosine + ibn + angle), paired over 3 seeds."""
    section = ANGLE_TERM_SECTION
    starts = {
        "minilm": ("reproduce/objectives.json", "MiniLM", "CPU, 2 threads (the CPU and the precision were not recorded)", "2026-11-23"),
        "smollm2": (
            "angle-term-worth/smollm2/objectives.json",
            "SmolLM2 (LoRA, 200 steps)",
            "AMD EPYC (AVX2 and AVX-512 machines, fp32), 2 threads",
            "2026-11-30",
        ),
    }
    rows = {
        "without_angle": ("without angle", -0.96),
        "only_cosine": ("only cosine", -0.98),
        "only_ibn": ("only ibn", -13.78),
        "only_angle": ("only angle", -1.11),
    }
    return [
        Claim(f"table4.{key}.{start}", section, f'Table 4, "{row}" against "all", from {name} (paper: {paper:+.2f})',
              source, _paired(source, row), hardware, date, "reproduce.md")
        for start, (source, name, hardware, date) in starts.items()
        for key, (row, paper) in rows.items()
    ]  # fmt: skip


def resolve(results_dir: Path = RESULTS) -> dict[str, str]:
    """Every claim's current figure by key (raises ResultsError naming the file and field)."""
    results = Results(results_dir)
    return {claim.key: claim.value(results) for claim in claims()}


# Charts -------------------------------------------------------------------------------------------

CHART_SOURCES = {"train": "train-minilm-loop-levers-xeon-amx/bench_train.json", "serve": "serve-vs-infinity-ov-pad8/summary.json"}
"""The results file of each chart."""

CHART_ROWS = [
    ("anglekit:paper:grouped:auto", "anglekit default (bf16)"),
    ("anglekit:paper:grouped", "anglekit fp32"),
    ("sentence-transformers:cosent:grouped:bf16", "sentence-transformers best (bf16)"),
    ("sentence-transformers:cosent:random", "sentence-transformers default"),
    ("angle-emb:paper:grouped:bf16", "angle-emb paper, bf16"),
    ("angle-emb:paper:grouped", "angle-emb paper, fp32"),
]


def chart_data(results_dir: Path = RESULTS) -> dict[str, Any]:
    """What the charts plot, read from the results files (their fingerprint decides --check)."""
    r = Results(results_dir)
    source = CHART_SOURCES["train"]
    rows = []
    for row, label in CHART_ROWS:
        runs = r.get(source, f"rows[row={row}].train_pairs_per_s_runs")
        scores = r.get(source, f"rows[row={row}].spearman_runs")
        if not (isinstance(runs, list) and isinstance(scores, list) and all(isinstance(x, (int, float)) for x in runs + scores)):
            raise ResultsError(f"{results_dir / source}: row {row}: train_pairs_per_s_runs and spearman_runs must be lists of numbers")
        rows.append({"label": label, "pairs_per_s": [round(float(x), 3) for x in runs], "spearman": [round(float(x), 3) for x in scores]})
    cells = r.get(CHART_SOURCES["serve"], "cells")
    serve = []
    summary = results_dir / CHART_SOURCES["serve"]
    if not isinstance(cells, list) or not cells:
        raise ResultsError(f"{summary}: field 'cells' is not a non-empty list")
    for number, cell in enumerate(cells):
        runs = cell.get("runs") if isinstance(cell, dict) else None
        if not isinstance(runs, list) or not runs or not all(isinstance(x, dict) and _numbers([x.get("anglekit_sps"), x.get("infinity_sps")]) for x in runs):
            raise ResultsError(f"{summary}: cells[{number}].runs must be a non-empty list of runs with numeric anglekit_sps and infinity_sps")
        serve.append(
            {
                "cell": f"{cell.get('size')} x {cell.get('concurrency')}",
                "anglekit": round(sum(float(x["anglekit_sps"]) for x in runs) / len(runs), 1),
                "infinity": round(sum(float(x["infinity_sps"]) for x in runs) / len(runs), 1),
            }
        )
    return {"train": rows, "train_source": source, "serve": serve, "serve_source": CHART_SOURCES["serve"]}


def _fingerprint(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def render_charts(data: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes by file name; each PNG carries its data's fingerprint in its metadata."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, bytes] = {}

    def save(fig: Any, name: str, payload: Any) -> None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80, metadata={"Software": None, "Description": f"data {_fingerprint(payload)}"})
        plt.close(fig)
        out[name] = buffer.getvalue()

    train = data["train"]
    labels = [row["label"] for row in train]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    means = [sum(row["pairs_per_s"]) / len(row["pairs_per_s"]) for row in train]
    colors = ["tab:blue" if label.startswith("anglekit") else "tab:gray" for label in labels]
    ax.barh(labels[::-1], means[::-1], color=colors[::-1])
    for i, row in enumerate(train[::-1]):
        ax.plot(row["pairs_per_s"], [i] * len(row["pairs_per_s"]), "k.", markersize=4)
    ax.set_xlabel("training pairs/s (bars: mean of 3 seeds; dots: each seed)")
    ax.set_title("MiniLM on STS-B, 1 epoch, 2 threads (Xeon with AMX)", fontsize=10)
    fig.tight_layout()
    save(fig, "train_throughput.png", train)

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for i, row in enumerate(train[::-1]):
        ax.plot(row["spearman"], [i] * len(row["spearman"]), "o", color=colors[::-1][i], markersize=5)
        for seed, score in enumerate(row["spearman"]):
            ax.annotate(str(seed), (score, i), textcoords="offset points", xytext=(0, 5), fontsize=7, ha="center")
    ax.set_yticks(range(len(labels)), labels[::-1])
    ax.set_xlabel("STS-B test Spearman x 100 (seeds 0, 1, 2)")
    ax.set_title("Quality against seeds, same runs", fontsize=10)
    fig.tight_layout()
    save(fig, "train_quality_seeds.png", train)

    serve = data["serve"]
    fig, ax = plt.subplots(figsize=(7, 3.0))
    xs = range(len(serve))
    ax.bar([x - 0.2 for x in xs], [c["anglekit"] for c in serve], width=0.4, label="anglekit serve (fastest row)", color="tab:blue")
    ax.bar([x + 0.2 for x in xs], [c["infinity"] for c in serve], width=0.4, label="infinity (fastest row)", color="tab:gray")
    ax.set_xticks(list(xs), [c["cell"] for c in serve], fontsize=8)
    ax.set_xlabel("sentences per request x concurrent clients")
    ax.set_ylabel("sentences/s (mean of 3 runs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, "serve_vs_infinity.png", serve)
    return out


def chart_fingerprints(data: dict[str, Any]) -> dict[str, str]:
    return {
        "train_throughput.png": _fingerprint(data["train"]),
        "train_quality_seeds.png": _fingerprint(data["train"]),
        "serve_vs_infinity.png": _fingerprint(data["serve"]),
    }


# The page -----------------------------------------------------------------------------------------


def render_page(results_dir: Path = RESULTS) -> str:
    """docs/results.md: the current standing of every claim, then the charts."""
    results = Results(results_dir)
    every = claims()
    lines = [
        "# Results",
        "",
        "<!-- Written by benchmarks/make_results.py from benchmarks/results/: edit the script, not this page. -->",
        "",
        "The current standing of every benchmarked claim, read from the results file of its run. Timings",
        "depend on the machine and what else ran on it: each row names its hardware and date, and the",
        "command that produced its results file (run from the repository's root; a folder's `run.sh`",
        "says in its comments what it measured). How each benchmark runs, and the dated lab notes that",
        "led here (superseded figures included), are in [the benchmark history](../benchmarks/README.md).",
        "",
    ]
    section = None
    for i, claim in enumerate(every):
        if claim.section != section:
            section = claim.section
            lines += [
                f"## {section}",
                "",
                "| what was compared | figure | hardware | date | results file | command that produced it | details |",
                "|---|---:|---|---|---|---|---|",
            ]
        value = claim.value(results)
        lines.append(
            f"| {claim.what} | **{value}** | {claim.hardware} | {claim.run_date(results)} | `benchmarks/results/{claim.source}` "
            f"| {_command_cell(claim.command(results))} | [{claim.page[:-3]}]({claim.page}) |"
        )
        if i + 1 == len(every) or every[i + 1].section != section:
            lines.append("")
    lines += [
        "## Charts",
        "",
        "Throughput against the peers per setting (`benchmarks/results/train-minilm-loop-levers-xeon-amx/bench_train.json`,",
        f"made by {_command_cell(chart_command(results, 'train'))}; the protocol of [training](training.md#speed)):",
        "",
        f"![training throughput]({IMG}/train_throughput.png)",
        "",
        "Quality against seeds, the same runs: the speed does not cost Spearman.",
        "",
        f"![quality against seeds]({IMG}/train_quality_seeds.png)",
        "",
        "Serving against infinity, each at its fastest (`benchmarks/results/serve-vs-infinity-ov-pad8/summary.json`,",
        f"made by {_command_cell(chart_command(results, 'serve'))}):",
        "",
        f"![serving against infinity]({IMG}/serve_vs_infinity.png)",
        "",
        "Regenerate: `.venv/bin/python benchmarks/make_results.py` (`--check` in CI fails when this page",
        "or a chart would change).",
        "",
    ]
    return "\n".join(lines)


def chart_command(results: Results, chart: str) -> str:
    command, why = producing_command(results.root, CHART_SOURCES[chart])
    return command if command is not None else f"not recorded: {why}"


def _command_cell(command: str) -> str:
    """A command in a table cell: code, its pipes escaped; a "not recorded" reason as text."""
    if command.startswith("not recorded: "):
        return "*not recorded*: " + command.removeprefix("not recorded: ").replace("|", "\\|")
    return "`" + command.replace("|", "\\|") + "`"


def _png_fingerprint(path: Path) -> str | None:
    from PIL import Image

    try:
        with Image.open(path) as image:
            text = image.text.get("Description", "")  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return None
    return text.removeprefix("data ") or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when docs/results.md or a chart would change")
    parser.add_argument("--results-dir", type=Path, default=RESULTS, help="the results folder (default: benchmarks/results)")
    parser.add_argument("--docs-dir", type=Path, default=DOCS, help="the docs folder (default: docs)")
    args = parser.parse_args(argv)
    try:
        page = render_page(args.results_dir)
        data = chart_data(args.results_dir)
    except ResultsError as exc:
        print(f"make_results: error: {exc}", file=sys.stderr)
        return 2
    unrecorded = check_commands(args.results_dir)
    for problem in unrecorded:
        print(f"make_results: error: {problem}", file=sys.stderr)
    if unrecorded:
        return 2
    page_path = args.docs_dir / "results.md"
    img_dir = args.docs_dir / IMG
    fingerprints = chart_fingerprints(data)
    if args.check:
        stale = [] if page_path.is_file() and page_path.read_text(encoding="utf-8") == page else [str(page_path)]
        stale += [str(img_dir / name) for name, fp in fingerprints.items() if _png_fingerprint(img_dir / name) != fp]
        for path in stale:
            print(f"make_results: {path} is out of date: run .venv/bin/python benchmarks/make_results.py", file=sys.stderr)
        return 1 if stale else 0
    charts = render_charts(data)
    img_dir.mkdir(parents=True, exist_ok=True)
    for name, content in [("results.md", page.encode())] + sorted(charts.items()):
        target = page_path if name == "results.md" else img_dir / name
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(content)
        os.replace(tmp, target)
    print(f"wrote {page_path} and {len(charts)} charts under {img_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
