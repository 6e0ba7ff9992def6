"""Speed swaps: what makes the training loop faster without changing what it learns, in one place.

- :mod:`~anglekit.training.speed.table`: the table of swaps (:data:`SWAPS`, a
  :class:`~anglekit.plugins.Registry`), each saying what it matches, its probe, its flag and its devices;
- :mod:`~anglekit.training.speed.plan`: :func:`plan` (what applies to a model, what is skipped and
  why) and :func:`applied` (the swaps in place for the loop, the plan logged once);
- :mod:`~anglekit.training.speed.swap`: what a swap and the plan's settings are;
- the swaps: :mod:`~.vocab_rows` (compact embeddings), :mod:`~.fast_dropout`, :mod:`~.fused_norm`,
  :mod:`~.fused_mlp`, :mod:`~.lora_update` (fused LoRA), :mod:`~.packed_layers` (packed tokens),
  :mod:`~.autocast_swaps` (fp32 attention, no LoRA input casts), and :mod:`~.forward_swaps`, the
  per-instance forward swapping they share.

``anglekit train`` logs the plan once per run (``speed swaps for bert on cpu (fp32): ...``, or ``no
speed swap for architecture ...``) and records it as ``speed_swaps`` in ``train_config.json`` and
``results.json``. The arithmetic (``--precision``, :mod:`anglekit.training.precision`) is a setting
of the run, not a swap: it changes what is computed, and the swaps read it.
"""

from __future__ import annotations

from anglekit.training.speed.plan import Decision, SpeedPlan, applied, architecture, plan, settings_for
from anglekit.training.speed.swap import Matches, SpeedSettings, Swap
from anglekit.training.speed.table import SWAPS

__all__ = ["SWAPS", "Decision", "Matches", "SpeedPlan", "SpeedSettings", "Swap", "applied", "architecture", "plan", "settings_for"]
