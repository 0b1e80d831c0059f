"""The gate's pure decisions: the matrix, the window verdict, skewness, the incomplete beta function and Pearson's
p-value against values known in closed form."""

from __future__ import annotations

import math

import pytest

from numaforge.canary import decide
from numaforge.canary.decide import HOLD, ROLLBACK, WIDEN, Thresholds

T = Thresholds()


@pytest.mark.parametrize(
    ("p99", "skew", "want"),
    [
        (9.0, -0.1, WIDEN),
        (14.9, -0.29, WIDEN),
        (15.0, 0.0, HOLD),  # not below 15
        (20.0, 0.2, HOLD),
        (5.0, -0.5, HOLD),  # skew between -0.8 and -0.3
        (25.1, 0.5, ROLLBACK),  # P99 alone rolls back (the talk's "and" would hold: docs/canary-gate.md)
        (5.0, -0.81, ROLLBACK),  # skew alone rolls back
        (30.0, -1.0, ROLLBACK),  # the talk's literal rollback cell
        (25.0, -0.8, HOLD),  # the thresholds themselves are not crossed
        (9.0, None, WIDEN),  # fewer than 3 hosts: P99 alone
        (None, 0.1, HOLD),  # no latency data never widens
        (None, -0.9, ROLLBACK),
    ],
)
def test_matrix(p99, skew, want):
    decision, why = decide.decide_minute(p99, skew, T)
    assert decision == want, why
    assert why


def test_thresholds_from_the_command_line_move_the_cells():
    loose = Thresholds(widen_p99_ms=30, rollback_p99_ms=50)
    assert decide.decide_minute(26.0, 0.0, loose)[0] == WIDEN
    with pytest.raises(decide.ThresholdError, match="widen P99 delta"):
        Thresholds(widen_p99_ms=30, rollback_p99_ms=20).check()


def test_window_verdict():
    assert decide.window_verdict([WIDEN, WIDEN]) == WIDEN
    assert decide.window_verdict([WIDEN, HOLD, WIDEN]) == HOLD
    assert decide.window_verdict([WIDEN, ROLLBACK]) == ROLLBACK
    assert decide.window_verdict([]) == HOLD


def test_skewness():
    assert decide.skewness([1.0, 2.0]) is None
    assert decide.skewness([0.9, 0.9, 0.9]) == 0.0
    # one low outlier among n: g1 = -(n-2)/sqrt(n-1)
    assert decide.skewness([0.5, 1.0, 1.0, 1.0]) == pytest.approx(-2 / math.sqrt(3))
    assert decide.skewness([1.0, 2.0, 3.0, 10.0]) > 0


@pytest.mark.parametrize(
    ("a", "b", "x", "want"),
    [
        (2, 3, 0.5, 11 / 16),  # P(Binomial(4, 1/2) >= 2)
        (1, 1, 0.3, 0.3),  # uniform
        (5, 2, 0.8, 6 * 0.8**5 * 0.2 + 0.8**6),  # P(Binomial(6, 0.8) >= 5)
        (0.5, 0.5, 0.25, 2 / math.pi * math.asin(math.sqrt(0.25))),  # arcsine distribution
    ],
)
def test_betainc_known_values(a, b, x, want):
    assert decide.betainc(a, b, x) == pytest.approx(want, rel=1e-10, abs=1e-13)


def test_t_tail_closed_forms_and_tables():
    for t in (0.3, 1.0, 2.5, 12.706):
        assert decide.t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-10)  # Cauchy
        assert decide.t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-10)
    assert decide.t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=2e-4)  # t table: 0.975 quantile, df 10
    assert decide.t_two_sided_p(2.576, 1e6) == pytest.approx(0.01, abs=1e-4)  # the normal limit


def test_pearson_r_and_p():
    r, p = decide.pearson([1, 2, 3, 4], [2, 4, 5, 9])
    assert r == pytest.approx(11 / math.sqrt(130))  # sxy 11, sxx 5, syy 26
    t = r * math.sqrt(2 / (1 - r * r))
    assert p == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-9)  # df = 2 closed form
    assert decide.pearson([1, 2], [3, 4]) == (None, None)
    assert decide.pearson([1, 1, 1], [3, 4, 5]) == (None, None)
    r, p = decide.pearson(list(range(10)), [-v for v in range(10)])
    assert r == pytest.approx(-1.0) and p == 0.0


def test_correlation_alert_uses_the_talks_thresholds():
    p99 = [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
    skew = [0.0, -0.1, -0.22, -0.3, -0.41, -0.5, -0.6, -0.69]
    c = decide.correlation(p99 + [None], skew + [0.3], T)
    assert c["n"] == 8 and c["r"] < -0.99 and c["p"] < 0.01 and c["alert"]
    c = decide.correlation([1.0, 2.0, 3.0, 4.0], [0.1, -0.1, 0.1, -0.1], T)
    assert not c["alert"]


def test_lowest_skew_one_outlier_can_reach():
    assert decide.lowest_one_outlier_skew(2) is None
    assert decide.lowest_one_outlier_skew(3) == pytest.approx(-0.7071, abs=1e-4)
    assert decide.lowest_one_outlier_skew(3) > T.rollback_skew
    assert decide.lowest_one_outlier_skew(4) < T.rollback_skew
    for n in (3, 4, 7):
        assert decide.skewness([0.1] + [0.99] * (n - 1)) == pytest.approx(decide.lowest_one_outlier_skew(n))
