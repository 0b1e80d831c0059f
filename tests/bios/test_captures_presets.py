"""Issue 41 item 8: HPE's AMDPerformanceWorkloadProfile is a second preset. On the DL385 Gen10 Plus v2 capture
(tests/data/captures/libredfish-hpe-dl385-gen10p, registry A42) its dependencies force and lock what the profiles
set -- NumaMemoryDomainsPerSocket, DeterminismControl, PerformanceDeterminism, LastLevelCacheAsNUMANode, Sriov
ReadOnly, ProcAmdIoVt GrayOut -- for every value but Disabled, and it is itself ReadOnly unless WorkloadProfile is
Custom (HPE's BaseConfigs default: Disabled). So on a host at WorkloadProfile=Custom with an AMD profile set, the
plan writes AMDPerformanceWorkloadProfile=Disabled with the change that needs it, after WorkloadProfile; it is
never written when nothing it locks changes. The capture's registry and Bios as captured, with the two presets'
current values set as an operator may have them. Pure: no BMC."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import BiosValidationError
from numaforge.bios.plan import make_plan
from numaforge.bios.profile import render_profile
from numaforge.bios.vendors import load_vendor_map, translate

from .capture_trees import capture_host
from .conftest import CAPTURES
from .helpers import facts

DL385 = CAPTURES / "libredfish-hpe-dl385-gen10p"
AMD = "AMDPerformanceWorkloadProfile"


def _locking_values(reg) -> list[str]:
    """The AMD profile values whose dependencies lock or force an attribute the hpe map sets (from the registry)."""
    gen = load_vendor_map("hpe").generations[0]
    mapped = {e.get("attribute") for e in gen.settings.values()} | {"DeterminismControl", "PerformanceDeterminism"}
    out = set()
    for d in reg.dependencies:
        for c in d.conditions:
            if c.get("MapFromAttribute") == AMD and d.to_attribute in mapped and d.to_property != "GrayOut":
                out.add(c["MapFromValue"])
    return sorted(out)


def _as_the_bios_shows(reg, bios: dict, current: dict) -> dict:
    """The captured Bios with ``current`` set and what its dependencies force then (as the BIOS shows it)."""
    now = {**bios, **current}
    for d in reg.dependencies:
        if d.to_property == "CurrentValue" and d.to_attribute in now and d.holds(reg.value_names(now)):
            now[d.to_attribute] = d.to_value
    return now


def _plan(profile: str, current: dict):
    reg, bios = capture_host(DL385)
    now = _as_the_bios_shows(reg, bios, current)
    p = render_profile(profile, facts(vendor="hpe", model="ProLiant DL385 Gen10 Plus v2"))
    desired = translate(p.settings, {}, load_vendor_map("hpe"), reg, "h", optional=p.optional, present=now)
    return make_plan(desired, reg, now, {}, "h"), reg


def test_the_capture_shows_the_amd_profile_locking_the_mapped_settings():
    reg, bios = capture_host(DL385)
    assert bios[AMD] == "Disabled" and bios["WorkloadProfile"] != "Custom"
    assert len(_locking_values(reg)) >= 10  # HPCOptimized, LinuxKVMOptimized, ... (not Disabled)
    assert "Disabled" not in _locking_values(reg)


@pytest.mark.parametrize("profile", ["epyc-gpudirect", "epyc-baseline"])
def test_an_amd_workload_profile_that_locks_a_change_is_set_to_disabled_in_the_same_write(profile):
    reg, _bios = capture_host(DL385)
    written = []
    for value in _locking_values(reg):
        plan, _ = _plan(profile, {"WorkloadProfile": "Custom", AMD: value})
        changes = [i for i in plan.items if i.action == "change"]
        locked = {
            d.to_attribute
            for d in reg.dependencies
            if any(c.get("MapFromAttribute") == AMD and c.get("MapFromValue") == value for c in d.conditions)
        }
        if not locked & {i.attribute for i in changes}:
            assert AMD not in {i.attribute for i in changes}, value  # nothing it locks changes: never written
            continue
        amd = next(i for i in changes if i.attribute == AMD)
        assert amd.desired == "Disabled" and amd.setting == "preset", value
        assert "frees the settings it locks" in amd.resolved
        order = [i.attribute for i in plan.items]
        assert order.index(AMD) < min(order.index(i.attribute) for i in changes if i.setting != "preset")
        written.append(value)
    assert len(written) >= 10, written


def test_the_amd_profile_is_not_written_when_it_locks_nothing_that_changes():
    """Disabled already, or WorkloadProfile not Custom (which forces it Disabled): no write of it."""
    for current in ({"WorkloadProfile": "Custom", AMD: "Disabled"}, {}):
        plan, _ = _plan("epyc-gpudirect", current)
        assert all(i.action != "change" for i in plan.items if i.attribute == AMD), current


def test_without_the_pairing_the_locked_change_was_refused():
    """What the pairing fixes, shown on the same capture: with the AMD profile kept (the profile sets it raw to its
    current value), the NUMA change is refused naming the dependency."""
    reg, bios = capture_host(DL385)
    now = _as_the_bios_shows(reg, bios, {"WorkloadProfile": "Custom", AMD: "HPCOptimized"})
    p = render_profile("epyc-gpudirect", facts(vendor="hpe", model="ProLiant DL385 Gen10 Plus v2"))
    desired = translate(p.settings, {AMD: "HPCOptimized"}, load_vendor_map("hpe"), reg, "h", present=now)
    with pytest.raises(BiosValidationError) as exc:
        make_plan(desired, reg, now, {}, "h")
    assert AMD in str(exc.value)
