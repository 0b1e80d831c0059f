"""numaforge.measure.paired: paired block differences, bootstrap and sign-flip intervals, Holm, TOST, and no
verdict below the minimum number of blocks. Pure: every expected number below is worked out by hand."""

import itertools
import math
import random

import numpy as np
import pytest

from numaforge.measure import paired


def test_differences_pair_by_block_and_skip_missing_values():
    base = {1: 10.0, 2: 11.0, 3: None, 4: 9.0}
    other = {1: 12.0, 2: 10.0, 3: 5.0, 5: 1.0}
    assert paired.differences(base, other) == [2.0, -1.0]


def test_one_round_85_0_vs_84_9_is_no_verdict_not_better():
    c = paired.compare([85.0 - 84.9], lower_is_better=False)
    assert c.verdict == "no verdict: 1 round, need >= 6 for an interval"
    assert c.ci is None and c.p is None
    assert paired.describe(c) == c.verdict


def test_five_blocks_cannot_reach_five_percent_so_no_verdict():
    # the exact sign-flip p of 5 equal-signed differences is 2/32 = 0.0625: no test at 5 % can say anything
    assert paired.sign_flip_p([1.0] * 5) == pytest.approx(2 / 32)
    assert paired.sign_flip_p([1.0] * 6) == pytest.approx(2 / 64)
    assert paired.compare([1.0] * 5, lower_is_better=True).verdict.startswith("no verdict: 5 rounds")
    assert paired.compare([1.0] * 6, lower_is_better=True).verdict == paired.WORSE


def test_sign_flip_p_exact_small_case():
    # d = [3, -1, 2]: sums over the 8 sign patterns: 4, 6, -2, 0, 0, 2, -6, -4 -> |s| >= 4 in 4 of 8
    assert paired.sign_flip_p([3.0, -1.0, 2.0]) == pytest.approx(0.5)
    assert paired.sign_flip_p([0.0] * 7) == 1.0


def test_sign_flip_p_is_exact_at_twenty_blocks_not_the_monte_carlo_floor():
    """Issue 42 item 6: 20 blocks all one way is p = 2 / 2**20 (1.9e-06), not 1 / 20,001 (5e-05)."""
    assert paired.sign_flip_p([1.0 + (i % 3) for i in range(20)]) == 2 / 2**20
    noisy = [(-1.0) ** i * (i % 5) for i in range(20)]
    assert paired.sign_flip_p(noisy) > 0.5


@pytest.mark.parametrize("n", [7, 12, 15, 16])
def test_sign_flip_p_counts_every_sign_pattern(n):
    """The split enumeration counts exactly what the plain enumeration of all 2**n patterns counts."""
    rng = random.Random(n)
    d = [rng.choice([-3.0, -1.0, 0.0, 0.5, 2.0, 4.0]) for _ in range(n)]
    obs = abs(sum(d)) - 1e-9 * (1 + sum(abs(x) for x in d))
    plain = sum(1 for s in itertools.product((1, -1), repeat=n) if abs(sum(a * x for a, x in zip(s, d))) >= obs)
    assert paired.sign_flip_p(d) == plain / 2**n


@pytest.mark.parametrize("n", [7, 12, 15, 16])
def test_the_grid_count_agrees_with_every_sign_pattern(n):
    """Above EXACT_MAX blocks the p comes from counting subset sums on the data's decimal grid: on data the
    enumeration can still check (3-decimal values, zeros and ties among them), it counts the same patterns."""
    rng = random.Random(100 + n)
    d = [rng.choice([-3.125, -1.0, 0.0, 0.5, 2.0, 4.0, 0.001, -2.3]) for _ in range(n)]
    obs = abs(sum(d)) - 1e-9 * (1 + sum(abs(x) for x in d))
    plain = sum(1 for s in itertools.product((1, -1), repeat=n) if abs(sum(a * x for a, x in zip(s, d))) >= obs)
    grid = paired._on_grid(d)
    assert grid is not None
    assert paired._grid_p(grid) == pytest.approx(plain / 2**n, rel=1e-12, abs=0)
    assert paired._grid_p([0] * n) == 1.0 and paired._grid_p([3, -3] * (n // 2)) == 1.0  # sums of 0: every pattern


def test_sign_flip_p_beyond_the_enumeration_is_still_exact():
    """Issue 42 item 6 and amendment 8 ("p-values exact"): 100 blocks all one way is 2 / 2**100, not the Monte Carlo
    floor 1 / 20,001; an alternating series has p = 1; measurements rounded to 3 decimals are counted exactly."""
    d = [1.0 + (i % 3) for i in range(100)]
    assert paired.p_method(d) == "exact"
    assert paired.sign_flip_p(d) == pytest.approx(2 / 2**100, rel=1e-12)
    assert paired.sign_flip_p([(-1.0) ** i * 2.5 for i in range(100)]) == 1.0
    rng = random.Random(7)
    d = [round(rng.gauss(0.4, 1.0) * 10, 3) for _ in range(100)]
    p = paired.sign_flip_p(d)
    assert paired.p_method(d) == "exact" and 0 < p < 1
    # the count's p agrees with a large Monte Carlo of the same statistic within its error (3 sd)
    signs = np.random.default_rng(1).integers(0, 2, size=(200_000, 100), dtype=np.int8) * 2 - 1
    obs = abs(sum(d)) - 1e-9 * (1 + sum(abs(x) for x in d))
    mc = float(np.count_nonzero(np.abs(signs @ np.asarray(d)) >= obs)) / 200_000
    assert abs(mc - p) < 3 * math.sqrt(p * (1 - p) / 200_000) + 1e-5, (p, mc)


def test_sign_flip_p_falls_back_to_a_seeded_monte_carlo_only_off_any_grid():
    """Data on no decimal grid of <= GRID_DECIMALS places (or whose grid sums would pass GRID_MAX) get a seeded
    Monte Carlo p, said by p_method; the same data give the same p."""
    d = [math.pi * (1 + i % 3) for i in range(paired.EXACT_MAX + 1)]
    assert paired.p_method(d) == "monte carlo"
    p = paired.sign_flip_p(d)
    assert p == paired.sign_flip_p(d) and p == 1 / (paired.N_PERM + 1)
    big = [float(paired.GRID_MAX // 10)] * (paired.EXACT_MAX + 1)  # on the grid of 1, gcd divides it away
    assert paired.p_method(big) == "exact"
    spread = [float(paired.GRID_MAX // 10 + i) for i in range(paired.EXACT_MAX + 1)]  # gcd 1, sum > GRID_MAX
    assert paired.p_method(spread) == "monte carlo"
    assert paired.p_method(d[: paired.EXACT_MAX]) == "exact"  # enumerated, grid or not


def test_interval_is_deterministic_contains_the_mean_and_needs_min_blocks():
    d = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    lo, hi = paired.interval(d)
    assert lo < 4.5 < hi and (lo, hi) == paired.interval(d)
    assert 2.5 < lo and hi < 6.5
    with pytest.raises(ValueError, match="need >= 6"):
        paired.interval(d[:5])


def test_holm_step_down():
    adj = paired.holm({"a": 0.01, "b": 0.04, "c": 0.03})
    # sorted 0.01, 0.03, 0.04 -> *3, *2, *1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    assert adj == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert paired.holm({"x": 0.6, "y": 0.7}) == pytest.approx({"x": 1.0, "y": 1.0})


def test_tost_equivalent_only_when_the_90_interval_is_inside_the_margin():
    d = [0.1, -0.2, 0.15, -0.05, 0.0, 0.1, -0.1, 0.05]
    eq, (lo, hi) = paired.tost(d, margin=1.0)
    assert eq and -1 < lo < hi < 1
    assert not paired.tost(d, margin=0.05)[0]
    with pytest.raises(ValueError, match="margin must be > 0"):
        paired.tost(d, margin=0)


def test_compare_directions_and_equivalence():
    down = [-10.0, -12.0, -9.0, -11.0, -10.5, -9.5, -10.0, -11.0]
    assert paired.compare(down, lower_is_better=True).verdict == paired.BETTER
    assert paired.compare(down, lower_is_better=False).verdict == paired.WORSE
    assert paired.compare(down).verdict == paired.LOWER
    flat = [0.2, -0.3, 0.1, -0.1, 0.3, -0.2, 0.0, 0.1]
    assert paired.compare(flat, lower_is_better=True).verdict == paired.NO_CHANGE
    c = paired.compare(flat, lower_is_better=True, margin=2.0)
    assert c.verdict == paired.EQUIVALENT and c.equivalent
    assert "TOST margin +-2" in paired.describe(c) and "not met" not in paired.describe(c)
    wide = [5.0, -6.0, 4.0, -5.0, 6.0, -4.0, 5.0, -5.0]
    c = paired.compare(wide, lower_is_better=True, margin=2.0)
    assert c.verdict == paired.NO_CHANGE and "not met" in paired.describe(c)


def test_family_adjusts_secondaries_but_not_the_primary():
    # the same 6-block shift: exact p = 2/64 = 0.03125 each. Primary: significant; two secondaries:
    # Holm 0.0625 each -> no change. Alone as a secondary it keeps p_adj 0.03125 -> a verdict.
    d = [1.0, 1.2, 0.9, 1.1, 1.0, 1.05]
    lower = {"m": True, "s1": True, "s2": True}
    fam = paired.family({"m": d, "s1": d, "s2": d}, "m", lower, {})
    assert fam["m"].verdict == paired.WORSE and fam["m"].p_adj is None
    assert fam["s1"].p_adj == pytest.approx(0.0625) and fam["s1"].verdict == paired.NO_CHANGE
    fam = paired.family({"m": d, "s1": d}, "m", lower, {})
    assert fam["s1"].verdict == paired.WORSE


def test_family_adjusts_over_the_named_secondaries_only_and_leaves_the_rest_descriptive():
    # the protocol registers 3 secondaries; two descriptive counts must not enlarge the Holm family
    d = [1.0, 1.2, 0.9, 1.1, 1.0, 1.05]
    lower = {"m": True, "s1": True, "d1": None, "d2": None}
    fam = paired.family({"m": d, "s1": d, "d1": d, "d2": d}, "m", lower, {}, secondary=("s1",))
    assert fam["s1"].p_adj == pytest.approx(0.03125) and fam["s1"].verdict == paired.WORSE
    assert fam["d1"].verdict == paired.DESCRIPTIVE and fam["d1"].p_adj is None and fam["d1"].ci is not None
    line = paired.describe(fam["d1"])
    assert line.startswith(paired.DESCRIPTIVE + ": +1.04 [") and "p=" not in line
    everything = paired.family({"m": d, "s1": d, "d1": d, "d2": d}, "m", lower, {})
    assert everything["s1"].p_adj == pytest.approx(3 * 0.03125) and everything["s1"].verdict == paired.NO_CHANGE
    short = paired.family({"m": d[:3], "d1": d[:3]}, "m", lower, {}, secondary=())
    assert short["d1"].verdict == paired.no_verdict(3)
