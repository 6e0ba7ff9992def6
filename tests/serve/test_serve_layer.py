"""The per-request ``layer`` of POST /v1/embeddings: a model trained with ESE embeds from that layer
(equal to ``Embedder.from_pretrained(layer=...)``), mixed layers never share a forward pass, and a
model without ESE, an exported graph or a layer out of range get a 400 with the server still up."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import helpers
from serving import Gate, error_of, sentences, start_server, wait_for

TEXTS = sentences(10, seed=21)
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(scope="module")
def ese_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-layer tiny BERT saved as a model trained with ESE (early_exit: true)."""
    from anglekit.model.embedder import Embedder

    root = tmp_path_factory.mktemp("ese-model")
    model = Embedder.from_pretrained(helpers.build_tiny_bert(root / "base", layers=4), device="cpu")
    model.config.early_exit = True
    return model.save_pretrained(root / "ese")


def load(folder: Path, **options: Any) -> Any:
    from anglekit.serve.backends import load_backend

    return load_backend("torch", str(folder), device="cpu", **options)


def reference(folder: Path, layer: int | None) -> np.ndarray:
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(folder, layer=layer, device="cpu").encode(TEXTS)


def post(url: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/embeddings", json={"input": TEXTS, **body}, timeout=60)


def test_layer_embeds_from_that_layer_and_mixed_layers_run_apart(ese_dir: Path) -> None:
    gate = Gate(load(ese_dir))
    layers_seen: list[int | None] = []
    inner_embed = gate.inner.embed

    def embed(ids: Any, layer: int | None = None) -> Any:
        layers_seen.append(layer)
        return inner_embed(ids, layer=layer)

    gate.inner.embed = embed
    expected = {layer: reference(ese_dir, layer) for layer in (None, 1, 2, 3)}
    with start_server(lambda: gate) as running:
        assert httpx.get(f"{running.url}/v1/models").json()["data"][0]["layers"] == 4
        layers_seen.clear()  # the warm-up's passes
        gate.hold()  # the requests pile up and share one window
        answers: dict[Any, Any] = {}

        def ask(layer: int | None) -> None:
            body = {} if layer is None else {"layer": layer}
            answers[layer] = post(running.url, **body)

        threads = [threading.Thread(target=ask, args=(layer,)) for layer in (None, 1, 2, 3)]
        for t in threads:
            t.start()
        wait_for(lambda: running.state.batcher is not None and running.state.batcher.queued == 4 * len(TEXTS), what="4 requests queued")
        gate.release()
        for t in threads:
            t.join(60)
    for layer, response in answers.items():
        assert response.status_code == 200, response.text
        np.testing.assert_allclose(np.array([d["embedding"] for d in response.json()["data"]]), expected[layer], **TOL)
    assert sorted(layers_seen, key=lambda x: x or 0) == [None, 1, 2, 3]  # one forward pass per layer, none mixed


def test_the_last_layer_equals_the_model_output(ese_dir: Path) -> None:
    with start_server(lambda: load(ese_dir)) as running:
        full = np.array([d["embedding"] for d in post(running.url).json()["data"]])
        last = np.array([d["embedding"] for d in post(running.url, layer=4).json()["data"]])
    np.testing.assert_allclose(last, full, **TOL)


@pytest.mark.parametrize(("layer", "match"), [(0, "between 1 and the model's 4 layers"), (5, "between 1 and the model's 4 layers"),
                                              (-1, "between 1"), ("2", "must be an integer"), (True, "must be an integer"),
                                              (2.0, "must be an integer")])  # fmt: skip
def test_a_bad_layer_is_a_400_and_the_server_stays_up(ese_dir: Path, layer: Any, match: str) -> None:
    with start_server(lambda: load(ese_dir)) as running:
        response = post(running.url, layer=layer)
        assert response.status_code == 400 and error_of(response)["param"] == "layer"
        assert match in error_of(response)["message"]
        assert post(running.url, layer=2).status_code == 200


def test_a_model_without_ese_refuses_layer(server: Any) -> None:
    response = post(server.url, layer=1)
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == "layer" and "not trained with ESE" in error["message"]


def test_an_exported_graph_refuses_layer(ese_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from anglekit.export import export

    folder = export(str(ese_dir), "onnx", tmp_path / "onnx", device="cpu").folder
    with start_server(lambda: load(folder)) as running:
        response = post(running.url, layer=2)
        assert response.status_code == 400 and "exported graph runs every layer" in error_of(response)["message"]
