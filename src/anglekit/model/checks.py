"""Checks of a model before any work starts: complete weights, a tokenizer, sizes that fit.

A truncated ``model.safetensors``, a folder without tokenizer files or a max length beyond the
position embeddings would otherwise fail deep inside transformers (or, for the tokenizer, not at
all), after data was read or minutes were spent. These checks read only headers and configs.
"""

from __future__ import annotations

import json
import logging
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError
from anglekit.io.read import describe, read_json, require_object

logger = logging.getLogger(__name__)

TOKENIZER_FILES = (
    "tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model", "sentencepiece.bpe.model", "merges.txt",
)  # fmt: skip
"""Files of which a local model folder needs at least one to have a tokenizer."""


@dataclass(frozen=True)
class ModelFacts:
    """What the model's config says about its sizes (None where it says nothing)."""

    hidden_size: int | None
    max_positions: int | None


def facts_of(model_config: Any) -> ModelFacts:
    """Hidden size and position limit from a transformers config."""
    hidden = getattr(model_config, "hidden_size", None)
    positions = getattr(model_config, "max_position_embeddings", None)
    return ModelFacts(
        hidden if isinstance(hidden, int) and hidden > 0 else None,
        positions if isinstance(positions, int) and positions > 0 else None,
    )


def check_safetensors(path: Path) -> None:
    """A ConfigError unless ``path`` holds a safetensors header and every byte it announces."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as handle:
            (header_size,) = struct.unpack("<Q", handle.read(8))
            if header_size > size - 8:
                raise ValueError("header larger than the file")
            header = json.loads(handle.read(header_size))
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable safetensors file ({exc}); the download or copy may be incomplete") from None
    end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
    if size < 8 + header_size + end:
        raise ConfigError(f"{path}: truncated, {size} of {8 + header_size + end} bytes; the download or copy is incomplete")


def has_safetensors_weights(folder: Path) -> bool:
    """Whether a model folder holds safetensors weights (which transformers loads in preference)."""
    return (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file()


def check_local_weights(folder: Path) -> None:
    """Every weight file that loading will read from a local model folder is complete
    (safetensors to the last byte, pytorch ``.bin`` archives readable to their index at the end;
    shards all present). Beside safetensors weights, ``.bin`` weights are ignored (transformers
    loads the safetensors ones) with a warning."""
    index_names = ["model.safetensors.index.json", "pytorch_model.bin.index.json"]
    if has_safetensors_weights(folder):
        index_names.remove("pytorch_model.bin.index.json")
        ignored = sorted(p.name for p in folder.glob("*.bin") if p.name.startswith(("pytorch_model", "model")))
        if ignored:
            logger.warning("%s: loading model.safetensors; ignoring %s beside it (remove it if it is stale)", folder, ", ".join(ignored))
    for index_name in index_names:
        index_file = folder / index_name
        if index_file.is_file():
            shards = _index_shards(index_file)
            missing = sorted(s for s in shards if not (folder / s).is_file())
            if missing:
                raise ConfigError(f"{folder}: weight shard(s) {missing} named in {index_name} are missing")
    for path in sorted(folder.glob("*.safetensors")):
        check_safetensors(path)
    for path in [] if has_safetensors_weights(folder) else sorted(folder.glob("*.bin")):
        if path.name.startswith(("pytorch_model", "model")) and not zipfile.is_zipfile(path):
            raise ConfigError(f"{path}: not a complete PyTorch archive; the download or copy may be incomplete")


def _index_shards(index_file: Path) -> set[str]:
    """The shard files a weight index (``model.safetensors.index.json``) names; a ConfigError naming
    the file and field when it is unreadable or ``weight_map`` is not an object of file names."""
    try:
        index = json.loads(index_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{index_file}: not a readable weight index ({exc})") from None
    if not isinstance(index, dict):
        raise ConfigError(f"{index_file}: a weight index must be a JSON object, got {describe(index)}")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict):
        raise ConfigError(f"{index_file}, field 'weight_map': expected an object (tensor name -> shard file), got {describe(weight_map)}")
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard.strip():
            raise ConfigError(f"{index_file}, field 'weight_map.{tensor}': expected a shard file name, got {describe(shard)}")
    return set(weight_map.values())


def check_local_tokenizer(folder: Path) -> None:
    """A ConfigError unless the folder has tokenizer files (else transformers may pick another
    tokenizer silently, or fail later)."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(
            f"{folder}: no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer beside the weights "
            "(tokenizer.save_pretrained) or use the folder it came with"
        )


MODEL_JSON_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "adapter_config.json",
    "anglekit_config.json",
)
"""JSON files of a model folder read by transformers or sentence-transformers: each must hold an object."""


def check_local_json(folder: Path) -> None:
    """A ConfigError naming the file when one of :data:`MODEL_JSON_FILES` in ``folder`` is empty,
    binary, truncated, malformed or not an object (transformers would fail with a bare
    JSONDecodeError or AttributeError far from the cause)."""

    for name in MODEL_JSON_FILES:
        path = folder / name
        if not path.exists():
            continue
        expected = f"a JSON object (the model's {name})"
        try:
            data = require_object(read_json(path, expected=expected), source=str(path), expected=expected)
        except DataError as exc:  # a model folder's file: a configuration problem, like the other checks here
            raise ConfigError(str(exc)) from None
        if name == "tokenizer.json":  # a fast tokenizer's file: the keys the tokenizers library reads first
            for key, kind, what in (("model", dict, "an object"), ("added_tokens", list, "a list")):
                if not isinstance(data.get(key), kind):
                    raise ConfigError(f"{path}, field {key!r}: expected {what} (a tokenizers file saved by save_pretrained), got {describe(data.get(key))}")


def check_max_length(max_length: int, facts: ModelFacts, source: str) -> None:
    """A ConfigError when ``max_length`` exceeds the model's position embeddings."""
    if facts.max_positions is not None and max_length > facts.max_positions:
        raise ConfigError(
            f"{source}: max_length {max_length} is above the model's {facts.max_positions} position embeddings; "
            f"use --max-length {facts.max_positions} or less (long texts: --long-text chunk-mean)"
        )


__all__ = [
    "TOKENIZER_FILES",
    "ModelFacts",
    "MODEL_JSON_FILES",
    "check_local_json",
    "check_local_tokenizer",
    "check_local_weights",
    "check_max_length",
    "check_safetensors",
    "facts_of",
    "has_safetensors_weights",
]
