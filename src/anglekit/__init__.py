"""anglekit: train, evaluate and serve angle-optimized (AnglE) text embeddings.

The root holds the public API only: :class:`Embedder` (from :mod:`anglekit.model`), the errors
(:mod:`anglekit.errors`) and the version. Everything else lives in a package named for its
concept: ``model``, ``data``, ``losses``, ``training``, ``evaluation``, ``llm``, ``generation``,
``github_issues``, ``io`` and the command line, ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anglekit.errors import AnglekitError, ConfigError, DataError, UnsupportedModelError
from anglekit.version import __version__

__all__ = ["AnglekitError", "ConfigError", "DataError", "Embedder", "UnsupportedModelError", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from anglekit.model.embedder import Embedder


def __getattr__(name: str) -> Any:
    # Lazy so that `import anglekit` (and `anglekit --help`) does not pay for torch/transformers.
    if name == "Embedder":
        from anglekit.model.embedder import Embedder

        return Embedder
    raise AttributeError(f"module 'anglekit' has no attribute {name!r}")
