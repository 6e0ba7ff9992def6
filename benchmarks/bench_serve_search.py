#!/usr/bin/env python
"""Serving rows of issue 31: search over HTTP, and the per-request depth of an ESE model.

**search**: ``anglekit serve MODEL --index qnli=DIR`` (POST /v1/search) against a FastAPI + faiss
baseline (``peers/fastapi_faiss.py``: ``Embedder.encode`` per request, then ``faiss.IndexFlatIP``)
on the same exact index: all-MiniLM-L6-v2, the unique sentences of GLUE QNLI dev as documents, its
questions as queries (one per request, k = 10), concurrency 1, 8, 32, the same CPU threads per
server, loopback, same run. Reported: queries/s, p50/p99 latency, and recall@10 of each server
against brute force (``Embedder.encode`` of the queries and a numpy scan of the index's vectors).

**depth**: MiniLM trained with ``--ese --ese-target angle-emb`` on STS-B train (the target the
recorded run trained with, before ``unit`` became the default; cached under ``.cache/``), served once;
32-sentence embedding requests at concurrency 8 with ``layer`` 2, 3, 4, 6 (6: the full model):
sentences/s and the speed-up over the full model, and the STS-B test Spearman of that layer
(``Embedder.from_pretrained(layer=...)``).

    .venv/bin/python benchmarks/bench_serve_search.py                   # both
    .venv/bin/python benchmarks/bench_serve_search.py --only search --requests 64 --max-seconds 5   # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
import bench_serve  # noqa: E402
import common  # noqa: E402
import infinity_peer  # noqa: E402

K = 10
LAYERS = (2, 3, 4, 6)
ESE_STEPS = 180


def qnli(limit_docs: int | None = None) -> tuple[list[str], list[str]]:
    """(documents, queries): the unique sentences and questions of QNLI dev."""
    path = common.stsb_dir().parent / "qnli" / "dev.tsv"
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    docs = common.unique_sentences(r["sentence"] for r in rows)
    queries = common.unique_sentences(r["question"] for r in rows)
    return docs[:limit_docs] if limit_docs else docs, queries


def build_index(model_dir: Path, docs: list[str], folder: Path) -> Path:
    from anglekit import Embedder
    from anglekit.index.store import VectorIndex

    if (folder / "index.json").is_file():
        return folder
    model = Embedder.from_pretrained(model_dir, device="cpu")
    print(f"building the index of {len(docs)} documents in {folder}", file=sys.stderr, flush=True)
    VectorIndex.build(model, [f"q{i}" for i in range(len(docs))], docs, name=str(model_dir)).save(folder)
    return folder


def brute_force(model_dir: Path, index_dir: Path, queries: list[str]) -> list[list[str]]:
    from anglekit import Embedder
    from anglekit.index.store import VectorIndex

    index = VectorIndex.load(index_dir)
    q = Embedder.from_pretrained(model_dir, device="cpu").encode(queries, normalize=True, role="query")
    scores = q @ np.asarray(index.vectors).T
    return [[index.ids[j] for j in np.argsort(-row, kind="stable")[:K]] for row in scores]


def search_server(peer: str, model_dir: Path, index_dir: Path, threads: int, env: dict[str, str]) -> Any:
    port = infinity_peer.free_port()
    url = f"http://127.0.0.1:{port}"
    if peer == "anglekit":
        argv = [sys.executable, "-m", "anglekit", "serve", str(model_dir), "--port", str(port), "--device", "cpu", "--threads",
                str(threads), "--quiet", "--index", f"qnli={index_dir}"]  # fmt: skip
    else:
        argv = [sys.executable, str(HERE / "peers" / "fastapi_faiss.py"), str(model_dir), str(index_dir), "--port", str(port),
                "--threads", str(threads)]  # fmt: skip
    return bench_serve._process(argv, env, peer, url), f"{url}/v1/search"


async def fetch_ids(url: str, queries: list[str]) -> list[list[str]]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = bench_serve.Connection(parts.hostname or "127.0.0.1", parts.port or 80, parts.path)
    out = []
    for q in queries:
        status, data = await connection.post(json.dumps({"query": q, "k": K}).encode())
        if status != 200:
            raise RuntimeError(f"{url}: {status} {data[:200]!r}")
        out.append([r["id"] for r in json.loads(data)["data"][0]["results"]])
    connection.close()
    return out


def recall(found: list[list[str]], truth: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=False)]))


def run_search(args: argparse.Namespace, model_dir: Path, threads: int, env: dict[str, str]) -> dict[str, Any]:
    docs, queries = qnli()
    index_dir = build_index(model_dir, docs, common.cache_root() / "bench_serve_search" / f"qnli-{len(docs)}-exact")
    probe = queries[: args.recall_queries]
    truth = brute_force(model_dir, index_dir, probe)
    rows, recalls = [], {}
    body = lambda texts: json.dumps({"query": texts[0], "k": K}).encode()  # noqa: E731
    for peer in ("anglekit", "fastapi-faiss"):
        print(f"== search: {peer}", file=sys.stderr, flush=True)
        process, url = search_server(peer, model_dir, index_dir, threads, env)
        with process:
            recalls[peer] = recall(asyncio.run(fetch_ids(url, probe)), truth)
            for concurrency in args.concurrency:
                requests = max(args.requests, 2 * concurrency)
                row = asyncio.run(bench_serve.run_cell(url, queries, 1, concurrency, requests, args.max_seconds, "float", body))
                row.update(peer=peer, queries_per_s=row.pop("sentences_per_s"))
                rows.append(row)
                print(f"   concurrency {concurrency:>3}: {row['queries_per_s']:8.1f} queries/s  p50 {row['p50_ms']:7.1f} ms  "
                      f"p99 {row['p99_ms']:7.1f} ms  failures {row['failures']}", file=sys.stderr, flush=True)  # fmt: skip
    ratios = []
    for concurrency in args.concurrency:
        ours, theirs = (next(r for r in rows if r["peer"] == p and r["concurrency"] == concurrency) for p in ("anglekit", "fastapi-faiss"))
        ratios.append({"concurrency": concurrency, "throughput_ratio": ours["queries_per_s"] / theirs["queries_per_s"],
                       "p99_ratio": ours["p99_ms"] / theirs["p99_ms"]})  # fmt: skip
    return {"documents": len(docs), "queries": len(queries), "k": K, "recall_queries": len(probe), "recall_at_10": recalls,
            "rows": rows, "ratios_vs_fastapi_faiss": ratios}  # fmt: skip


def ese_model(model_dir: Path, threads: int) -> Path:
    """MiniLM trained with ESE on STS-B train (``ESE_STEPS`` steps, cached)."""
    out = common.cache_root() / "bench_serve_search" / f"minilm-ese-angle-emb-{ESE_STEPS}"
    if (out / "results.json").is_file():
        return out / "model"
    print(f"training the ESE model in {out}", file=sys.stderr, flush=True)
    argv = [sys.executable, "-m", "anglekit", "train", "--model", str(model_dir), "--train-data", f"{common.stsb_dir()}:train",
            "--objective", "paper", "--ese", "--ese-target", "angle-emb", "--pooling", "last_avg", "--max-length", "64", "--batch-size", "32",
            "--max-steps", str(ESE_STEPS), "--learning-rate", "2e-5", "--output-dir", str(out), "--device", "cpu", "--quiet",
            "--overwrite-output-dir"]  # fmt: skip
    subprocess.run(argv, check=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    return out / "model"


def layer_spearman(model: Path, layer: int | None) -> float:
    from anglekit import Embedder

    s1, s2, gold = common.read_stsb("test")
    embedder = Embedder.from_pretrained(model, layer=layer, device="cpu")
    return common.cosine_spearman_x100(embedder.encode(s1), embedder.encode(s2), gold)


def run_depth(args: argparse.Namespace, model_dir: Path, threads: int, env: dict[str, str]) -> dict[str, Any]:
    model = ese_model(model_dir, threads)
    s1, s2, _ = common.read_stsb("test")
    sentences = common.unique_sentences(s1, s2)
    port = infinity_peer.free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "anglekit", "serve", str(model), "--port", str(port), "--device", "cpu", "--threads", str(threads),
            "--quiet", "--served-model-name", "ese"]  # fmt: skip
    rows = []
    with bench_serve._process(argv, env, "anglekit (ESE)", url):
        for repeat in range(args.depth_repeats):
            for layer in LAYERS:  # interleaved: every layer in each repeat
                body = lambda texts, layer=layer: json.dumps({"input": texts, "model": "ese", "layer": layer}).encode()  # noqa: E731
                row = asyncio.run(bench_serve.run_cell(f"{url}/v1/embeddings", sentences, 32, 8, args.depth_requests, args.max_seconds,
                                                       "float", body))  # fmt: skip
                row.update(layer=layer, repeat=repeat)
                rows.append(row)
                print(f"   layer {layer}: {row['sentences_per_s']:8.1f} sentences/s", file=sys.stderr, flush=True)
    table = []
    full = np.mean([r["sentences_per_s"] for r in rows if r["layer"] == max(LAYERS)])
    for layer in LAYERS:
        speeds = [r["sentences_per_s"] for r in rows if r["layer"] == layer]
        table.append({"layer": layer, "sentences_per_s": float(np.mean(speeds)), "spread": [float(min(speeds)), float(max(speeds))],
                      "speedup_vs_full": float(np.mean(speeds) / full), "stsb_test_spearman": layer_spearman(model, layer)})  # fmt: skip
    return {"model": f"all-MiniLM-L6-v2 + ESE, {ESE_STEPS} steps on STS-B train", "request": "32 sentences, concurrency 8", "rows": rows,
            "layers": table}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("search", "depth"), default=None)
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=1024, help="search requests per cell (at least 2 x concurrency)")
    parser.add_argument("--recall-queries", type=int, default=500)
    parser.add_argument("--depth-requests", type=int, default=48, help="32-sentence requests per depth cell")
    parser.add_argument("--depth-repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads of every server (0: the number of cores)")
    parser.add_argument("--out", default=str(HERE / "results" / "bench_serve_search.json"))
    args = parser.parse_args(argv)

    from anglekit.model.offline import minilm_dir

    threads = args.threads or os.cpu_count() or 1
    env = {**infinity_peer.offline_env(threads), "OMP_WAIT_POLICY": "PASSIVE"}  # the same environment for every server
    model_dir = minilm_dir()
    result: dict[str, Any] = {"threads": threads, "server_env": {"OMP_WAIT_POLICY": "PASSIVE"},
                              "versions": common.versions("anglekit", "torch", "faiss-cpu", "fastapi", "uvicorn")}  # fmt: skip
    started = time.time()
    if args.only in (None, "search"):
        result["search"] = run_search(args, model_dir, threads, env)
    if args.only in (None, "depth"):
        result["depth"] = run_depth(args, model_dir, threads, env)
    result["seconds"] = time.time() - started
    if "search" in result:
        s = result["search"]
        print(f"\nsearch: {s['documents']} QNLI documents, k = {K}, 1 query per request, {threads} threads per server")
        print(f"{'concurrency':>11}  {'anglekit q/s':>12} {'p50':>7} {'p99':>7}  {'fastapi+faiss q/s':>17} {'p50':>7} {'p99':>7}  ratio  p99 ratio")
        for ratio in s["ratios_vs_fastapi_faiss"]:
            c = ratio["concurrency"]
            a, b = (next(r for r in s["rows"] if r["peer"] == p and r["concurrency"] == c) for p in ("anglekit", "fastapi-faiss"))
            print(f"{c:>11}  {a['queries_per_s']:12.1f} {a['p50_ms']:7.1f} {a['p99_ms']:7.1f}  {b['queries_per_s']:17.1f} {b['p50_ms']:7.1f} "
                  f"{b['p99_ms']:7.1f}  {ratio['throughput_ratio']:5.2f}  {ratio['p99_ratio']:9.2f}")  # fmt: skip
        print(f"recall@10 vs brute force ({s['recall_queries']} queries): " + ", ".join(f"{p} {v:.4f}" for p, v in s["recall_at_10"].items()))
    if "depth" in result:
        print(f"\ndepth: {result['depth']['model']}; {result['depth']['request']}")
        print(f"{'layer':>5}  {'sentences/s':>11}  {'spread':>17}  {'speed-up':>8}  {'STS-B test':>10}")
        for r in result["depth"]["layers"]:
            print(f"{r['layer']:>5}  {r['sentences_per_s']:11.1f}  {r['spread'][0]:8.1f}-{r['spread'][1]:<8.1f}  {r['speedup_vs_full']:8.2f}  "
                  f"{r['stsb_test_spearman']:10.2f}")  # fmt: skip
    bench_serve.write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
