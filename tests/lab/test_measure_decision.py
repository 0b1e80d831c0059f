"""The protocol's decision rules 1-5 (numaforge.measure.decision) on synthetic study blocks: each rule's
finding, the order (a failed rule 1 judges nothing), and rule 5's choice by data, by code, or none."""

from __future__ import annotations

from pathlib import Path

from numaforge.measure import arms, decision, scenario
from numaforge.measure.scenario import ProbeMetrics

REAL = Path(__file__).resolve().parents[2] / "patches" / "sched-numa-prefer-local-fallback"

BLOCKS = 8
JITTER = [0.0, 0.3, -0.2, 0.1, -0.1, 0.2, -0.3, 0.05]  # per block, added to every endpoint: paired, not flat


def runs(spec: dict[str, dict[str, float]], busy: bool = False) -> list[ProbeMetrics]:
    """One run per arm per block; spec {arm: {endpoint: mean}} over a base of off's values."""
    base = {"not_closer_per_min": 0.2 if busy else 4.0, "local_share_30s": 60.0, "time_to_90": 30.0}
    base |= {"pages_migrated_per_min": 1000.0, "closer_per_min": 0.0, "found_nothing_per_min": 0.0}
    out = []
    for b in range(1, BLOCKS + 1):
        j = JITTER[b - 1]
        for arm, over in spec.items():
            vals = {k: v + j * (1 + 0.5 * (arm == "off")) for k, v in (base | over).items()}
            out.append(ProbeMetrics(arm, b, **vals))  # type: ignore[arg-type]
    return out


def reports(spec: dict[str, dict[str, float]], busy_spec: dict[str, dict[str, float]] | None = None):
    busy: dict[str, dict[str, float]] = {a: {} for a in spec} | (busy_spec or {})
    return scenario.report(runs(spec), list(spec)), scenario.report(runs(busy, busy=True), list(spec))


def held(dec: decision.Decision, rule: int, arm: str) -> bool:
    return next(f.holds for f in dec.findings if f.rule == rule and f.arm == arm)


FIXES = {"not_closer_per_min": 0.5}
LOCAL = {"not_closer_per_min": 0.5, "local_share_30s": 75.0, "time_to_90": 20.0}


def test_a_null_arm_that_moves_things_stops_every_judgement():
    main, busy = reports({"off": {}, "winner": LOCAL, "null": {"not_closer_per_min": 1.0}})
    dec = decision.apply_rules(main, busy, {"winner": 10})
    assert not dec.judged and [f.rule for f in dec.findings] == [1]
    assert dec.choice is None and "no arm is judged" in dec.statement


def test_one_design_that_improves_locality_is_chosen_on_data():
    main, busy = reports({"off": {}, "winner": LOCAL, "alt-a": FIXES, "null": {}})
    dec = decision.apply_rules(main, busy, {"winner": 30, "alt-a": 5})
    assert dec.judged and held(dec, 1, "null")
    assert held(dec, 2, "winner") and held(dec, 3, "winner") and held(dec, 4, "winner")
    assert dec.candidates == ["winner", "alt-a"] and dec.improving == ["winner"]
    assert (dec.choice, dec.basis) == ("winner", "data")


def test_a_design_that_changes_the_busy_control_is_not_a_candidate():
    main, busy = reports(
        {"off": {}, "winner": LOCAL, "alt-a": LOCAL, "null": {}}, {"alt-a": {"not_closer_per_min": 3.0}}
    )
    dec = decision.apply_rules(main, busy, {"winner": 30, "alt-a": 5})
    assert not held(dec, 2, "alt-a") and held(dec, 2, "winner")
    assert dec.candidates == ["winner"] and dec.choice == "winner"
    dec = decision.apply_rules(main, None, {})
    assert dec.candidates == [] and "none is cleared" in dec.statement


def test_no_outcome_improved_says_the_choice_is_about_the_mechanism_only():
    main, busy = reports({"off": {}, "winner": FIXES, "alt-a": FIXES, "null": {}})
    dec = decision.apply_rules(main, busy, {"winner": 30, "alt-a": 5})
    assert dec.candidates == ["winner", "alt-a"] and dec.improving == []
    assert dec.choice is None and dec.basis == "mechanism only"
    assert "No design is better than upstream on outcomes" in dec.statement


def test_worse_cost_is_harm_even_with_better_locality():
    main, busy = reports({"off": {}, "winner": LOCAL | {"pages_migrated_per_min": 2000.0}, "null": {}})
    dec = decision.apply_rules(main, busy, {})
    assert not held(dec, 4, "winner") and "pages_migrated_per_min" in dec.findings[-1].why
    assert dec.candidates == [] and dec.choice is None


def test_a_large_improvement_is_not_harm():
    # +15 points of locality is far outside the 5-point margin: not "equivalent", but shown better, so no harm
    main, busy = reports({"off": {}, "winner": LOCAL, "null": {}})
    assert main["paired"]["local_share_30s"]["winner"]["equivalent"] is False
    assert decision.no_harm(main, "winner")[0]


def test_two_improving_designs_that_do_not_separate_go_to_the_smaller_change():
    main, busy = reports({"off": {}, "winner": LOCAL, "alt-a": LOCAL, "null": {}})
    dec = decision.apply_rules(main, busy, {"winner": 30, "alt-a": 5})
    assert dec.improving == ["winner", "alt-a"] and "winner vs alt-a" in dec.direct
    assert (dec.choice, dec.basis) == ("alt-a", "code") and "made on code, not data" in dec.statement


def test_two_improving_designs_separated_by_locality_go_to_the_better_one():
    better = LOCAL | {"local_share_30s": 90.0}
    main, busy = reports({"off": {}, "winner": LOCAL, "alt-a": better, "null": {}})
    dec = decision.apply_rules(main, busy, {"winner": 5, "alt-a": 30})
    assert (dec.choice, dec.basis) == ("alt-a", "data")
    assert dec.direct["winner vs alt-a"].startswith("worse")


def test_equal_code_sizes_leave_rule_5_without_a_choice():
    main, busy = reports({"off": {}, "winner": LOCAL, "alt-a": LOCAL, "null": {}})
    dec = decision.apply_rules(main, busy, {"winner": 10, "alt-a": 10})
    assert dec.choice is None and dec.basis == "none" and "makes no choice between winner, alt-a" in dec.statement


def test_code_size_counts_code_lines_not_comments():
    sizes = arms.code_lines()
    assert set(sizes) == {f"alt-{d.name}" for d in (REAL / "alternatives").iterdir()} | {"winner"}
    # the shipped 0001 (group-exempt since amendment 6): bool need_gain; the 4-line need_gain expression whose
    # first line holds the group exemption (`!ng && ...`); the 4-line if/continue
    assert sizes["alt-group-exempt"] == 9
    # 0000 (issue 42): the distance line changed (- and +), env.dist moved (+ and -)
    assert sizes["alt-distfix"] == 4
    assert sizes["winner"] == sizes["alt-distfix"] + sizes["alt-group-exempt"]
    # drop-zero-gain, 0001 until then: its group exemption a line of its own (`!(ng && ng->active_nodes > 1)`)
    assert sizes["alt-drop-zero-gain"] == 10
