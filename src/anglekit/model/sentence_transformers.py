"""Read a sentence-transformers folder's settings: pooling, normalisation, max length, prompts.

Folders written by sentence-transformers 2.x to 6.x load with their own settings, so that
``Embedder.from_pretrained`` embeds exactly like sentence-transformers does:

- ``modules.json`` must list Transformer, Pooling and optionally Normalize, in that order (old
  ``sentence_transformers.models.*`` paths and the 5.4+ module paths alike); anything else (Dense,
  Router, custom modules) raises :class:`~anglekit.errors.UnsupportedModelError` naming the module.
- Pooling: the old keys (``pooling_mode_cls_token``, ...) and the new ``pooling_mode``; modes
  anglekit has no exact counterpart for, several modes at once, unknown keys and
  ``include_prompt: false`` are refused by name.
- Max length: ``max_seq_length`` in ``sentence_bert_config.json`` (or its older file names), else
  the tokenizer's ``model_max_length`` capped at the model's positions, as sentence-transformers
  computes it.
- Prompts (``config_sentence_transformers.json``): ``default_prompt_name`` becomes the general
  prompt, ``query`` and ``document`` the role prompts, as sentence-transformers' ``encode``,
  ``encode_query`` and ``encode_document`` apply them.
- ``truncate_dim`` (``config_sentence_transformers.json``) becomes the default ``truncate_dim``, as
  sentence-transformers 6 cuts its output (after a Normalize module anglekit renormalises, warned).
- Every field read from these files is type-checked: a value of another type is a ConfigError
  naming the file, the field and the value (``pooling_mode must be a mode name or a list of mode
  names, got int 5``), never a TypeError or a silently ignored value.
- The custom modules that ``anglekit export`` writes (``anglekit_modules.py``) are read back from
  their config and constants, never executed.

When ``sentence_transformers`` imports, module types resolve through its own classes and its own
Pooling reads the pooling config (with its conversion of the old keys); otherwise, and for what the
installed version cannot read (a folder written by a newer one), a hand reader of the same files
follows the current sentence-transformers rules.
"""

from __future__ import annotations

import ast
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, UnsupportedModelError
from anglekit.model.hub import local_or_hub_file as _file

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
TRANSFORMER_CONFIG_FILES = (
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
)
"""Where sentence-transformers looks for the Transformer module's config, in its order."""

LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
"""The Pooling config's old boolean keys (what TEI and sentence-transformers < 5.4 read) and the
mode each one turns on, in sentence-transformers' order."""

ST_TO_ANGLEKIT_POOLING = {"cls": "cls", "mean": "last_avg", "max": "last_max", "lasttoken": "last_token"}
"""sentence-transformers pooling modes with an exact anglekit counterpart."""

_POOLING_KEYS = {"word_embedding_dimension", "embedding_dimension", "pooling_mode", "include_prompt", *LEGACY_POOLING_KEYS}
_TRANSFORMER_KEYS = {
    "max_seq_length", "do_lower_case", "transformer_task", "modality_config", "module_output_name", "unpad_inputs",
    "model_args", "model_kwargs", "tokenizer_args", "processor_kwargs", "config_args", "config_kwargs",
    "cache_dir", "backend", "tokenizer_name_or_path", "query_length", "document_length", "query_expansion",
    "processing_kwargs",
}  # fmt: skip
"""Keys sentence-transformers 2.x-6.x write into ``sentence_bert_config.json``."""
_TEXT_MODALITY = {"method": "forward", "method_output_name": "last_hidden_state"}
_VERY_LARGE = int(1e29)
"""transformers' "no limit" model_max_length is 1e30; anything this large means none was set."""

ANGLEKIT_MODULE_FILE = "anglekit_modules.py"
ANGLEKIT_POOLING = "anglekit_modules.AnglekitPooling"
ANGLEKIT_TRANSFORMER = "anglekit_modules.AnglekitTransformer"
"""Custom module types written by :mod:`anglekit.export` for what sentence-transformers' own
modules cannot express (cls_avg, first_last_avg, prompt templates with text inside)."""

REFUSAL_MODULE = "anglekit_only.NotExpressibleInSentenceTransformers"
"""The module type a saved folder's ``modules.json`` names when stock sentence-transformers modules
cannot embed like the model (:mod:`anglekit.model.st_layout`): it does not exist, so
sentence-transformers refuses the folder; anglekit reads such a folder from ``anglekit_config.json``."""

STANDARD_MODULES = ("Transformer", "Pooling", "Normalize")


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc})") from exc


def _read_object(path: Path, what: str) -> dict[str, Any]:
    data = _read_json(path, what)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the {what} must be a JSON object, got {type(data).__name__}")
    return data


def _shown(value: Any) -> str:
    """A value as an error names it: its JSON type and (shortened) value, e.g. ``int 5``."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def _wrong(where: Any, field: str, expected: str, value: Any) -> ConfigError:
    """``{where}: {field} must be {expected}, got {type} {value}`` (a field of another tool's file)."""
    return ConfigError(f"{where}: {field} must be {expected}, got {_shown(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_types(config: dict[str, Any], where: Any, types: dict[str, tuple[Callable[[Any], bool], str]]) -> None:
    """A ConfigError for the first field of ``config`` (present and not null) of the wrong type."""
    for key, (ok, expected) in types.items():
        if config.get(key) is not None and not ok(config[key]):
            raise _wrong(where, key, expected, config[key])


def _is_mode(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(m, str) for m in value))


_POOLING_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "pooling_mode": (_is_mode, "a mode name or a list of mode names"),
    "include_prompt": (lambda v: isinstance(v, bool), "true or false"),
    "word_embedding_dimension": (lambda v: _is_int(v) and v > 0, "a positive integer"),
    "embedding_dimension": (lambda v: _is_int(v) and v > 0, "a positive integer"),
    **{key: (lambda v: isinstance(v, bool), "true or false") for key in LEGACY_POOLING_KEYS},
}
_TRANSFORMER_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "max_seq_length": (lambda v: _is_int(v) and v > 0, "a positive integer or null"),
    "do_lower_case": (lambda v: isinstance(v, bool), "true or false"),
    "transformer_task": (lambda v: isinstance(v, str), "a string"),
    "modality_config": (lambda v: isinstance(v, dict), "an object"),
    "module_output_name": (lambda v: isinstance(v, str), "a string"),
    "tokenizer_name_or_path": (lambda v: isinstance(v, str), "a string"),
    "processor_kwargs": (lambda v: isinstance(v, dict), "an object"),
    "tokenizer_args": (lambda v: isinstance(v, dict), "an object"),
}
_ST_CONFIG_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model_type": (lambda v: isinstance(v, str), "a string"),
    "default_prompt_name": (lambda v: isinstance(v, str), "a prompt name (a string) or null"),
    "truncate_dim": (lambda v: _is_int(v) and v > 0, "a positive integer or null"),
}


# ----------------------------------------------------------------- module kinds


def _hand_kind(kind: str, where: str) -> str:
    """Transformer, Pooling or Normalize for a ``sentence_transformers.*`` type, by its class name."""
    name = kind.rsplit(".", 1)[-1]
    if kind.startswith("sentence_transformers.") and name in STANDARD_MODULES:
        return name
    raise _unsupported_module(kind, where)


def _st_kind(kind: str, where: str) -> str:
    """Transformer, Pooling or Normalize for a ``sentence_transformers.*`` type, resolved through
    sentence-transformers' own classes (any of its historical module paths)."""
    if not kind.startswith("sentence_transformers."):
        raise _unsupported_module(kind, where)
    classes = _st_classes()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls = classes["import"](kind)
    except (ImportError, AttributeError, ValueError):
        # A path from another sentence-transformers version (e.g. 5.4+ paths under an older one).
        return _hand_kind(kind, where)
    for name in STANDARD_MODULES:
        if cls is classes[name]:
            return name
    raise _unsupported_module(kind, where)


def _unsupported_module(kind: str, where: str) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"{where}: module {kind!r} is not supported (anglekit applies only sentence-transformers' "
        f"{', '.join(STANDARD_MODULES)} and the modules anglekit export writes); the model would embed "
        "differently from sentence-transformers"
    )


def _st_classes() -> dict[str, Any]:
    """sentence-transformers' Transformer, Pooling, Normalize and its import_from_string."""
    # The locations of 5.4 (the floor) to 6.x: sentence_transformers.models is deprecated there.
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    try:
        from sentence_transformers.util import import_from_string
    except ImportError:  # pragma: no cover - older layouts
        from sentence_transformers.util.misc import import_from_string  # type: ignore[no-redef]
    return {"Transformer": Transformer, "Pooling": Pooling, "Normalize": Normalize, "import": import_from_string}


def sentence_transformers_available() -> bool:
    """Whether ``sentence_transformers`` imports here (then it reads the folders)."""
    try:
        _st_classes()
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------- pooling


def pooling_modes(config: dict[str, Any]) -> tuple[str, ...]:
    """The pooling modes a Pooling config turns on, by current sentence-transformers' rules: the new
    ``pooling_mode`` (a name or a list) wins; else the old boolean keys; with neither, ``mean``."""
    mode = config.get("pooling_mode")
    if mode is not None:
        return (mode,) if isinstance(mode, str) else tuple(mode)
    found = [key for key in LEGACY_POOLING_KEYS if key in config]
    if not found:
        return ("mean",)
    active = tuple(mode for key, mode in LEGACY_POOLING_KEYS.items() if config.get(key))
    return active or ("mean",)


def _st_pooling_modes(folder: Path) -> tuple[tuple[str, ...], bool] | None:
    """(modes, include_prompt) of the Pooling module in ``folder``, as sentence-transformers loads
    it; None when the installed version cannot read the config (one from another version)."""
    import inspect

    pooling_cls = _st_classes()["Pooling"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if len(inspect.signature(pooling_cls.load).parameters) == 1:  # sentence-transformers < 5
                module = pooling_cls.load(str(folder))
            else:
                module = pooling_cls.load(str(folder), local_files_only=True)
        except (TypeError, ValueError, OSError):
            return None
    mode = getattr(module, "pooling_mode", None)
    if isinstance(mode, str):
        modes: tuple[str, ...] = (mode,)
    elif isinstance(mode, (tuple, list)):
        modes = tuple(mode)
    else:  # sentence-transformers < 5.4 keeps the booleans
        modes = tuple(m for m in module.get_pooling_mode_str().split("+") if m)
    return modes, bool(getattr(module, "include_prompt", True))


def _pooling(config_file: Path, *, through_st: bool) -> str:
    """anglekit's pooling for a sentence-transformers Pooling config, or UnsupportedModelError."""
    config = _read_object(config_file, "Pooling config")
    unknown = sorted(set(config) - _POOLING_KEYS)
    if unknown:
        raise UnsupportedModelError(f"{config_file}: unknown Pooling key(s) {unknown}; anglekit cannot tell how they pool")
    _check_types(config, config_file, _POOLING_TYPES)
    read = _st_pooling_modes(config_file.parent) if through_st else None
    modes, include_prompt = read if read is not None else (pooling_modes(config), config.get("include_prompt", True))
    if include_prompt is False:
        raise UnsupportedModelError(f"{config_file}: include_prompt false (prompt tokens kept out of the pooling) is not supported")
    if len(modes) != 1:
        raise UnsupportedModelError(f"{config_file}: several pooling modes {list(modes)} at once (concatenated) are not supported")
    mode = modes[0]
    if mode not in ST_TO_ANGLEKIT_POOLING:
        legacy = {m: k for k, m in LEGACY_POOLING_KEYS.items()}
        raise UnsupportedModelError(
            f"{config_file}: pooling mode {mode!r} ({legacy.get(mode, 'pooling_mode')}) is not supported; "
            f"anglekit applies {', '.join(sorted(ST_TO_ANGLEKIT_POOLING))}"
        )
    return ST_TO_ANGLEKIT_POOLING[mode]


# ----------------------------------------------------------------- transformer


def _transformer_config(name: str, revision: str | None) -> tuple[dict[str, Any], Path | None]:
    for filename in TRANSFORMER_CONFIG_FILES:
        path = _file(name, filename, revision)
        if path is not None:
            return _read_object(path, "Transformer module config"), path
    return {}, None


def _check_transformer_config(config: dict[str, Any], where: str) -> None:
    unknown = sorted(set(config) - _TRANSFORMER_KEYS)
    if unknown:
        raise UnsupportedModelError(f"{where}: unknown Transformer key(s) {unknown}; anglekit cannot tell what they change")
    _check_types(config, where, _TRANSFORMER_TYPES)
    for key in ("processor_kwargs", "tokenizer_args"):
        given = config.get(key) or {}
        if given.get("model_max_length") is not None and not (_is_int(given["model_max_length"]) and given["model_max_length"] > 0):
            raise _wrong(where, f"{key}.model_max_length", "a positive integer", given["model_max_length"])
    if config.get("do_lower_case"):
        raise UnsupportedModelError(f"{where}: do_lower_case is not supported (lower-case the texts yourself)")
    task = config.get("transformer_task")
    if task not in (None, "feature-extraction"):
        raise UnsupportedModelError(f"{where}: transformer_task {task!r} is not supported (anglekit embeds hidden states)")
    modalities = config.get("modality_config")
    if modalities is not None and modalities != {"text": _TEXT_MODALITY}:
        raise UnsupportedModelError(f"{where}: modality_config {modalities!r} is not supported (text through forward only)")
    output = config.get("module_output_name")
    if output not in (None, "token_embeddings"):
        raise UnsupportedModelError(f"{where}: module_output_name {output!r} is not supported")
    for key in ("processing_kwargs", "query_length", "document_length", "query_expansion"):
        if config.get(key):
            raise UnsupportedModelError(f"{where}: {key} {config[key]!r} is not supported")
    tokenizer = config.get("tokenizer_name_or_path")
    if tokenizer:
        raise UnsupportedModelError(f"{where}: a separate tokenizer ({tokenizer!r}) is not supported")


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < _VERY_LARGE else None


def _max_length(name: str, revision: str | None, config: dict[str, Any], model_config: Any) -> int | None:
    """The max length sentence-transformers uses: ``max_seq_length``, else the tokenizer's
    ``model_max_length`` capped at the model's positions."""
    explicit = _positive_int(config.get("max_seq_length"))
    if explicit is not None:
        return explicit
    for key in ("processor_kwargs", "tokenizer_args"):
        given = config.get(key) or {}
        if isinstance(given, dict) and _positive_int(given.get("model_max_length")) is not None:
            return int(given["model_max_length"])
    tokenizer_max = None
    tokenizer_file = _file(name, "tokenizer_config.json", revision)
    if tokenizer_file is not None:
        given = _read_object(tokenizer_file, "tokenizer config").get("model_max_length")
        if given is not None and not (isinstance(given, (int, float)) and not isinstance(given, bool) and given > 0):
            raise _wrong(tokenizer_file, "model_max_length", "a positive number", given)
        tokenizer_max = _positive_int(given)
    positions = _positive_int(getattr(model_config, "max_position_embeddings", None)) if model_config is not None else None
    known = [n for n in (tokenizer_max, positions) if n is not None]
    return min(known) if known else None


# ----------------------------------------------------------------- prompts


DEFAULT_PROMPT_NAME = "default"
"""The name under which anglekit saves its general prompt (``default_prompt_name``)."""


def _template(prefix: str, where: str) -> str:
    if "{text}" in prefix:
        raise UnsupportedModelError(f"{where}: prompt {prefix!r} contains '{{text}}', which anglekit reads as the text's place")
    return prefix + "{text}"


def prompt_settings(config: dict[str, Any], where: str, template: str | None = None) -> dict[str, Any]:
    """anglekit's prompt settings for a ``config_sentence_transformers.json``, as sentence-transformers
    applies its prompts: the ``default_prompt_name`` one becomes the general ``prompt`` (applied
    when no role is given), and every named prompt a role (``query`` and ``document`` in
    ``query_prompt`` / ``document_prompt``, the others in ``prompts``), except the entry named
    ``default`` that is the default (anglekit's own name for its general prompt). ``template``: the
    general template of anglekit's custom module, which empty prefixes leave as it is."""
    _check_types(config, where, _ST_CONFIG_TYPES)
    kind = config.get("model_type")
    if kind not in (None, "SentenceTransformer"):
        raise UnsupportedModelError(f"{where}: model_type {kind!r} is not a SentenceTransformer (dense embeddings)")
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, (str, type(None))) for k, v in prompts.items()):
        raise ConfigError(f"{where}: prompts must map names to strings, got {prompts!r}")
    prompts = {k: v or "" for k, v in prompts.items()}
    default_name = config.get("default_prompt_name")
    if default_name is not None and default_name not in prompts:
        raise ConfigError(f"{where}: default_prompt_name {default_name!r} is not one of the prompts {sorted(prompts)}")
    default = prompts[default_name] if default_name is not None else ""
    settings: dict[str, Any] = {}
    if default:
        settings["prompt"] = _template(default, where)
    named: dict[str, str] = {}
    for name, prefix in prompts.items():
        if name == default_name == DEFAULT_PROMPT_NAME:
            continue
        if template is None:
            named[name] = _template(prefix, where)
        elif prefix:
            raise UnsupportedModelError(f"{where}: prompt {name!r} ({prefix!r}) before anglekit's prompt template {template!r} is not supported")
        else:
            named[name] = template
    for name, key in (("query", "query_prompt"), ("document", "document_prompt")):
        if name in named:
            settings[key] = named.pop(name)
    if named:
        settings["prompts"] = named
    if settings and template is None:
        settings["prompt_preprocess"] = False
    return settings


# ----------------------------------------------------------------- anglekit's own modules


def read_anglekit_constants(path: Path) -> dict[str, Any]:
    """The constants (``NAME = literal``) of an ``anglekit_modules.py``, read without running it."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from exc
    constants: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return constants


def _anglekit_module(name: str, revision: str | None, kind: str, path: str, where: str) -> dict[str, Any]:
    """Settings held by a custom module that ``anglekit export`` wrote."""
    if kind == ANGLEKIT_TRANSFORMER:
        source = _file(name, ANGLEKIT_MODULE_FILE, revision)
        if source is None:
            raise UnsupportedModelError(f"{where}: module {kind!r} needs {ANGLEKIT_MODULE_FILE}, which is missing")
        constants = read_anglekit_constants(source)
        template, preprocess = constants.get("TEMPLATE"), constants.get("PREPROCESS")
        if not isinstance(template, str) or not isinstance(preprocess, bool):
            raise ConfigError(f"{source}: TEMPLATE (a string) and PREPROCESS (true/false) are missing")
        return {"prompt": template, "prompt_preprocess": preprocess}
    config_file = _file(name, f"{path}/config.json", revision)
    if config_file is None:
        raise UnsupportedModelError(f"{where}: module {kind!r} has no {path}/config.json")
    pooling = _read_object(config_file, "pooling config").get("pooling")
    if not isinstance(pooling, str):
        raise ConfigError(f"{config_file}: 'pooling' (a name) is missing")
    return {"pooling": pooling}


# ----------------------------------------------------------------- the folder


def read_sentence_transformers_settings(
    name_or_path: str, *, revision: str | None = None, model_config: Any = None, through_st: bool | None = None
) -> dict[str, Any]:
    """Embedder settings of a sentence-transformers folder (or hub repository), {} when it is not one.

    ``model_config``: the transformers config (its ``max_position_embeddings`` caps the tokenizer's
    max length as in sentence-transformers). ``through_st``: read through sentence-transformers
    (default: when it imports) or by hand.
    """
    modules_file = _file(name_or_path, MODULES_FILE, revision)
    if modules_file is None:
        return {}
    if through_st is None:
        through_st = sentence_transformers_available()
    modules = _read_json(modules_file, "module list")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ConfigError(f"{modules_file}: expected a list of modules (objects with 'type' and 'path')")
    if any(module.get("type") == REFUSAL_MODULE for module in modules):
        if _file(name_or_path, "anglekit_config.json", revision) is None:
            raise UnsupportedModelError(f"{modules_file}: names {REFUSAL_MODULE!r} but the folder has no anglekit_config.json")
        return {}  # anglekit_config.json holds every setting
    settings, kinds = _module_settings(name_or_path, revision, modules, modules_file, through_st=through_st)
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedModelError(
            f"{modules_file}: modules {kinds} are not supported; anglekit applies Transformer, Pooling and an optional Normalize, in that order"
        )
    transformer, transformer_file = _transformer_config(name_or_path, revision)
    _check_transformer_config(transformer, str(transformer_file or modules_file))
    max_length = _max_length(name_or_path, revision, transformer, model_config)
    if max_length is not None:
        settings["max_length"] = max_length
    st_config_file = _file(name_or_path, ST_CONFIG_FILE, revision)
    if st_config_file is not None:
        settings.update(_st_config_settings(st_config_file, settings))
    return settings


def _module_settings(name_or_path: str, revision: str | None, modules: list[dict[str, Any]], modules_file: Any, *,
                     through_st: bool) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """(settings, module kinds) of the module list: pooling, normalize and anglekit's own modules;
    a module anglekit cannot apply is an UnsupportedModelError naming it."""
    kind_of: Callable[[str, str], str] = _st_kind if through_st else _hand_kind
    settings: dict[str, Any] = {"normalize": False}
    kinds: list[str] = []
    for index, module in enumerate(modules):
        kind, path = module.get("type"), module.get("path", "")
        where = f"{modules_file} (module {index})"
        if not isinstance(kind, str) or not isinstance(path, str):
            raise ConfigError(f"{where}: 'type' and 'path' must be strings, got {module!r}")
        if kind in (ANGLEKIT_POOLING, ANGLEKIT_TRANSFORMER):
            settings.update(_anglekit_module(name_or_path, revision, kind, path, where))
            kinds.append("Pooling" if kind == ANGLEKIT_POOLING else "Transformer")
            continue
        name = kind_of(kind, where)
        kinds.append(name)
        if name == "Pooling":
            pooling_file = _file(name_or_path, f"{path}/config.json", revision)
            if pooling_file is None:
                raise UnsupportedModelError(f"{where}: the Pooling module has no {path}/config.json")
            settings["pooling"] = _pooling(pooling_file, through_st=through_st)
        elif name == "Normalize":
            settings["normalize"] = True
        elif path not in ("", "."):
            raise UnsupportedModelError(f"{where}: the Transformer lives in the subfolder {path!r}; anglekit loads a model from the folder's root")
    return settings, kinds


def _st_config_settings(st_config_file: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """The prompts and truncation of ``config_sentence_transformers.json``, given the module
    ``settings`` read so far (a default prompt beside an anglekit template is refused)."""
    st_config = _read_object(st_config_file, "sentence-transformers config")
    prompts = prompt_settings(st_config, str(st_config_file), settings.get("prompt"))
    if "prompt" in prompts and "prompt" in settings:
        raise UnsupportedModelError(f"{st_config_file}: a default prompt and an anglekit prompt template together are not supported")
    return {**prompts, **_truncation(st_config, st_config_file, normalize=settings["normalize"])}


def _truncation(config: dict[str, Any], where: Path, *, normalize: bool) -> dict[str, Any]:
    """``truncate_dim`` of a ``config_sentence_transformers.json`` (typed by :func:`prompt_settings`),
    applied as sentence-transformers 3-6 apply it: ``encode`` keeps the first k coordinates of the
    model's output. After a Normalize module sentence-transformers cuts unit vectors (so its vectors
    are shorter than 1), while anglekit normalises after the cut: the same directions and cosine
    similarities, at unit length; a warning says so."""
    truncate_dim = config.get("truncate_dim")
    if truncate_dim is None:
        return {}
    if normalize:
        warnings.warn(
            f"{where}: truncate_dim {truncate_dim} after a Normalize module: sentence-transformers cuts the unit vectors "
            "(its vectors are shorter than 1); anglekit normalises after the cut (the same directions and cosine similarities, at unit length)",
            UserWarning,
            stacklevel=3,
        )
    return {"truncate_dim": truncate_dim}


_COMPARED = ("pooling", "normalize", "max_length", "truncate_dim")


def check_agreement(from_st: dict[str, Any], saved: Any, where: str) -> None:
    """Refuse a folder whose sentence-transformers files (``from_st``, as read by
    :func:`read_sentence_transformers_settings`) and ``anglekit_config.json`` (``saved``, an
    :class:`~anglekit.model.config.EmbedderConfig`) would embed differently, naming both values."""
    if not from_st:
        return
    differ = [
        f"{key}: {from_st[key]!r} in modules.json/its module configs, {getattr(saved, key)!r} in anglekit_config.json"
        for key in _COMPARED
        if key in from_st and from_st[key] != getattr(saved, key)
    ]
    prompts_differ = False
    st_general = from_st.get("prompt")
    if st_general != saved.prompt:
        prompts_differ = True
        differ.append(f"prompt: {st_general!r} in {ST_CONFIG_FILE}, {saved.prompt!r} in anglekit_config.json")
    st_named = {**{n: from_st[k] for n, k in (("query", "query_prompt"), ("document", "document_prompt")) if k in from_st}, **from_st.get("prompts", {})}
    ours = saved.named_prompts
    for name in dict.fromkeys([*st_named, *ours]):
        st_template, our_template = st_named.get(name), ours.get(name)
        # sentence-transformers gives every model query and document prompts: for a model without
        # those roles the layout writes its general prompt (or none) there, what encode_query uses.
        if our_template is None and name in ("query", "document") and st_template in (saved.prompt, "{text}" if saved.prompt is None else saved.prompt):
            continue
        if st_template != our_template:
            prompts_differ = True
            differ.append(f"prompts.{name}: {st_template!r} in {ST_CONFIG_FILE}, {our_template!r} in anglekit_config.json")
    templates = saved.prompt is not None or bool(ours)
    if not prompts_differ and templates and from_st.get("prompt_preprocess", bool(saved.prompt_preprocess)) != bool(saved.prompt_preprocess):
        differ.append(
            f"prompt_preprocess: {from_st['prompt_preprocess']!r} in the sentence-transformers files, {saved.prompt_preprocess!r} in anglekit_config.json"
        )
    if differ:
        raise ConfigError(
            f"{where}: the sentence-transformers files and anglekit_config.json disagree ({'; '.join(differ)}); the folder would embed differently in sentence-transformers"
        )


__all__ = [
    "ANGLEKIT_MODULE_FILE",
    "DEFAULT_PROMPT_NAME",
    "ANGLEKIT_POOLING",
    "ANGLEKIT_TRANSFORMER",
    "LEGACY_POOLING_KEYS",
    "REFUSAL_MODULE",
    "ST_TO_ANGLEKIT_POOLING",
    "check_agreement",
    "pooling_modes",
    "prompt_settings",
    "read_anglekit_constants",
    "read_sentence_transformers_settings",
    "sentence_transformers_available",
]
