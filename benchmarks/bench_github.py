#!/usr/bin/env python
"""GitHub issues builder benchmarks: collection speed, and chunk pooling vs truncation on long texts.

1. **Collection** against the fake GitHub API on 127.0.0.1 (``tests/fake_github.py``):
   ``--repos`` repositories of ``--issues`` closed issues (every 10th a duplicate, with comments
   and a timeline), ``per_page=100``, the rate limiter off. Reports requests/s and issues/s of
   ``collect`` (issues, details and originals phases), then builds the dataset from it.
2. **Long texts** on a synthetic pair set built here (the real dataset is not available
   offline): each text is a long boilerplate shared by all texts (an issue template and a
   ``pip freeze`` dump, as real issues have) followed by 24 STS-B test sentences; a positive pair
   has the two sides of the same related STS-B pairs (score >= 3), a negative pair the sides of
   two unrelated groups, half of them sharing their first 8 sentences (only the text past the
   first 512 tokens tells those apart); about 650-750 tokens a text, 375 of them boilerplate.
   Route 1, chunk pooling (the model setting ``long_text``, anglekit's substitute for AnglE-RAN),
   against truncation, on all-MiniLM-L6-v2: truncation at 128 and at the model limit (512),
   ``chunk-mean`` with 128-token windows: 4 windows spread over the text (``long_text_max_chunks=4``:
   exactly the token budget of truncation at 512, i.e. equal compute), all windows without
   overlap, all with 50% overlap, and ``chunk-max`` without overlap. Route 2, a long-context
   encoder: ``--long-context-model`` (default SmolLM2-135M-Instruct from PyPI, 8192 positions,
   last-token pooling, zero-shot) reading each whole text in one window (``max_length`` above
   every text), against its own truncation at 128 and 512 and its own ``chunk-mean``. Reports
   Spearman x 100 and ROC-AUC of cosine vs label, tokens processed and seconds.

The model is all-MiniLM-L6-v2 when its package is installed (see ``peers/common.py``), else a
random tiny BERT (then only the timings mean anything).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_github.py [--pairs 80] [--issues 1000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE.parent / "tests"))
import common  # noqa: E402  (the command a results file records; peers/common.py)

TEMPLATE = (
    "### Describe the bug\nA clear and concise description of what the bug is.\n\n"
    "### To Reproduce\nSteps to reproduce the behavior:\n1. Go to '...'\n2. Click on '....'\n3. Scroll down to '....'\n"
    "4. See error\n\n### Expected behavior\nA clear and concise description of what you expected to happen.\n\n"
    "### Environment\n- OS: [e.g. Ubuntu 22.04]\n- Python version: [e.g. 3.11]\n- Package version: [e.g. 2.1.0]\n"
    "- Installed from: [pip / conda / source]\n\n### Additional context\nAdd any other context about the problem here.\n"
    "Please search existing issues before opening a new one, and fill in every section of this template.\n"
)


# ----------------------------------------------------------------------------- 1. collection
def bench_collection(n_repos: int, n_issues: int, workdir: Path) -> dict[str, Any]:
    from anglekit.github_issues.build import build_dataset
    from anglekit.github_issues.client import GitHubClient
    from anglekit.github_issues.collect import collect
    from fake_github import FakeGitHub, make_fixture

    rng = random.Random(0)
    repos = {}
    for r in range(n_repos):
        issues = []
        for k in range(1, n_issues + 1):
            spec: dict[str, Any] = {"number": k, "title": f"Issue {k} of repo {r}", "body": "text " * rng.randint(20, 400)}
            if k % 10 == 0:
                spec.update(
                    state_reason="duplicate",
                    comments=["Thanks for the report", f"Duplicate of #{k - rng.randint(1, 9)}"],
                    timeline=[{"event": "labeled", "label": {"name": "duplicate"}}, {"event": "closed"}],
                )
            issues.append(spec)
        repos[f"bench/repo{r}"] = issues
    fixture = make_fixture(repos)
    with FakeGitHub(fixture) as server:
        client = GitHubClient(server.base_url, per_page=100, rate_limit=False)
        start = time.perf_counter()
        summary = collect(list(repos), workdir / "collection", client=client)
        seconds = time.perf_counter() - start
    start = time.perf_counter()
    built = build_dataset(workdir / "collection", workdir / "dataset", negative_ratio=1.0, plot=False)
    build_s = time.perf_counter() - start
    issues = sum(r.issues for r in summary.repos)
    return {
        "repos": n_repos,
        "issues": issues,
        "requests": summary.requests,
        "seconds": round(seconds, 3),
        "requests_per_s": round(summary.requests / seconds, 1),
        "issues_per_s": round(issues / seconds, 1),
        "build_seconds": round(build_s, 3),
        "pairs": {s: v["total"] for s, v in built.stats["pairs"].items()},
    }


# ----------------------------------------------------------------------------- 2. long texts
def synthetic_pairs(n_pairs: int, seed: int = 0, sentences_per_text: int = 24, shared_head: int = 8) -> tuple[list[str], list[str], np.ndarray]:
    """Long "issues": a long boilerplate shared by every text (template + environment dump, as
    GitHub issue templates make them), then the content: ``sentences_per_text`` STS-B sentences.

    Positive pair: the two sides of the same STS-B pairs (score >= 3 of 5), in the same order.
    Negative pair: the first sides of one group against the second sides of another group; in
    every other negative the two texts share their first ``shared_head`` sentence pairs (same
    symptom, different issue), so that only the part past the first 512 tokens tells them apart.
    Truncation at 512 tokens sees the boilerplate and about the first 8 content sentences.
    """
    import common

    s1, s2, gold = common.read_stsb("test")
    gold = np.asarray(gold, dtype=float)
    scale = 5.0 if gold.max() > 1.5 else 1.0
    related = [i for i, g in enumerate(gold) if g >= 3.0 / 5.0 * scale]
    rng = random.Random(seed)
    env_dump = "\n".join(
        f"{name}=={rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        for name in (
            "numpy",
            "scipy",
            "torch",
            "transformers",
            "tokenizers",
            "safetensors",
            "accelerate",
            "datasets",
            "pandas",
            "pyarrow",
            "requests",
            "urllib3",
            "tqdm",
            "pyyaml",
            "regex",
            "filelock",
            "fsspec",
            "huggingface-hub",
            "packaging",
            "typing-extensions",
        )
    )
    boilerplate = TEMPLATE + "\n### pip freeze\n```\n" + env_dump + "\n```\n"

    def group() -> list[int]:
        return [rng.choice(related) for _ in range(sentences_per_text)]

    text1, text2, labels = [], [], []
    for k in range(n_pairs):
        g1 = group()
        positive = k % 2 == 0
        g2 = g1 if positive else group()
        if k % 4 == 3:  # a hard negative: same beginning, different rest
            g2 = g1[:shared_head] + g2[shared_head:]
        text1.append(boilerplate + "\n### What happened\n" + " ".join(s1[i] for i in g1))
        text2.append(boilerplate + "\n### What happened\n" + " ".join(s2[i] for i in g2))
        labels.append(1.0 if positive else 0.0)
    return text1, text2, np.array(labels)


def _scores(a: np.ndarray, b: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    from scipy.stats import rankdata, spearmanr

    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(1)
    ranks = rankdata(cos)
    n_pos, n_neg = int(labels.sum()), int((1 - labels).sum())
    auc = (ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    rho = float(spearmanr(cos, labels).statistic) if np.ptp(cos) > 0 else float("nan")
    # constant cosines (every text truncated to the same template): no correlation -> null
    return {"spearman_x100": None if np.isnan(rho) else round(100 * rho, 2), "auc": round(float(auc), 4)}


def bench_long_text(n_pairs: int, tiny: bool, long_context_model: str | None = None) -> dict[str, Any]:
    import torch

    from anglekit.model.embedder import Embedder
    from anglekit.model.long_text import _special_wrap, chunk_token_ids, model_max_length

    model_name = "tiny random BERT"
    if not tiny:
        try:
            import common

            model_dir = common.minilm_dir()
            model_name = "all-MiniLM-L6-v2"
        except (FileNotFoundError, ImportError):
            tiny = True
    if tiny:
        import helpers

        model_dir = helpers.build_tiny_bert(Path(tempfile.mkdtemp()) / "tiny")
    text1, text2, labels = synthetic_pairs(n_pairs)
    texts = text1 + text2
    rows: list[dict[str, Any]] = []

    def run(route: str, model: str, name: str, embedder: Any, tokens: int) -> None:
        start = time.perf_counter()
        vectors = embedder.encode(texts, batch_size=16, normalize=False)
        seconds = time.perf_counter() - start
        n = len(text1)
        rows.append(
            {"route": route, "model": model, "method": name, **_scores(vectors[:n], vectors[n:], labels), "tokens": tokens, "seconds": round(seconds, 2)}
        )
        print(json.dumps(rows[-1]), flush=True)

    def lengths_of(embedder: Any) -> tuple[list[list[int]], tuple[list[int], list[int]], list[int]]:
        tok = embedder.tokenizer
        content = tok([embedder.config.format(t) for t in texts], add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        wrap = _special_wrap(tok)
        return content, wrap, [len(c) + len(wrap[0]) + len(wrap[1]) for c in content]

    def chunk_tokens(content: list[list[int]], tok: Any, wrap: Any, window: int, stride: int, cap: int | None) -> int:
        return sum(len(c) for ids in content for c in chunk_token_ids(ids, tok, window, stride, max_chunks=cap, wrap=wrap))

    # Route 1: chunk pooling on an encoder with a 512-token limit.
    base = Embedder.from_pretrained(model_dir, device="cpu")
    limit = model_max_length(base) or 512
    content, wrap, lengths = lengths_of(base)
    specials = len(wrap[0]) + len(wrap[1])
    for max_length in sorted({min(128, limit), limit}):
        run(
            "truncation",
            model_name,
            f"truncate@{max_length}",
            Embedder.from_pretrained(model_dir, max_length=max_length, device="cpu"),
            sum(min(n, max_length) for n in lengths),
        )
    window = 128
    room = window - specials
    budget = max(1, limit // window)  # windows costing what truncation at the model limit costs
    for mode, label, stride, cap in (("chunk-mean", f"x{budget} spread, = truncate@{limit} tokens", room, budget), ("chunk-mean", "no overlap", room, None),
                                     ("chunk-mean", "50% overlap", room // 2, None), ("chunk-max", "no overlap", room, None)):  # fmt: skip
        chunked = Embedder.from_pretrained(model_dir, device="cpu", long_text=mode, long_text_window=window, long_text_stride=stride, long_text_max_chunks=cap)
        run("chunk pooling", model_name, f"{mode}@{window} ({label})", chunked, chunk_tokens(content, base.tokenizer, wrap, window, stride, cap))
    result: dict[str, Any] = {
        "model": model_name, "model_limit": limit, "pairs": len(text1), "positives": int(labels.sum()),
        "text_tokens": {"min": min(lengths), "median": int(np.median(lengths)), "max": max(lengths),
                        "share_over_512": round(float(np.mean(np.array(lengths) > 512)), 3)},
        "threads": torch.get_num_threads(), "rows": rows,
    }  # fmt: skip

    # Route 2: a long-context model reading each whole text, against its own truncation and chunking.
    if long_context_model:
        try:
            probe = Embedder.from_pretrained(long_context_model, device="cpu")
        except Exception as exc:  # noqa: BLE001 - reported, the rest of the benchmark stands
            result["long_context"] = {"model": long_context_model, "skipped": f"{type(exc).__name__}: {exc}"}
            return result
        long_limit = model_max_length(probe) or probe.config.max_length
        content, wrap, lengths = lengths_of(probe)
        whole = max(lengths)
        if whole > long_limit:
            result["long_context"] = {"model": long_context_model, "skipped": f"texts of {whole} tokens exceed its {long_limit} positions"}
            return result
        for max_length in (128, 512, whole):
            name = f"whole text (max_length {whole})" if max_length == whole else f"truncate@{max_length}"
            run(
                "long context" if max_length == whole else "truncation",
                long_context_model,
                name,
                Embedder.from_pretrained(long_context_model, max_length=max_length, device="cpu"),
                sum(min(n, max_length) for n in lengths),
            )
        specials = len(wrap[0]) + len(wrap[1])
        chunked = Embedder.from_pretrained(long_context_model, max_length=512, device="cpu", long_text="chunk-mean", long_text_window=128,
                                           long_text_stride=128 - specials)  # fmt: skip
        run(
            "chunk pooling", long_context_model, "chunk-mean@128 (no overlap)", chunked, chunk_tokens(content, probe.tokenizer, wrap, 128, 128 - specials, None)
        )
        result["long_context"] = {"model": long_context_model, "model_limit": long_limit, "text_tokens_max": whole}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=3)
    parser.add_argument("--issues", type=int, default=1000, help="closed issues per repository")
    parser.add_argument("--pairs", type=int, default=80, help="synthetic long-text pairs")
    parser.add_argument("--tiny", action="store_true", help="use a random tiny BERT instead of all-MiniLM-L6-v2")
    parser.add_argument("--skip-long", action="store_true")
    parser.add_argument(
        "--long-context-model", default="pypi:smollm2-135m-instruct", help="route 2: a model with long positions that reads whole texts ('' to skip)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bench_github.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as work:
        collection = bench_collection(args.repos, args.issues, Path(work))
    print(json.dumps({"collection": collection}), flush=True)
    result: dict[str, Any] = {"collection": collection}
    if not args.skip_long:
        result["long_text"] = bench_long_text(args.pairs, args.tiny, args.long_context_model or None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **result}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
