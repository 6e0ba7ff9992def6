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

What cannot be drawn truthfully is left out and said in a warning naming the run and the key: a
series with no finite value (all NaN or null), values outside a probe's range (an angle outside
[0, 180] degrees, a share outside [0, 1], ...: see :func:`valid_range`), gradient norms of 0 on
the log axis, and probes the run's ``train_config.json`` asked for (``probe_data``,
``probe_steps``) that its log lacks. When nothing at all is left to draw, a :class:`DataError`
is raised and no figure is written (an earlier one at ``output`` is left as it was).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError
from anglekit.io.atomic import atomic_path
from anglekit.io.read import describe, read_json, read_jsonl, require_object

__all__ = ["drawable_series", "finite_number", "load_metrics", "panels_for", "plot_dynamics", "series", "valid_range", "within_range"]

logger = logging.getLogger(__name__)

Series = dict[str, tuple[list[float], list[float]]]
"""Metric key -> ``(steps, values)`` of the points to draw."""


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


def finite_number(value: Any) -> bool:
    """Whether a logged ``value`` is a finite number (not a boolean, null, NaN or infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def series(records: Sequence[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """``(steps, values)`` of every record holding a finite number under ``key``."""
    steps, values = [], []
    for record in records:
        value = record.get(key)
        if finite_number(value):
            steps.append(float(record["step"]))
            values.append(float(value))
    return steps, values


def valid_range(key: str) -> tuple[float, float, str] | None:
    """``(low, high, what)``: the values a logged probe can take (:mod:`.probes`), or None for keys
    without one (the loss and its components)."""
    if key.startswith("probe_grad_"):
        return 0.0, math.inf, "a gradient norm"
    if not key.startswith("probe_"):
        return None
    name = key.removeprefix("probe_").removeprefix("dev_")
    if name.startswith("angle_"):
        return 0.0, 180.0, "an angle in degrees"
    ranges = {
        "saturated": (0.0, 1.0, "a share of pairs"),
        "anisotropy": (-1.0, 1.0, "a mean cosine"),
        "alignment": (0.0, 4.0, "a mean squared distance of unit vectors"),
        "uniformity": (-8.0, 0.0, "log mean exp(-2 d^2) of unit vectors"),
    }
    return ranges.get(name)


_TOLERANCE = 1e-6
"""Rounding a probe may show beyond its range (e.g. a uniformity of 1e-16) and still be drawn."""


def within_range(key: str, value: float) -> bool:
    """Whether ``value`` lies in ``key``'s :func:`valid_range`, give or take rounding (any value of a
    key without a range)."""
    bounds = valid_range(key)
    return bounds is None or bounds[0] - _TOLERANCE <= value <= bounds[1] + _TOLERANCE


_LOG_AXIS = ("probe_grad_",)
"""Keys drawn on a log axis (the gradients panel), where values <= 0 have no place."""


def drawable_series(records: Sequence[dict[str, Any]], run: str = "run", *, warn: bool = True) -> Series:
    """The loss and probe series of ``records`` that can be drawn, each cut to its drawable points.

    Left out, with a warning naming ``run`` and the key when ``warn``: a series without a finite
    value; values outside :func:`valid_range`; values <= 0 of a key drawn on a log axis."""
    say = logger.warning if warn else (lambda *args: None)
    keys = list(dict.fromkeys(k for r in records for k in r if k == "loss" or k.startswith(("loss_", "probe_"))))
    out: Series = {}
    for key in keys:
        present = sum(1 for r in records if key in r)
        steps, values = series(records, key)
        if not steps:
            say("%s: '%s' has no finite value (NaN, infinite or null in all %d records holding it); not drawn", run, key, present)
            continue
        bounds = valid_range(key)
        if bounds is not None:
            low, high, what = bounds
            outside = [(s, v) for s, v in zip(steps, values, strict=True) if not within_range(key, v)]
            if outside:
                span = f"[{low:g}, {high:g}]" if math.isfinite(high) else f">= {low:g}"
                say("%s: %d of %d values of '%s' are outside its range %s (%s), e.g. %g at step %g; not drawn%s",
                    run, len(outside), len(values), key, span, what, outside[0][1], outside[0][0],
                    " (none is left: the series is left out)" if len(outside) == len(values) else "")  # fmt: skip
                kept = [(s, v) for s, v in zip(steps, values, strict=True) if within_range(key, v)]
                steps, values = [s for s, _ in kept], [v for _, v in kept]
        if steps and key.startswith(_LOG_AXIS):
            positive = [(s, v) for s, v in zip(steps, values, strict=True) if v > 0]
            if len(positive) < len(values):
                say("%s: %d of %d values of '%s' are <= 0 and have no place on the log axis; not drawn%s",
                    run, len(values) - len(positive), len(values), key, " (none is left: the series is left out)" if not positive else "")  # fmt: skip
                steps, values = [s for s, _ in positive], [v for _, v in positive]
        if steps:
            out[key] = (steps, values)
    return out


def _check_requested_probes(run_dir: str | os.PathLike[str], run: str, records: Sequence[dict[str, Any]]) -> None:
    """Warn when the run's ``train_config.json`` asked for probes that ``records`` lack."""
    folder = Path(run_dir)
    config_path = (folder if folder.is_dir() else folder.parent) / "train_config.json"
    if not config_path.is_file():
        return
    try:
        settings = read_json(config_path, expected="the settings 'anglekit train' wrote").get("train")
    except (DataError, AttributeError) as error:
        logger.warning("%s: %s cannot be read (%s); the probes it asked for are not checked", run, config_path, error)
        return
    if not isinstance(settings, dict):
        return
    keys = {k for r in records for k in r}
    asked = []
    if settings.get("probe_data") is not None and not any(k.startswith("probe_dev_") for k in keys):
        asked.append((f"probe_data {settings['probe_data']!r}", "probe_dev_*"))
    if settings.get("probe_steps") is not None and not any(k.startswith("probe_") and not k.startswith("probe_dev_") for k in keys):
        asked.append((f"probe_steps {settings['probe_steps']!r}", "probe_* (batch)"))
    for setting, prefix in asked:
        logger.warning("%s: %s asks for probes (%s) but the log holds no %s value (did the run stop before its first probe record?)",
                       run, config_path, setting, prefix)  # fmt: skip


def plot_dynamics(
    run_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Draw the panels of the module docstring for one or more runs into ``output`` (PNG).

    What cannot be drawn is left out with a warning (see the module docstring); a
    :class:`DataError` when nothing is left, before anything is written."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
    if not dirs:
        raise ConfigError("give at least one run directory")
    names = list(labels) if labels else [Path(d).name or str(d) for d in dirs]
    if len(names) != len(dirs):
        raise ConfigError(f"{len(names)} labels for {len(dirs)} runs")
    output = Path(output)
    if output.suffix.lower() != ".png":
        raise ConfigError(f"--output must end in .png, got {output}")
    runs = []
    for name, d in zip(names, dirs, strict=True):
        records = load_metrics(d)
        _check_requested_probes(d, name, records)
        drawable = drawable_series(records, name)
        if not drawable:
            logger.warning("%s: nothing in %s can be drawn; the run is left out of the figure", name, _metrics_path(d))
        runs.append((name, drawable))
    panels = _panels([drawable for _, drawable in runs])
    if not panels:
        raise DataError(
            "nothing to draw: no loss or probe value is finite and in its range (see the warnings above)",
            source=", ".join(str(_metrics_path(d)) for d in dirs),
        )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = 2 if len(panels) > 2 else len(panels)
    nrows = (len(panels) + ncols - 1) // ncols
    fig, grid = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.4 * nrows), squeeze=False)
    axes = list(grid.flat)[: len(panels)]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (name, drawable) in enumerate(runs):
        colour = colours[index % len(colours)]
        for ax, panel in zip(axes, panels, strict=False):
            _PANELS[panel](ax, name, drawable, colour)
    for ax in list(grid.flat)[len(panels) :]:
        ax.set_visible(False)
    for ax in axes:
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


def _metrics_path(run_dir: str | os.PathLike[str]) -> Path:
    path = Path(run_dir)
    return path / "metrics.jsonl" if path.is_dir() else path


def panels_for(runs: Sequence[Sequence[dict[str, Any]]]) -> list[str]:
    """The panels (keys of ``_PANELS``) that the runs' records have drawable data for, in drawing order."""
    return _panels([drawable_series(records, warn=False) for records in runs])


def _panels(runs: Sequence[Series]) -> list[str]:
    keys = {k for drawable in runs for k in drawable}

    def has(prefixes: Sequence[str]) -> bool:
        return any(k.startswith(tuple(prefixes)) for k in keys)

    panels = ["loss"] if has(["loss"]) else []
    if has(["probe_angle", "probe_dev_angle"]):
        panels.append("angles")
    if has(["probe_alignment", "probe_uniformity", "probe_dev_alignment", "probe_dev_uniformity"]):
        panels.append("align_uniform")
        if any(_plane_points(drawable)[1] for drawable in runs):
            panels.append("plane")
    if has(["probe_saturated", "probe_anisotropy"]):
        panels.append("saturation")
    if has(["probe_grad_"]):
        panels.append("gradients")
    return panels


_LINE_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (1, 3)), (0, (5, 1)))
"""The line styles of one run's series in a panel, reused in turn when it has more (Matryoshka's
components per dimension): every series is drawn, each with its own label."""


def _loss_panel(ax: Any, name: str, drawable: Series, colour: str) -> None:
    keys = ["loss"] + sorted(k for k in drawable if k.startswith("loss_"))
    lines = [(k, _LINE_STYLES[i % len(_LINE_STYLES)], f"{name} {k}") for i, k in enumerate(keys)]
    _plot_series(ax, drawable, lines, colour, "loss and components")


def _plot_series(ax: Any, drawable: Series, lines: list[tuple[str, Any, str]], colour: str, title: str, **style: Any) -> None:
    """One line per (metric key, line style, label) that ``drawable`` holds, against the step."""
    for key, linestyle, label in lines:
        if key in drawable:
            steps, values = drawable[key]
            ax.plot(steps, values, color=colour, linestyle=linestyle, label=label, **style)
    ax.set_title(title)
    ax.set_xlabel("step")


def _angles_panel(ax: Any, name: str, drawable: Series, colour: str) -> None:
    positives = [("probe_angle_pos", "-", f"{name}: positive"), ("probe_dev_angle_pos", "--", f"{name}: dev positive")]
    negatives = [("probe_angle_neg", "-", f"{name}: negatives"), ("probe_angle_hard_neg", ":", f"{name}: hard negative"),
                 ("probe_dev_angle_neg", "--", f"{name}: dev negatives")]  # fmt: skip
    _plot_series(ax, drawable, positives, colour, "mean angle (degrees)", marker="o", markersize=3)
    _plot_series(ax, drawable, negatives, colour, "mean angle (degrees)", marker="^", markersize=3)


def _align_uniform_panel(ax: Any, name: str, drawable: Series, colour: str) -> None:
    keys = (("probe_alignment", "-"), ("probe_uniformity", "-."), ("probe_dev_alignment", "--"), ("probe_dev_uniformity", ":"))
    _plot_series(ax, drawable, [(k, style, f"{name} {k.removeprefix('probe_')}") for k, style in keys], colour, "alignment and uniformity")


def _plane_points(drawable: Series) -> tuple[str, list[tuple[float, float, float]]]:
    """``(prefix, [(uniformity, alignment, step)])`` of the steps with both, the dev probes preferred."""
    prefix = "probe_dev_" if "probe_dev_alignment" in drawable and "probe_dev_uniformity" in drawable else "probe_"
    uniformity = dict(zip(*drawable.get(f"{prefix}uniformity", ([], [])), strict=True))
    alignment = dict(zip(*drawable.get(f"{prefix}alignment", ([], [])), strict=True))
    return prefix, [(uniformity[step], alignment[step], step) for step in uniformity if step in alignment]


def _plane_panel(ax: Any, name: str, drawable: Series, colour: str) -> None:
    """Alignment vs uniformity, the dev probes preferred (as in the papers)."""
    prefix, points = _plane_points(drawable)
    if points:
        xs, ys, steps = zip(*points, strict=True)
        ax.plot(xs, ys, color=colour, linewidth=0.8, alpha=0.6)
        ax.scatter(xs, ys, c=steps, cmap="viridis", s=18, edgecolors=colour, label=f"{name} ({prefix.rstrip('_')})")
    ax.set_title("alignment vs uniformity (lower left is better)")
    ax.set_xlabel("uniformity")
    ax.set_ylabel("alignment")


def _saturation_panel(ax: Any, name: str, drawable: Series, colour: str) -> None:
    keys = (("probe_saturated", "-", "share |cos| > 0.99"), ("probe_anisotropy", "--", "anisotropy"))
    _plot_series(ax, drawable, [(k, style, f"{name} {label}") for k, style, label in keys], colour, "saturation", marker="o", markersize=3)


def _gradients_panel(ax: Any, name: str, drawable: Series, colour: str) -> None:
    keys = sorted(k for k in drawable if k.startswith("probe_grad_"))
    lines = [(k, _LINE_STYLES[i % len(_LINE_STYLES)], f"{name} {k.removeprefix('probe_grad_')}") for i, k in enumerate(keys)]
    _plot_series(ax, drawable, lines, colour, "gradient norm per term (w.r.t. the embeddings)", marker="o", markersize=3)
    ax.set_yscale("log")  # every value drawn is > 0 (drawable_series)


_PANELS = {
    "loss": _loss_panel,
    "angles": _angles_panel,
    "align_uniform": _align_uniform_panel,
    "plane": _plane_panel,
    "saturation": _saturation_panel,
    "gradients": _gradients_panel,
}
"""The panels plot_dynamics draws, by name: ``draw(ax, run name, its drawable series, colour)``."""
