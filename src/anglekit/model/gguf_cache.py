"""A local GGUF file converted once into an ordinary model folder, so later loads skip the GGUF parsing.

transformers reads a GGUF file's metadata and vocabulary through the ``gguf`` package three times per
load (config, weights, tokenizer) and maps every tensor name anew: a load of SmolLM2-135M takes 46 s
on two cores, against 10.5 s (imports included) from safetensors (``benchmarks/bench_gguf_load.py``). The first float load of a local GGUF
file therefore saves what it produced (config, float32 safetensors, tokenizer) under
``<cache>/gguf/<file stem>-<hash of the file's path, size, modification time and the transformers
release>/`` and later loads
read that folder: the same weights bit for bit, the same tokenizer and config (tests compare the
fingerprints), so nothing a model computes changes. What a model records as its origin (the base of
its adapters) stays the GGUF file. The in-process generation backend (``anglekit generate --llm
hf:...``) reads and makes the same conversion when the LM head is tied to the embeddings, as
SmolLM2's is (:func:`ready_causal`). A hub GGUF and k-bit loads are not cached.
``ANGLEKIT_GGUF_CACHE=0`` turns the cache off; deleting the folder is always safe. A conversion that
would leave less than :data:`SPARE_BYTES` free is not kept, and a new conversion of a changed file
deletes those of its earlier states.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from anglekit.io.atomic import staging_dir
from anglekit.llm.gguf import GGUFSource
from anglekit.model.offline import cache_dir

logger = logging.getLogger(__name__)

ENV = "ANGLEKIT_GGUF_CACHE"
COMPLETE = ".complete"
"""Written last: a folder without it (a conversion cut short) is never read."""


SPARE_BYTES = 1 << 30
"""Free space a conversion leaves on its disk: with less, it is not kept (the load goes on)."""


def _stamp(gguf: GGUFSource) -> dict[str, Any] | None:
    """What a conversion is of: the file (resolved), its size and modification time, and the
    transformers release whose GGUF reader made it; None when ``gguf`` is not a local file."""
    file = Path(gguf.location) / gguf.filename
    if not file.is_file():
        return None
    import transformers  # its GGUF reader made the conversion: another release converts anew

    stat = file.stat()
    return {"file": str(file.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "transformers": transformers.__version__}


def _located(gguf: GGUFSource) -> tuple[Path, dict[str, Any]] | None:
    """The conversion folder of ``gguf`` with its :func:`_stamp`; None when it is not a local file or
    the cache is off."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    stamp = _stamp(gguf)
    if stamp is None:
        return None
    key = "\n".join(str(stamp[k]) for k in ("file", "size", "mtime_ns", "transformers"))
    return cache_dir() / "gguf" / f"{Path(gguf.filename).stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}", stamp


def cache_folder(gguf: GGUFSource) -> Path | None:
    """Where the conversion of ``gguf`` lives; None when it is not a local file or the cache is off."""
    located = _located(gguf)
    return None if located is None else located[0]


def ready(gguf: GGUFSource, load_in_kbit: int | None = None) -> Path | None:
    """The complete conversion of ``gguf``, or None (always for a k-bit load, which reads the file)."""
    if load_in_kbit is not None:
        return None
    folder = cache_folder(gguf)
    return folder if folder is not None and (folder / COMPLETE).is_file() else None


def ready_causal(gguf: GGUFSource) -> Path | None:
    """The complete conversion of ``gguf`` when it is a whole causal LM too: a conversion holds the base
    model's weights, which are the whole model only when the LM head is the embedding matrix
    (``tie_word_embeddings``, which transformers sets when the file has no separate output tensor)."""
    folder = ready(gguf)
    if folder is None:
        return None
    try:
        tied = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("tie_word_embeddings")
    except (OSError, ValueError):
        return None
    return folder if tied is True else None


def store(gguf: GGUFSource, backbone: Any, tokenizer: Any) -> Path | None:
    """Save a float32 ``backbone`` and its ``tokenizer`` loaded from ``gguf`` as its conversion; the
    folder appears whole or not at all (two processes converting at once keep the first). A failure
    to write is logged and loses nothing: the next load reads the GGUF file again."""
    located = _located(gguf)
    if located is None:
        return None
    folder, stamp = located
    if (folder / COMPLETE).is_file():
        return folder
    params = list(backbone.parameters())
    if not params or any(p.dtype != torch.float32 for p in params):
        return None  # another dtype (or packed weights) would not reload as this file's float32 weights
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        needed, free = sum(p.numel() * 4 for p in params), shutil.disk_usage(folder.parent).free
        if free - needed < SPARE_BYTES:
            logger.warning("not keeping the conversion of %s: it needs %.1f GB and %.1f GB is free in %s (1 GB is left spare); "
                           "it is read from the GGUF file again next time", gguf.filename, needed / 1e9, free / 1e9, folder.parent)  # fmt: skip
            return None
        staging = staging_dir(folder, prefix=f".{folder.name}.")
        try:
            architectures = backbone.config.architectures  # save_pretrained sets it; the GGUF's config has none
            try:
                backbone.save_pretrained(staging, safe_serialization=True)
            finally:
                backbone.config.architectures = architectures
            saved = json.loads((staging / "config.json").read_text(encoding="utf-8"))
            (staging / "config.json").write_text(json.dumps({**saved, "architectures": architectures}, indent=2), encoding="utf-8")
            tokenizer.save_pretrained(staging)
            (staging / COMPLETE).write_text(json.dumps(stamp) + "\n", encoding="utf-8")
            if not folder.exists():
                os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _drop_outdated(stamp, folder)
    except (OSError, RuntimeError, ValueError) as exc:  # the load itself succeeded: never fail it here
        logger.warning("could not keep the conversion of %s in %s (%s); it is read from the GGUF file again next time", gguf.filename, folder, exc)
        return None
    logger.info("%s converted once into %s; later loads read it", gguf.filename, folder)
    return folder


def _drop_outdated(stamp: dict[str, Any], current: Path) -> None:
    """Delete the conversions of an earlier state of the file ``stamp`` describes (the same path,
    another size or modification time), beside its ``current`` one: no load can read them again.
    Those of another transformers release stay (another environment may share the cache), and so
    does anything unreadable."""
    stem = current.name.rsplit("-", 1)[0]  # the folders of one file name share it (:func:`_located`)
    for other in current.parent.glob(f"{glob.escape(stem)}-*"):
        if other == current or not other.is_dir():
            continue
        try:
            recorded = json.loads((other / COMPLETE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being written, cut short, or from before the stamp was recorded
        if (
            isinstance(recorded, dict)
            and recorded.get("file") == stamp["file"]
            and (recorded.get("size"), recorded.get("mtime_ns")) != (stamp["size"], stamp["mtime_ns"])
        ):
            shutil.rmtree(other, ignore_errors=True)
            logger.info("deleted %s, the conversion of an earlier state of %s", other, stamp["file"])


def name_as_source(backbone: Any, tokenizer: Any, gguf: GGUFSource) -> None:
    """Give a model read from its conversion the name it has when read from ``gguf`` (the folder of
    the file), which PEFT records as the base of adapters."""
    backbone.config._name_or_path = gguf.location
    tokenizer.name_or_path = gguf.location
