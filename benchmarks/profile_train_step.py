#!/usr/bin/env python
"""Profile a training benchmark row's steps with torch.profiler: the ops by self CPU time.

Runs one row script (``benchmarks/anglekit_train.py`` or ``benchmarks/peers/st_train.py``) in this
process under ``torch.profiler`` and writes the op table (top 40 by self CPU time) to OUT. Both
scripts evaluate STS-B test around training (anglekit before and after, the peer after), so the
forward ops (``aten::addmm``) include evaluation; the backward ops (``aten::mm``, ``*Backward``),
dropout masks, the embedding gradient and the optimizer are the training steps' alone.

    .venv/bin/python benchmarks/profile_train_step.py benchmarks/anglekit_train.py OUT.txt \\
        --objective paper --seed 0 --max-steps 40 --threads 2 --out r.json
    .venv/bin/python benchmarks/profile_train_step.py benchmarks/peers/st_train.py OUT.txt \\
        --loss cosent --seed 0 --max-steps 40 --group-by-length --eval-limit 50 --threads 2 --out r.json
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    script, out, *args = argv
    if not Path(script).is_file():
        print(f"{script}: no such script", file=sys.stderr)
        return 2
    from torch.profiler import ProfilerActivity, profile

    sys.argv = [script, *args]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
    Path(out).write_text(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
