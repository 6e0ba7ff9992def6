"""Inference precision is a setting of every backend, recorded and read back: torch (the weights'
dtype), onnxruntime (fp32 only; the provider asked for is the one that runs, CUDA without TF32)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.model.embedder import Embedder

from helpers import row_cosines

TEXTS = ["a man is playing the guitar .", "dog", "the old woman walks her small white dog in the park every morning ."]


def test_torch_precision_is_the_weights_dtype(tiny_bert_dir: Path) -> None:
    import torch

    fp32 = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    assert fp32.precision == "fp32"
    bf16 = Embedder.from_pretrained(tiny_bert_dir, device="cpu", precision="bf16")
    assert bf16.precision == "bf16" and all(p.dtype == torch.bfloat16 for p in bf16.backbone.parameters() if p.is_floating_point())
    reference, vectors = fp32.encode(TEXTS), bf16.encode(TEXTS)
    assert vectors.dtype == np.float32 and np.abs(vectors - reference).max() > 0
    assert row_cosines(vectors, reference).min() >= 0.99
    assert Embedder.from_pretrained(tiny_bert_dir, device="cpu", precision="fp32", dtype="fp32").precision == "fp32"
    assert Embedder.from_pretrained(tiny_bert_dir, device="cpu", precision="bf16", dtype="bfloat16").precision == "bf16"
    assert Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="fp16").precision == "fp16"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"precision": "fp16"}, "precision must be one of fp32, bf16"),
    ({"precision": "BF16"}, "precision must be one of fp32, bf16"),
    ({"precision": 16}, "precision must be one of fp32, bf16"),
    ({"precision": "bf16", "dtype": "fp32"}, "precision 'bf16' and dtype 'fp32' disagree"),
    ({"precision": "fp32", "dtype": "fp16"}, "precision 'fp32' and dtype 'fp16' disagree"),
])  # fmt: skip
def test_bad_torch_precisions_are_clear_errors(tiny_bert_dir: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Embedder.from_pretrained(tiny_bert_dir, device="cpu", **kwargs)


def test_onnxruntime_runs_fp32_only(tiny_bert_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from anglekit.model.onnx import FP32_TOLERANCE, OnnxEmbedder, export_onnx

    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    folder = export_onnx(model, tmp_path / "onnx")
    loaded = Embedder.from_pretrained(folder, precision="fp32")
    assert isinstance(loaded, OnnxEmbedder) and loaded.precision == "fp32"
    assert loaded.session.get_providers()[0] == "CPUExecutionProvider"
    np.testing.assert_allclose(loaded.encode(TEXTS), model.encode(TEXTS), atol=FP32_TOLERANCE)
    with pytest.raises(ConfigError, match="onnxruntime runs the exported graph in fp32"):
        Embedder.from_pretrained(folder, precision="bf16")
    with pytest.raises(ConfigError, match="onnxruntime runs the exported graph in fp32"):
        OnnxEmbedder.from_pretrained(folder, precision="bf16")


class _Session:
    def __init__(self, providers: list[str]) -> None:
        self.providers = providers

    def get_providers(self) -> list[str]:
        return self.providers


def test_a_provider_onnxruntime_fell_back_from_is_an_error() -> None:
    """onnxruntime starts the CPU provider with only a warning when CUDA fails to load: refused."""
    from anglekit.model.onnx import check_providers

    cuda = [("CUDAExecutionProvider", {"device_id": 0, "use_tf32": 0}), "CPUExecutionProvider"]
    check_providers(_Session(["CUDAExecutionProvider", "CPUExecutionProvider"]), cuda, "cuda")
    check_providers(_Session(["CPUExecutionProvider"]), ["CPUExecutionProvider"], None)
    with pytest.raises(ConfigError, match="onnxruntime did not start CUDAExecutionProvider \\(it runs CPUExecutionProvider\\)"):
        check_providers(_Session(["CPUExecutionProvider"]), cuda, "cuda")
    with pytest.raises(ConfigError, match="it runs nothing"):
        check_providers(_Session([]), ["CPUExecutionProvider"], None)


def test_cuda_sessions_ask_for_fp32_without_tf32(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the CUDA provider is asked for (onnxruntime's CUDA provider uses TF32 unless told not to);
    the session itself is faked: this machine need not have a GPU."""
    ort = pytest.importorskip("onnxruntime")
    from anglekit.model.onnx import OnnxEmbedder

    asked: dict[str, Any] = {}

    def session(path: str, options: Any, providers: list[Any]) -> _Session:
        asked["providers"] = providers
        return _Session(["CUDAExecutionProvider", "CPUExecutionProvider"])

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(ort, "InferenceSession", session)
    OnnxEmbedder.session_for(tmp_path / "model.onnx", threads=1, device="cuda:1")
    assert asked["providers"] == [("CUDAExecutionProvider", {"device_id": 1, "use_tf32": 0}), "CPUExecutionProvider"]
