"""The ``sts`` suite: STS12-16 (SentEval's "all" setting), STS-B test, SICK-R test, and their average.

Layout of AnglE's Table 2 (columns STS12 .. STS16, STS-B, SICK-R, Avg): Spearman's rho x 100 between
the cosine similarity of the two sentences' embeddings and the gold score.

For STS12-16 the headline number is SentEval's ``all``: ONE Spearman over the concatenation of
all subsets of the year (pairs with a blank gold line removed). The JSON also holds each subset's
Spearman and Pearson, their plain ``mean`` and their ``wmean`` (weighted by each subset's number of
pairs), as SentEval reports them.

Two copies of the data (``variant``):

* ``senteval`` (default; what the papers report): ``senteval/STS/STS1x-en-test``,
  ``senteval/STS/STSBenchmark``, ``senteval/SICK``; tokenised text, whitespace normalised exactly
  as SentEval's split-and-join does;
* ``original`` (MTEB-style): ``sts12-16-original/STS1x``, ``stsb``, ``senteval/SICK``; text untouched.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data import senteval as se
from anglekit.errors import ConfigError
from anglekit.evaluation.encoders import encode_unique, rows
from anglekit.evaluation.tables import markdown_table, mean
from anglekit.metrics.similarity import correlation_scores, paired_cosine

STS_COLUMNS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")
"""Columns of AnglE's Table 2 (before ``Avg``)."""


def _pairs_source(data_root: Path, variant: str) -> tuple[Path, Path]:
    if variant == "senteval":
        return data_root / "senteval" / "STS" / "STSBenchmark", data_root / "senteval" / "SICK"
    return data_root / "stsb", data_root / "senteval" / "SICK"


def load_sts_data(
    data_root: str | os.PathLike[str], *, variant: str = "senteval", tasks: Sequence[str] = STS_COLUMNS, check_counts: bool = True
) -> dict[str, Any]:
    """Read (and validate) every file of the suite before anything is encoded.

    ``check_counts``: require SentEval's pair counts per year (3108, 1500, 3750, 3000, 1186).
    """
    if variant not in se.STS_VARIANTS:
        raise ConfigError(f"unknown STS data copy {variant!r}; choose one of {', '.join(se.STS_VARIANTS)}")
    unknown = [t for t in tasks if t not in STS_COLUMNS]
    if unknown:
        raise ConfigError(f"unknown STS task(s) {unknown}; choose from {', '.join(STS_COLUMNS)}")
    root = Path(data_root)
    normalize = variant == "senteval"
    stsb_dir, sick_dir = _pairs_source(root, variant)
    data: dict[str, Any] = {}
    for task in tasks:
        if task in se.STS_YEARS:
            data[task] = se.load_sts_year(root, task, variant=variant, check_counts=check_counts)
        elif task == "STS-B":
            data[task] = se.load_stsbenchmark(stsb_dir, "test", normalize_whitespace=normalize)
        else:
            data[task] = se.load_sick_relatedness(sick_dir, "test", normalize_whitespace=normalize)
    return data


def _all_texts(data: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    for item in data.values():
        if isinstance(item, se.StsYear):
            for sub in item.subsets:
                texts.extend(sub.text1)
                texts.extend(sub.text2)
        else:
            texts.extend(item.text1)
            texts.extend(item.text2)
    return texts


def year_scores(year: se.StsYear, cosines: Sequence[np.ndarray]) -> dict[str, Any]:
    """SentEval's per-year numbers from each subset's cosines: per subset, all, mean, wmean."""
    subsets: dict[str, Any] = {}
    for sub, cos in zip(year.subsets, cosines, strict=True):
        scores = correlation_scores(cos, sub.gold, source=sub.gold_path)
        subsets[sub.name] = {
            **scores.as_dict(),
            "n_skipped_blank_gold": sub.n_skipped,
            "n_lines": sub.n_lines,
            "input": sub.input_path,
            "gold": sub.gold_path,
            "encoding": sub.encoding,
        }
    weights = np.array([s["n_pairs"] for s in subsets.values()], dtype=np.float64)
    all_scores = correlation_scores(np.concatenate(list(cosines)), np.concatenate([s.gold for s in year.subsets]), source=str(year.directory))
    out: dict[str, Any] = {"all": all_scores.as_dict(), "subsets": subsets}
    for stat in ("spearman", "pearson"):
        values = np.array([s[stat] for s in subsets.values()])
        out.setdefault("mean", {})[stat] = float(values.mean())
        out.setdefault("wmean", {})[stat] = float(np.average(values, weights=weights))
    out["n_pairs"] = int(weights.sum())
    return out


def evaluate_sts(
    encode: Callable[..., np.ndarray],
    data_root: str | os.PathLike[str],
    *,
    variant: str = "senteval",
    tasks: Sequence[str] = STS_COLUMNS,
    check_counts: bool = True,
) -> dict[str, Any]:
    """Run the STS suite with ``encode`` (texts -> vectors). Returns the result dict (see module doc)."""
    data = load_sts_data(data_root, variant=variant, tasks=tasks, check_counts=check_counts)
    vectors, index = encode_unique(encode, _all_texts(data), desc="sts: encode")
    scores: dict[str, float] = {}
    details: dict[str, Any] = {}
    for task, item in data.items():
        if isinstance(item, se.StsYear):
            cosines = [paired_cosine(rows(vectors, index, s.text1), rows(vectors, index, s.text2)) for s in item.subsets]
            details[task] = {**year_scores(item, cosines), "directory": item.directory}
            scores[task] = details[task]["all"]["spearman"]
        else:
            cos = paired_cosine(rows(vectors, index, item.text1), rows(vectors, index, item.text2))
            result = correlation_scores(cos, item.labels, source=str(item.source))
            details[task] = {**result.as_dict(), "split": item.split, "source": item.source, "encoding": item.encoding}
            scores[task] = result.spearman
    columns = [t for t in STS_COLUMNS if t in scores]
    scores["Avg"] = mean([scores[c] for c in columns])
    return {
        "suite": "sts",
        "metric": "spearman x 100 of cosine vs gold (STS12-16: SentEval 'all')",
        "variant": variant,
        "columns": [*columns, "Avg"],
        "scores": scores,
        "details": details,
        "n_texts_encoded": len(index),
    }


def sts_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    cols = result["columns"]
    lines = [
        f"## STS (Spearman x 100, cosine; data copy: {result['variant']})",
        "",
        markdown_table(["model", *cols], [[title, *[result["scores"][c] for c in cols]]]),
        "",
        "STS12-16 use SentEval's 'all' setting (one Spearman over all subsets of a year).",
        "",
        "### Per year: all / mean / wmean (Spearman x 100) and pairs",
        "",
    ]
    year_rows = []
    for task, det in result["details"].items():
        if "all" in det:
            year_rows.append([task, det["all"]["spearman"], det["mean"]["spearman"], det["wmean"]["spearman"], det["n_pairs"]])
    if year_rows:
        lines += [markdown_table(["year", "all", "mean", "wmean", "pairs"], year_rows), "", "### Per subset", ""]
        sub_rows = []
        for task, det in result["details"].items():
            for name, s in det.get("subsets", {}).items():
                sub_rows.append([f"{task} {name}", s["spearman"], s["pearson"], s["n_pairs"], s["n_skipped_blank_gold"]])
        lines.append(markdown_table(["subset", "spearman", "pearson", "pairs", "skipped (blank gold)"], sub_rows))
    return "\n".join(lines) + "\n"
