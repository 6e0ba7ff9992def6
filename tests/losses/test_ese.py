"""ESE / Espresso: each part against an independent loop (PCA target, compression term, layer
weights, the whole L_ese), and its config errors."""

from __future__ import annotations

import math

import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.losses import AnglEObjective, ESEConfig, ESEObjective, ObjectiveConfig, compression_loss, pca_targets
from anglekit.losses.ese import layer_weight

K = 4


def _stacks(layers: int = 3, batch: int = 6, dim: int = 8) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(layers, batch, dim, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.randn(layers, batch, dim, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    return x, y, labels, torch.arange(batch), torch.arange(batch, 2 * batch)


def _pca_loop(h: torch.Tensor, k: int) -> torch.Tensor:
    n, d = h.shape
    gram = torch.zeros(d, d, dtype=h.dtype)
    for a in range(d):
        for b in range(d):
            gram[a, b] = sum(h[i, a] * h[i, b] for i in range(n)) / math.sqrt(d)
    affinity = torch.stack([torch.exp(row) / torch.exp(row).sum() for row in gram])
    u, s, _ = torch.linalg.svd(affinity)
    for j in range(k):  # the sign rule: each singular vector's largest entry positive
        big = max(range(d), key=lambda a: abs(float(u[a, j])))
        if u[big, j] < 0:
            u[:, j] = -u[:, j]
    return torch.stack([torch.stack([sum(h[i, a] * u[a, j] * s[j] for a in range(d)) for j in range(k)]) for i in range(n)])


def _compression_loop(h: torch.Tensor, k: int, t: float) -> torch.Tensor:
    target = _pca_loop(h.detach(), k)
    n = h.shape[0]
    mse = sum((h[i, j] - target[i, j]) ** 2 for i in range(n) for j in range(k)) / (n * k)
    kl = 0.0
    for i in range(n):
        p = torch.softmax(target[i] / t, dim=0)
        log_q = torch.log_softmax(h[i, :k] / t, dim=0)
        kl = kl + sum(p[j] * (torch.log(p[j]) - log_q[j]) for j in range(k))
    return mse + t * kl / n


def test_pca_targets_match_a_loop_and_carry_no_gradient() -> None:
    h = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    out = pca_targets(h, 3)
    assert out.shape == (5, 3) and not out.requires_grad
    torch.testing.assert_close(out, _pca_loop(h.detach(), 3))


@pytest.mark.parametrize("t", [1.0, 0.5])
def test_compression_term_matches_a_loop(t: float) -> None:
    h = torch.randn(5, 6, dtype=torch.float64)
    torch.testing.assert_close(compression_loss(h, 3, t), _compression_loop(h, 3, t))


def test_layer_weights() -> None:
    assert layer_weight(1) == 1.0
    assert layer_weight(3) == pytest.approx(1 / (1 + math.log(3)))
    with pytest.raises(ValueError):
        layer_weight(0)


@pytest.mark.parametrize("layers", [1, 3])
def test_ese_loss_equals_the_sum_of_its_parts(layers: int) -> None:
    inner = AnglEObjective(ObjectiveConfig(positive_threshold=1.0))
    ese = ESEObjective(inner, ESEConfig(compression_size=K, kl_temperature=0.7, target="angle-emb"))
    x, y, labels, ids1, ids2 = _stacks(layers)
    out = ese(x, y, labels, ids1, ids2)

    top = layers - 1
    expected = inner(x[top], y[top], labels, ids1, ids2).loss
    expected = expected + inner(x[top][:, :K], y[top][:, :K], labels, ids1, ids2).loss
    expected = expected + _compression_loop(torch.cat([x[top], y[top]]), K, 0.7)
    shallow = torch.zeros((), dtype=torch.float64)
    for layer in range(1, layers):  # transformer layers 1..n-1 are rows 0..n-2
        row = layer - 1
        w = 1.0 / (1.0 + math.log(layer))
        term = inner(x[row][:, :K], y[row][:, :K], labels, ids1, ids2).loss + _compression_loop(torch.cat([x[row], y[row]]), K, 0.7)
        shallow = shallow + w * term
    if layers > 1:
        expected = expected + shallow / (layers - 1)
        torch.testing.assert_close(out.components["ese_layers"], shallow / (layers - 1))
    else:
        assert "ese_layers" not in out.components
    torch.testing.assert_close(out.loss, expected)
    assert {"cosine", "ibn", "angle", "ese_compressed", "ese_compression"} <= set(out.components)
    (gx,) = torch.autograd.grad(out.loss, x, retain_graph=True)
    (ex,) = torch.autograd.grad(expected, x)
    torch.testing.assert_close(gx, ex)


def test_unit_target_compresses_the_normalised_rows_and_ignores_scale() -> None:
    """``target="unit"``: C on h / ||h|| (against the loop on normalised rows); the loss and its gradient
    direction do not change when the activations are scaled up, where angle-emb's C grows with them."""
    inner = AnglEObjective(ObjectiveConfig(positive_threshold=1.0))
    x, y, labels, ids1, ids2 = _stacks(layers=2)
    unit = ESEObjective(inner, ESEConfig(compression_size=K, kl_temperature=0.7, target="unit"))
    out = unit(x, y, labels, ids1, ids2)
    normalised = torch.nn.functional.normalize(torch.cat([x[1], y[1]]), dim=-1)
    torch.testing.assert_close(out.components["ese_compression"], _compression_loop(normalised, K, 0.7))
    big_x, big_y = (50.0 * x).detach().requires_grad_(), (50.0 * y).detach().requires_grad_()
    torch.testing.assert_close(unit(big_x, big_y, labels, ids1, ids2).components["ese_compression"], out.components["ese_compression"])
    # a decoder's massive activations: two coordinates far larger than the rest, in every row
    plain = ESEObjective(inner, ESEConfig(compression_size=K, kl_temperature=0.7, target="angle-emb"))
    shift = torch.zeros(8, dtype=torch.float64)
    shift[1], shift[5] = 50.0, -50.0
    massive_x, massive_y = (x + shift).detach(), (y + shift).detach()
    calm, loud = (plain(a, b, labels, ids1, ids2).components["ese_compression"] for a, b in ((x, y), (massive_x, massive_y)))
    assert loud > 100 * calm  # angle-emb's C grows with the activations' square
    assert unit(massive_x, massive_y, labels, ids1, ids2).components["ese_compression"] < 1.0
    assert "target=unit" in repr(unit) and ESEConfig().target == "unit"


def test_ese_config_errors() -> None:
    with pytest.raises(ConfigError, match="ese_compression_size"):
        ESEConfig(compression_size=0)
    with pytest.raises(ConfigError, match="ese_kl_temperature"):
        ESEConfig(kl_temperature=0.0)
    with pytest.raises(ConfigError, match="ese_target must be one of angle-emb, unit, got 'pca'"):
        ESEConfig(target="pca")
    x, y, labels, ids1, ids2 = _stacks(dim=8)
    with pytest.raises(ValueError, match="larger than the embedding dimension"):
        ESEObjective(AnglEObjective(ObjectiveConfig(positive_threshold=1.0)), ESEConfig(compression_size=16))(x, y, labels, ids1, ids2)
    with pytest.raises(ValueError, match="layer stacks"):
        ESEObjective(AnglEObjective(ObjectiveConfig(positive_threshold=1.0)))(x[0], y[0], labels, ids1, ids2)
