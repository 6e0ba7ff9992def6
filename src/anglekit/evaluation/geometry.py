"""The ``geometry`` suite: alignment, uniformity, cosine-vs-gold densities and cosine saturation.

* **alignment** (Wang & Isola 2020, alpha = 2): mean squared distance ``||f(x) - f(y)||^2`` over
  positive pairs, here STS-B test pairs with gold >= ``positive_threshold`` (4.0); lower is better.
* **uniformity** (t = 2): ``log mean_{i<j} exp(-2 ||f(x_i) - f(x_j)||^2)`` over all distinct
  sentences of STS-B test; lower is better.
  Both on L2-normalised embeddings.
* **figure** (in the manner of AnglE's Figure 5): left, the density of the cosine similarity of
  STS-B test pairs per gold-score bucket ([0,1), [1,2), [2,3), [3,4), [4,5]); right, the
  distribution of the gold scores. Written as ``<out_dir>/geometry.png``.
* **saturation**: the share of STS-B *train* pairs whose cosine lies in the saturation zones of
  the cosine function, ``|cos| > saturation_threshold`` (0.9), where its gradient is small (the
  problem AnglE's angle objective addresses); reported for ``cos > t`` and ``cos < -t`` too, and
  the same shares on the test split.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data import senteval as se
from anglekit.errors import ConfigError
from anglekit.evaluation.encoders import encode_unique, rows
from anglekit.evaluation.tables import markdown_table
from anglekit.io.atomic import atomic_path
from anglekit.metrics.similarity import paired_cosine

GOLD_BUCKETS = ((0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, 5.0))
GEOMETRY_COLUMNS = ("alignment", "uniformity", "saturated train %")


def l2_normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def alignment(x: np.ndarray, y: np.ndarray, *, alpha: float = 2.0) -> float:
    """``mean_i ||x_i - y_i||^alpha`` of L2-normalised rows (positive pairs)."""
    x, y = l2_normalize(x), l2_normalize(y)
    if x.shape != y.shape or len(x) == 0:
        raise ValueError(f"alignment needs two non-empty arrays of one shape, got {x.shape} and {y.shape}")
    return float(np.mean(np.linalg.norm(x - y, axis=1) ** alpha))


def uniformity(x: np.ndarray, *, t: float = 2.0, block: int = 2048) -> float:
    """``log mean_{i<j} exp(-t ||x_i - x_j||^2)`` of L2-normalised rows, in blocks (log-sum-exp)."""
    x = l2_normalize(x)
    n = len(x)
    if n < 2:
        raise ValueError("uniformity needs at least 2 vectors")
    running_max = -np.inf
    running_sum = 0.0  # sum of exp(v - running_max)
    for start in range(0, n, block):
        a = x[start : start + block]
        sq = np.maximum(2.0 - 2.0 * (a @ x.T), 0.0)  # ||a_i - x_j||^2 for unit vectors
        values = -t * sq
        i_idx = np.arange(start, start + len(a))[:, None]
        j_idx = np.arange(n)[None, :]
        v = values[j_idx > i_idx]
        if v.size == 0:
            continue
        m = float(v.max())
        if m > running_max:
            running_sum = running_sum * np.exp(running_max - m) if np.isfinite(running_max) else 0.0
            running_max = m
        running_sum += float(np.exp(v - running_max).sum())
    n_pairs = n * (n - 1) / 2
    return float(running_max + np.log(running_sum) - np.log(n_pairs))


def saturation_shares(cos: np.ndarray, threshold: float) -> dict[str, float]:
    cos = np.asarray(cos)
    return {
        "abs_above": float(np.mean(np.abs(cos) > threshold) * 100),
        "above": float(np.mean(cos > threshold) * 100),
        "below_negative": float(np.mean(cos < -threshold) * 100),
        "n_pairs": int(len(cos)),
    }


def bucket_of(gold: np.ndarray) -> np.ndarray:
    """Index into :data:`GOLD_BUCKETS` (the last bucket includes 5.0)."""
    return np.clip(np.floor(np.asarray(gold)).astype(int), 0, len(GOLD_BUCKETS) - 1)


def plot_geometry(cos: np.ndarray, gold: np.ndarray, path: str | os.PathLike[str], *, title: str = "") -> Path:
    """Cosine density per gold bucket (left) and the gold distribution (right), saved as PNG (atomic)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from scipy.stats import gaussian_kde

    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    grid = np.linspace(min(-0.2, float(cos.min()) - 0.05), 1.0, 400)
    buckets = bucket_of(gold)
    for b, (lo, hi) in enumerate(GOLD_BUCKETS):
        values = cos[buckets == b]
        label = f"gold [{lo:.0f}, {hi:.0f}{']' if b == len(GOLD_BUCKETS) - 1 else ')'} (n={len(values)})"
        if len(values) >= 2 and np.ptp(values) > 0:
            left.plot(grid, gaussian_kde(values)(grid), label=label)
        elif len(values):
            left.axvline(float(values.mean()), label=label, linestyle=":")
    left.set_xlabel("cosine similarity")
    left.set_ylabel("density")
    left.set_title("cosine per gold-score bucket")
    left.legend(fontsize=8)
    right.hist(gold, bins=np.arange(-0.25, 5.5, 0.5), color="grey")
    right.set_xlabel("gold score")
    right.set_ylabel("pairs")
    right.set_title("gold scores")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    target = Path(path)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    return target


def evaluate_geometry(
    encode: Callable[..., np.ndarray],
    data_root: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    variant: str = "senteval",
    positive_threshold: float = 4.0,
    saturation_threshold: float = 0.9,
    uniformity_t: float = 2.0,
    plot: bool = True,
    title: str = "",
) -> dict[str, Any]:
    """Run the geometry suite on STS-B (test for alignment/uniformity/figure; train for saturation)."""
    if variant not in se.STS_VARIANTS:
        raise ConfigError(f"unknown STS-B copy {variant!r}; choose one of {', '.join(se.STS_VARIANTS)}")
    if not 0.0 < saturation_threshold < 1.0:
        raise ConfigError(f"saturation_threshold must be in (0, 1), got {saturation_threshold}")
    directory = Path(data_root) / ("senteval/STS/STSBenchmark" if variant == "senteval" else "stsb")
    normalize = variant == "senteval"
    test = se.load_stsbenchmark(directory, "test", normalize_whitespace=normalize)
    train = se.load_stsbenchmark(directory, "train", normalize_whitespace=normalize)
    vectors, index = encode_unique(encode, test.text1, test.text2, train.text1, train.text2, desc="geometry: encode")

    a, b = rows(vectors, index, test.text1), rows(vectors, index, test.text2)
    positive = test.labels >= positive_threshold
    if not positive.any():
        raise ConfigError(f"no STS-B test pair has gold >= {positive_threshold}")
    test_sentences = list(dict.fromkeys([*test.text1, *test.text2]))
    align = alignment(a[positive], b[positive])
    uniform = uniformity(rows(vectors, index, test_sentences), t=uniformity_t)
    cos_test = paired_cosine(a, b)
    cos_train = paired_cosine(rows(vectors, index, train.text1), rows(vectors, index, train.text2))
    buckets = bucket_of(test.labels)
    per_bucket = {}
    for k, (lo, hi) in enumerate(GOLD_BUCKETS):
        c = cos_test[buckets == k]
        per_bucket[f"[{lo:g},{hi:g}{']' if k == len(GOLD_BUCKETS) - 1 else ')'}"] = {
            "n_pairs": int(len(c)),
            "cos_mean": float(c.mean()) if len(c) else None,
            "cos_std": float(c.std()) if len(c) else None,
        }
    train_sat = saturation_shares(cos_train, saturation_threshold)
    result: dict[str, Any] = {
        "suite": "geometry",
        "metric": "alignment/uniformity (lower is better) on normalised STS-B test embeddings; saturation = % of STS-B train pairs with |cos| > threshold",
        "variant": variant,
        "columns": list(GEOMETRY_COLUMNS),
        "scores": {"alignment": align, "uniformity": uniform, "saturated train %": train_sat["abs_above"]},
        "details": {
            "alignment": {"value": align, "alpha": 2, "n_positive_pairs": int(positive.sum()), "positive_threshold": positive_threshold},
            "uniformity": {"value": uniform, "t": uniformity_t, "n_sentences": len(test_sentences)},
            "cosine_by_gold_bucket": per_bucket,
            "saturation": {"threshold": saturation_threshold, "train": train_sat, "test": saturation_shares(cos_test, saturation_threshold)},
            "cosine_quantiles_train": {str(q): float(np.quantile(cos_train, q)) for q in (0.01, 0.1, 0.5, 0.9, 0.99)},
            "sources": {"test": test.source, "train": train.source},
        },
    }
    if plot and out_dir is not None:
        png = plot_geometry(cos_test, test.labels, Path(out_dir) / "geometry.png", title=title)
        result["figure"] = str(png)
    return result


def geometry_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    d = result["details"]
    sat = d["saturation"]
    bucket_rows = [[k, v["n_pairs"], v["cos_mean"], v["cos_std"]] for k, v in d["cosine_by_gold_bucket"].items()]
    cols = result["columns"]
    lines = [
        f"## Embedding geometry (STS-B, data copy: {result['variant']})",
        "",
        markdown_table(["model", *cols], [[title, *[result["scores"][c] for c in cols]]], digits=4),
        "",
        f"- alignment over {d['alignment']['n_positive_pairs']} test pairs with gold >= {d['alignment']['positive_threshold']}; "
        f"uniformity (t = {d['uniformity']['t']}) over {d['uniformity']['n_sentences']} test sentences.",
        f"- saturation (|cos| > {sat['threshold']}): train {sat['train']['abs_above']:.2f}% "
        f"(cos > t: {sat['train']['above']:.2f}%, cos < -t: {sat['train']['below_negative']:.2f}%), "
        f"test {sat['test']['abs_above']:.2f}%.",
        "",
        markdown_table(["gold bucket", "pairs", "mean cos", "std cos"], bucket_rows, digits=3),
        "",
    ]
    if "figure" in result:
        lines += [f"![cosine by gold bucket]({Path(result['figure']).name})", ""]
    return "\n".join(lines)
