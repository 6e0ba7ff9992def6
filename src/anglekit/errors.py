"""Exceptions raised by anglekit: one family, each message names what was wrong and where.

Each type carries the exit status the command line gives for it (``exit_status``):
:data:`EXIT_USAGE` (2) for the way a command was called or set up (a flag, a config key, a model or
output path, a service it talks to) and :data:`EXIT_DATA` (1) for the input data it was given. A
new type inherits its base's status; ``tests/cli/test_exit_status.py`` pins each type's.
"""

from __future__ import annotations

EXIT_DATA = 1
"""Exit status of an error in the input data (:class:`DataError`, :class:`UndefinedScoreError`)."""
EXIT_USAGE = 2
"""Exit status of a usage or setup error (a flag, a config key, a model or output path), as
argparse gives for a bad command line; also of an error of the system (a full disk, a missing file)."""
EXIT_PARTIAL = 3
"""Exit status of a command that did part of its work and kept it (some LLM requests or some
repositories failed): rerun the same command to finish."""
EXIT_UNEXPECTED = 70
"""Exit status of an unexpected failure, an error anglekit did not raise on purpose (``EX_SOFTWARE``
of sysexits.h), so that a script tells a bug from bad data."""
EXIT_INTERRUPTED = 130
"""Exit status on Ctrl-C (128 + SIGINT), as a shell gives."""


class AnglekitError(Exception):
    """Base class of every error anglekit raises on purpose. ``exit_status``: the command line's
    exit status for it, :data:`EXIT_USAGE` unless a subclass is about the input data."""

    exit_status: int = EXIT_USAGE


class ConfigError(AnglekitError, ValueError):
    """A configuration value, key or flag is unknown or invalid."""


class DataError(AnglekitError, ValueError):
    """Input data is malformed. The message names the source, the row and the field.

    ``row`` is 1-based as a person counts rows in a file (header excluded for tabular files,
    ``None`` when the problem concerns the whole source).
    """

    exit_status = EXIT_DATA

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        row: int | None = None,
        field: str | None = None,
    ) -> None:
        self.source = source
        self.row = row
        self.field = field
        where = []
        if source is not None:
            where.append(str(source))
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class InputPathError(DataError):
    """An input path the command was given that is not there (and, where a name is also taken, is
    no known dataset or hub id), or is not the kind the flag takes (a folder where a file belongs, a
    file where a folder does). The data was never reached, the command is wrong: a usage error for
    the command line (exit 2), as argparse's for a file argument it cannot open. A
    :class:`DataError` still, to code that catches those around reading its input. (A file missing
    or of the wrong kind *inside* an input folder is a plain :class:`DataError`: the folder is the
    data, and it is incomplete.)"""

    exit_status = EXIT_USAGE


class UnsupportedModelError(ConfigError):
    """A model folder holds parts anglekit cannot apply (e.g. a sentence-transformers module other
    than Transformer, Pooling and Normalize), so anglekit would embed differently from its authors."""


class OutputError(AnglekitError):
    """An output file or folder cannot be written (a missing permission, a file where a folder is
    needed, ...). Raised before the work whose result it would hold starts, where possible."""


class DiskFullError(OutputError):
    """A write ran out of space (ENOSPC, a quota, or a short write). The message names the file,
    the bytes asked for and written, and which finished parts are intact; ``path``, ``requested``
    and ``written`` (bytes, ``None`` when unknown) say the same to code. Exit 2 like every
    :class:`OutputError`: the data is fine, the place it is written to is not."""

    def __init__(self, message: str, *, path: str, requested: int | None = None, written: int | None = None) -> None:
        self.path = path
        self.requested = requested
        self.written = written
        super().__init__(message)


class UndefinedScoreError(AnglekitError, ValueError):
    """A score is undefined for the data given (e.g. a correlation over fewer than 2 pairs, or over
    gold labels that are all equal). The message says which and why. A data error for the
    command line (exit 1): the data given has too few pairs or no spread."""

    exit_status = EXIT_DATA


class ExportError(AnglekitError, ValueError):
    """A model cannot be exported to the format asked for exactly (the message names the setting
    the format cannot express), or the exported folder does not embed like the model, or the
    upload to the hub failed. Nothing half-written is left at the output."""


class ModelMismatchError(ConfigError):
    """Vectors made by one model met another: an index or shards searched or extended with a model
    whose fingerprint (weights and embedding settings) differs from the one recorded with them.
    A usage error (exit 2): neither file is malformed, the command paired the wrong two."""


class UnknownBackendError(ConfigError):
    """An inference backend name that no backend registered (:mod:`anglekit.model.backends`); the
    message lists the registered ones, ``known`` holds them."""

    def __init__(self, name: object, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown backend {name!r}; registered backends: {', '.join(known)}")


class DuplicateNameError(ConfigError):
    """A name registered twice in one registry (:class:`anglekit.plugins.Registry`: an objective
    family, a backend, an export format, an evaluation suite); ``kind`` and ``name`` say which."""

    def __init__(self, message: str, *, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(message)


class AmbiguousBackendError(ConfigError):
    """A model folder that several inference backends claim as theirs (their files are all there):
    the caller names the backend to use. ``backends`` holds their names."""

    def __init__(self, source: str, backends: tuple[str, ...]) -> None:
        self.source = source
        self.backends = backends
        super().__init__(f"{source}: holds the files of several backends ({', '.join(backends)}); choose one with backend= (--backend)")


class NothingGeneratedError(AnglekitError):
    """A generation run got answers, and every one was empty: no pairs file is written (an empty
    file would pass for a finished run). The message names the LLMs and what to change. A usage
    error (exit 2): the input is fine, the fix is a setting (``--max-tokens``, the model, the prompt)."""
