"""A table's chart (``<table>.png`` beside ``<table>.md``), drawn from its summary alone.

Panels, each where the summary has its data:

- **scores**: mean ± std over seeds per row, each seed a dot (one point per column and row for a
  table with several columns; one row a line otherwise);
- **Δ vs reference (paired)**: each trained row's seed-by-seed difference from the reference row,
  mean ± std of the differences, filled where the paired t-test rejects no difference at 5% and
  hollow where it is within noise;
- **angle/cosine gradient**: ``w3 ||dL_angle/dE|| / (w1 ||dL_cos/dE||)`` per row (the share of the
  update the angle term drives), and the same ratio over the training steps (mean over seeds, the
  band spanning the seeds);
- **saturation**: the share of the batch's pairs whose |cos| exceeds 0.99 (where the paper says
  the cosine's gradient vanishes) and the anisotropy (the mean cosine between the batch's texts)
  over the training steps, for cells that probed them.

matplotlib comes with the ``eval`` extra; it is imported only when a chart is drawn.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

SIGNIFICANT = 0.05


def chart_panels(summary: dict[str, Any]) -> list[str]:
    """The panels a summary has data for, in drawing order."""
    rows = summary["rows"]
    panels = ["scores"] if any(r["metrics"] for r in rows) else []
    if any(r.get("paired") or r.get("paired_other") for r in rows):
        panels.append("delta")
    if any(r.get("gradient_share") for r in rows):
        panels.append("share")
        if any((r.get("gradient_share") or {}).get("steps") for r in rows):
            panels.append("share_steps")
    if any(r.get("saturation") or r.get("anisotropy") for r in rows):
        panels.append("saturation")
    return panels


def chart_figure(summary: dict[str, Any]) -> Any:
    """The matplotlib figure of one table summary's chart (None when no row has a finished cell);
    its axes are titled after their panels."""
    panels = chart_panels(summary)
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    many = len(summary["metrics"]) > 1
    ncols = 1 if len(panels) == 1 else 2
    nrows = (len(panels) + ncols - 1) // ncols
    height = max(3.6, 0.32 * len(summary["rows"]) + 1.6)
    fig, grid = plt.subplots(nrows, ncols, figsize=(7.0 * ncols, height * nrows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    draw = {
        "scores": _scores_many if many else _scores_one,
        "delta": _delta_many if many else _delta_one,
        "share": _share,
        "share_steps": _share_steps,
        "saturation": _saturation,
    }
    for ax, panel in zip(grid.flat, panels, strict=False):
        draw[panel](ax, summary, colours)
        ax.grid(alpha=0.3)
    for ax in list(grid.flat)[len(panels) :]:
        ax.remove()
    fig.suptitle(summary["title"], fontsize=10)
    fig.tight_layout()
    return fig


def render_chart(summary: dict[str, Any]) -> bytes | None:
    """PNG bytes of one table summary's chart (None when no row has a finished cell)."""
    fig = chart_figure(summary)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _colour(summary: dict[str, Any], row: dict[str, Any], colours: Sequence[str]) -> str:
    """A row's colour, by its place in the table: the same in every panel, whichever rows have data."""
    return colours[summary["rows"].index(row) % len(colours)]


def _seed_values(metric: dict[str, Any]) -> list[float]:
    return [float(v) for _, v in sorted(metric["values"].items(), key=lambda kv: int(kv[0]))]


def _scores_many(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    """x: the columns; one series per row, offset so that the rows of a column sit side by side."""
    metrics, rows = summary["metrics"], [r for r in summary["rows"] if r["metrics"]]
    width = 0.7 / max(1, len(rows))
    for i, row in enumerate(rows):
        colour, offset = _colour(summary, row, colours), (i - (len(rows) - 1) / 2) * width
        xs, means, errs = [], [], []
        for j, metric in enumerate(metrics):
            value = row["metrics"].get(metric)
            if value:
                xs.append(j + offset)
                means.append(value["mean"])
                errs.append(value["std"] or 0.0)
                seeds = _seed_values(value)
                ax.plot([j + offset] * len(seeds), seeds, ".", color=colour, markersize=3, alpha=0.6)
        marker = "x" if row["kind"] != "train" else "o"
        ax.errorbar(xs, means, yerr=errs, fmt=marker, color=colour, capsize=2, markersize=5, label=row["row"])
    ax.set_xticks(range(len(metrics)), [_short(m) for m in metrics], fontsize=8, rotation=20)
    ax.set_ylabel("Spearman x 100 (mean ± std; dots: seeds)")
    ax.set_title("scores", fontsize=9)
    ax.legend(fontsize=7)


def _scores_one(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    """y: the rows; the primary metric's mean ± std, each seed a dot."""
    primary, rows = summary["primary"], summary["rows"]
    for i, row in enumerate(rows):
        value = row["metrics"].get(primary)
        if not value:
            continue
        y = len(rows) - 1 - i
        colour = colours[0] if row["row"] != summary["reference"] else colours[1]
        ax.errorbar([value["mean"]], [y], xerr=[value["std"] or 0.0], fmt="o" if row["kind"] == "train" else "x", color=colour, capsize=2)
        seeds = _seed_values(value)
        ax.plot(seeds, [y] * len(seeds), ".", color=colour, markersize=4, alpha=0.6)
    ax.set_yticks(range(len(rows)), [r["row"] for r in rows][::-1], fontsize=8)
    ax.set_xlabel(f"{primary}, Spearman x 100 (mean ± std; dots: seeds)")
    ax.set_title("scores", fontsize=9)


def _pairs(row: dict[str, Any], primary: str) -> dict[str, dict[str, Any]]:
    return {**({primary: row["paired"]} if row.get("paired") else {}), **(row.get("paired_other") or {})}


def _delta_marker(ax: Any, x: float, y: float, pair: dict[str, Any], colour: str, horizontal: bool, label: str | None) -> None:
    err = pair["std_diff"] or 0.0
    filled = pair["p"] is not None and pair["p"] < SIGNIFICANT
    style = {"fmt": "o", "color": colour, "capsize": 2, "markersize": 5, "mfc": colour if filled else "white", "label": label}
    if horizontal:
        ax.errorbar([x], [y], xerr=[err], **style)
    else:
        ax.errorbar([x], [y], yerr=[err], **style)


def _delta_many(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    """x: the compared columns; one series per trained row."""
    primary = summary["primary"]
    compared = [m for m in summary["metrics"] if any(m in _pairs(r, primary) for r in summary["rows"])]
    rows = [r for r in summary["rows"] if _pairs(r, primary)]
    width = 0.7 / max(1, len(rows))
    for i, row in enumerate(rows):
        colour, offset, label = _colour(summary, row, colours), (i - (len(rows) - 1) / 2) * width, row["row"]
        for j, metric in enumerate(compared):
            pair = _pairs(row, primary).get(metric)
            if pair:
                _delta_marker(ax, j + offset, pair["mean_diff"], pair, colour, False, label)
                label = None
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(compared)), [_short(m) for m in compared], fontsize=8, rotation=20)
    ax.set_ylabel("paired Δ (mean ± std over seeds)")
    ax.set_title(f"Δ vs {summary['reference']} (filled: p < {SIGNIFICANT:g}; hollow: within noise)", fontsize=9)
    ax.legend(fontsize=7)


def _delta_one(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    """y: the rows; the primary metric's paired difference from the reference row."""
    rows = summary["rows"]
    for i, row in enumerate(rows):
        if row.get("paired"):
            _delta_marker(ax, row["paired"]["mean_diff"], len(rows) - 1 - i, row["paired"], colours[0], True, None)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [r["row"] for r in rows][::-1], fontsize=8)
    ax.set_xlabel(f"paired Δ {summary['primary']} (mean ± std over seeds)")
    ax.set_title(f"Δ vs {summary['reference']} (filled: p < {SIGNIFICANT:g}; hollow: within noise)", fontsize=9)


def _share(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    rows = summary["rows"]
    for i, row in enumerate(rows):
        share = row.get("gradient_share")
        if not share:
            continue
        y, colour = len(rows) - 1 - i, _colour(summary, row, colours)
        ax.barh([y], [share["mean"]], xerr=[share["std"] or 0.0], color=colour, alpha=0.7, capsize=2)
        seeds = _seed_values(share)
        ax.plot(seeds, [y] * len(seeds), "k.", markersize=4)
    ax.set_yticks(range(len(rows)), [r["row"] for r in rows][::-1], fontsize=8)
    ax.set_xlabel("w3 ||dL_angle/dE|| / (w1 ||dL_cos/dE||), mean of the probes (dots: seeds)")
    ax.set_title("the angle term's share of the update", fontsize=9)


def _over_steps(ax: Any, summary: dict[str, Any], colours: Sequence[str], series_of: Any, linestyle: str = "-", label: bool = True) -> None:
    """One line per row, the mean over its seeds at each step, the band spanning the seeds."""
    for row in summary["rows"]:
        by_seed = series_of(row) or {}
        at_step: dict[float, list[float]] = {}
        for series in by_seed.values():
            for step, value in series:
                at_step.setdefault(float(step), []).append(float(value))
        if not at_step:
            continue
        steps = sorted(at_step)
        colour = _colour(summary, row, colours)
        name = f"{row['row']} ({len(by_seed)} seeds)" if label else None
        ax.plot(steps, [sum(at_step[s]) / len(at_step[s]) for s in steps], color=colour, linestyle=linestyle, label=name)
        ax.fill_between(steps, [min(at_step[s]) for s in steps], [max(at_step[s]) for s in steps], color=colour, alpha=0.2)
    ax.set_xlabel("step")
    ax.legend(fontsize=7)


def _share_steps(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    _over_steps(ax, summary, colours, lambda row: (row.get("gradient_share") or {}).get("steps"))
    ax.set_ylabel("angle/cosine gradient (mean; band: seeds)")
    ax.set_title("the angle term's share over training", fontsize=9)


def _saturation(ax: Any, summary: dict[str, Any], colours: Sequence[str]) -> None:
    _over_steps(ax, summary, colours, lambda row: row.get("saturation"))
    _over_steps(ax, summary, colours, lambda row: row.get("anisotropy"), linestyle="--", label=False)
    ax.set_ylabel("mean over seeds (band: seeds)")
    ax.set_title("saturation (solid: share of pairs with |cos| > 0.99) and anisotropy (dashed: mean cosine)", fontsize=9)


def _short(metric: str) -> str:
    return metric.replace("STS-B test", "STS-B").replace(", middle layer", " middle layer")
