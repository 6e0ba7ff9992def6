"""The report of a reproduction: per table, mean ± std per row, the paired comparison with the
reference row, and the published figure (with its own difference from the paper's reference)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from anglekit.evaluation.paper import PAPER_SCALE, paper_note, paper_row
from anglekit.reproduce.protocol import Protocol
from anglekit.reproduce.stats import Paired, mean_std, paired
from anglekit.reproduce.tables import Published, Row, TableSpec


def published_values(pub: Published | None) -> dict[str, float | None]:
    """Our metric name -> the paper's figure for a row (None where the paper has none)."""
    if pub is None:
        return {}
    row = paper_row(pub.table, pub.row, key=pub.key)
    return {ours: (row.get(theirs) if isinstance(row.get(theirs), float) else None) for ours, theirs in pub.columns.items()}


def _fmt(value: float | None, digits: int = 2, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def row_values(records: Sequence[dict[str, Any]], row: Row, metric: str) -> dict[int, float]:
    """{seed (0 for untrained rows): value} of ``metric`` over a row's finished cells; a multi-task row's
    value for a seed is the mean over its tasks when ``metric`` is ``Avg`` and the table has per-task
    metrics."""
    out: dict[int, float] = {}
    for r in records:
        if r["row"] == row.name and r.get("status") == "done" and metric in r["metrics"]:
            out[r["seed"] if r["seed"] is not None else 0] = float(r["metrics"][metric])
    return out


def _paired_dict(comparison: Paired) -> dict[str, Any]:
    return {
        "seeds": list(comparison.seeds),
        "mean_diff": comparison.mean_diff,
        "std_diff": comparison.std_diff,
        "t": comparison.t,
        "p": comparison.p,
        "within_noise": comparison.within_noise,
        "verdict": comparison.verdict(),
    }


def gradient_share(records: Sequence[dict[str, Any]], row: Row) -> dict[str, Any] | None:
    """The angle term's weighted gradient over the cosine term's, ``w3 ||dL_angle|| / (w1 ||dL_cos||)``,
    per seed and its mean, from the cells' ``gradients`` (None when no cell of the row logged both);
    ``steps`` holds the same ratio at each probed step, ``{seed: [[step, ratio], ...]}``, for the
    records that carry their probes per step (``probe_steps``, from their dynamics log)."""
    settings = row.settings
    w_angle, w_cos = float(settings.get("angle_weight", 1.0)), float(settings.get("cosine_weight", 1.0))

    def ratio(grads: dict[str, Any]) -> float | None:
        cosine = grads.get("grad_cosine")
        return None if not cosine or w_cos == 0 else w_angle * float(grads.get("grad_angle", 0.0)) / (w_cos * float(cosine))

    values: dict[int, float] = {}
    steps: dict[int, list[list[Any]]] = {}
    for r in records:
        if r["row"] != row.name or r.get("status") != "done":
            continue
        seed = r["seed"] if r["seed"] is not None else 0
        share = ratio(r.get("gradients") or {})
        if share is None:
            continue
        values[seed] = share
        series = [[step, value] for step, value in _per_step(r, ratio) if value is not None]
        if series:
            steps[seed] = series
    if not values:
        return None
    m, sd = mean_std(list(values.values()))
    return {"values": values, "mean": m, "std": sd, "steps": steps}


def _per_step(record: dict[str, Any], value: Any) -> list[tuple[int, Any]]:
    """``(step, value(probes))`` over a record's integer steps of ``probe_steps``, in step order."""
    by_step = record.get("probe_steps") or {}
    return sorted((step, value(probes)) for step, probes in by_step.items() if isinstance(step, int) and not isinstance(step, bool))


def probe_series(records: Sequence[dict[str, Any]], row: Row, probe: str) -> dict[int, list[list[Any]]]:
    """One probe over the training steps of a row's finished cells, ``{seed: [[step, value], ...]}``
    (only the seeds whose cells logged it), from their ``probe_steps``."""
    out: dict[int, list[list[Any]]] = {}
    for r in records:
        if r["row"] == row.name and r.get("status") == "done":
            series = [[step, value] for step, value in _per_step(r, lambda probes: probes.get(probe)) if value is not None]
            if series:
                out[r["seed"] if r["seed"] is not None else 0] = series
    return out


def table_summary(table: TableSpec, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Numbers of one table: per row and metric the values per seed, mean, std; paired comparisons."""
    records = [dict(r) for r in records]
    # Tables whose tasks each give one metric (non-transfer): a per-seed Avg over the measured tasks.
    if "Avg" in table.metrics and all(t.evaluation == "pairs" for t in table.tasks):
        by_row_seed: dict[tuple[str, Any], list[float]] = {}
        for r in records:
            if r.get("status") == "done":
                by_row_seed.setdefault((r["row"], r["seed"]), []).extend(r["metrics"].values())
        for (row, seed), values in by_row_seed.items():
            records.append({"row": row, "seed": seed, "status": "done", "metrics": {"Avg": sum(values) / len(values)}})
    ref_row = next(r for r in table.rows if r.name == table.reference)
    ref_values = row_values(records, ref_row, table.primary)
    ref_pub = published_values(ref_row.published).get(table.primary)
    rows = []
    for row in table.rows:
        metrics = {}
        for metric in table.metrics:
            values = row_values(records, row, metric)
            if values:
                m, sd = mean_std(list(values.values()))
                metrics[metric] = {"values": values, "mean": m, "std": sd}
        primary = row_values(records, row, table.primary)
        comparison = paired(primary, ref_values) if row.kind == "train" and row is not ref_row else None
        others = {}
        for metric in table.compare if row.kind == "train" and row is not ref_row else ():
            other = paired(row_values(records, row, metric), row_values(records, ref_row, metric))
            if other is not None:
                others[metric] = _paired_dict(other)
        pub = published_values(row.published)
        pub_primary = pub.get(table.primary)
        rows.append(
            {
                "row": row.name,
                "kind": row.kind,
                "metrics": metrics,
                "paired": None if comparison is None else _paired_dict(comparison),
                "paired_other": others,
                "gradient_share": gradient_share(records, row) if table.gradient_share else None,
                "saturation": probe_series(records, row, "saturated"),
                "anisotropy": probe_series(records, row, "anisotropy"),
                "published": pub,
                "published_source": None if row.published is None else f"Table {row.published.table}: {row.published.row}",
                "published_note": None if row.published is None else row.published.note or None,
                "published_diff": (
                    row.published.approx_diff
                    if row.published is not None and row.published.approx_diff is not None
                    else None
                    if (
                        pub_primary is None or ref_pub is None or row is ref_row or row.kind != "train" or row.published == ref_row.published
                    )  # the same paper row: no own figure
                    else pub_primary - ref_pub
                ),
                "published_diff_approx": row.published is not None and row.published.approx_diff is not None,
                "skipped": sorted({r.get("reason", "") for r in records if r["row"] == row.name and r.get("status") == "skipped"}),
            }
        )
    return {
        "table": table.name,
        "title": table.title,
        "paper": table.paper,
        "primary": table.primary,
        "reference": table.reference,
        "metrics": list(table.metrics),
        "rows": rows,
        "notes": list(table.notes),
        "precisions": trained_precisions(records),
    }


def trained_precisions(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many finished trained cells ran in each precision (``unrecorded``: cells from before
    2026-11-30). A cell's key holds the requested precision, ``auto``, which is bf16 on a CPU with
    native bf16 and fp32 on one without, so a table resumed on another machine can mix them."""
    counts = Counter(str(r["training"].get("precision") or "unrecorded") for r in records if r.get("status") == "done" and r.get("training") is not None)
    return dict(sorted(counts.items()))


def _cell(metric: dict[str, Any] | None, skipped: bool = False) -> str:
    if not metric:
        return "skipped" if skipped else "-"
    m, sd, n = metric["mean"], metric["std"], len(metric["values"])
    return f"{m:.2f} ± {sd:.2f} (n={n})" if sd is not None else f"{m:.2f}"


def _delta(pair: dict[str, Any] | None) -> str:
    """A paired difference as ``+0.12 ± 0.05 (p=0.04)``."""
    if not pair:
        return "-"
    spread = f" ± {pair['std_diff']:.2f}" if pair["std_diff"] is not None else ""
    p = f" (p={pair['p']:.2f})" if pair["p"] is not None else ""
    return f"{pair['mean_diff']:+.2f}{spread}{p}"


def render_table(summary: dict[str, Any]) -> str:
    """Markdown of one table summary."""
    lines = [f"## {summary['title']}", ""]
    many = len(summary["metrics"]) > 1
    primary = summary["primary"]
    compare = list(dict.fromkeys(m for r in summary["rows"] for m in (r.get("paired_other") or {})))
    shares = any(r.get("gradient_share") for r in summary["rows"])
    if many:
        header = ["row", *summary["metrics"], f"Δ {primary} vs reference (paired)", *[f"Δ {m}" for m in compare], f"paper {primary}"]
        if shares:
            header.append("angle/cosine gradient")
    else:
        header = ["row", f"{primary} mean ± std", "per seed", "Δ vs reference (paired)", "paper", "paper Δ"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for row in summary["rows"]:
        pair = row["paired"]
        if pair is not None:
            spread = f" ± {pair['std_diff']:.2f}" if pair["std_diff"] is not None else ""
            delta = f"{pair['mean_diff']:+.2f}{spread}: {pair['verdict']}"
        elif row["row"] == summary["reference"]:
            delta = "reference"
        else:
            delta = "-"
        pub = row["published"].get(primary) if row["published"] else None
        if many:
            other = [_delta(row.get("paired_other", {}).get(m)) for m in compare]
            cells = [row["row"], *[_cell(row["metrics"].get(m), bool(row["skipped"])) for m in summary["metrics"]], delta, *other, _fmt(pub)]
            if shares:
                share = row.get("gradient_share")
                cells.append("-" if not share else f"{share['mean']:.3f}" + (f" ± {share['std']:.3f}" if share["std"] is not None else ""))
        else:
            metric = row["metrics"].get(primary)
            seeds = ", ".join(f"{v:.2f}" for _, v in sorted(metric["values"].items())) if metric else "-"
            pub_diff = _fmt(row["published_diff"], sign=True)
            cells = [
                row["row"],
                _cell(metric, bool(row["skipped"])),
                seeds if row["kind"] == "train" else "-",
                delta,
                _fmt(pub),
                f"≈{pub_diff}" if row["published_diff_approx"] else pub_diff,
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {r['row']}: skipped: {'; '.join(r['skipped'])}" for r in summary["rows"] if r["skipped"]]
    sources = [
        f"- {r['row']}: paper {r['published_source']}" + (f" ({r['published_note']})" if r["published_note"] else "")
        for r in summary["rows"]
        if r["published_source"]
    ]
    if sources:
        lines += ["Published figures beside the rows:", "", *sources, ""]
    lines += [f"- {n}" for n in summary["notes"]]
    precisions = summary["precisions"]
    if len(precisions) > 1:
        mixed = ", ".join(f"{name} {count}" for name, count in precisions.items())
        lines.append(f"- The trained cells' recorded precisions differ ({mixed}): where two paired cells differ, so may their scores.")
    if summary["table"] == "ibn-duplicates":
        note = paper_note("identical-sentence detection")
        if note:
            lines.append(f"- The paper: {note}")
    lines.append("")
    return "\n".join(lines)


def render_report(summaries: Sequence[dict[str, Any]], protocol: Protocol, seeds: Sequence[int], command: str) -> str:
    """The whole report: the protocol, what the start means, the scale difference, then each table."""
    p = protocol.describe()
    lines = [
        "# Reproduction report",
        "",
        f"Command: `{command}`",
        "",
        f"Protocol ({protocol.preset}): model {p['model']}, start {p['start']}, max length {p['max_length']}, "
        f"batch {p['batch_size']}, learning rate {p['learning_rate']:g} (constant, no warmup), "
        f"{'{:g} epoch(s)'.format(p['epochs']) if p['max_steps'] < 0 else '{:d} steps'.format(p['max_steps'])}; seeds {', '.join(map(str, seeds))}.",
        "",
        f"Start: {protocol.start.meaning}" if protocol.model is None else f"Start: the model {protocol.model} as given.",
        "",
        f"Scale: these runs are far smaller than the paper's ({PAPER_SCALE}). The published figures are "
        "printed beside the rows to compare directions and gaps (the 'paper Δ' column is the paper's own "
        "difference from its reference row), not levels.",
        "",
        "Each value is Spearman x 100 (cosine vs gold); mean ± sample standard deviation over the seeds. The paired "
        "comparison takes the difference from the reference row seed by seed (same seeds, same batches) and a "
        "two-sided paired t-test; 'within noise' means it does not reject no difference at 5% (with 3 seeds only "
        "a large, consistent difference does).",
        "",
    ]
    for s in summaries:
        lines.append(render_table(s))
    return "\n".join(lines)
