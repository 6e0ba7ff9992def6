"""Read a run's ``metrics.jsonl`` and plot its training dynamics (``anglekit plot-dynamics``).

One PNG with up to six panels, each drawn only when the run logged its data:

1. the loss and each named component against the step;
2. the mean angle to the positive and to the in-batch negatives (SimACE Fig. 4), from the
   training batches (solid) and from ``probe_data`` in eval mode (dashed);
3. alignment and uniformity against the step;
4. alignment against uniformity, one point per probe record, coloured by step (SimACE Fig. 3,
   SimCSE Fig. 2: lower left is better);
5. saturation: the share of training pairs with |cos| > 0.99 and the anisotropy (mean cosine
   between the batch's texts), where AnglE says the cosine saturates;
6. the norm of each objective term's gradient with respect to the embeddings (log scale).

Several runs can be drawn together (e.g. SimCSE next to SimACE): each gets its own colour.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError
from anglekit.io.atomic import atomic_path
from anglekit.io.read import describe, read_jsonl, require_object

__all__ = ["load_metrics", "panels_for", "plot_dynamics", "series"]


def load_metrics(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of ``RUN_DIR/metrics.jsonl`` (or of the file itself when given one)."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.exists():
        raise DataError("no metrics.jsonl here (is this a training output_dir?)", source=str(run_dir))
    records = []
    source = str(path)
    for row, record in read_jsonl(path, expected=_EXPECTED):
        records.append(_check_record(record, source, row))
    if not records:
        raise DataError("no records", source=str(path))
    return records


_EXPECTED = "training log records written by 'anglekit train' (one JSON object a line with a numeric 'step')"
_PLOTTED = ("loss", "probe_")


def _check_record(record: Any, source: str, row: int) -> dict[str, Any]:
    """``record`` if it is a log record whose step and plotted values are numbers, else a
    :class:`DataError` naming the row and the key."""
    require_object(record, source=source, row=row, expected=_EXPECTED)
    if "step" not in record:
        raise DataError(f"no 'step' key; expected {_EXPECTED}", source=source, row=row)
    step = record["step"]
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
        raise DataError(f"expected the step as a number, got {describe(step)}", source=source, row=row, field="step")
    for key, value in record.items():
        if key.startswith(_PLOTTED) and value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DataError(f"expected a number (or null), got {describe(value)}", source=source, row=row, field=key)
    return record


def series(records: Sequence[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """``(steps, values)`` of every record holding a finite number under ``key``."""
    steps, values = [], []
    for record in records:
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            steps.append(float(record["step"]))
            values.append(float(value))
    return steps, values


def plot_dynamics(
    run_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Draw the panels of the module docstring for one or more runs into ``output`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dirs = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
    if not dirs:
        raise ConfigError("give at least one run directory")
    names = list(labels) if labels else [Path(d).name or str(d) for d in dirs]
    if len(names) != len(dirs):
        raise ConfigError(f"{len(names)} labels for {len(dirs)} runs")
    output = Path(output)
    if output.suffix.lower() != ".png":
        raise ConfigError(f"--output must end in .png, got {output}")
    runs = [(name, load_metrics(d)) for name, d in zip(names, dirs)]

    panels = panels_for([records for _, records in runs])
    ncols = 2 if len(panels) > 2 else len(panels)
    nrows = (len(panels) + ncols - 1) // ncols
    fig, grid = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.4 * nrows), squeeze=False)
    axes = [list(grid.flat)[: len(panels)]]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (name, records) in enumerate(runs):
        colour = colours[index % len(colours)]
        for ax, panel in zip(axes[0], panels):
            _PANELS[panel](ax, name, records, colour)
    for ax in list(grid.flat)[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[0]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(output) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return output


def panels_for(runs: Sequence[Sequence[dict[str, Any]]]) -> list[str]:
    """The panels (keys of ``_PANELS``) that the runs' records have data for, in drawing order."""

    def has(prefixes: Sequence[str]) -> bool:
        return any(any(k.startswith(p) for p in prefixes) for records in runs for r in records for k in r)

    panels = ["loss"]
    if has(["probe_angle", "probe_dev_angle"]):
        panels.append("angles")
    if has(["probe_alignment", "probe_uniformity", "probe_dev_alignment", "probe_dev_uniformity"]):
        panels += ["align_uniform", "plane"]
    if has(["probe_saturated", "probe_anisotropy"]):
        panels.append("saturation")
    if has(["probe_grad_"]):
        panels.append("gradients")
    return panels


def _loss_panel(ax: Any, name: str, records: list[dict[str, Any]], colour: str) -> None:
    keys = ["loss"] + sorted({k for r in records for k in r if k.startswith("loss_")})
    lines = [(k, style, f"{name} {k}") for k, style in zip(keys, ["-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1))])]
    _plot_series(ax, records, lines, colour, "loss and components")


def _plot_series(ax: Any, records: list[dict[str, Any]], lines: list[tuple[str, Any, str]], colour: str, title: str, **style: Any) -> None:
    """One line per (metric key, line style, label) that the records hold, against the step."""
    for key, linestyle, label in lines:
        steps, values = series(records, key)
        if steps:
            ax.plot(steps, values, color=colour, linestyle=linestyle, label=label, **style)
    ax.set_title(title)
    ax.set_xlabel("step")


def _angles_panel(ax: Any, name: str, records: list[dict[str, Any]], colour: str) -> None:
    positives = [("probe_angle_pos", "-", f"{name}: positive"), ("probe_dev_angle_pos", "--", f"{name}: dev positive")]
    negatives = [("probe_angle_neg", "-", f"{name}: negatives"), ("probe_angle_hard_neg", ":", f"{name}: hard negative"),
                 ("probe_dev_angle_neg", "--", f"{name}: dev negatives")]  # fmt: skip
    _plot_series(ax, records, positives, colour, "mean angle (degrees)", marker="o", markersize=3)
    _plot_series(ax, records, negatives, colour, "mean angle (degrees)", marker="^", markersize=3)


def _align_uniform_panel(ax: Any, name: str, records: list[dict[str, Any]], colour: str) -> None:
    keys = (("probe_alignment", "-"), ("probe_uniformity", "-."), ("probe_dev_alignment", "--"), ("probe_dev_uniformity", ":"))
    _plot_series(ax, records, [(k, style, f"{name} {k.removeprefix('probe_')}") for k, style in keys], colour, "alignment and uniformity")


def _plane_panel(ax: Any, name: str, records: list[dict[str, Any]], colour: str) -> None:
    """Alignment vs uniformity, the dev probes preferred (as in the papers)."""
    prefix = "probe_dev_" if any("probe_dev_alignment" in r for r in records) else "probe_"
    points = [
        (r[f"{prefix}uniformity"], r[f"{prefix}alignment"], r["step"])
        for r in records
        if isinstance(r.get(f"{prefix}uniformity"), (int, float)) and isinstance(r.get(f"{prefix}alignment"), (int, float))
    ]
    if points:
        xs, ys, steps = zip(*points)
        ax.plot(xs, ys, color=colour, linewidth=0.8, alpha=0.6)
        ax.scatter(xs, ys, c=steps, cmap="viridis", s=18, edgecolors=colour, label=f"{name} ({prefix.rstrip('_')})")
    ax.set_title("alignment vs uniformity (lower left is better)")
    ax.set_xlabel("uniformity")
    ax.set_ylabel("alignment")


def _saturation_panel(ax: Any, name: str, records: list[dict[str, Any]], colour: str) -> None:
    keys = (("probe_saturated", "-", "share |cos| > 0.99"), ("probe_anisotropy", "--", "anisotropy"))
    _plot_series(ax, records, [(k, style, f"{name} {label}") for k, style, label in keys], colour, "saturation", marker="o", markersize=3)


def _gradients_panel(ax: Any, name: str, records: list[dict[str, Any]], colour: str) -> None:
    keys = sorted({k for r in records for k in r if k.startswith("probe_grad_")})
    lines = [(k, style, f"{name} {k.removeprefix('probe_grad_')}") for k, style in zip(keys, ["-", "--", ":", "-.", (0, (1, 3))])]
    _plot_series(ax, records, lines, colour, "gradient norm per term (w.r.t. the embeddings)", marker="o", markersize=3)
    if any(line.get_ydata().size and min(line.get_ydata()) > 0 for line in ax.get_lines()):
        ax.set_yscale("log")


_PANELS = {
    "loss": _loss_panel,
    "angles": _angles_panel,
    "align_uniform": _align_uniform_panel,
    "plane": _plane_panel,
    "saturation": _saturation_panel,
    "gradients": _gradients_panel,
}
"""The panels plot_dynamics draws, by name: ``draw(ax, run name, its records, colour)``."""
