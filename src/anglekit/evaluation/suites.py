"""One entry point for every evaluation suite: :func:`run_suite` (and :func:`run_suites`).

    from anglekit.model.embedder import Embedder
    from anglekit.evaluation.suites import run_suite

    model = Embedder.from_pretrained("pypi:all-minilm-l6-v2", pooling="last_avg", max_length=256)
    result = run_suite("sts", model, data_root="../shared/data", out_dir="runs/minilm", batch_size=64, cache=True)
    result["scores"]          # {"STS12": 72.37, ..., "SICK-R": 77.15, "Avg": 78.87}

Each suite writes ``<out_dir>/<suite>.json`` (everything, machine-readable) and
``<out_dir>/<suite>.md`` (a readable table); ``geometry`` also writes ``geometry.png``. Every
result has the keys ``suite``, ``columns`` (the headline columns, in table order), ``scores``
(column -> number), ``details``, ``model`` (name, fingerprint, batch size, max length, cache
hits/misses), ``options``, ``data_root``, ``seconds`` and ``created``.

A new suite is one module and one call, :func:`register_suite`: its ``evaluate(encode, data_root,
*, option=default, ...)`` returns ``suite``, ``columns``, ``scores`` and ``details``; its
``markdown(result, *, title=...)`` renders them. Its keyword-only options are its options (checked
against their annotations); an ``out_dir`` keyword receives the run's folder and a ``title`` keyword
the model's name. Then ``run_suite``, ``run_suites("all")`` and ``anglekit eval --suite NAME`` run it.
An installed distribution adds a suite with an entry point of the group ``anglekit.eval_suites``
(:mod:`anglekit.plugins`) naming a module (or object) with ``evaluate`` and ``markdown``.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anglekit.errors import ConfigError
from anglekit.evaluation.cache import CachedEncoder, EmbeddingCache
from anglekit.evaluation.encoders import prepare_encoder
from anglekit.evaluation.geometry import evaluate_geometry, geometry_markdown
from anglekit.evaluation.nontransfer import evaluate_nontransfer, nontransfer_markdown
from anglekit.evaluation.retrieval import evaluate_retrieval, retrieval_markdown
from anglekit.evaluation.sts import evaluate_sts, sts_markdown
from anglekit.evaluation.transfer import evaluate_transfer, transfer_markdown
from anglekit.io.atomic import atomic_write_json, atomic_write_text
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.plugins import GROUPS, Registry

Runner = tuple[Callable[..., dict[str, Any]], Callable[..., str]]


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name or name == "all" or "." in name or name != name.strip():
        raise ConfigError(f"a suite name is a non-empty word other than 'all', without dots, got {name!r}")


def _checked(name: str, runner: Any, others: dict[str, Any]) -> Runner:
    _check_name(name)
    if not (isinstance(runner, tuple) and len(runner) == 2 and all(callable(part) for part in runner)):
        raise ConfigError(f"suite {name!r}: evaluate and markdown must be callables")
    return runner


def _from_entry_point(name: str, loaded: Any) -> Any:
    """A plugin's suite: a module (or object) with ``evaluate`` and ``markdown``, or the pair."""
    if isinstance(loaded, tuple):
        return loaded
    return (getattr(loaded, "evaluate", None), getattr(loaded, "markdown", None))


SUITE_REGISTRY: Registry[Runner] = Registry(
    "evaluation suite",
    GROUPS["eval_suites"],
    unknown=lambda name, known: ConfigError(f"unknown suite {name!r}; choose one of {', '.join(known)}"),
    check=_checked,
    from_entry_point=_from_entry_point,
)
"""The registry: suite name -> (evaluate, markdown), in the order ``run_suites("all", ...)`` runs them
(the built-ins, then the installed plugins' suites: entry points ``anglekit.eval_suites``)."""
SUITE_REGISTRY.register("sts", (evaluate_sts, sts_markdown))
SUITE_REGISTRY.register("non-transfer", (evaluate_nontransfer, nontransfer_markdown))
SUITE_REGISTRY.register("transfer", (evaluate_transfer, transfer_markdown))
SUITE_REGISTRY.register("retrieval", (evaluate_retrieval, retrieval_markdown))
SUITE_REGISTRY.register("geometry", (evaluate_geometry, geometry_markdown))

_RUN_KEYWORDS = ("encode", "data_root", "out_dir")
"""Keywords a suite's ``evaluate`` may take that are the run's, not options."""


def register_suite(name: str, evaluate: Callable[..., dict[str, Any]], markdown: Callable[..., str], *, replace: bool = False) -> None:
    """Make suite ``name`` known to :func:`run_suite`, :func:`run_suites` (``"all"`` included, after
    the suites before it) and ``anglekit eval --suite NAME``. ``evaluate(encode, data_root, *,
    options...)`` returns the result (``suite``, ``columns``, ``scores``, ``details``);
    ``markdown(result, *, title=...)`` renders it. A name already registered is a
    :class:`~anglekit.errors.DuplicateNameError` (a ConfigError) unless ``replace``."""
    _check_name(name)
    SUITE_REGISTRY.register(name, (evaluate, markdown), replace=replace)


def unregister_suite(name: str) -> None:
    """Forget suite ``name`` (an unknown one is a ConfigError)."""
    SUITE_REGISTRY.unregister(name)


def __getattr__(attribute: str) -> Any:
    if attribute == "SUITES":  # read from the registry, so that a suite registered later is listed
        return SUITE_REGISTRY.names()
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


if TYPE_CHECKING:  # pragma: no cover
    SUITES: tuple[str, ...]
    """Suite names, in the order ``run_suites("all", ...)`` runs them (the registered suites)."""


def suite_options(name: str) -> dict[str, Any]:
    """The options a suite accepts (keyword -> default)."""
    runner = _get(name)[0]
    parameters = inspect.signature(runner).parameters.values()
    return {p.name: p.default for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _RUN_KEYWORDS}


def check_suite_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of suite ``name`` checked against its keywords' types (a :class:`ConfigError`
    naming the option and the type it expected), lists as tuples and integers as floats where a
    float is expected; a lone value where a list is expected becomes a list of one."""
    import typing

    allowed = suite_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown option(s) {unknown} for suite {name!r}; it takes {sorted(allowed)}")
    hints = typing.get_type_hints(_get(name)[0])
    return {key: _typed(f"{name}.{key}", value, hints.get(key, Any)) for key, value in options.items()}


_TYPE_NAMES = {str: "a string", bool: "true or false", int: "an integer", float: "a number"}


def _typed(where: str, value: Any, hint: Any) -> Any:
    """``value`` converted to ``hint`` (str, bool, int, float, X | None, Sequence[X]), else a ConfigError."""
    import typing
    from collections.abc import Sequence as AbcSequence

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if args and type(None) in args and origin is not AbcSequence:  # X | None
        if value is None:
            return None
        return _typed(where, value, next(a for a in args if a is not type(None)))
    if origin is AbcSequence:
        items = value if isinstance(value, (list, tuple)) else [value]
        return tuple(_typed(f"{where}[{i}]", item, args[0] if args else Any) for i, item in enumerate(items))
    ok = (isinstance(value, hint) and not (hint in (int, float) and isinstance(value, bool))) or (
        hint is float and isinstance(value, int) and not isinstance(value, bool)
    )
    if not ok:
        shown = f"{type(value).__name__} {value!r}" if value is not None else "nothing (null)"
        raise ConfigError(f"option {where}: expected {_TYPE_NAMES.get(hint, getattr(hint, '__name__', str(hint)))}, got {shown}")
    return float(value) if hint is float else value


def _get(name: str) -> Runner:
    return SUITE_REGISTRY.get(name)


def _data_root(data_root: str | os.PathLike[str] | None) -> Path:
    if data_root is None:
        from anglekit.data.catalog import default_data_root

        root = default_data_root()
        if root is None:
            raise ConfigError("no data root: pass data_root= or set $ANGLEKIT_DATA to the folder holding senteval/, stsb/ ...")
        return root
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"data_root {os.fspath(data_root)!r} is not a directory")
    return root


def make_encoder(
    model: Any,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_length: int | None = None,
    cache: bool | str | os.PathLike[str] = False,
    name: str | None = None,
    fingerprint: str | None = None,
    progress: bool = True,
) -> Callable[..., Any]:
    """The encoder the suites call: :func:`prepare_encoder`, behind an embedding cache if asked.

    ``cache``: False (no cache), True (the default folder, ``$ANGLEKIT_CACHE/embeddings`` or
    ``~/.cache/anglekit/embeddings``) or a folder. Caching needs a fingerprint (an Embedder has
    one; for a plain callable pass ``fingerprint=``).
    """
    encoder = prepare_encoder(model, batch_size=batch_size, max_length=max_length, name=name, fingerprint=fingerprint, progress=progress)
    if cache is False or cache is None:
        return encoder
    if not encoder.fingerprint:
        raise ConfigError(
            "cache=... needs the model's fingerprint: pass fingerprint= (e.g. anglekit.evaluation.encoders.fingerprint_directory(model_dir)) or use an Embedder"
        )
    directory = None if cache is True else cache
    return CachedEncoder(encoder, EmbeddingCache(directory, fingerprint=encoder.fingerprint, max_length=encoder.max_length))


def run_suite(
    name: str,
    encode: Any,
    *,
    data_root: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_length: int | None = None,
    cache: bool | str | os.PathLike[str] = False,
    model_name: str | None = None,
    fingerprint: str | None = None,
    progress: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """Run one suite (``sts``, ``non-transfer``, ``transfer``, ``retrieval``, ``geometry``).

    ``encode``: an Embedder, a SentenceTransformer, a ``texts -> array`` callable, or an encoder
    from :func:`make_encoder` (then its own batch size and max length apply, and ``cache`` must
    not be given again for a cached one).
    ``options`` are the suite's own keywords (see :func:`suite_options`); an unknown one is a
    ConfigError. With ``out_dir`` the JSON and markdown files are written there (atomically).
    Returns the result dict.
    """
    runner, render = _get(name)
    allowed = suite_options(name)
    options = check_suite_options(name, options)
    try:
        root: Path | None = _data_root(data_root)
    except ConfigError:
        if not options.get("data"):
            raise
        root = None  # a suite given its own data (retrieval's BEIR folders) needs no data root
    if isinstance(encode, CachedEncoder):
        if cache not in (False, None):
            raise ConfigError("encode is already a CachedEncoder; drop cache=")
        encoder: Any = encode
    else:  # a PreparedEncoder passes through make_encoder unchanged (its own batch size wins), cached if asked
        encoder = make_encoder(encode, batch_size=batch_size, max_length=max_length, cache=cache, name=model_name, fingerprint=fingerprint, progress=progress)
    kwargs = dict(options)
    takes = inspect.signature(runner).parameters
    if "title" in takes:  # a suite that names the model in its own output (geometry's figure)
        kwargs.setdefault("title", model_name or getattr(encoder, "name", "") or "")
    if "out_dir" in takes and out_dir is not None:  # a suite that writes files of its own (geometry.png)
        kwargs["out_dir"] = out_dir
    hits0, misses0 = getattr(encoder, "hits", 0), getattr(encoder, "misses", 0)
    start = time.perf_counter()
    result = runner(encoder, root, **kwargs)
    seconds = time.perf_counter() - start
    info = encoder.info() if hasattr(encoder, "info") else {"name": getattr(encoder, "__name__", "encoder")}
    if isinstance(info.get("cache"), dict):  # this suite's share (one cache may serve several suites)
        info["cache"] = {**info["cache"], "hits": encoder.hits - hits0, "misses": encoder.misses - misses0}
    if model_name:
        info["name"] = model_name
    result.update(
        {
            "model": info,
            "options": {k: v for k, v in {**allowed, **options}.items() if k not in ("title",)},
            "data_root": str(root) if root is not None else None,
            "seconds": round(seconds, 2),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / f"{name}.json", result)
        title = str(info.get("name") or "model")
        atomic_write_text(out / f"{name}.md", render(result, title=title) + f"\n_{seconds:.1f} s_\n")
    return result


def run_suites(names: str | Sequence[str], encode: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """Run several suites with one encoder (and one cache); ``"all"`` runs :data:`SUITES`.

    Keyword arguments are those of :func:`run_suite`; suite options go in ``options={suite: {...}}``.
    """
    selected = list(SUITE_REGISTRY.names()) if names == "all" else ([names] if isinstance(names, str) else list(names))
    for n in selected:
        _get(n)
    per_suite = kwargs.pop("options", {}) or {}
    bad = sorted(set(per_suite) - set(selected))
    if bad:
        raise ConfigError(f"options given for suite(s) {bad} that are not run")
    encoder_keys = ("batch_size", "max_length", "cache", "model_name", "fingerprint", "progress")
    enc_kwargs = {k: kwargs.pop(k) for k in encoder_keys if k in kwargs}
    encoder = make_encoder(
        encode,
        batch_size=enc_kwargs.get("batch_size", DEFAULT_BATCH_SIZE),
        max_length=enc_kwargs.get("max_length"),
        cache=enc_kwargs.get("cache", False),
        name=enc_kwargs.get("model_name"),
        fingerprint=enc_kwargs.get("fingerprint"),
        progress=enc_kwargs.get("progress", True),
    )
    return {n: run_suite(n, encoder, model_name=enc_kwargs.get("model_name"), **kwargs, **per_suite.get(n, {})) for n in selected}
