"""Issue 26 items 4 and 5: vendor presets and ReadOnly-as-of-the-current-state.

Dell's registry reports ReadOnly as of the current state: on the dell-15g corpus registry PcieAspmL1 says
ReadOnly while SysProfile is not Custom (dependency SysProfile NEQ Custom -> ReadOnly). The vendor maps name
each vendor's preset (Dell SysProfile, HPE WorkloadProfile, Lenovo operating mode) and the value that frees the
settings it locks; the plan sets it as a change of its own, first, in the same write, and a setting the preset
frees is planned, not refused. Pure tests on the corpus registries, then the dell-15g simulator (which accepts
the preset and the freed setting in one PATCH, as iDRAC does)."""

from __future__ import annotations

import json

import pytest

from numaforge.bios.apply import apply_host, plan_host
from numaforge.bios.errors import BiosValidationError, VendorMapError
from numaforge.bios.plan import make_plan
from numaforge.bios.registry import Registry
from numaforge.bios.vendors import Desired, default_vendors_dir, load_vendor_map, translate
from numaforge.lab.bmc import flavours

from .test_bios_apply_bmc import _bmc_password, host_for, opts, run, sim_factory  # noqa: F401 (fixtures)

CORPUS = flavours.CORPUS_DIR


def _reg(name: str) -> Registry:
    return Registry.from_json(json.loads((CORPUS / f"{name}.json").read_text()))


def _current(reg: Registry) -> dict:
    return {n: a.raw.get("DefaultValue") for n, a in reg.attributes.items()}


def test_the_dell_preset_is_planned_first_and_frees_pcie_aspm_l1():
    reg = _reg("dell-15g")
    cur = _current(reg)
    assert reg.attributes["PcieAspmL1"].read_only and cur["SysProfile"] == "PerfOptimized"
    desired = translate({"pcie_aspm": "l1", "sriov": True}, {}, load_vendor_map("dell"), reg)
    assert (desired[0].attribute, desired[0].value, desired[0].setting) == ("SysProfile", "Custom", "preset")
    assert "frees the settings it locks" in desired[0].resolved and "R6515" in desired[0].source
    plan = make_plan(desired, reg, cur)
    assert list(plan.changes) == ["SysProfile", "PcieAspmL1"]  # the preset first, then what it frees
    assert plan.changes["PcieAspmL1"] == "Enabled"


def test_a_setting_still_locked_after_the_plan_is_refused_with_the_dependency():
    reg = _reg("dell-15g")
    desired = [Desired("PcieAspmL1", "Enabled", "pcie_aspm")]  # no preset in this plan
    with pytest.raises(BiosValidationError) as exc:
        make_plan(desired, reg, _current(reg))
    assert "PcieAspmL1 is made read-only by registry dependency: if SysProfile NEQ 'Custom'" in str(exc.value)


def test_a_preset_already_free_is_no_change_and_raw_overrides_it():
    reg = _reg("lenovo-sr665")  # default CustomMode
    desired = translate({"sriov": True}, {}, load_vendor_map("lenovo"), reg)
    plan = make_plan(desired, reg, _current(reg))
    assert "OperatingModes_ChooseOperatingMode" not in plan.changes
    raw = {"OperatingModes_ChooseOperatingMode": "MaximumPerformance"}
    got = translate({"sriov": True}, raw, load_vendor_map("lenovo"), reg)
    assert [(d.attribute, d.value, d.setting) for d in got if d.attribute.startswith("Operating")] == [
        ("OperatingModes_ChooseOperatingMode", "MaximumPerformance", "raw")
    ]


def test_hpe_workload_profile_is_set_to_custom_where_the_registry_has_it():
    got = translate({"sriov": True}, {}, load_vendor_map("hpe"), _reg("hpe-gen10p"))
    assert (got[0].attribute, got[0].value) == ("WorkloadProfile", "Custom")
    got = translate({"sriov": True}, {}, load_vendor_map("hpe"), _reg("hpe-gen11"))  # no WorkloadProfile there
    assert all(d.setting != "preset" for d in got)


@pytest.mark.bmc
def test_dell_15g_applies_the_preset_and_the_freed_setting_in_one_write(sim_factory, tmp_path):
    (tmp_path / "aspm.yaml.j2").write_text("settings:\n  pcie_aspm: l1\n")
    sim = sim_factory("dell-15g")
    h = host_for(sim, profile="aspm")
    r = run(apply_host, h, opts(profiles_dir=str(tmp_path), reboot=True))
    assert r.status == "changed", r.message
    assert sim.bios_current()["SysProfile"] == "Custom" and sim.bios_current()["PcieAspmL1"] == "Enabled"
    assert sim.count("PATCH") == 1 and len(sim.jobs()) == 1


def test_values_no_public_source_shows_are_marked_unverified_in_the_plan():
    reg = _reg("lenovo-sr665")
    got = {d.setting: d for d in translate({"llc_as_numa": True, "sriov": True}, {}, load_vendor_map("lenovo"), reg)}
    assert "UNVERIFIED: no public SR665 Redfish source: found by DisplayName" in got["llc_as_numa"].resolved
    assert "UNVERIFIED: DevicesandIOPorts_SRIOV is on the Intel SR670 V2" in got["sriov"].resolved
    assert "that other operating modes override these settings is not in a public source" in got["preset"].resolved
    hpe = translate({"sriov": True}, {}, load_vendor_map("hpe"), _reg("hpe-gen11"))
    assert hpe and all("UNVERIFIED" not in d.resolved for d in hpe)  # the iLO 6 definitions show every value


def test_an_empty_unverified_reason_is_a_load_error(tmp_path):
    text = (default_vendors_dir() / "lenovo.yaml").read_text()
    old = '        unverified: {"Enabled": "Enabled is not seen (the SR635 V3 default is Disabled)"}\n'
    assert old in text
    (tmp_path / "lenovo.yaml").write_text(text.replace(old, "        unverified: {Enabled: ''}\n", 1))
    with pytest.raises(VendorMapError) as exc:
        load_vendor_map("lenovo", tmp_path)
    assert "settings.llc_as_numa.unverified.Enabled must say why no public source shows it" in exc.value.what
    assert exc.value.where.startswith(str(tmp_path / "lenovo.yaml") + ":")


@pytest.mark.bmc
def test_bios_plan_lists_the_unverified_items(sim_factory):
    sim = sim_factory("lenovo-sr665")
    r = run(plan_host, host_for(sim, profile="epyc-gpudirect"))
    assert r.status == "ok", r.message
    assert "preset -> OperatingModes_ChooseOperatingMode" in r.data["unverified"]
    items = [i for i in r.data["plan"] if "UNVERIFIED: " in i["resolved"]]
    # no public source shows an SR665's XCC names or values: every mapped item of the plan is marked
    assert items and {i["setting"] for i in items} == {i["setting"] for i in r.data["plan"] if i["attribute"] != "-"}
    assert sorted(r.data["unverified"]) == sorted(f"{i['setting']} -> {i['attribute']}" for i in items)


def test_multi_condition_dependencies_combine_left_to_right_by_mapterms():
    """DMTF AttributeRegistry v1 MapTerms: terms evaluate in array order, left to right: A OR B AND C is
    (A OR B) AND C -- not A OR (B AND C)."""
    from numaforge.bios.registry import MapDependency

    def cond(attr, value, term=None):
        c = {"MapFromAttribute": attr, "MapFromCondition": "EQU", "MapFromValue": value}
        return {**c, "MapTerms": term} if term else c

    dep = MapDependency("X", [cond("A", 1), cond("B", 1, "OR"), cond("C", 1, "AND")], "X", "ReadOnly", True)
    assert dep.holds({"A": 1, "B": 0, "C": 1})
    assert not dep.holds({"A": 1, "B": 0, "C": 0})  # A OR (B AND C) would hold here
    assert dep.holds({"A": 0, "B": 1, "C": 1})
    assert not dep.holds({"A": 0, "B": 0, "C": 1})
