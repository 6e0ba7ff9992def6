#!/usr/bin/env python
"""Corpus-scale encode: ``anglekit encode --output-dir`` on N sentences, peak RSS as the corpus grows.

The corpus: the distinct sentences of the offline data (Flickr30k captions of all splits, SentEval's
MR, CR, SUBJ, MPQA, TREC, SST, SICK, SNLI dev/test, MRPC, QNLI dev; STS-B is left out: its test
sentences are bench_search's queries), repeated with distinct ids up to ``--n`` records, written
as JSON Lines {"id", "text"}. The encode runs as its own process (all-MiniLM-L6-v2, CPU); its
resident memory (the process tree's RSS) is sampled every 0.2 s, and the peak so far is reported
when the finished shards first cover each of ``--marks`` rows (default 100k and 1M): flat
means constant memory (the sentences are shuffled once, so every stretch mixes short and long
ones). Throughput is texts/s of the whole run (model load included).

    .venv/bin/python benchmarks/bench_encode_scale.py --n 1000000            # the real run (lead)
    .venv/bin/python benchmarks/bench_encode_scale.py --n 5000 --marks 1000,5000   # smoke

The shards stay in ``--work-dir`` (default runs/bench_encode_scale/shards) for bench_search.py
(``--shards``); results go to benchmarks/results/bench_encode_scale.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402
import contextlib


def data_root() -> Path:
    return Path(os.environ.get("ANGLEKIT_DATA") or ROOT.parent / "shared" / "data")


def _lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", errors="replace").splitlines()


def _columns(path: Path, *names: str) -> list[str]:
    import csv

    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = [h.strip() for h in next(reader)]
        index = [header.index(n) for n in names]
        return [row[i] for row in reader for i in index if i < len(row)]


def distinct_sentences(root: Path | None = None) -> list[str]:
    """The distinct non-blank sentences of the offline corpora (not STS-B), in a fixed order."""
    root = root or data_root()
    senteval = root / "senteval"
    texts: list[str] = []
    for split, stem in (("Train", "train"), ("Val", "val"), ("Test", "test")):
        for j in range(1, 6):
            texts += _lines(root / "flickr30k" / split / f"{stem}.{j}")
    for name in ("MR/rt-polarity.pos", "MR/rt-polarity.neg", "CR/custrev.pos", "CR/custrev.neg", "SUBJ/subj.objective",
                 "SUBJ/subj.subjective", "MPQA/mpqa.pos", "MPQA/mpqa.neg"):  # fmt: skip
        texts += _lines(senteval / name)
    for name in ("TREC/train_5500.label", "TREC/TREC_10.label"):
        texts += [line.split(" ", 1)[1] for line in _lines(senteval / name) if " " in line]
    for name in ("sentiment-train", "sentiment-dev", "sentiment-test"):
        texts += [line.rsplit("\t", 1)[0] for line in _lines(senteval / "SST" / "binary" / name)]
    for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        texts += _columns(senteval / "SICK" / name, "sentence_A", "sentence_B")
    for name in ("s1.dev", "s2.dev", "s1.test", "s2.test"):
        texts += _lines(senteval / "SNLI" / name)
    for name in ("msr-para-train.tsv", "msr-para-val.tsv", "msr-para-test.tsv"):
        texts += _columns(root / "mrpc" / name, "#1 String", "#2 String")
    texts += _columns(root / "qnli" / "dev.tsv", "question", "sentence")
    distinct = list(dict.fromkeys(t.strip() for t in texts if t.strip()))
    random.Random(0).shuffle(distinct)  # every stretch of the corpus mixes short captions and long reviews
    return distinct


def write_corpus(path: Path, n: int, sentences: list[str]) -> None:
    """``n`` records {"id", "text"}: the sentences repeated, each copy with its own id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            rep, j = divmod(i, len(sentences))
            handle.write(json.dumps({"id": f"r{rep}-{j}", "text": sentences[j]}, ensure_ascii=False) + "\n")


def _tree_rss(process: object) -> int:
    import psutil

    total = 0
    try:
        procs = [process, *process.children(recursive=True)]  # type: ignore[attr-defined]
    except psutil.Error:
        return 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="records to encode (default 1,000,000)")
    parser.add_argument("--marks", default="100000,1000000", help="report the peak RSS when this many rows are done (comma-separated)")
    parser.add_argument("--model", default="pypi:all-minilm-l6-v2")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench_encode_scale")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bench_encode_scale.json")
    args = parser.parse_args(argv)
    import psutil

    marks = sorted(int(m) for m in args.marks.split(",") if m)
    sentences = distinct_sentences()
    corpus, shards = args.work_dir / "corpus.jsonl", args.work_dir / "shards"
    write_corpus(corpus, args.n, sentences)
    shutil.rmtree(shards, ignore_errors=True)  # a fresh run: numbers of a resumed one would be partial
    command = [sys.executable, "-m", "anglekit", "encode", args.model, "--input", str(corpus), "--output-dir", str(shards),
               "--shard-size", str(args.shard_size), "--batch-size", str(args.batch_size), "--role", "document",
               "--workers", str(args.workers), "--device", "cpu", "--quiet"]  # fmt: skip
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    handle = psutil.Process(process.pid)
    try:
        peak, at_mark, samples = 0, {}, []
        while process.poll() is None:
            peak = max(peak, _tree_rss(handle))
            done = min(args.n, len(list(shards.glob("shard-??????.json"))) * args.shard_size) if shards.is_dir() else 0
            for mark in marks:
                if mark not in at_mark and done >= mark:
                    at_mark[mark] = peak
            if not samples or time.perf_counter() - samples[-1][0] >= 5:
                samples.append((time.perf_counter(), done, peak))
            time.sleep(0.2)
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        print(err, file=sys.stderr)
        return process.returncode
    for mark in marks:
        at_mark.setdefault(mark, peak) if mark <= args.n else None
    mb = 1024 * 1024
    print(out.strip())
    print(f"{args.n} texts ({len(sentences)} distinct), {args.shard_size} per shard, batch {args.batch_size}, {args.workers} worker(s), "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'rows done':>12} {'peak RSS MB':>12}")
    for mark, rss in sorted(at_mark.items()):
        print(f"{mark:>12,} {rss / mb:>12.0f}")
    print(f"{'end':>12} {peak / mb:>12.0f}")
    print(f"{args.n / seconds:.1f} texts/s, {seconds:.0f} s; corpus {corpus.stat().st_size / mb:.0f} MB; shards in {shards}")
    result = {
        "n": args.n, "distinct": len(sentences), "model": args.model, "batch_size": args.batch_size, "shard_size": args.shard_size,
        "workers": args.workers, "seconds": seconds, "texts_per_s": args.n / seconds, "peak_rss_mb": peak / mb,
        "peak_rss_mb_at_rows": {str(k): v / mb for k, v in sorted(at_mark.items())}, "corpus_mb": corpus.stat().st_size / mb,
        "samples": [{"s": round(t - started, 1), "rows": d, "peak_rss_mb": round(p / mb)} for t, d, p in samples],
        "cpus": os.cpu_count(), "shards": str(shards), "versions": common.versions("anglekit", "torch", "transformers"),
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **result}, indent=2) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
