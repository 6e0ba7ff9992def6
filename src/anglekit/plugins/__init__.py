"""One registry shape for everything a plugin can add: objectives, inference backends, export
formats and evaluation suites.

A :class:`Registry` maps names to items in registration order: :meth:`~Registry.register` (a name
taken is a :class:`~anglekit.errors.DuplicateNameError` unless ``replace=True``),
:meth:`~Registry.unregister`, :meth:`~Registry.names`, :meth:`~Registry.get` (an unknown name is
the registry's own typed error, listing the names), and read-only mapping access (``in``, iteration, ``registry[name]``, ``items()``, ``values()``).

**Installed plugins.** A distribution adds to a registry through an entry point of its group
(:data:`GROUPS`): the entry point's name is the name registered, its object the item (each registry
says what it takes). Entry points are read when the registry is first asked for its names or an
item, not when anglekit is imported. A plugin that fails to load (an import error, a ``sys.exit()``
as it is imported, a wrong object, a name already taken) is left out with a :class:`PluginWarning`
naming it and its distribution; the command goes on without it (Ctrl-C still stops it).

This package imports only :mod:`anglekit.errors`: every layer can hold a registry without cycles.
"""

from __future__ import annotations

import importlib.metadata
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from anglekit.errors import ConfigError, DuplicateNameError

T = TypeVar("T")

GROUPS = {
    "objectives": "anglekit.objectives",
    "backends": "anglekit.backends",
    "export_formats": "anglekit.export_formats",
    "eval_suites": "anglekit.eval_suites",
}
"""Kind -> the entry-point group a distribution declares its plugins of that kind in."""


class PluginWarning(UserWarning):
    """An installed plugin could not be loaded and is left out (the message names it and why)."""


def installed_plugins(group: str) -> list[tuple[str, str]]:
    """The entry points of ``group`` as (name, distribution), without importing them (sorted by name)."""
    found = []
    for entry in importlib.metadata.entry_points(group=group):
        dist = getattr(entry, "dist", None)
        found.append((entry.name, f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"))
    return sorted(found)


class Registry(Generic[T]):
    """Named items of one kind, with the installed plugins of entry-point group ``group`` added on
    first read.

    ``kind``: what an item is, in messages ("backend"). ``unknown(name, names)``: the error of
    :meth:`get` for a name not registered (default: a ConfigError listing the names). ``check(name,
    item, others)``: validates an item before it is added, against ``others`` (the other items
    registered so far, by name; no plugin is read for it), and returns what to store (raise a typed
    error to refuse it). ``from_entry_point(name, obj)``: the item of an entry point's loaded object
    (default: the object).
    """

    def __init__(
        self,
        kind: str,
        group: str | None = None,
        *,
        unknown: Callable[[str, tuple[str, ...]], Exception] | None = None,
        check: Callable[[str, Any, dict[str, T]], T] | None = None,
        from_entry_point: Callable[[str, Any], Any] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self._items: dict[str, T] = {}
        self._unknown = unknown
        self._check = check
        self._from_entry_point = from_entry_point
        self._lock = threading.RLock()
        self._plugins_read = group is None
        self.plugins: dict[str, str] = {}
        """Name -> the distribution (name and version) of each plugin loaded from an entry point."""

    # -- changing ------------------------------------------------------------------------------

    def register(self, name: str, item: T, *, replace: bool = False) -> T:
        """Add ``item`` as ``name``; returns it. A name already registered is a
        :class:`~anglekit.errors.DuplicateNameError` unless ``replace``; a bad name or item is the
        registry's typed error. Registering reads no plugin (built-ins register at import)."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise ConfigError(f"a {self.kind} name is a non-empty string without surrounding spaces, got {name!r}")
        with self._lock:
            if name in self._items and not replace:
                origin = f" (by the plugin of {self.plugins[name]})" if name in self.plugins else ""
                raise DuplicateNameError(f"{self.kind} {name!r} is registered already{origin}", kind=self.kind, name=name)
            others = {key: value for key, value in self._items.items() if key != name}
            stored = self._check(name, item, others) if self._check is not None else item
            self._items[name] = stored
            if replace:
                self.plugins.pop(name, None)
            return stored

    def unregister(self, name: str) -> T:
        """Remove ``name``; returns its item (an unknown name is the registry's error)."""
        with self._lock:
            item = self.get(name)
            del self._items[name]
            self.plugins.pop(name, None)
            return item

    # -- reading -------------------------------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (built-ins first, then plugins by name)."""
        self.load_plugins()
        return tuple(self._items)

    def get(self, name: str) -> T:
        """The item registered as ``name``, else the registry's typed error listing the names."""
        self.load_plugins()
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            raise self._unknown_error(name) from None

    def __getitem__(self, name: str) -> T:
        self.load_plugins()
        return self._items[name]

    def items(self) -> list[tuple[str, T]]:
        """(name, item) pairs, in registration order."""
        self.load_plugins()
        return list(self._items.items())

    def values(self) -> list[T]:
        """The items, in registration order."""
        self.load_plugins()
        return list(self._items.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        self.load_plugins()
        try:
            return name in self._items
        except TypeError:
            return False

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._items)})"

    def _unknown_error(self, name: Any) -> Exception:
        known = tuple(self._items)
        if self._unknown is not None:
            return self._unknown(name, known)
        return ConfigError(f"unknown {self.kind} {name!r}; registered: {', '.join(known) or 'none'}")

    # -- plugins -------------------------------------------------------------------------------

    def load_plugins(self) -> None:
        """Register the installed plugins of the group (once; later calls do nothing)."""
        if self._plugins_read:
            return
        with self._lock:
            if self._plugins_read:
                return
            self._plugins_read = True  # first: a plugin's module may read this registry as it loads
            for entry in sorted(importlib.metadata.entry_points(group=self.group or ""), key=lambda e: e.name):
                self._load_entry_point(entry)

    def _load_entry_point(self, entry: importlib.metadata.EntryPoint) -> None:
        dist = getattr(entry, "dist", None)
        origin = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
        try:
            loaded = entry.load()
            item = self._from_entry_point(entry.name, loaded) if self._from_entry_point is not None else loaded
            self.register(entry.name, item)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plugin is left out, the command goes on (Ctrl-C still stops it)
            why = f"it called sys.exit({exc.code!r}) as it loaded" if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"anglekit: the {self.kind} plugin {entry.name!r} ({entry.value}, from {origin}; entry point group {self.group}) is left out: {why}",
                PluginWarning,
                stacklevel=4,
            )
            return
        self.plugins[entry.name] = origin


__all__ = ["GROUPS", "PluginWarning", "Registry", "installed_plugins"]
