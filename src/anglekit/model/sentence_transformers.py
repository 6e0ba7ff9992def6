"""Read a sentence-transformers model directory's pooling and normalisation settings.

Lets ``Embedder.from_pretrained`` load such a directory (e.g. all-MiniLM-L6-v2) and embed exactly
like sentence-transformers does, without depending on that package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, UnsupportedModelError
from anglekit.model.hub import local_or_hub_file as _file

_POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "last_avg",
    "pooling_mode_max_tokens": "last_max",
    "pooling_mode_lasttoken": "last_token",
}

_SUPPORTED_MODULES = ("Transformer", "Pooling", "Normalize")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read sentence-transformers settings ({exc})") from exc


def read_sentence_transformers_settings(name_or_path: str, *, revision: str | None = None) -> dict[str, Any]:
    """Embedder settings implied by a sentence-transformers layout, or {} when it is not one."""
    modules_file = _file(name_or_path, "modules.json", revision)
    if modules_file is None:
        return {}
    modules = _read_json(modules_file)
    if not isinstance(modules, list):
        raise ConfigError(f"{modules_file}: expected a list of modules")
    settings: dict[str, Any] = {}
    for module in modules:
        kind = str(module.get("type", ""))
        if not kind.endswith(_SUPPORTED_MODULES):
            raise UnsupportedModelError(
                f"{modules_file}: module {kind!r} is not supported (anglekit applies only "
                f"{', '.join(_SUPPORTED_MODULES)}); the model would embed differently from sentence-transformers"
            )
        if kind.endswith("Pooling"):
            pooling_file = _file(name_or_path, f"{module.get('path', '')}/config.json", revision)
            if pooling_file is not None:
                pooling_config = _read_json(pooling_file)
                unsupported = sorted(
                    key for key, on in pooling_config.items()
                    if key.startswith("pooling_mode_") and on and key not in _POOLING_MODES
                )
                if unsupported:
                    raise UnsupportedModelError(f"{pooling_file}: pooling mode(s) {unsupported} are not supported")
                active = [mode for key, mode in _POOLING_MODES.items() if pooling_config.get(key)]
                if len(active) == 1:
                    settings["pooling"] = active[0]
                elif active:
                    raise UnsupportedModelError(f"{pooling_file}: several pooling modes {active} are not supported together")
        elif kind.endswith("Normalize"):
            settings["normalize"] = True
    bert_config_file = _file(name_or_path, "sentence_bert_config.json", revision)
    if bert_config_file is not None:
        bert_config = _read_json(bert_config_file)
        if bert_config.get("do_lower_case"):
            raise UnsupportedModelError(f"{bert_config_file}: do_lower_case is not supported (lower-case the texts yourself)")
        max_len = bert_config.get("max_seq_length")
        if isinstance(max_len, int) and max_len > 0:
            settings["max_length"] = max_len
    return settings
