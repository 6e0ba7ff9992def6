"""Export a model to the formats other tools load, and push it to the Hugging Face hub.

``export(model, format="sentence-transformers", output_dir=DIR)`` writes a folder that embeds
exactly like the anglekit model in the target runtime, or refuses with the reason
(:class:`~anglekit.errors.ExportError`); it never leaves a half-written folder. When the target
runtime is installed, the export is checked against it on a few texts (one longer than the max
length) before it lands.

Formats are a registry: :data:`FORMATS` maps a name to the module that writes it. A format module
has ``NAME``, ``DESCRIPTION``, ``write(model, folder, card=..., **options) -> layout``
(``layout.custom``: loading needs trust_remote_code), ``verify(model, folder, layout) -> (difference
or None, how)``, ``tolerance(model)`` and, when it takes options, ``Options``: a dataclass whose
fields, declared with :func:`anglekit.config.setting` (type, default, choices, help), are the
keywords of ``write`` and the flags of ``anglekit export`` (a list of texts is given there as a
file of texts). A new format is one module and one ``FORMATS.register(name, module)`` call, or, from
an installed distribution, an entry point of the group ``anglekit.export_formats`` naming the module
(:mod:`anglekit.plugins`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from anglekit.config import check_fields
from anglekit.errors import ConfigError, ExportError
from anglekit.io.atomic import settle_modes, staging_dir
from anglekit.plugins import GROUPS, Registry

FORMAT_ATTRIBUTES = ("DESCRIPTION", "write", "verify", "tolerance")
"""What a format module has (``Options`` too when it takes options)."""


def _checked_format(name: str, module: Any, others: dict[str, Any]) -> str | ModuleType:
    if isinstance(module, str):  # an import path, imported when first used
        return module
    missing = [attribute for attribute in FORMAT_ATTRIBUTES if not hasattr(module, attribute)]
    if missing:
        raise ExportError(f"export format {name!r}: its module {getattr(module, '__name__', module)!r} lacks {', '.join(missing)}")
    return module


FORMATS: Registry[str | ModuleType] = Registry(
    "export format",
    GROUPS["export_formats"],
    unknown=lambda name, known: ExportError(f"unknown export format {name!r}; choose one of {', '.join(known)}"),
    check=_checked_format,
)
"""Export format name -> the module that writes it: its import path (imported when first used; the
format modules import no torch, so ``anglekit export --help`` can list their options), or the module;
then the installed plugins' formats (entry points ``anglekit.export_formats``)."""
FORMATS.register("sentence-transformers", "anglekit.export.sentence_transformers")
FORMATS.register("onnx", "anglekit.export.onnx")
FORMATS.register("openvino", "anglekit.export.openvino")


@dataclass
class ExportResult:
    """What :func:`export` wrote and how it was checked."""

    folder: Path
    format: str
    max_difference: float | None
    """Largest absolute difference of normalised vectors between the model and the target runtime
    loading the folder (None when the runtime is not installed or the check was skipped)."""
    check: str
    """How the folder was checked, or why not."""
    trust_remote_code: bool
    """Whether loading the folder runs its own code (``anglekit_modules.py``)."""
    url: str | None = None
    """The hub commit, when pushed."""


def format_module(name: str) -> ModuleType:
    """The module that writes format ``name``, or an ExportError listing the formats."""
    module = FORMATS.get(name)
    return importlib.import_module(module) if isinstance(module, str) else module


def format_options(name: str) -> type | None:
    """The ``Options`` dataclass of format ``name`` (its options, typed, with their help), or None
    for a format without options."""
    return getattr(format_module(name), "Options", None)


def _format_options(format: str, declared: type | None, options: dict[str, Any]) -> dict[str, Any]:
    """The keywords of the format's ``write``: every option it declares, as given or its default
    (checked against its type and choices), or an ExportError naming an option it does not take."""
    names = [f.name for f in dataclasses.fields(declared)] if declared is not None else []
    given = {k: v for k, v in options.items() if v is not None}
    _check_options_fit(format, given)
    if declared is None:
        return {}
    values = declared(**given)
    try:
        check_fields(values)
    except ConfigError as exc:
        raise ExportError(f"option {exc} (the {format} format)") from None
    return {name: getattr(values, name) for name in names}


def _settings_by_name(format: str) -> dict[str, Any]:
    """{field name: its Setting} of the options format ``format`` declares."""
    from anglekit.config import settings_of

    declared = format_options(format)
    return {s.name: s for s in settings_of(declared)} if declared is not None else {}


def _flag(name: str, value: Any) -> str:
    """How an option given as ``name=value`` reads on the command line (``--quantize int8-static``)."""
    for other in FORMATS:
        setting = _settings_by_name(other).get(name)
        if setting is not None:
            flag = setting.flags[0]
            return f"{flag} {value}" if setting.choices is not None and isinstance(value, str) else flag
    return name


def _check_options_fit(format: str, given: dict[str, Any]) -> None:
    """An ExportError, speaking in flags, when an option given is not one of format ``format``
    (or its value not one of its choices there), naming the formats that take them all."""
    own = _settings_by_name(format)

    def fits(settings: dict[str, Any], name: str, value: Any) -> bool:
        setting = settings.get(name)
        if setting is None:
            return False
        return setting.choices is None or not isinstance(value, str) or value in setting.choices

    misfits = [name for name, value in given.items() if not fits(own, name, value)]
    if not misfits:
        return
    flags = " ".join(_flag(name, given[name]) for name in misfits)
    takers = [other for other in FORMATS if other != format and all(fits(_settings_by_name(other), n, v) for n, v in given.items())]
    choices = [f"its {own[n].flags[0]} takes {', '.join(map(str, own[n].choices))}" for n in misfits if n in own and own[n].choices is not None]
    message = f"{flags}: not {'an option' if len(misfits) == 1 else 'options'} of the {format} format" + (f" ({'; '.join(choices)})" if choices else "")
    if len(takers) == 1:
        message += f"; that is the {takers[0]} format's: --format {takers[0]} ({format_module(takers[0]).DESCRIPTION})"
    elif takers:
        message += f"; the {' and '.join(takers)} formats take {'it' if len(misfits) == 1 else 'them'}: --format {' or --format '.join(takers)}"
    raise ExportError(message)


def _embedder(model: Any, load_kwargs: dict[str, Any]) -> Any:
    """An Embedder without adapters: ``model`` itself, a merged copy of it, or loaded from a path."""
    from anglekit.model.embedder import Embedder

    if isinstance(model, (str, os.PathLike)):
        load_kwargs.setdefault("device", "cpu")
        embedder = Embedder.from_pretrained(model, **load_kwargs)
        _check_weights(embedder)
        return embedder.merge_lora() if embedder.has_lora else embedder
    if load_kwargs:
        raise ExportError(f"loading options {sorted(load_kwargs)} apply only when the model is given as a name or path")
    if not isinstance(model, Embedder):
        raise ExportError(f"model must be an Embedder, a folder or a hub name, got {type(model).__name__}")
    _check_weights(model)
    if model.has_lora:  # merge a copy: the caller's model keeps its adapters
        return copy.deepcopy(model).merge_lora()
    return model


def _check_weights(model: Any) -> None:
    """Refuse quantised weights (bitsandbytes k-bit): an export would carry them, not the model's."""
    from anglekit.llm.lora import unwrap

    method = getattr(unwrap(model.backbone), "quantization_method", None)
    if method is not None:
        raise ExportError(
            f"the model's weights are quantised ({getattr(method, 'value', method)}); load it in full precision (without load_in_kbit) to export it"
        )


def _source_paths(model: Any, load_kwargs: dict[str, Any]) -> list[str]:
    """The local files and folders the export reads: the model (or an Embedder's own folder), and
    the base its adapters merge into (given, or recorded in adapter_config.json)."""
    found: list[Any] = []
    if isinstance(model, (str, os.PathLike)):
        found.append(model)
        adapter_config = Path(model) / "adapter_config.json"
        if adapter_config.is_file():
            with contextlib.suppress(OSError, ValueError, AttributeError):  # a bad adapter_config.json is named when the model loads
                found.append(json.loads(adapter_config.read_text(encoding="utf-8")).get("base_model_name_or_path"))
    else:
        for part in (getattr(model, "backbone", None), getattr(model, "tokenizer", None)):
            found.append(getattr(part, "name_or_path", None))
    found.append(load_kwargs.get("base_model"))
    return [os.fspath(p) for p in found if isinstance(p, (str, os.PathLike)) and os.fspath(p) and os.path.exists(p)]


RUNTIME_GRAPH_FORMATS = {"onnx": "onnx_config.json", "openvino": "openvino_config.json"}
"""Formats whose export may go into a new subfolder of the model's own folder (format -> the info
file an earlier export of it holds): ``anglekit serve`` serves an int8 one found there."""


def _check_not_source(output_dir: str | os.PathLike[str] | None, sources: list[str], format: str | None = None) -> None:
    """Refuse an output folder that is a source, inside one, or holds one (symlinks resolved): the
    export replaces the whole folder, which would destroy the model it reads. A runtime graph
    (:data:`RUNTIME_GRAPH_FORMATS`) may go into a subfolder of the model that is new, empty, or an
    earlier export of that format: nothing of the model is replaced."""
    if output_dir is None or not os.fspath(output_dir):
        return
    target = Path(os.path.realpath(output_dir))
    for source in sources:
        real = Path(os.path.realpath(source))
        if target == real:
            how = "is"
        elif target.is_relative_to(real):
            if format in RUNTIME_GRAPH_FORMATS and _free_or_graph(target, RUNTIME_GRAPH_FORMATS[format]):
                continue
            how = "is inside"
        elif real.is_relative_to(target):
            how = "contains"
        else:
            continue
        shown = f"{source} ({real})" if str(real) != os.path.abspath(source) else str(source)
        raise ExportError(
            f"{output_dir}: the output folder {how} the model being exported, {shown}; an export never writes into "
            "its source (--overwrite would replace the model): choose a folder outside it"
        )


def _free_or_graph(target: Path, info_file: str) -> bool:
    """Whether ``target`` does not exist, is an empty folder, or holds an earlier export (``info_file``)."""
    if not target.exists():
        return True
    return target.is_dir() and (not any(target.iterdir()) or (target / info_file).is_file())


def _prepare_target(output_dir: str | os.PathLike[str] | None, overwrite: bool) -> Path:
    if output_dir is None or not os.fspath(output_dir):
        raise ExportError("output_dir is required: the folder to write the exported model into")
    target = Path(output_dir)
    if target.exists() and not target.is_dir():
        raise ExportError(f"{target}: exists and is not a folder")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise ExportError(f"{target}: folder is not empty; choose a new folder or overwrite it (overwrite=True, --overwrite)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"{target}: cannot create its parent folder ({exc.strerror or exc})") from None
    return target


def _move_into_place(staging: Path, target: Path) -> None:
    """Replace ``target`` by ``staging`` (two renames; the old content is removed afterwards)."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        os.replace(target, old / "content")
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def export(
    model: Any,
    format: str = "sentence-transformers",
    output_dir: str | os.PathLike[str] | None = None,
    *,
    overwrite: bool = False,
    verify: bool = True,
    card: Any = None,
    push_to_hub: str | None = None,
    private: bool | None = None,
    token: str | None = None,
    options: dict[str, Any] | None = None,
    **load_kwargs: Any,
) -> ExportResult:
    """Write ``model`` (an Embedder, a folder, a hub name or ``pypi:NAME``) in ``format`` to ``output_dir``.

    - Adapters are merged first (into a copy when an Embedder is given).
    - ``verify``: load the result with the target runtime when it is installed and refuse the export
      (ExportError, nothing written) when it embeds differently beyond the format's tolerance.
    - ``overwrite``: replace a non-empty ``output_dir`` (default: refuse).
    - ``card``: a :class:`~anglekit.model.card.ModelCardData` for the README.md (default: the model's).
    - ``push_to_hub="owner/name"``: then upload the folder (``private``, ``token``).
    - ``options``: the format's own options (the fields of its ``Options``: for ``onnx``, ``quantize`` and
      ``optimize``; for ``openvino``, ``quantize``, ``calibration_texts`` and ``precision``); None means
      the default, an option the format lacks is an ExportError.
    - ``load_kwargs``: :meth:`Embedder.from_pretrained` options when ``model`` is a name (device
      defaults to cpu).
    """
    if push_to_hub is None and (private is not None or token is not None):
        given = " and ".join(n for n, v in (("private (--private)", private), ("token", token)) if v is not None)
        raise ExportError(f"{given} appl{'y' if ' and ' in given else 'ies'} only when uploading: add push_to_hub (--push-to-hub owner/name)")
    if push_to_hub is not None and (not isinstance(push_to_hub, str) or not push_to_hub.strip()):
        raise ExportError(f"push_to_hub must name a hub repository (owner/name), got {push_to_hub!r}")
    writer = format_module(format)
    options = _format_options(format, getattr(writer, "Options", None), options or {})
    _check_not_source(output_dir, _source_paths(model, load_kwargs), format)
    target = _prepare_target(output_dir, overwrite)
    embedder = _embedder(model, dict(load_kwargs))
    _check_not_source(target, _source_paths(embedder, {}), format)  # a hub name or pypi: model resolved to a local folder
    staging = staging_dir(target)  # mkdir's mode under the umask: it becomes the target
    try:
        layout = writer.write(embedder, staging, card=card, **options)
        difference, how = (None, "not checked (verify=False)")
        if verify:
            difference, how = writer.verify(embedder, staging, layout)
            limit = writer.tolerance(embedder)
            if difference is not None and not difference <= limit:
                raise ExportError(
                    f"the {format} folder embeds differently from the model (max difference {difference:.2e} "
                    f"> {limit:.0e}, {how}); nothing was written to {target}"
                )
        settle_modes(staging)  # mkdir's and open()'s modes under the umask, whatever wrote the files
        _move_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = ExportResult(target, format, difference, how, bool(getattr(layout, "custom", False)))
    if push_to_hub is not None:
        result.url = push(target, push_to_hub, private=private, token=token)
    return result


def push(
    model_or_folder: Any,
    repo_id: str,
    *,
    format: str = "sentence-transformers",
    private: bool | None = None,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Upload to the hub repository ``repo_id`` through huggingface_hub: a folder as it is, or an
    Embedder exported to ``format`` first; the commit's URL."""
    from anglekit.export.hub import push_folder

    if isinstance(model_or_folder, (str, os.PathLike)):
        return push_folder(model_or_folder, repo_id, private=private, token=token, revision=revision, commit_message=commit_message)
    with tempfile.TemporaryDirectory(prefix="anglekit-push-") as scratch:
        exported = export(model_or_folder, format, Path(scratch) / "model")
        return push_folder(exported.folder, repo_id, private=private, token=token, revision=revision, commit_message=commit_message)


push_to_hub = push
"""Alias of :func:`push`."""

__all__ = ["FORMATS", "ExportResult", "export", "format_module", "format_options", "push", "push_to_hub"]
