"""Per-arm medians with 95% percentile-bootstrap intervals: what tables and pictures show of each arm.

Never a verdict: two arms are compared only by numaforge.measure.paired (paired per-round differences).
Deterministic (seeded), standard library only.
"""

from __future__ import annotations

import random
from statistics import median


def bootstrap_ci(xs: list[float], level: float = 0.95, n_boot: int = 2000, seed: int = 13) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of xs (resampled with replacement n_boot times)."""
    vals = [float(x) for x in xs if x is not None]
    if not vals:
        raise ValueError("no values to bootstrap")
    if len(vals) == 1:
        return vals[0], vals[0]
    rng = random.Random(seed)
    k = len(vals)
    meds = sorted(median(rng.choices(vals, k=k)) for _ in range(n_boot))
    lo_i = int((1 - level) / 2 * n_boot)
    hi_i = min(n_boot - 1, int((1 + level) / 2 * n_boot) - 1)
    return meds[lo_i], meds[hi_i]


def summary(xs: list[float | None]) -> dict | None:
    """{'n', 'median', 'ci': [lo, hi], 'values'} of the non-missing values, or None when there are none."""
    vals = [float(x) for x in xs if x is not None]
    if not vals:
        return None
    lo, hi = bootstrap_ci(vals)
    return {"n": len(vals), "median": median(vals), "ci": [lo, hi], "values": vals}
