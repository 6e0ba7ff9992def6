"""The inference backend registry: a backend registered from this file alone (a marker file in its
folders, a numpy function over the torch Embedder's vectors) is loaded by ``Embedder.from_pretrained``
(named, or found by its marker), offered by ``--backend`` and run by ``anglekit encode`` and the
server; unknown names and folders several backends claim are typed errors. The model flags of
every command come from :class:`LoadSettings`, with one help text each."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import AmbiguousBackendError, ConfigError, UnknownBackendError
from anglekit.model.backends import (
    DEFAULT_BACKEND,
    InferenceBackend,
    backend_names,
    detect_backend,
    get_backend,
    register_backend,
    resolve_backend,
    unregister_backend,
)
from anglekit.model.embedder import Embedder
from anglekit.model.encoding import EncodeAPI
from anglekit.model.load_settings import LoadSettings

import helpers

TEXTS = ["a man is playing the guitar .", "dog", "two kids ride bikes in the park every morning"]
MARKER = "scaled_backend.json"
"""The file that makes a folder the new backend's: ``{"model": TORCH_FOLDER, "scale": FACTOR}``."""


class ScaledEmbedder(EncodeAPI):
    """The new backend's model: a torch Embedder's pooled vectors times a factor (a numpy function)."""

    backend = "scaled"

    def __init__(self, inner: Embedder, scale: float, source: str) -> None:
        self.inner, self.scale, self.source = inner, scale, source
        self.config = inner.config
        self.tokenizer = inner.tokenizer

    @property
    def dim(self) -> int:
        return self.inner.dim

    def _encoding(self) -> Any:
        return self.inner._encoding()

    def tokenize_unpadded(self, texts: Sequence[str], role: Any = None) -> list[list[int]]:
        return self.inner.tokenize_unpadded(texts, role)

    def pad(self, sequences: Sequence[Sequence[int]], device: Any = None) -> Any:
        return self.inner.pad(sequences, device)

    def embed_padded(self, batch: Any, normalize: bool) -> np.ndarray:
        vectors = self.inner.embed_padded(batch, normalize=False) * np.float32(self.scale)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True) if normalize else vectors

    def fingerprint(self) -> str:
        return f"scaled-{self.scale}-{self.inner.fingerprint()}"


def load_scaled(source: Any, settings: LoadSettings, *, threads: int | None = None) -> ScaledEmbedder:
    marker = json.loads((Path(source) / MARKER).read_text())
    inner = Embedder.from_pretrained(marker["model"], LoadSettings.of(settings, backend="torch"))
    return ScaledEmbedder(inner, float(marker["scale"]), str(source))


@pytest.fixture
def scaled() -> Iterator[InferenceBackend]:
    """The new backend, registered for one test."""
    backend = InferenceBackend("scaled", load=load_scaled, detect=lambda folder: (folder / MARKER).is_file(), description="torch x a factor")
    register_backend(backend)
    try:
        yield backend
    finally:
        unregister_backend("scaled")


@pytest.fixture
def scaled_folder(tmp_path: Path, tiny_bert_dir: Path) -> Path:
    folder = tmp_path / "scaled-model"
    folder.mkdir()
    (folder / MARKER).write_text(json.dumps({"model": str(tiny_bert_dir), "scale": 3.0}))
    return folder


@pytest.fixture(scope="module")
def reference(tiny_bert_dir: Path) -> np.ndarray:
    return Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(TEXTS, normalize=False)


# ------------------------------------------------------------------ a new backend, from this file alone


def test_from_pretrained_loads_the_new_backend_named_or_found_by_its_files(scaled: Any, scaled_folder: Path, reference: np.ndarray) -> None:
    assert "scaled" in backend_names() and detect_backend(scaled_folder) is scaled
    for model in (Embedder.from_pretrained(scaled_folder, device="cpu"), Embedder.from_pretrained(scaled_folder, LoadSettings(backend="scaled", device="cpu"))):
        assert isinstance(model, ScaledEmbedder)
        np.testing.assert_allclose(model.encode(TEXTS, normalize=False), 3.0 * reference, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(model.encode(TEXTS, normalize=True), axis=1), 1.0, atol=1e-5)
    settings = LoadSettings(device="cpu", max_length=4)  # the settings reach the backend's loader
    assert Embedder.from_pretrained(scaled_folder, settings).config.max_length == 4


def test_the_command_line_offers_and_runs_the_new_backend(
    scaled: Any, scaled_folder: Path, reference: np.ndarray, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    for command in (["encode"], ["eval"], ["serve"]):
        code, out, _ = helpers.run_cli([*command, "--help"], capsys)
        assert code == 0 and "scaled" in out.split("--backend")[1].split("\n")[0], command  # the choices come from the registry
    for backend in ("scaled", "auto"):  # named, or found by its marker file
        output = tmp_path / f"{backend}.npy"
        argv = ["encode", str(scaled_folder), "--backend", backend, "--input", str(texts), "--output", str(output), "--device", "cpu", "--quiet"]
        code, _, err = helpers.run_cli(argv, capsys)
        assert code == 0, err
        np.testing.assert_allclose(np.load(output), 3.0 * reference, rtol=1e-5, atol=1e-5)


def test_the_server_serves_the_new_backend(scaled: Any, scaled_folder: Path, reference: np.ndarray) -> None:
    from anglekit.serve.backends import EncoderBackend, load_backend

    for name in ("scaled", None):
        served: Any = load_backend(name, str(scaled_folder), device="cpu")
        assert isinstance(served, EncoderBackend) and not served.early_exit
        np.testing.assert_allclose(served.embed(served.tokenize(TEXTS, None, truncate=True)), 3.0 * reference, rtol=1e-5, atol=1e-5)


def test_once_unregistered_the_backend_is_unknown_everywhere(scaled_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "scaled" not in backend_names()
    with pytest.raises(UnknownBackendError, match="unknown backend 'scaled'; registered backends: torch, onnx, openvino"):
        Embedder.from_pretrained(scaled_folder, backend="scaled")
    code, _, err = helpers.run_cli(["encode", str(scaled_folder), "--backend", "scaled", "--input", "t.txt", "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 2 and "invalid choice: 'scaled'" in err


# ------------------------------------------------------------------ unknown names, detection


def test_an_unknown_backend_is_a_typed_error_listing_the_registered_ones(tiny_bert_dir: Path) -> None:
    for attempt in (
        lambda: Embedder.from_pretrained(tiny_bert_dir, backend="tensorflow"),
        lambda: LoadSettings(backend="tensorflow"),
        lambda: get_backend("tensorflow"),
        lambda: resolve_backend("tensorflow", tiny_bert_dir),
    ):
        with pytest.raises(UnknownBackendError) as caught:
            attempt()
        assert isinstance(caught.value, ConfigError) and caught.value.known == backend_names()
        assert str(caught.value) == "unknown backend 'tensorflow'; registered backends: torch, onnx, openvino"
    from anglekit.serve.backends import load_backend

    with pytest.raises(UnknownBackendError, match="registered backends: torch, onnx, openvino"):
        load_backend("tensorflow", str(tiny_bert_dir))


def test_a_folder_two_backends_claim_is_ambiguous(scaled: Any, tiny_bert_dir: Path, tmp_path: Path, reference: np.ndarray) -> None:
    both = tmp_path / "both"
    shutil.copytree(tiny_bert_dir, both)
    (both / MARKER).write_text(json.dumps({"model": str(tiny_bert_dir), "scale": 2.0}))
    with pytest.raises(AmbiguousBackendError) as caught:
        detect_backend(both)
    assert caught.value.backends == ("torch", "scaled") and "choose one with backend=" in str(caught.value)
    with pytest.raises(AmbiguousBackendError):
        Embedder.from_pretrained(both, device="cpu")
    np.testing.assert_allclose(Embedder.from_pretrained(both, backend="torch", device="cpu").encode(TEXTS, normalize=False), reference, atol=1e-6)
    np.testing.assert_allclose(Embedder.from_pretrained(both, backend="scaled", device="cpu").encode(TEXTS, normalize=False), 2.0 * reference, atol=1e-5)


def test_a_folder_no_backend_claims_goes_to_the_default(tiny_bert_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for source in (empty, tmp_path / "missing", "org/hub-model", "model.gguf"):
        assert detect_backend(source) is None
        assert resolve_backend(None, source).name == resolve_backend("auto", source).name == DEFAULT_BACKEND
    assert detect_backend(tiny_bert_dir) is get_backend("torch")  # PyTorch weights


def test_names_are_checked_when_registered() -> None:
    with pytest.raises(ConfigError, match="registered already"):
        register_backend(InferenceBackend("torch", load=load_scaled))
    for bad in ("auto", "", "two words"):
        with pytest.raises(ConfigError, match="a backend name is a word"):
            register_backend(InferenceBackend(bad, load=load_scaled))
    assert backend_names() == ("torch", "onnx", "openvino")


# ------------------------------------------------------------------ one settings object, one help text


def test_keywords_and_the_settings_object_are_the_same_request() -> None:
    settings = LoadSettings(device="cpu", dtype="float32", precision="auto", backend="auto")
    assert (settings.dtype, settings.precision, settings.backend) == ("fp32", None, None)
    assert LoadSettings.of(settings, pooling="cls").given() == {"device": "cpu", "dtype": "fp32", "pooling": "cls"}
    assert LoadSettings.of(None, max_length=8) == LoadSettings(max_length=8)
    with pytest.raises(TypeError):
        LoadSettings.of(settings, not_a_setting=1)
    with pytest.raises(ConfigError, match="max_length must be int"):
        LoadSettings(max_length="long")  # type: ignore[arg-type]


def test_every_command_generates_a_flag_with_the_same_help(capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import build_parser
    from anglekit.cli.common import load_setting

    commands = {
        "encode": ["encode", "m", "--input", "x", "--output", "v.npy"], "eval": ["eval", "m", "--data", "x"],
        "index": ["index", "build", "m", "--input", "x", "--output-dir", "d"], "search": ["search", "d", "q"],
        "serve": ["serve", "m"], "merge-lora": ["merge-lora", "a", "--output-dir", "d"],
        "merge": ["merge", "a", "b", "--weight", "0.5", "--output-dir", "d"],
    }  # fmt: skip
    for name, argv in commands.items():
        keys = build_parser().parse_args(argv)._load_settings  # the fields this command has flags for
        assert {"device", "dtype", "revision", "trust_remote_code"} <= set(keys), name
        code, out, _ = helpers.run_cli([*argv[: 2 if name == "index" else 1], "--help"], capsys)
        flat = " ".join(out.split())
        for key in keys:
            setting = load_setting(key)
            assert " ".join(setting.help.split())[:35] in flat, (name, key)  # the first line of the field's help
    assert build_parser().parse_args(commands["merge-lora"]).device == "cpu"  # a command's own default
    assert build_parser().parse_args(commands["merge"]).device == "cpu"


def test_train_declares_its_shared_loading_settings_on_load_settings() -> None:
    """train's model section reuses LoadSettings' declarations (one help, one range) for the
    settings every loading command shares; a YAML value out of range is refused as a flag is."""
    import dataclasses

    from anglekit.errors import ConfigError
    from anglekit.model.load_settings import LoadSettings
    from anglekit.training.config import ModelSection, TrainConfig

    load = {f.name: f for f in dataclasses.fields(LoadSettings)}
    model = {f.name: f for f in dataclasses.fields(ModelSection)}
    for name in ("gguf_file", "revision", "trust_remote_code", "prompt", "prompt_preprocess", "max_length", "bidirectional"):
        assert model[name].metadata == load[name].metadata, name
    with pytest.raises(ConfigError, match="max_length must be >= 1"):
        TrainConfig.from_dict({"model": "m", "train_data": "d", "max_length": 0})
