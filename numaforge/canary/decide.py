"""The SLO canary gate's decisions (pure): the talk's matrix per minute, the window's verdict, skewness, and the
Pearson correlation of the two series with its exact p-value.

    t = Thresholds()                                  # the talk's numbers (docs/canary-gate.md)
    decide_minute(p99_delta_ms=9.0, skew=-0.1, t=t)   # -> "widen"
    pearson([1, 2, 3, 4], [2, 4, 5, 9])               # -> (r, p)

Matrix (the talk, 3.3): P99 delta < 15 ms and skew > -0.3 widens; P99 delta > 25 ms and skew < -0.8 rolls back
and captures a trace; anything between holds and extends the window. numaforge rolls back when *either* number
crosses its rollback threshold (the talk's literal "and" would leave a canary 40 ms slower with a healthy skew
holding forever); a number that could not be measured, or that is not a number (NaN, infinite, a P99 the
Prometheus client refused as "cannot tell"), never widens: the minute holds, or rolls back on the other number.

The p-value is exact: t = r sqrt((n-2)/(1-r^2)) has Student's t distribution with n-2 degrees of freedom under
no correlation, and its two-sided tail is the regularized incomplete beta function I_x(df/2, 1/2) at
x = df/(df+t^2), computed with Lentz's continued fraction (Numerical Recipes 6.4). No scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

WIDEN = "widen"
HOLD = "hold"
ROLLBACK = "rollback"


class ThresholdError(ValueError):
    """Thresholds that contradict each other (widen beyond rollback)."""


@dataclass(frozen=True)
class Thresholds:
    widen_p99_ms: float = 15.0  # P99 delta below this (and skew above widen_skew) widens
    rollback_p99_ms: float = 25.0  # P99 delta above this rolls back
    widen_skew: float = -0.3
    rollback_skew: float = -0.8
    alert_r: float = 0.75  # |Pearson r| above this with p below alert_p: an alert in the report
    alert_p: float = 0.01

    def check(self) -> None:
        if not self.widen_p99_ms <= self.rollback_p99_ms:
            raise ThresholdError(
                f"the widen P99 delta ({self.widen_p99_ms:g} ms) is above the rollback one ({self.rollback_p99_ms:g} ms)"
            )
        if not self.widen_skew >= self.rollback_skew:
            raise ThresholdError(
                f"the widen skew ({self.widen_skew:g}) is below the rollback skew ({self.rollback_skew:g})"
            )
        if not (0 < self.alert_r < 1 and 0 < self.alert_p < 1):
            raise ThresholdError(f"alert r {self.alert_r:g} and alert p {self.alert_p:g} must be between 0 and 1")


def decide_minute(
    p99_delta_ms: float | None, skew: float | None, t: Thresholds, cannot_tell: str | None = None
) -> tuple[str, str]:
    """(decision, why) for one minute. skew None (fewer than 3 hosts with locality numbers) is judged on the
    P99 delta alone; p99 None (no latency data) can only hold or roll back on the skew. A number that is not
    finite, or ``cannot_tell`` (why a measured value was refused, e.g. a negative P99), can only hold or roll
    back: a minute that cannot tell never widens."""
    unsure = [cannot_tell] if cannot_tell else []
    if p99_delta_ms is not None and not math.isfinite(p99_delta_ms):
        unsure.append(f"cannot tell: the P99 delta is {p99_delta_ms}")
        p99_delta_ms = None
    if skew is not None and not math.isfinite(skew):
        unsure.append(f"cannot tell: the skew is {skew}")
        skew = None
    bad, good = [], []
    if p99_delta_ms is not None:
        if p99_delta_ms > t.rollback_p99_ms:
            bad.append(f"P99 delta {p99_delta_ms:.1f} ms > {t.rollback_p99_ms:g} ms")
        elif p99_delta_ms < t.widen_p99_ms:
            good.append(f"P99 delta {p99_delta_ms:.1f} ms < {t.widen_p99_ms:g} ms")
    if skew is not None:
        if skew < t.rollback_skew:
            bad.append(f"skew {skew:.2f} < {t.rollback_skew:g}")
        elif skew > t.widen_skew:
            good.append(f"skew {skew:.2f} > {t.widen_skew:g}")
    if bad:
        return ROLLBACK, "; ".join(bad + unsure)
    if unsure:
        return HOLD, "; ".join(unsure) + (f" ({'; '.join(good)})" if good else "")
    if p99_delta_ms is None:
        return HOLD, "no P99 data for this minute" + (f" ({'; '.join(good)})" if good else "")
    needed = 1 if skew is None else 2
    if len(good) == needed:
        return WIDEN, "; ".join(good) + (
            "; skew not judged (fewer than 3 hosts with locality numbers)" * (skew is None)
        )
    parts = [f"P99 delta {p99_delta_ms:.1f} ms"] + ([f"skew {skew:.2f}"] if skew is not None else [])
    return HOLD, ", ".join(parts) + " between the widen and rollback thresholds"


def window_verdict(decisions: Sequence[str]) -> str:
    """The window's decision from its minutes: any rollback rolls back, every minute widening widens, else hold."""
    if any(d == ROLLBACK for d in decisions):
        return ROLLBACK
    if decisions and all(d == WIDEN for d in decisions):
        return WIDEN
    return HOLD


def skewness(values: Sequence[float]) -> float | None:
    """Fisher-Pearson skewness g1 = m3 / m2^1.5 (population moments); None below 3 values; 0 when all equal."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n < 3:
        return None
    mean = sum(xs) / n
    m2 = sum((x - mean) ** 2 for x in xs) / n
    m3 = sum((x - mean) ** 3 for x in xs) / n
    if m2 <= 1e-24 * max(1.0, mean * mean):
        return 0.0
    return m3 / m2**1.5


def lowest_one_outlier_skew(n: int) -> float | None:
    """The skew of n values with one low outlier, the most negative n values can reach: -(n-2)/sqrt(n-1).
    -0.71 for 3 hosts: with 3 hosts the skew can never cross the talk's -0.8."""
    return None if n < 3 else -(n - 2) / math.sqrt(n - 1)


# ------------------------------------------------------------------ Pearson r and its exact p-value
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), a, b > 0, 0 <= x <= 1."""
    if not (a > 0 and b > 0 and 0.0 <= x <= 1.0):
        raise ValueError(f"betainc needs a, b > 0 and 0 <= x <= 1, got a={a}, b={b}, x={x}")
    if x in (0.0, 1.0):
        return x
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    """(r, two-sided p) of two equally long series; (None, None) below 3 pairs or when a series is constant."""
    if len(x) != len(y):
        raise ValueError(f"series of different lengths: {len(x)} and {len(y)}")
    n = len(x)
    if n < 3:
        return None, None
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None, None
    r = sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sxx * syy)
    r = max(-1.0, min(1.0, r))
    df = n - 2
    if abs(r) >= 1.0:
        return r, 0.0
    return r, t_two_sided_p(r * math.sqrt(df / (1.0 - r * r)), df)


def correlation(p99: Sequence[float | None], skew: Sequence[float | None], t: Thresholds) -> dict:
    """The talk's correlation check over the minutes where both numbers exist."""
    pairs = [(a, b) for a, b in zip(p99, skew) if a is not None and b is not None]
    r, p = pearson([a for a, _ in pairs], [b for _, b in pairs])
    alert = r is not None and p is not None and abs(r) > t.alert_r and p < t.alert_p
    return {"n": len(pairs), "r": r, "p": p, "alert": alert}
