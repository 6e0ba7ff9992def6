"""The objective terms' gradient norms logged as probes (issue 30): against a separate
computation per term, and harmless to the step's own backward."""

from __future__ import annotations

import torch

from anglekit.losses.combined import AnglEObjective, ObjectiveConfig
from anglekit.training.probes import ProbeAccumulator, gradient_norms


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    vectors = torch.randn(8, 16, generator=g, dtype=torch.float64)
    labels = torch.tensor([5.0, 1.0, 3.0, 0.5], dtype=torch.float64)
    ids = torch.arange(8)
    return vectors, labels, ids


def _objective() -> AnglEObjective:
    return AnglEObjective(ObjectiveConfig(cosine_weight=1.0, ibn_weight=1.0, angle_weight=1.0, positive_threshold=2.5))


def test_each_term_norm_equals_its_own_backward() -> None:
    vectors, labels, ids = _inputs()
    leaf = vectors.clone().requires_grad_(True)
    out = _objective()(leaf[:4], leaf[4:], labels, ids[:4], ids[4:])
    norms = gradient_norms(out.components, leaf)
    assert set(norms) == {"grad_cosine", "grad_ibn", "grad_angle"}
    for name in ("cosine", "ibn", "angle"):
        alone = vectors.clone().requires_grad_(True)
        term = _objective()(alone[:4], alone[4:], labels, ids[:4], ids[4:]).components[name]
        term.backward()
        assert abs(norms[f"grad_{name}"] - float(alone.grad.norm())) < 1e-10
    # the graph survives for the step's own backward, whose gradient is unchanged by the probe
    out.loss.backward()
    plain = vectors.clone().requires_grad_(True)
    _objective()(plain[:4], plain[4:], labels, ids[:4], ids[4:]).loss.backward()
    assert torch.allclose(leaf.grad, plain.grad, atol=1e-12)


def test_saturated_pairs_starve_the_cosine_term_not_the_angle_term() -> None:
    """AnglE section 3: near |cos| = 1 the cosine's gradient vanishes. Pairs at cos 0.9999 against
    pairs at cos 0.5, same labels: the cosine term's gradient shrinks by orders of magnitude."""
    torch.manual_seed(0)
    base = torch.nn.functional.normalize(torch.randn(4, 16, dtype=torch.float64), dim=-1)
    noise = torch.nn.functional.normalize(torch.randn(4, 16, dtype=torch.float64), dim=-1)
    labels = torch.tensor([5.0, 1.0, 3.0, 0.5], dtype=torch.float64)
    ids = torch.arange(8)
    cfg = ObjectiveConfig(cosine_weight=1.0, ibn_weight=0.0, angle_weight=1.0)

    def norms(eps: float) -> dict[str, float]:
        scales = torch.linspace(1.0, 4.0, 4, dtype=torch.float64)[:, None]
        x = base.clone().requires_grad_(True)
        y = (base + eps * noise * scales).detach()
        leaf = torch.cat([x, y]).detach().requires_grad_(True)
        out = AnglEObjective(cfg)(leaf[:4], leaf[4:], labels, ids[:4], ids[4:])
        return gradient_norms(out.components, leaf)

    near, far = norms(1e-3), norms(1.0)
    assert near["grad_cosine"] < 1e-2 * far["grad_cosine"]
    assert near["grad_angle"] > 10 * near["grad_cosine"]


def test_no_components_or_no_grad_gives_nothing_and_accumulates() -> None:
    vectors, labels, ids = _inputs()
    assert gradient_norms({}, vectors.requires_grad_(True)) == {}
    assert gradient_norms({"cosine": torch.tensor(1.0)}, vectors) == {}
    acc = ProbeAccumulator()
    leaf = vectors.clone().requires_grad_(True)
    out = _objective()(leaf[:4], leaf[4:], labels, ids[:4], ids[4:])
    acc.add(gradient_norms(out.components, leaf))
    acc.add(gradient_norms(out.components, leaf))
    assert acc.flush().keys() == {"grad_cosine", "grad_ibn", "grad_angle"}


def test_plot_dynamics_draws_the_saturation_and_gradient_panels(tmp_path) -> None:
    import json

    from anglekit.training.dynamics import panels_for, plot_dynamics

    records = [
        {"step": step, "loss": 1.0 / step, "probe_saturated": 0.5 / step, "probe_anisotropy": 0.9 - 0.01 * step,
         "probe_grad_cosine": 0.1 * step, "probe_grad_angle": 1.0, "probe_grad_ibn": 0.5}
        for step in (10, 20, 30)
    ]  # fmt: skip
    assert panels_for([records]) == ["loss", "saturation", "gradients"]
    assert panels_for([[{"step": 1, "loss": 1.0}]]) == ["loss"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    figure = plot_dynamics([run], tmp_path / "dyn.png", labels=["smollm2"])
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
