"""``anglekit serve --backend onnx``: an exported folder served by onnxruntime answers like the
OnnxEmbedder (and so like the torch model), through the real openai SDK."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
openai = pytest.importorskip("openai")

from anglekit.errors import ConfigError  # noqa: E402

from serving import sentences, start_server  # noqa: E402


def test_an_onnx_folder_serves_its_own_vectors(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder
    from anglekit.model.onnx import OnnxEmbedder, export_onnx
    from anglekit.serve.backends import load_backend

    torch_model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    folder = export_onnx(torch_model, tmp_path / "onnx")
    reference = OnnxEmbedder.from_pretrained(folder)
    texts = sentences(40, seed=3)
    for backend in ("onnx", "torch"):  # torch on an ONNX-only folder: the folder decides
        with start_server(lambda backend=backend: load_backend(backend, str(folder), device="cpu")) as running:
            client = openai.OpenAI(base_url=running.url + "/v1", api_key="none")
            got = client.embeddings.create(model="tiny", input=texts)
            vectors = np.array([d.embedding for d in got.data], dtype=np.float32)
            np.testing.assert_allclose(vectors, reference.encode(texts, normalize=torch_model.config.normalize), atol=1e-5)
            np.testing.assert_allclose(vectors, torch_model.encode(texts), atol=1e-4)
            packed = client.embeddings.create(model="tiny", input=texts[:3], encoding_format="base64")
            decoded = np.frombuffer(base64.b64decode(packed.data[0].embedding), dtype="<f4")
            np.testing.assert_allclose(decoded, vectors[0], atol=1e-6)
    with pytest.raises(ConfigError, match="fixed when the ONNX model was exported"):
        load_backend("onnx", str(folder), device="cpu", pooling="cls")
    with pytest.raises(ConfigError, match="not an ONNX model folder"):
        load_backend("onnx", str(tiny_bert_dir), device="cpu")
