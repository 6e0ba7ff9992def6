"""Mean ± standard deviation over seeds, and the paired comparison of two rows on the same seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ALPHA = 0.05


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof 1; None for a single value)."""
    if not values:
        raise ValueError("no values")
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


@dataclass(frozen=True)
class Paired:
    """Row minus reference over the seeds both have: mean difference, its standard deviation, the
    paired t statistic and two-sided p-value (None when fewer than 2 seeds or no spread)."""

    seeds: tuple[int, ...]
    mean_diff: float
    std_diff: float | None
    t: float | None
    p: float | None

    @property
    def within_noise(self) -> bool:
        """True unless a paired t-test on the shared seeds rejects "no difference" at 5%."""
        return self.p is None or self.p >= ALPHA

    def verdict(self) -> str:
        if len(self.seeds) < 2:
            return "one seed: no test"
        if self.p is None:
            return "identical on every seed" if self.mean_diff == 0 else "no spread: no test"
        if self.within_noise:
            return f"within noise (p={self.p:.2f})"
        return f"{'higher' if self.mean_diff > 0 else 'lower'} (p={self.p:.3f})"


def paired(row: Mapping[int, float], reference: Mapping[int, float]) -> Paired | None:
    """The paired comparison over the seeds in both (None when they share none)."""
    seeds = tuple(sorted(set(row) & set(reference)))
    if not seeds:
        return None
    diffs = [row[s] - reference[s] for s in seeds]
    m, sd = mean_std(diffs)
    if sd is None or sd == 0:
        return Paired(seeds, m, sd, None, None)
    t = m / (sd / math.sqrt(len(diffs)))
    from scipy import stats

    p = float(2 * stats.t.sf(abs(t), df=len(diffs) - 1))
    return Paired(seeds, m, sd, t, p)
