"""Paired, blocked comparisons of two arms: the only place a measurement report gets a verdict from.

A block is one round of the interleaved schedule (runner.schedule): every arm ran once, in random order, in the
same boot. For one endpoint the evidence is the list of paired differences d_i = arm_i - base_i over the blocks
where both arms produced a value; never two pooled samples (the blocks remove slow drift of the host).

- ``interval(d)``: percentile bootstrap interval of the mean difference (seeded ``random``, resampling blocks).
- ``sign_flip_p(d)``: two-sided permutation p-value of the mean difference under the null "the arms are
  exchangeable within a block" (each d_i's sign flipped at random): exact, all 2**n sign patterns counted (issue
  42: 20 blocks all one way is 2 / 2**20, not the Monte Carlo floor 1 / 20,001). Up to ``EXACT_MAX`` blocks by
  enumeration; above that by the distribution of the signed sum, when the differences lie on a decimal grid (the
  measurements are rounded to 3 decimals) whose sums need at most ``GRID_MAX`` cells; only else (``p_method``
  says so) a seeded Monte Carlo of ``N_PERM`` patterns.
- ``holm(p)``: Holm's step-down adjustment of a family of p-values (the secondary endpoints of one arm).
- ``tost(d, margin)``: equivalence within +-margin: both one-sided tests at ``alpha``, i.e. the (1 - 2 alpha)
  bootstrap interval inside (-margin, +margin). The only way a report may say "no regression".
- ``compare(d, ...)``: the verdict. Fewer than ``MIN_BLOCKS`` blocks: "no verdict: N rounds, need >= M for an
  interval" -- with n blocks the smallest two-sided sign-flip p-value is 2 / 2**n, which first drops below 0.05
  at n = 6, so fewer blocks cannot show anything at 5 % however large the difference.

Everything is pure and deterministic (fixed seeds): the same runs give the same report.
"""

from __future__ import annotations

import itertools
import math
import random
from bisect import bisect_left, bisect_right
from dataclasses import asdict, dataclass
from statistics import fmean

import numpy as np

ALPHA = 0.05
MIN_BLOCKS = 6  # smallest n with 2 / 2**n < ALPHA (see the module docstring)
N_BOOT = 4000
N_PERM = 20000
EXACT_MAX = 36  # count all 2**n sign patterns up to this many blocks (two halves of <= 2**18 sums)
GRID_MAX = 20_000_000  # above EXACT_MAX: the largest sum of |d| on its grid counted exactly (<= 80 MB of float64)
GRID_DECIMALS = 6  # the finest decimal grid tried (the measurements are rounded to 3 decimals)
SEED = 13

BETTER, WORSE, HIGHER, LOWER = "better", "worse", "higher", "lower"
NO_CHANGE = "no detectable change"
EQUIVALENT = "equivalent"
DESCRIPTIVE = "descriptive (not tested)"


def no_verdict(n: int) -> str:
    return f"no verdict: {n} round{'s' if n != 1 else ''}, need >= {MIN_BLOCKS} for an interval"


def differences(base: dict[int, float | None], other: dict[int, float | None]) -> list[float]:
    """other - base per block ({block: value}), over the blocks where both have a value, in block order."""
    return [
        float(other[b]) - float(base[b])  # type: ignore[arg-type]
        for b in sorted(set(base) & set(other))
        if base[b] is not None and other[b] is not None
    ]


def interval(d: list[float], level: float = 0.95, n_boot: int = N_BOOT, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(d), resampling blocks with replacement. Needs >= MIN_BLOCKS."""
    if len(d) < MIN_BLOCKS:
        raise ValueError(no_verdict(len(d)))
    rng = random.Random(seed)
    k = len(d)
    means = sorted(fmean(rng.choices(d, k=k)) for _ in range(n_boot))
    lo = means[int((1 - level) / 2 * n_boot)]
    hi = means[min(n_boot - 1, math.ceil((1 + level) / 2 * n_boot) - 1)]
    return lo, hi


def sign_flip_p(d: list[float], n_perm: int = N_PERM, seed: int = SEED) -> float:
    """Two-sided sign-flip permutation p-value of mean(d): exact (``p_method``), else seeded Monte Carlo."""
    if not d:
        raise ValueError("no paired differences")
    obs = abs(sum(d)) - 1e-9 * (1 + sum(abs(x) for x in d))
    if len(d) <= EXACT_MAX:
        return _exact_hits(d, obs) / 2 ** len(d)
    grid = _on_grid(d)
    if grid is not None:
        return _grid_p(grid)
    # n_perm random sign patterns at once: numpy's own seeded generator, so the p differs from the loop's by the
    # Monte Carlo error only
    signs = np.random.default_rng(seed).integers(0, 2, size=(n_perm, len(d)), dtype=np.int8) * 2 - 1
    hits = int(np.count_nonzero(np.abs(signs @ np.asarray(d, dtype=float)) >= obs))
    return (hits + 1) / (n_perm + 1)


def p_method(d: list[float]) -> str:
    """How sign_flip_p gets d's p: "exact" (every sign pattern counted) or "monte carlo" (seeded, N_PERM)."""
    return "exact" if len(d) <= EXACT_MAX or _on_grid(d) is not None else "monte carlo"


def _on_grid(d: list[float]) -> list[int] | None:
    """d as integers on the coarsest decimal grid (10**-j, j <= GRID_DECIMALS) it lies on, divided by their gcd
    (signs kept): the signed sums of these are the signed sums of d, scaled. None when d is on no such grid or the
    sums would need more than GRID_MAX cells (then sign_flip_p falls back to Monte Carlo)."""
    for j in range(GRID_DECIMALS + 1):
        scaled = [x * 10**j for x in d]
        k = [round(x) for x in scaled]
        if all(abs(x - i) <= 1e-6 * max(1.0, abs(x)) for x, i in zip(scaled, k)):
            g = math.gcd(*k) or 1
            k = [i // g for i in k]
            return k if sum(abs(i) for i in k) < GRID_MAX else None
    return None


def _grid_p(signed: list[int]) -> float:
    """The exact two-sided p of the sum of ``signed`` (integers) under sign flips. With k = |signed| and K = sum(k),
    a sign pattern's sum is K - 2 T, T the sum of the k it flips; the subset sums T are symmetric about K / 2, so
    p = 2 * #{subsets with T <= (K - obs) / 2} / 2**n for obs = |sum(signed)| > 0 (ties count, as in the
    enumeration). The subsets are counted by their sum up to that bound only (float64 counts: < 2**1023, each exact
    to float rounding), so a small p costs little and the largest costs n * K / 2 additions."""
    obs = abs(sum(signed))
    if obs == 0:
        return 1.0
    k = [abs(i) for i in signed]
    cap = (sum(k) - obs) // 2  # the largest T in the lower tail
    counts = np.zeros(cap + 1)
    counts[0] = 1.0
    reach = 0
    for x in sorted(k):  # the reachable sums grow by x: only that prefix, up to cap, is added to
        if x == 0:
            counts[: reach + 1] *= 2.0
        elif x <= cap:
            top = min(reach + x, cap)
            counts[x : top + 1] += counts[: top + 1 - x].copy()
        reach = min(reach + x, cap)
    return float(min(1.0, 2.0 * counts.sum() / 2.0 ** len(k)))


def _exact_hits(d: list[float], obs: float) -> int:
    """How many of the 2**n sign patterns give |sum| >= obs, meeting in the middle: every signed sum of the first
    half against the sorted signed sums of the second (2**(n/2) bisections, not 2**n sums of n terms)."""
    if obs <= 0:  # every pattern: |sum| >= a bound at or below 0 (the two tails below would overlap)
        return 2 ** len(d)
    half = len(d) // 2

    def sums(xs: list[float]) -> list[float]:
        return [sum(s * x for s, x in zip(signs, xs)) for signs in itertools.product((1, -1), repeat=len(xs))]

    right = sorted(sums(d[half:]))
    n = len(right)
    return sum(n - bisect_left(right, obs - a) + bisect_right(right, -obs - a) for a in sums(d[:half]))


def holm(p: dict[str, float]) -> dict[str, float]:
    """Holm-adjusted p-values of one family: sorted ascending, p_(i) * (m - i), running max, capped at 1."""
    m = len(p)
    out: dict[str, float] = {}
    running = 0.0
    for i, (key, val) in enumerate(sorted(p.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, val * (m - i)))
        out[key] = running
    return out


def tost(d: list[float], margin: float, alpha: float = ALPHA, seed: int = SEED) -> tuple[bool, tuple[float, float]]:
    """(equivalent within +-margin?, the (1 - 2 alpha) interval): two one-sided tests at alpha."""
    if margin <= 0:
        raise ValueError(f"equivalence margin must be > 0 (got {margin})")
    lo, hi = interval(d, level=1 - 2 * alpha, seed=seed)
    return (-margin < lo and hi < margin), (lo, hi)


@dataclass
class Comparison:
    """One endpoint, one arm against the base, over n blocks."""

    verdict: str
    n: int
    mean_diff: float | None = None
    ci: tuple[float, float] | None = None  # 95 % bootstrap interval of the mean difference
    p: float | None = None  # sign-flip p-value
    p_adj: float | None = None  # Holm-adjusted (secondary endpoints); None for the primary
    margin: float | None = None  # equivalence margin (absolute, in the endpoint's unit)
    tost_ci: tuple[float, float] | None = None  # the 90 % interval TOST used
    equivalent: bool = False  # TOST within +-margin held

    def as_dict(self) -> dict:
        return asdict(self)


def compare(d: list[float], lower_is_better: bool | None = None, margin: float | None = None) -> Comparison:
    """The verdict of one endpoint from its paired differences (other - base), before any multiplicity
    adjustment (see ``decide``): a direction when the interval excludes 0 and p < ALPHA; "equivalent" when
    TOST within the margin holds; else NO_CHANGE; and no verdict at all below MIN_BLOCKS."""
    n = len(d)
    if n < MIN_BLOCKS:
        return Comparison(no_verdict(n), n, fmean(d) if d else None, margin=margin)
    ci = interval(d)
    c = Comparison(NO_CHANGE, n, fmean(d), ci, sign_flip_p(d), margin=margin)
    if margin is not None:
        c.equivalent, c.tost_ci = tost(d, margin)
    return decide(c, c.p, lower_is_better)


def decide(c: Comparison, p: float | None, lower_is_better: bool | None) -> Comparison:
    """Set c's direction verdict from p (raw for the primary, Holm-adjusted for a secondary) and its interval."""
    if c.ci is None or p is None:
        return c
    lo, hi = c.ci
    if p < ALPHA and (hi < 0 or lo > 0):
        d = LOWER if hi < 0 else HIGHER
        c.verdict = d if lower_is_better is None else (BETTER if (d == LOWER) == lower_is_better else WORSE)
    else:
        c.verdict = EQUIVALENT if c.equivalent else NO_CHANGE
    return c


def family(
    diffs: dict[str, list[float]],
    primary: str | None,
    lower_is_better: dict[str, bool | None],
    margins: dict[str, float | None],
    secondary: tuple[str, ...] | None = None,
) -> dict[str, Comparison]:
    """Every endpoint of one arm: the primary judged at ALPHA, the secondaries with p Holm-adjusted over the
    secondaries only. `secondary` None: every endpoint but the primary is one. Given: the endpoints in neither
    are descriptive -- their mean difference and interval are reported, their verdict is DESCRIPTIVE and they
    do not enlarge the Holm family (a protocol that registers 3 secondaries adjusts over 3)."""
    out = {k: compare(d, lower_is_better.get(k), margins.get(k)) for k, d in diffs.items()}
    tested = [k for k in out if k != primary and (secondary is None or k in secondary)]
    for k, c in out.items():
        if k != primary and k not in tested and c.ci is not None:
            c.verdict = DESCRIPTIVE
    ps = {k: p for k in tested if (p := out[k].p) is not None}
    for k, padj in holm(ps).items():
        out[k].p_adj = padj
        decide(out[k], padj, lower_is_better.get(k))
    return out


def describe(c: Comparison, unit: str = "") -> str:
    """One line for a report: the verdict with the mean paired difference, its interval and p."""
    if c.ci is None:
        return c.verdict
    u = "" if unit in ("", "%") else f" {unit}"
    pts = " pts" if unit == "%" else u
    s = f"{c.verdict}: {c.mean_diff:+.3g}{pts} [{c.ci[0]:+.3g}, {c.ci[1]:+.3g}] over {c.n} rounds"
    if c.verdict == DESCRIPTIVE:
        return s
    s += f", p={c.p:.3g}"
    if c.p_adj is not None:
        s += f" (Holm {c.p_adj:.3g})"
    if c.margin is not None:
        s += f", TOST margin +-{c.margin:.3g}{'' if c.equivalent else ' not met'}"
    return s
