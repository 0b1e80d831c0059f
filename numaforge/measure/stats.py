"""Medians with 95% percentile-bootstrap intervals, and the comparison rule used in every report.

Two arms differ only when their intervals do not overlap; otherwise the report says "no detectable change".
Deterministic (seeded), standard library only.
"""

from __future__ import annotations

import random
from statistics import median

NO_CHANGE = "no detectable change"


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


def compare(base: dict | None, other: dict | None, lower_is_better: bool | None = None) -> str:
    """'lower' / 'higher' (other vs base, when the 95% intervals do not overlap) or NO_CHANGE; with
    lower_is_better it says 'better' / 'worse' instead."""
    if not base or not other:
        return "n/a"
    (blo, bhi), (olo, ohi) = base["ci"], other["ci"]
    if ohi < blo:
        d = "lower"
    elif olo > bhi:
        d = "higher"
    else:
        return NO_CHANGE
    if lower_is_better is None:
        return d
    return "better" if (d == "lower") == lower_is_better else "worse"
