"""The one registry shape (anglekit.plugins.Registry) and its entry points: register, unregister,
names, get; a duplicate name is a DuplicateNameError; entry points are read on the first read (not
at import, not on register), once; a plugin that fails to load is named in a PluginWarning and left
out while the others load. The four registries of anglekit use it. Entry points come from
distributions written here (dist-info folders on sys.path), nothing installed."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from anglekit.errors import ConfigError, DataError, DuplicateNameError
from anglekit.plugins import GROUPS, PluginWarning, Registry, installed_plugins

GROUP = "anglekit.tests_widgets"


def add_distribution(root: Path, name: str, entry_points: dict[str, str], *, group: str = GROUP, modules: dict[str, str] | None = None) -> None:
    """A distribution ``name`` 0.1 on ``root`` (put on sys.path by the caller) with ``entry_points`` in ``group``."""
    dist = root / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[{group}]\n{lines}", encoding="utf-8")
    for module, source in (modules or {}).items():
        (root / f"{module}.py").write_text(source, encoding="utf-8")


@pytest.fixture
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m.startswith("widgets_")]:
        del sys.modules[name]


def widgets() -> Registry[int]:
    def check(name: str, item: object, others: dict[str, int]) -> int:
        if not isinstance(item, int) or isinstance(item, bool):
            raise ConfigError(f"widget {name!r} must be an integer, got {type(item).__name__}")
        if item in others.values():
            raise ConfigError(f"widget {name!r}: {item} is taken")
        return item

    return Registry("widget", GROUP, unknown=lambda name, known: DataError(f"no widget {name!r} among {list(known)}"), check=check)


def test_register_unregister_names_get_and_typed_errors() -> None:
    registry = widgets()
    assert registry.register("one", 1) == 1 and registry.register("two", 2) == 2
    assert registry.names() == ("one", "two") == tuple(registry) and len(registry) == 2
    assert registry.get("two") == 2 == registry["two"] and "one" in registry and "three" not in registry and [] not in registry
    assert registry.items() == [("one", 1), ("two", 2)] and registry.values() == [1, 2]
    with pytest.raises(DuplicateNameError, match="widget 'one' is registered already") as caught:
        registry.register("one", 3)
    assert (caught.value.kind, caught.value.name) == ("widget", "one") and isinstance(caught.value, ConfigError)
    assert registry.register("one", 3, replace=True) == 3 and registry.get("one") == 3
    with pytest.raises(DataError, match=r"no widget 'zero' among \['one', 'two'\]"):
        registry.get("zero")
    with pytest.raises(DataError, match="no widget"):
        registry.get(["unhashable"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="widget 'bad' must be an integer, got str"):
        registry.register("bad", "1")
    with pytest.raises(ConfigError, match="widget 'four': 2 is taken"):
        registry.register("four", 2)
    for bad in ("", " padded", 5):
        with pytest.raises(ConfigError, match="a widget name is a non-empty string"):
            registry.register(bad, 9)  # type: ignore[arg-type]
    assert registry.unregister("two") == 2 and registry.names() == ("one",)
    with pytest.raises(DataError, match="no widget 'two'"):
        registry.unregister("two")
    assert Registry("thing").names() == ()  # no group: no plugins
    with pytest.raises(ConfigError, match=r"unknown thing 'x'; registered: none"):
        Registry("thing").get("x")


def test_entry_points_are_read_on_the_first_read_once_and_broken_ones_are_named(site_dir: Path) -> None:
    add_distribution(site_dir, "good-widgets", {"seven": "widgets_good:SEVEN", "eight": "widgets_good:EIGHT"},
                     modules={"widgets_good": "import sys\nSEVEN = 7\nEIGHT = 8\nsys.modules[__name__].loaded = True\n"})  # fmt: skip
    add_distribution(site_dir, "bad-widgets", {"broken": "widgets_broken:X", "wrong": "widgets_wrong:TEXT", "one": "widgets_wrong:ONE"},
                     modules={"widgets_broken": "raise ImportError('no module named torchwidgets')\n", "widgets_wrong": "TEXT = 'seven'\nONE = 100\n"})  # fmt: skip
    registry = widgets()
    registry.register("one", 1)  # a built-in: registering reads no plugin
    assert "widgets_good" not in sys.modules
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert registry.names() == ("one", "eight", "seven")
        assert registry.names() == ("one", "eight", "seven")  # read once
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, PluginWarning))
    assert len(messages) == 3, messages
    assert messages[0].startswith(
        "anglekit: the widget plugin 'broken' (widgets_broken:X, from bad-widgets 0.1; entry point group anglekit.tests_widgets) is left out: ImportError: no module named torchwidgets"
    )
    assert (
        "the widget plugin 'one' (widgets_wrong:ONE, from bad-widgets 0.1" in messages[1]
        and "DuplicateNameError: widget 'one' is registered already" in messages[1]
    )
    assert "the widget plugin 'wrong'" in messages[2] and "ConfigError: widget 'wrong' must be an integer, got str" in messages[2]
    assert registry.plugins == {"eight": "good-widgets 0.1", "seven": "good-widgets 0.1"}
    with pytest.raises(DuplicateNameError, match=r"widget 'seven' is registered already \(by the plugin of good-widgets 0.1\)"):
        registry.register("seven", 70)
    assert installed_plugins(GROUP) == [("broken", "bad-widgets 0.1"), ("eight", "good-widgets 0.1"), ("one", "bad-widgets 0.1"),
                                        ("seven", "good-widgets 0.1"), ("wrong", "bad-widgets 0.1")]  # fmt: skip


def test_a_plugin_that_reads_its_registry_while_loading_does_not_recurse(site_dir: Path) -> None:
    registry = widgets()
    sys.modules["widgets_registry_under_test"] = registry  # type: ignore[assignment]
    try:
        source = "import sys\nregistry = sys.modules['widgets_registry_under_test']\nNAMES = registry.names()\nVALUE = 5\n"
        add_distribution(site_dir, "reader", {"five": "widgets_reader:VALUE"}, modules={"widgets_reader": source})
        assert registry.names() == ("five",)
        assert sys.modules["widgets_reader"].NAMES == ()  # type: ignore[attr-defined]
    finally:
        del sys.modules["widgets_registry_under_test"]


@pytest.mark.parametrize(
    ("kind", "entry", "module_source", "message"),
    [
        ("backends", "widgets_kind:OBJ", "OBJ = object()\n", "backend 'plugged' must be an anglekit.model.backends.InferenceBackend, got object"),
        ("objectives", "widgets_kind:OBJ", "OBJ = 3\n", "objective family 'plugged' must be an anglekit.losses.registry.ObjectiveFamily, got int"),
        (
            "export_formats",
            "widgets_kind",
            "DESCRIPTION = 'half a format'\n",
            "export format 'plugged': its module 'widgets_kind' lacks write, verify, tolerance",
        ),
        ("eval_suites", "widgets_kind", "def evaluate(encode, data_root): ...\n", "suite 'plugged': evaluate and markdown must be callables"),
    ],
)
def test_each_registry_of_anglekit_refuses_a_wrong_plugin_with_a_warning(site_dir: Path, kind: str, entry: str, module_source: str, message: str) -> None:
    from anglekit.evaluation.suites import SUITE_REGISTRY
    from anglekit.export import FORMATS
    from anglekit.losses.registry import FAMILIES
    from anglekit.model.backends import BACKENDS

    registry = {"backends": BACKENDS, "objectives": FAMILIES, "export_formats": FORMATS, "eval_suites": SUITE_REGISTRY}[kind]
    assert registry.group == GROUPS[kind]
    before = registry.names()  # anglekit's registry reads the installed plugins (none here) now, or read them already
    add_distribution(site_dir, "wrong-plugin", {"plugged": entry}, group=GROUPS[kind], modules={"widgets_kind": module_source})
    fresh = Registry(registry.kind, registry.group, check=registry._check, from_entry_point=registry._from_entry_point)
    with pytest.warns(PluginWarning, match="is left out") as caught:
        assert fresh.names() == ()
    assert message in str(caught[0].message) and "from wrong-plugin 0.1" in str(caught[0].message)
    assert registry.names() == before  # entry points are read once


@pytest.mark.parametrize(
    ("exit_call", "shown"),
    [("sys.exit()", "sys.exit(None)"), ("sys.exit(3)", "sys.exit(3)"), ("sys.exit('torchwidgets is missing')", "sys.exit('torchwidgets is missing')"), ("raise SystemExit(0)", "sys.exit(0)")],
)  # fmt: skip
def test_a_plugin_that_exits_as_it_loads_is_named_and_left_out(site_dir: Path, exit_call: str, shown: str) -> None:
    """A module that calls sys.exit() on import is one more broken plugin: warned of, not the end of the command."""
    add_distribution(site_dir, "quitting-widgets", {"quits": "widgets_quits:X", "nine": "widgets_nine:NINE"},
                     modules={"widgets_quits": f"import sys\n{exit_call}\nX = 1\n", "widgets_nine": "NINE = 9\n"})  # fmt: skip
    registry = widgets()
    with pytest.warns(PluginWarning) as caught:
        assert registry.names() == ("nine",)
    messages = [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]
    assert messages == [
        "anglekit: the widget plugin 'quits' (widgets_quits:X, from quitting-widgets 0.1; entry point group anglekit.tests_widgets) "
        f"is left out: it called {shown} as it loaded"
    ]
    assert registry.plugins == {"nine": "quitting-widgets 0.1"}


def test_ctrl_c_while_a_plugin_loads_still_stops_the_command(site_dir: Path) -> None:
    add_distribution(site_dir, "slow-widgets", {"slow": "widgets_slow:X"}, modules={"widgets_slow": "raise KeyboardInterrupt\n"})
    with pytest.raises(KeyboardInterrupt):
        widgets().names()


def test_the_command_line_goes_on_past_a_plugin_that_exits_as_it_loads(tmp_path: Path) -> None:
    """Through the command: ``anglekit train --help`` reads the objective plugins; one that calls
    sys.exit() is named in a warning, the help is printed with the built-in presets, exit 0."""
    import subprocess

    import anglekit

    site = tmp_path / "site"
    add_distribution(site, "exiting-objectives", {"quitter": "widgets_quitter:FAMILY"}, group=GROUPS["objectives"],
                     modules={"widgets_quitter": "import sys\nsys.exit('a required library is missing')\n"})  # fmt: skip
    src = Path(anglekit.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(site)])}
    done = subprocess.run([sys.executable, "-m", "anglekit", "train", "--help"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "simcse-sup" in done.stdout and "--positive-threshold" in done.stdout
    assert (
        "the objective family plugin 'quitter' (widgets_quitter:FAMILY, from exiting-objectives 0.1; entry point group anglekit.objectives) "
        "is left out: it called sys.exit('a required library is missing') as it loaded"
    ) in done.stderr
