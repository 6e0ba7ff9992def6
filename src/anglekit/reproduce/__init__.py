"""Reproduce the papers' tables at the scale of the machine: ``anglekit reproduce TABLE``.

    from anglekit.reproduce import ReproduceConfig, reproduce
    result = reproduce(["objectives"], ReproduceConfig(seeds=(0, 1, 2), output_dir="runs/repro"))
    print(result.report.read_text())

A table is rows x tasks x seeds of cells (:mod:`anglekit.reproduce.cells`), each trained with
:func:`anglekit.training.run.train`, scored, and kept as one JSON; a rerun recomputes only missing
cells. The report gives mean ± std per row, a paired comparison with the table's reference row,
and the published figure from the shipped paper tables (:mod:`anglekit.evaluation.paper`).
"""

from anglekit.reproduce.config import TABLE_NAMES, ReproduceConfig, expand_tables
from anglekit.reproduce.protocol import PRESETS, STARTS, Protocol, make_protocol
from anglekit.reproduce.runner import ReproduceResult, reproduce
from anglekit.reproduce.stats import Paired, mean_std, paired

__all__ = [
    "PRESETS",
    "STARTS",
    "TABLE_NAMES",
    "Paired",
    "Protocol",
    "ReproduceConfig",
    "ReproduceResult",
    "expand_tables",
    "make_protocol",
    "mean_std",
    "paired",
    "reproduce",
]
