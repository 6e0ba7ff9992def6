"""Evaluation: faces over encoded embeddings. Nothing here knows about training.

Entry points (imported lazily, so ``import anglekit.evaluation`` stays cheap):

* :func:`run_suite`, :func:`run_suites`, :data:`SUITES` (``anglekit.evaluation.suites``)
* ``anglekit.evaluation.report.report`` (not re-exported here: the name is also the submodule's)
* :func:`make_encoder`, :class:`EmbeddingCache`, :class:`CachedEncoder`
* the pieces: ``sts``, ``nontransfer``, ``transfer``, ``retrieval``, ``geometry``, ``mteb_model``
  (needs the ``mteb`` package); the scores they compute live below, in :mod:`anglekit.metrics`.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "run_suite": "anglekit.evaluation.suites",
    "run_suites": "anglekit.evaluation.suites",
    "make_encoder": "anglekit.evaluation.suites",
    "SUITES": "anglekit.evaluation.suites",
    "EmbeddingCache": "anglekit.evaluation.cache",
    "CachedEncoder": "anglekit.evaluation.cache",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'anglekit.evaluation' has no attribute {name!r}")
