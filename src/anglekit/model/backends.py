"""The registry of inference backends: each names itself, says whether a folder holds its format,
and loads a model into an object with the Embedder's encode API.

``torch`` (the :class:`~anglekit.model.embedder.Embedder`), ``onnx``
(:class:`~anglekit.model.onnx.OnnxEmbedder`) and ``openvino``
(:class:`~anglekit.model.openvino.OpenVinoEmbedder`) are registered here; another backend is one
:func:`register_backend` call, and then ``Embedder.from_pretrained(..., backend=NAME)``, folder
detection, ``--backend NAME`` (every command's choices come from :func:`backend_names`) and
``anglekit serve`` know it.

An installed distribution adds a backend with an entry point of the group ``anglekit.backends``
(:mod:`anglekit.plugins`): its name is the backend's name, its object an :class:`InferenceBackend`
of that name, registered when the registry is first read.

A backend's ``load`` and ``detect`` may be given as ``"module:function"`` strings, imported on
first use: nothing here imports torch or a runtime until a model is loaded (``anglekit --help``
stays fast).

Detection (``backend`` None or ``auto``): every backend is asked whether a local folder holds its
format; the one that claims it loads it, none means :data:`DEFAULT_BACKEND` (hub names, GGUF files
and folders of PyTorch weights), and more than one is an
:class:`~anglekit.errors.AmbiguousBackendError`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import AmbiguousBackendError, ConfigError, UnknownBackendError
from anglekit.plugins import GROUPS, Registry

DEFAULT_BACKEND = "torch"
"""The backend of a model no backend claims by its files (a hub name, a GGUF file, ...)."""
AUTO = "auto"
"""The ``backend`` value (like None) that lets the folder decide."""

Loader = Callable[..., Any]
"""``load(source, settings, *, threads=None) -> encoder``: ``source`` a name or path, ``settings``
a :class:`~anglekit.model.load_settings.LoadSettings`, ``threads`` the CPU threads (None: the
backend's default); the encoder has the Embedder's encode API (``encode``, ``config``, ``dim``,
``tokenize_unpadded``, ``pad``, ``embed_padded``, ``fingerprint``)."""
Detector = Callable[[Path], bool]
"""``detect(folder) -> bool``: whether a local folder holds this backend's format (and nothing that
another backend should load instead)."""


@dataclass(frozen=True)
class InferenceBackend:
    """One inference backend: its name, loader and folder test (each a callable, or a
    ``"module:function"`` string imported when first used)."""

    name: str
    load: Loader | str
    detect: Detector | str | None = None
    """None: it claims no folder (it is used when named, or as the default)."""
    description: str = ""
    """One line for the documentation: what runs the model, which folders it loads."""

    def loader(self) -> Loader:
        return _resolve(self.load)

    def claims(self, folder: Path) -> bool:
        """Whether ``folder`` (a local folder) holds this backend's format."""
        return self.detect is not None and bool(_resolve(self.detect)(folder))


def _resolve(target: Callable[..., Any] | str) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name or name == AUTO or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"a backend name is a word of letters, digits, '-' and '_' (not {AUTO!r}), got {name!r}")


def _checked(name: str, backend: Any, others: dict[str, Any]) -> InferenceBackend:
    _check_name(name)
    if not isinstance(backend, InferenceBackend):
        raise ConfigError(f"backend {name!r} must be an anglekit.model.backends.InferenceBackend, got {type(backend).__name__}")
    if backend.name != name:
        raise ConfigError(f"backend {name!r}: its InferenceBackend is named {backend.name!r}")
    return backend


BACKENDS: Registry[InferenceBackend] = Registry("backend", GROUPS["backends"], unknown=UnknownBackendError, check=_checked)
"""Backend name -> backend: the built-ins, then the installed plugins (entry points ``anglekit.backends``)."""


def register_backend(backend: InferenceBackend, *, replace: bool = False) -> InferenceBackend:
    """Add ``backend`` to the registry (``replace``: over one of the same name, else a
    :class:`~anglekit.errors.DuplicateNameError`)."""
    _check_name(backend.name)
    return BACKENDS.register(backend.name, backend, replace=replace)


def unregister_backend(name: str) -> InferenceBackend:
    """Remove the backend ``name`` from the registry; returns it."""
    return BACKENDS.unregister(name)


def backend_names() -> tuple[str, ...]:
    """The registered backends' names, in registration order."""
    return BACKENDS.names()


def get_backend(name: str) -> InferenceBackend:
    """The backend registered as ``name``, else an :class:`~anglekit.errors.UnknownBackendError`."""
    return BACKENDS.get(name)


def detect_backend(source: str | os.PathLike[str]) -> InferenceBackend | None:
    """The backend whose format the local folder ``source`` holds; None when no backend claims it
    (or it is not a local folder); an :class:`~anglekit.errors.AmbiguousBackendError` when several do."""
    folder = Path(os.fspath(source)).expanduser()
    if not folder.is_dir():
        return None
    claiming = [backend for backend in BACKENDS.values() if backend.claims(folder)]
    if len(claiming) > 1:
        raise AmbiguousBackendError(os.fspath(source), tuple(b.name for b in claiming))
    return claiming[0] if claiming else None


def resolve_backend(name: str | None, source: str | os.PathLike[str]) -> InferenceBackend:
    """The backend to load ``source`` with: the one named, or (``name`` None or ``auto``) the one
    its folder holds the format of, else :data:`DEFAULT_BACKEND`."""
    if name is not None and name != AUTO:
        return get_backend(name)
    return detect_backend(source) or get_backend(DEFAULT_BACKEND)


def load_encoder(source: str | os.PathLike[str], settings: Any, *, threads: int | None = None) -> Any:
    """``source`` loaded by the backend ``settings.backend`` (or the one its folder calls for) with
    ``settings`` (a :class:`~anglekit.model.load_settings.LoadSettings`); ``threads``: CPU threads."""
    backend = resolve_backend(settings.backend, source)
    return backend.loader()(source, settings, threads=threads)


def has_torch_weights(folder: Path) -> bool:
    """Whether ``folder`` holds PyTorch weights (safetensors, ``pytorch_model*.bin``) or LoRA adapters."""
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin")) or (folder / "adapter_config.json").is_file()


register_backend(
    InferenceBackend(
        "torch",
        load="anglekit.model.embedder:load_torch",
        detect=has_torch_weights,
        description="PyTorch (transformers): hub names, folders of weights or LoRA adapters, GGUF files",
    )
)
register_backend(
    InferenceBackend(
        "onnx",
        load="anglekit.model.onnx:load_onnx",
        detect="anglekit.model.onnx:only_onnx_weights",
        description="onnxruntime: a folder from 'anglekit export --format onnx' (CPU, or CUDA with onnxruntime-gpu)",
    )
)
register_backend(
    InferenceBackend(
        "openvino",
        load="anglekit.model.openvino:load_openvino",
        detect="anglekit.model.openvino:only_openvino_weights",
        description="OpenVINO (CPU): a folder from 'anglekit export --format openvino', or an ONNX folder",
    )
)


__all__ = [
    "AUTO",
    "BACKENDS",
    "DEFAULT_BACKEND",
    "InferenceBackend",
    "backend_names",
    "detect_backend",
    "get_backend",
    "has_torch_weights",
    "load_encoder",
    "register_backend",
    "resolve_backend",
    "unregister_backend",
]
