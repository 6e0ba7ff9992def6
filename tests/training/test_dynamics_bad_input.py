"""plot-dynamics on logs that would draw a misleading figure (issue #40): all-NaN series, values
outside a probe's range, zeros on the log axis, probes the run asked for but did not log, and
nothing drawable at all (an error that writes no figure)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

from anglekit.errors import DataError
from anglekit.training.dynamics import drawable_series, panels_for, plot_dynamics, valid_range

import helpers

PNG = b"\x89PNG\r\n\x1a\n"


def _run(folder: Path, records: list[dict[str, Any]], config: Any = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")  # NaN written as NaN
    if config is not None:
        (folder / "train_config.json").write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    return folder


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """What the saved figure holds, read from its axes when it is saved: panel title -> line label -> points."""
    from matplotlib.figure import Figure

    seen: dict[str, dict[str, list[tuple[float, float]]]] = {}
    save = Figure.savefig

    def spy(fig: Figure, *args: Any, **kwargs: Any) -> Any:
        for ax in fig.axes:
            if ax.get_visible():
                panel = seen.setdefault(ax.get_title(), {})
                for line in ax.get_lines():
                    panel[str(line.get_label())] = list(zip(map(float, line.get_xdata()), map(float, line.get_ydata()), strict=False))
                panel["yscale"] = ax.get_yscale()  # type: ignore[assignment]
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return seen


def test_an_all_nan_series_is_left_out_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture, drawn: dict[str, Any]) -> None:
    records = [{"step": s, "loss": 1.0 / s, "probe_alignment": 0.1 * s, "probe_uniformity": math.nan} for s in (1, 2, 3)]
    records[1]["probe_uniformity"] = None
    run = _run(tmp_path / "simace", records)
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        figure = plot_dynamics([run], tmp_path / "fig.png")
    assert figure.read_bytes()[:8] == PNG
    assert "simace: 'probe_uniformity' has no finite value (NaN, infinite or null in all 3 records holding it); not drawn" in caplog.text
    assert "probe_alignment" not in caplog.text and "loss" not in caplog.text
    lines = drawn["alignment and uniformity"]
    assert lines["simace alignment"] == [(1.0, 0.1), (2.0, 0.2), (3.0, pytest.approx(0.3))] and "simace uniformity" not in lines
    # No step has both: the alignment-uniformity plane has nothing to show and is not drawn.
    assert not any(title.startswith("alignment vs uniformity") for title in drawn)
    assert panels_for([records]) == ["loss", "align_uniform"]


def test_values_outside_a_probes_range_are_named_and_not_drawn(tmp_path: Path, caplog: pytest.LogCaptureFixture, drawn: dict[str, Any]) -> None:
    records = [
        {"step": 10, "loss": 0.5, "probe_saturated": 0.2, "probe_anisotropy": 0.4, "probe_angle_pos": 30.0, "probe_angle_neg": 85.0},
        {"step": 20, "loss": 0.4, "probe_saturated": 1.7, "probe_anisotropy": -1.5, "probe_angle_pos": -5.0, "probe_angle_neg": 190.0},
        {"step": 30, "loss": 0.3, "probe_saturated": 0.1, "probe_anisotropy": 0.3, "probe_angle_pos": 25.0, "probe_angle_neg": 200.0},
    ]
    run = _run(tmp_path / "r", records)
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        plot_dynamics([run], tmp_path / "fig.png", labels=["x"])
    text = caplog.text
    assert "x: 1 of 3 values of 'probe_saturated' are outside its range [0, 1] (a share of pairs), e.g. 1.7 at step 20; not drawn" in text
    assert "'probe_anisotropy' are outside its range [-1, 1] (a mean cosine), e.g. -1.5 at step 20" in text
    assert "1 of 3 values of 'probe_angle_pos' are outside its range [0, 180] (an angle in degrees), e.g. -5 at step 20" in text
    assert "2 of 3 values of 'probe_angle_neg' are outside its range [0, 180] (an angle in degrees), e.g. 190 at step 20" in text
    assert drawn["saturation"]["x share |cos| > 0.99"] == [(10.0, 0.2), (30.0, 0.1)]
    assert drawn["mean angle (degrees)"]["x: positive"] == [(10.0, 30.0), (30.0, 25.0)]
    assert drawn["mean angle (degrees)"]["x: negatives"] == [(10.0, 85.0)]
    assert [p for p in drawn["loss and components"]["x loss"]] == [(10.0, 0.5), (20.0, 0.4), (30.0, 0.3)]  # a loss has no range


def test_zero_and_negative_gradient_norms_on_the_log_axis(tmp_path: Path, caplog: pytest.LogCaptureFixture, drawn: dict[str, Any]) -> None:
    records = [{"step": s, "probe_grad_angle": g, "probe_grad_ibn": h} for s, g, h in ((1, 0.0, 0.0), (2, 0.5, 0.0), (3, 0.25, -1.0))]
    run = _run(tmp_path / "r", records)
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        plot_dynamics([run], tmp_path / "fig.png", labels=["x"])
    assert "x: 1 of 3 values of 'probe_grad_angle' are <= 0 and have no place on the log axis; not drawn" in caplog.text
    assert "x: 1 of 3 values of 'probe_grad_ibn' are outside its range >= 0 (a gradient norm), e.g. -1 at step 3; not drawn" in caplog.text
    assert "2 of 2 values of 'probe_grad_ibn' are <= 0 and have no place on the log axis; not drawn (none is left" in caplog.text
    panel = drawn["gradient norm per term (w.r.t. the embeddings)"]
    assert panel["x angle"] == [(2.0, 0.5), (3.0, 0.25)] and "x ibn" not in panel and panel["yscale"] == "log"
    assert list(drawn) == ["gradient norm per term (w.r.t. the embeddings)"]  # no loss logged: no empty loss panel


def test_rounding_at_a_range_edge_is_drawn_silently(caplog: pytest.LogCaptureFixture) -> None:
    records = [{"step": 1, "probe_uniformity": 1e-16, "probe_saturated": 1.0, "probe_alignment": 0.0}]
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        kept = drawable_series(records, "r")
    assert kept == {"probe_uniformity": ([1.0], [1e-16]), "probe_saturated": ([1.0], [1.0]), "probe_alignment": ([1.0], [0.0])}
    assert caplog.text == ""
    assert valid_range("loss_cosine") is None and valid_range("probe_dev_angle_neg") == (0.0, 180.0, "an angle in degrees")


def test_probes_the_run_asked_for_but_did_not_log_are_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = _run(tmp_path / "r", [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.4}], {"train": {"probe_data": "stsb:dev", "probe_steps": 5}})
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        plot_dynamics([run], tmp_path / "fig.png", labels=["x"])
    config = run / "train_config.json"
    assert f"x: {config} asks for probes (probe_data 'stsb:dev') but the log holds no probe_dev_* value" in caplog.text
    assert f"x: {config} asks for probes (probe_steps 5) but the log holds no probe_* (batch) value" in caplog.text
    caplog.clear()
    logged = _run(
        tmp_path / "ok", [{"step": 1, "loss": 0.5, "probe_dev_alignment": 0.3, "probe_alignment": 0.2}], {"train": {"probe_data": "stsb:dev", "probe_steps": 5}}
    )
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        plot_dynamics([logged], tmp_path / "fig2.png")
    assert caplog.text == ""
    caplog.clear()
    broken = _run(tmp_path / "broken", [{"step": 1, "loss": 0.5}], "{not json")
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        assert plot_dynamics([broken], tmp_path / "fig3.png").read_bytes()[:8] == PNG
    assert "train_config.json cannot be read" in caplog.text and "probes it asked for are not checked" in caplog.text


def test_nothing_drawable_is_an_error_and_writes_no_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "r", [{"step": 1, "loss": math.nan, "probe_saturated": 3.0}, {"step": 2, "loss": None, "probe_grad_angle": 0.0}])
    figure = tmp_path / "fig.png"
    code, out, err = helpers.run_cli(["plot-dynamics", str(run), "--output", str(figure)], capsys)
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == 1 and len(lines) == 1, err  # the log holds nothing to draw: the data
    assert lines[0] == (
        f"anglekit plot-dynamics: error: {run / 'metrics.jsonl'}: nothing to draw: no loss or probe value is finite and in its range (see the warnings above)"
    )
    assert not figure.exists() and out == ""
    figure.write_bytes(b"an earlier figure")
    with pytest.raises(DataError, match="nothing to draw"):
        plot_dynamics([run], figure)
    assert figure.read_bytes() == b"an earlier figure" and sorted(p.name for p in tmp_path.iterdir()) == ["fig.png", "r"]


def test_a_run_with_nothing_drawable_beside_a_good_one(tmp_path: Path, caplog: pytest.LogCaptureFixture, drawn: dict[str, Any]) -> None:
    good = _run(tmp_path / "good", [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}])
    empty = _run(tmp_path / "empty", [{"step": 1, "loss": math.inf}])
    with caplog.at_level(logging.WARNING, logger="anglekit.training.dynamics"):
        figure = plot_dynamics([good, empty], tmp_path / "fig.png")
    assert figure.read_bytes()[:8] == PNG
    assert f"empty: nothing in {empty / 'metrics.jsonl'} can be drawn; the run is left out of the figure" in caplog.text
    assert drawn["loss and components"]["good loss"] == [(1.0, 0.5), (2.0, 0.25)] and "empty loss" not in drawn["loss and components"]


def test_every_loss_component_and_gradient_is_drawn_however_many(tmp_path: Path, drawn: dict[str, Any]) -> None:
    """Matryoshka logs each term per dimension: more series than line styles, every one drawn."""
    terms = [f"{term}@{dim}" for dim in (64, 32, 16) for term in ("cosine", "ibn", "angle")]
    records = [{"step": s, "loss": 3.0 / s, **{f"loss_{t}": 1.0 / s for t in terms}, **{f"probe_grad_{t}": 0.1 * s for t in terms}} for s in (1, 2)]
    plot_dynamics([_run(tmp_path / "r", records)], tmp_path / "fig.png", labels=["x"])
    losses = {label for label in drawn["loss and components"] if label != "yscale"}
    assert losses == {"x loss", *(f"x loss_{t}" for t in terms)}
    grads = {label for label in drawn["gradient norm per term (w.r.t. the embeddings)"] if label != "yscale"}
    assert grads == {f"x {t}" for t in terms}
