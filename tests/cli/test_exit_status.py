"""The command line's exit status for every error type: 1 for the input data, 2 for usage (a flag,
a config key, a model or output path, a service), 70 for an unexpected failure, 130 for Ctrl-C.

The types are found by introspection (every subclass of ``AnglekitError`` in every anglekit
module), so a new type that nobody decided an exit status for fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import anglekit
from anglekit import errors
from anglekit.errors import AnglekitError

import helpers

DATA, USAGE = 1, 2

DECIDED: dict[str, int] = {
    # the base: raised directly for a wrong flag combination (e.g. merge-lora's --output-dir)
    "anglekit.errors.AnglekitError": USAGE,
    "anglekit.errors.ConfigError": USAGE,
    "anglekit.errors.UnsupportedModelError": USAGE,  # the model chosen, not the input data
    "anglekit.errors.ModelMismatchError": USAGE,  # two arguments that do not belong together
    "anglekit.errors.UnknownBackendError": USAGE,
    "anglekit.errors.DuplicateNameError": USAGE,  # installed plugins that clash
    "anglekit.errors.AmbiguousBackendError": USAGE,  # pass --backend
    "anglekit.errors.DataError": DATA,
    "anglekit.errors.InputPathError": USAGE,  # a path that is not there: the data was never reached
    "anglekit.data.training_data._Columns": DATA,  # a DataError used as a signal inside a reader
    "anglekit.errors.OutputError": USAGE,  # the place written to, not the data
    "anglekit.errors.DiskFullError": USAGE,  # an OutputError: free space or write elsewhere
    "anglekit.errors.UndefinedScoreError": DATA,  # too few pairs, or gold labels without spread
    "anglekit.errors.ExportError": USAGE,  # a format that cannot express the model's settings
    "anglekit.errors.NothingGeneratedError": USAGE,  # fixed by a setting: --max-tokens, model, prompt
    "anglekit.github_issues.client.GitHubError": USAGE,  # a service, a token, a repository name
    "anglekit.github_issues.client.NotFound": USAGE,
    "anglekit.github_issues.client.RateLimited": USAGE,
    "anglekit.generation.backends.BackendError": USAGE,  # a bad key, an unknown model, a server down
    # answered over HTTP by the server; should one reach the command line, it is not the data's fault
    "anglekit.serve.errors.ServeError": USAGE,
    "anglekit.serve.errors.InvalidRequest": USAGE,
    "anglekit.serve.errors.ContextLengthExceeded": USAGE,
    "anglekit.serve.errors.Unauthorized": USAGE,
    "anglekit.serve.errors.ModelNotFound": USAGE,
    "anglekit.serve.errors.IndexNotFound": USAGE,
    "anglekit.serve.errors.RouteNotFound": USAGE,
    "anglekit.serve.errors.MethodNotAllowed": USAGE,
    "anglekit.serve.errors.PayloadTooLarge": USAGE,
    "anglekit.serve.errors.UnsupportedMediaType": USAGE,
    "anglekit.serve.errors.QueueFull": USAGE,
    "anglekit.serve.errors.NotReady": USAGE,
    "anglekit.serve.errors.InternalError": USAGE,
}


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _all_error_types() -> list[type[AnglekitError]]:
    """AnglekitError and its subclasses, every anglekit module imported first (a module whose
    optional third-party library is missing is passed over; a broken anglekit module fails)."""
    for module in pkgutil.walk_packages(anglekit.__path__, "anglekit."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] == "anglekit":
                raise
    found: list[type[AnglekitError]] = [AnglekitError]
    for cls in found:
        found.extend(sub for sub in cls.__subclasses__() if sub not in found)
    return found


TYPES = _all_error_types()


def test_every_error_type_has_a_decided_exit_status() -> None:
    names = {_name(cls) for cls in TYPES}
    assert names - DECIDED.keys() == set(), "decide the exit status of these error types (here and in docs/cli.md)"
    assert DECIDED.keys() - names == set(), "these error types are gone"


@pytest.mark.parametrize("cls", TYPES, ids=_name)
def test_the_command_line_exits_with_the_types_status(
    cls: type[AnglekitError], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import anglekit.cli.encode as encode

    error = Exception.__new__(cls)  # every type, whatever its constructor asks for
    Exception.__init__(error, "what was wrong, and where")

    def fail(args: Any) -> int:
        raise error

    assert cls.exit_status == DECIDED[_name(cls)]
    texts = tmp_path / "texts.txt"
    texts.write_text("a sentence\n", encoding="utf-8")
    monkeypatch.setattr(encode, "run", fail)
    code, out, err = helpers.run_cli(["encode", "m", "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == DECIDED[_name(cls)], err
    assert out == "" and err == "anglekit encode: error: what was wrong, and where\n", err


def test_data_and_usage_are_told_apart_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Real runs, no monkeypatching: a malformed data file exits 1, an unknown flag value 2."""
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"anchor": "a", "positive": "b"}\n{"anchor": "a", "positive"\n', encoding="utf-8")
    code, _, err = helpers.run_cli(["mine", "--input", str(bad), "--output", str(tmp_path / "o.jsonl"), str(tmp_path / "nomodel")], capsys)
    assert code == DATA and "row 2" in err and err.count("\n") == 1, err
    code, _, err = helpers.run_cli(["encode", str(tmp_path / "nomodel"), "--input", str(bad), "--output", str(tmp_path / "v.txt")], capsys)
    assert code == USAGE and "--output must end in .npy" in err and err.count("\n") == 1, err
    code, _, err = helpers.run_cli(["encode", str(tmp_path / "nomodel"), "--input", str(tmp_path / "typo.txt"), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == USAGE and "typo.txt: no such file" in err and err.count("\n") == 1, err
    bad.write_text("", encoding="utf-8")
    code, _, err = helpers.run_cli(["encode", str(tmp_path / "nomodel"), "--input", str(bad), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == DATA and str(bad) in err and "empty" in err and err.count("\n") == 1, err


def test_unexpected_errors_and_system_errors_and_ctrl_c(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import anglekit.cli.encode as encode

    texts = tmp_path / "texts.txt"
    texts.write_text("a sentence\n", encoding="utf-8")
    argv = ["encode", "m", "--input", str(texts), "--output", str(tmp_path / "v.npy")]
    monkeypatch.setenv("ANGLEKIT_CACHE", str(tmp_path / "cache"))
    for raised, status, words in (
        (RuntimeError("a bug"), errors.EXIT_UNEXPECTED, "unexpected error: RuntimeError: a bug"),
        (FileNotFoundError(2, "No such file or directory", "gone.txt"), USAGE, "error: [Errno 2] No such file or directory: 'gone.txt'"),
        (KeyboardInterrupt(), errors.EXIT_INTERRUPTED, "interrupted"),
    ):

        def fail(args: Any, raised: BaseException = raised) -> int:
            raise raised

        monkeypatch.setattr(encode, "run", fail)
        code, _, err = helpers.run_cli(argv, capsys)
        assert code == status and words in err and err.count("\n") == 1, err
    assert (errors.EXIT_DATA, errors.EXIT_USAGE, errors.EXIT_UNEXPECTED) == (1, 2, 70)
