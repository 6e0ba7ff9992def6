"""Quantized encoding formats of POST /v1/embeddings (int8, uint8, binary, ubinary) through the real
openai SDK: codes of the normalised vectors, the calibration named in the response, the index's own
int8 codes and ranking reproduced by a client, bad combinations refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from anglekit.serve.quantized import UNIT_RANGE, Calibration, decode, describe, quantize

from serving import Running, error_of, sentences, start_server

openai = pytest.importorskip("openai")

DOCS = sentences(48, seed=11)
QUERIES = sentences(6, seed=12)


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def int8_index(reference: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from anglekit.index.store import VectorIndex

    folder = tmp_path_factory.mktemp("int8-index") / "docs"
    VectorIndex.build(reference, [f"d{i}" for i in range(len(DOCS))], DOCS, name=str(reference.source), quantize="int8").save(folder)
    return folder


@pytest.fixture(scope="module")
def calibrated(tiny_backend: Callable[..., Any], int8_index: Path) -> Any:
    with start_server(lambda: tiny_backend(), index=(f"docs={int8_index}",)) as running:
        assert running.state.status == "ready", running.state.error
        yield running


def raw(server: Running, **body: Any) -> httpx.Response:
    body.setdefault("model", "tiny")
    return httpx.post(f"{server.url}/v1/embeddings", json=body, timeout=60)


def test_sdk_gets_int8_codes_of_the_unit_vectors_with_the_unit_range(server: Running, reference: Any) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    response = client.embeddings.create(input=DOCS[:8], model="tiny", encoding_format="int8")  # type: ignore[arg-type]
    codes = np.array([d.embedding for d in response.data])  # the SDK's model holds them as floats of integer value
    assert np.array_equal(codes, np.rint(codes)) and codes.min() >= -127 and codes.max() <= 127
    quantization = response.model_extra["quantization"]
    assert quantization == {"encoding_format": "int8", "dimensions": reference.dim, "scale": pytest.approx(UNIT_RANGE),
                            "zero_point": 0, "calibration": "unit-range", "normalized": True}  # fmt: skip
    expected = np.rint(unit(reference.encode(DOCS[:8])) * 127)
    assert np.abs(codes - expected).max() <= 1 and (codes == expected).mean() > 0.98  # float noise at .5 boundaries only
    np.testing.assert_allclose(decode(codes, quantization), unit(reference.encode(DOCS[:8])), atol=UNIT_RANGE)


@pytest.mark.parametrize("fmt", ["uint8", "binary", "ubinary"])
def test_the_other_formats_follow_sentence_transformers_conventions(server: Running, reference: Any, fmt: str) -> None:
    body = raw(server, input=DOCS[:6], encoding_format=fmt).json()
    codes = np.array([d["embedding"] for d in body["data"]])
    vectors = unit(reference.encode(DOCS[:6]))
    quantization = body["quantization"]
    if fmt == "uint8":
        assert codes.min() >= 0 and codes.max() <= 255 and quantization["zero_point"] == 128
        np.testing.assert_allclose(decode(codes, quantization), vectors, atol=UNIT_RANGE)
        return
    bits = np.packbits(vectors > 0, axis=1)
    assert codes.shape == (6, (reference.dim + 7) // 8)
    assert np.array_equal(codes, bits.astype(np.int16) - 128 if fmt == "binary" else bits)
    assert np.array_equal(decode(codes, quantization), np.where(vectors > 0, 1.0, -1.0))


def test_an_int8_index_calibrates_and_a_client_ranks_like_the_index(calibrated: Running, int8_index: Path, reference: Any) -> None:
    from anglekit.index.quantize import block_scorer, top_k
    from anglekit.index.store import VectorIndex

    index = VectorIndex.load(int8_index)
    body = raw(calibrated, input=DOCS, encoding_format="int8").json()
    quantization = body["quantization"]
    assert quantization["calibration"] == "index:docs" and quantization["scale"] == pytest.approx(index.int8_scale, rel=1e-7)
    codes = np.array([d["embedding"] for d in body["data"]], dtype=np.int8)
    stored = np.asarray(index.codes)
    assert np.abs(codes.astype(int) - stored).max() <= 1 and (codes == stored).mean() > 0.98
    # A client's search over the decoded codes ranks like the index's own scan of its codes.
    queries = np.array([d["embedding"] for d in raw(calibrated, input=QUERIES).json()["data"]], dtype=np.float32)
    queries = unit(queries)
    client_rank = np.argsort(-(queries @ decode(codes, quantization).T), axis=1, kind="stable")[:, :5]
    _, index_rank = top_k(queries, len(DOCS), 5, block_scorer("int8", stored, index.dim, index.int8_scale))
    assert (client_rank == index_rank).mean() > 0.95
    # naming the index does the same; cutting dimensions falls back to the unit range
    assert raw(calibrated, input=DOCS[:2], encoding_format="uint8", index="docs").json()["quantization"]["calibration"] == "index:docs"
    assert raw(calibrated, input=DOCS[:2], encoding_format="int8", dimensions=16).json()["quantization"]["calibration"] == "unit-range"


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"encoding_format": "int4"}, 400, "encoding_format"),
        ({"encoding_format": 8}, 400, "encoding_format"),
        ({"encoding_format": "float", "index": "docs"}, 400, "index"),  # a calibration applies to int8/uint8 only
        ({"encoding_format": "binary", "index": "docs"}, 400, "index"),
        ({"encoding_format": "int8", "index": "nope"}, 404, "index"),
        ({"encoding_format": "int8", "index": 1}, 400, "index"),
        ({"encoding_format": "int8", "index": "docs", "dimensions": 8}, 400, "index"),
    ],
)
def test_bad_quantized_requests_are_refused(calibrated: Running, body: dict[str, Any], status: int, param: str) -> None:
    response = raw(calibrated, input=["a dog"], **body)
    assert response.status_code == status, response.text
    assert error_of(response)["param"] == param
    assert raw(calibrated, input=["still up"], encoding_format="int8").status_code == 200


def test_an_index_that_is_not_int8_cannot_calibrate(tiny_backend: Callable[..., Any], reference: Any, tmp_path: Path) -> None:
    from anglekit.index.store import VectorIndex

    VectorIndex.build(reference, ["a", "b"], ["one text", "another"], name=str(reference.source), quantize="binary").save(tmp_path / "b")
    with start_server(lambda: tiny_backend(), index=(f"bits={tmp_path / 'b'}",)) as running:
        response = raw(running, input=["a dog"], encoding_format="int8", index="bits")
        assert response.status_code == 400 and "not int8-quantized" in error_of(response)["message"]
        assert raw(running, input=["a dog"], encoding_format="int8").json()["quantization"]["calibration"] == "unit-range"


def test_quantize_and_decode_round_trip() -> None:
    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(20, 37)).astype(np.float32))
    calibration = Calibration(float(np.abs(vectors).max()) / 127, "index:x")
    for fmt in ("int8", "uint8"):
        codes = quantize(vectors, fmt, calibration)
        assert codes.dtype == (np.int8 if fmt == "int8" else np.uint8)
        np.testing.assert_allclose(decode(codes, describe(fmt, calibration, 37)), vectors, atol=calibration.scale / 2 + 1e-7)
    for fmt in ("binary", "ubinary"):
        codes = quantize(vectors, fmt, calibration)
        assert codes.shape == (20, 5)
        assert np.array_equal(decode(codes, describe(fmt, calibration, 37)), np.where(vectors > 0, 1.0, -1.0))
    with pytest.raises(ValueError, match="not a quantized encoding format"):
        quantize(vectors, "float", calibration)
