"""Embedding beyond one machine, on engines that already exist: a Ray Data adapter
(:mod:`anglekit.scale.ray`) and the predict function of a Spark ``predict_batch_udf``
(:mod:`anglekit.scale.spark`). Neither imports its engine until used; see docs/scale.md."""

from __future__ import annotations

__all__: list[str] = []
