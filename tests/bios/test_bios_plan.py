"""Plan: every desired value validated against the registry before any write; diff current/pending/desired."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import BiosValidationError
from numaforge.bios.plan import make_plan
from numaforge.bios.profile import render_profile
from numaforge.bios.vendors import Desired, load_vendor_map, translate

from .helpers import PROFILES, facts, registry

DELL = registry("registry-dell-like.json")
CURRENT = {
    "SystemBiosVersion": "2.14.1",
    "NumaNodesPerSocket": "1",
    "CcxAsNumaDomain": "Disabled",
    "MemInterleave": "Enabled",
    "PcieAcsCtl": "Enabled",
    "PcieAspmL1": "Enabled",
    "IommuSupport": "Disabled",
    "SriovGlobalEnable": "Disabled",
    "DeterminismSlider": "PowerDeterminism",
    "AcPwrRcvryDelay": "Immediate",
    "AcPwrRcvryUserDelay": 60,
    "AssetTag": "",
    "TpmSecurity": "On",
}


def d(attr, value, setting="raw"):
    return Desired(attr, value, setting)


def test_plan_classifies_ok_pending_and_change_and_patches_only_changes():
    desired = [
        d("NumaNodesPerSocket", "4"),
        d("CcxAsNumaDomain", "Disabled"),
        d("IommuSupport", "Enabled"),
        d("SriovGlobalEnable", "Enabled"),
    ]
    settings = {"IommuSupport": "Enabled", "CcxAsNumaDomain": "Disabled"}  # one pending, one echo of current
    plan = make_plan(desired, DELL, CURRENT, settings, "h")
    actions = {i.attribute: i.action for i in plan.items}
    assert actions == {
        "NumaNodesPerSocket": "change",
        "CcxAsNumaDomain": "ok",
        "IommuSupport": "pending",
        "SriovGlobalEnable": "change",
    }
    assert plan.changes == {"NumaNodesPerSocket": "4", "SriovGlobalEnable": "Enabled"}
    assert plan.pending == ["IommuSupport"] and plan.needs_reset


def test_desired_equal_to_current_but_other_value_pending_is_a_change():
    plan = make_plan([d("SriovGlobalEnable", "Disabled")], DELL, CURRENT, {"SriovGlobalEnable": "Enabled"})
    assert plan.changes == {"SriovGlobalEnable": "Disabled"}


def test_no_change_plan_is_empty():
    plan = make_plan([d("NumaNodesPerSocket", "1")], DELL, CURRENT, {})
    assert plan.changes == {} and not plan.needs_reset


def test_every_problem_reported_at_once_with_allowed_values():
    desired = [
        d("NumaNodesPerSocket", "3"),
        d("TpmSecurity", "Off"),
        d("AcPwrRcvryUserDelay", 30),
        d("AssetTag", "longer-than-ten"),
        d("NoSuchAttribute", 1),
        d("AcPwrRcvryDelay", 5),
        d("AsetTag", "x"),
    ]
    with pytest.raises(BiosValidationError) as ei:
        make_plan(desired, DELL, CURRENT, {}, "gpu-01")
    probs = "\n".join(ei.value.problems)
    assert "gpu-01/NumaNodesPerSocket='3' is not allowed; allowed: 0, 1, 2, 4" in probs
    assert "gpu-01/TpmSecurity is ReadOnly" in probs
    # the Integer is ReadOnly through the dependency (delay mode is not User) -- the type check comes first
    assert "AcPwrRcvryUserDelay=30 is below the lower bound 60" in probs
    assert "AssetTag is 15 characters, longer than MaxLength 10" in probs
    assert "NoSuchAttribute: not in registry BiosAttributeRegistry.v1_0_0" in probs
    assert "did you mean AssetTag?" in probs
    assert "AcPwrRcvryDelay=5 is not allowed" in probs
    assert len(ei.value.problems) == 7


def test_dependency_makes_attribute_read_only_unless_the_same_write_unlocks_it():
    with pytest.raises(BiosValidationError) as ei:
        make_plan([d("AcPwrRcvryUserDelay", 120)], DELL, CURRENT, {}, "h")
    assert "made read-only by registry dependency: if AcPwrRcvryDelay NEQ 'User'" in ei.value.problems[0]
    plan = make_plan([d("AcPwrRcvryDelay", "User"), d("AcPwrRcvryUserDelay", 120)], DELL, CURRENT, {}, "h")
    assert plan.changes == {"AcPwrRcvryDelay": "User", "AcPwrRcvryUserDelay": 120}


def test_read_only_attribute_already_at_desired_value_is_fine():
    plan = make_plan([d("TpmSecurity", "On")], DELL, CURRENT, {})
    assert plan.changes == {}


def test_hpe_determinism_dependency_is_satisfied_by_setting_control_manual():
    hpe = registry("registry-hpe-like-per-slot-aspm.json")
    desired = translate({"determinism": "power"}, {}, load_vendor_map("hpe"), hpe)
    plan = make_plan(
        desired,
        hpe,
        {"DeterminismControl": "DeterminismCtrlAuto", "PerformanceDeterminism": "PerformanceDeterministic"},
    )
    assert plan.changes == {
        "DeterminismControl": "DeterminismCtrlManual",
        "PerformanceDeterminism": "PowerDeterministic",
    }


def test_profile_raw_escape_hatch_is_validated_like_everything_else():
    p = render_profile("readonly-and-out-of-bounds-raw", facts(), PROFILES)
    desired = translate(p.settings, p.raw_for("dell"), load_vendor_map("dell"), DELL, "gpu-01")
    with pytest.raises(BiosValidationError) as ei:
        make_plan(desired, DELL, CURRENT, {}, "gpu-01")
    assert len(ei.value.problems) == 4
    assert "fix" not in ei.value.what and "raw:" in ei.value.fix


ENUMS = {n: a.values for n, a in DELL.attributes.items() if a.type == "Enumeration" and not a.read_only}


def test_plan_converges_property():
    """For any current/pending/desired: writing plan.changes and resetting leaves nothing to do, and the
    PATCH never carries a value the BIOS will already have."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    names = sorted(ENUMS)
    state = st.fixed_dictionaries({n: st.sampled_from(ENUMS[n]) for n in names})
    partial = st.dictionaries(st.sampled_from(names), st.just(None)).flatmap(
        lambda keys: st.fixed_dictionaries({k: st.sampled_from(ENUMS[k]) for k in keys})
    )

    @settings(max_examples=200, deadline=None)
    @given(current=state, pending=partial, want=partial)
    def check(current, pending, want):
        cur = {**CURRENT, **current}
        desired = [d(k, v) for k, v in want.items()]
        plan = make_plan(desired, DELL, cur, pending)
        effective = {**cur, **pending}
        for k, v in plan.changes.items():
            assert effective[k] != v
        after_reset = {**cur, **pending, **plan.changes}
        assert make_plan(desired, DELL, after_reset, {}).changes == {}
        assert not make_plan(desired, DELL, after_reset, {}).needs_reset

    check()
