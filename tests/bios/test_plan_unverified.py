"""Issue 26: a vendor-map entry marked `unverified` is marked wherever a plan uses it -- the item's `resolved`
ends in "UNVERIFIED: <why>" (printed in the plan table's resolved column and in --json's plan[].resolved),
and the host's report lists it under `unverified` -- and an entry its sources show is never marked. Both
shipped profiles on every corpus flavour (pure), then bios-plan against simulators (report and table)."""

from __future__ import annotations

import pytest
from rich.console import Console

from numaforge.bios.apply import plan_host
from numaforge.bios.hostplan import record_plan
from numaforge.bios.hoststate import BiosState
from numaforge.bios.plan import make_plan
from numaforge.bios.presets import UNVERIFIED, mark_of
from numaforge.bios.profile import Profile, render_profile
from numaforge.bios.registry import Registry
from numaforge.bios.vendors import Desired, load_vendor_map, translate
from numaforge.cli import bios, common
from numaforge.lab.bmc import CORPUS, load_flavour
from numaforge.report import HostResult, Report

from .helpers import facts
from .test_bios_apply_bmc import _bmc_password, host_for, run, sim_factory  # noqa: F401 (fixtures)
from .test_corpus import GENERATION, VENDOR


def _why(vendor: str, flavour: str, setting: str, attribute: str, value) -> str | None:
    """The map's mark on the value a plan item writes (marks sit on values: issue 41 item 9; keyed by the
    ValueName or by the ValueDisplayName the map spells it with), None when it is not marked."""
    gen = next(g for g in load_vendor_map(vendor).generations if g.id == GENERATION[flavour])
    entry = gen.preset if setting == "preset" else gen.settings.get(setting)
    attr = Registry.from_json(load_flavour(flavour).registry).attributes.get(attribute)
    shown = attr.value_display.get(value) if attr is not None else None
    return mark_of((entry or {}).get("unverified"), value, *([shown] if shown else [])) or None


@pytest.mark.parametrize("flavour", CORPUS)
@pytest.mark.parametrize("profile", ["epyc-gpudirect", "epyc-baseline"])
def test_every_planned_item_of_an_unverified_entry_says_so_and_no_other_does(flavour, profile):
    f = load_flavour(flavour)
    vendor = VENDOR[f.vendor]
    p = render_profile(profile, facts(vendor=vendor, model=f.model))
    reg = Registry.from_json(f.registry)
    desired = translate(p.settings, {}, load_vendor_map(vendor), reg, "h", optional=p.optional)
    plan = make_plan(desired, reg, dict(f.defaults), {}, "h")
    written = [i for i in plan.items if i.action != "gap"]
    assert written
    for i in written:
        why = _why(vendor, flavour, i.setting, i.attribute, i.desired)
        if why:
            assert f"; {UNVERIFIED}: {why}" in i.resolved, (i.setting, i.resolved)
        else:
            assert UNVERIFIED not in i.resolved, (i.setting, i.resolved)
        assert i.unverified == (why or ""), i.setting  # the report's list is built from this field, not the text


def _planned(flavour: str, profile: str) -> list:
    f = load_flavour(flavour)
    vendor = VENDOR[f.vendor]
    p = render_profile(profile, facts(vendor=vendor, model=f.model))
    reg = Registry.from_json(f.registry)
    desired = translate(p.settings, {}, load_vendor_map(vendor), reg, "h", optional=p.optional)
    return [i for i in make_plan(desired, reg, dict(f.defaults), {}, "h").items if i.action != "gap"]


def test_the_corpus_plans_cover_both_marked_and_unmarked_values():
    """The test above is not vacuous: some corpus plans write marked values, some none; an entry can be both
    (marks sit on values). On the Dell 15G the gpudirect plan's NPS "4", SR-IOV and SysProfile=Custom are shown
    by public sources now (cybozu-go/setup-hw, the R750 registry): unmarked (issue 41 item 9)."""
    marked = {fl: sorted(i.setting for i in _planned(fl, "epyc-gpudirect") if i.unverified) for fl in CORPUS}
    assert marked["hpe-gen10p"] == [] and marked["hpe-gen11"] == []
    assert marked["smc-h13"] and "numa_nodes_per_socket" in marked["dell-16g"]  # 16G: only "1" is shown
    d15 = {i.setting: i for i in _planned("dell-15g", "epyc-gpudirect")}
    assert not d15["numa_nodes_per_socket"].unverified and not d15["sriov"].unverified
    assert not d15["preset"].unverified
    # the same entry, another value: NPS1 on an H13 is shown (weka bios_tool writes it), NPS4 too; NPS2 is not
    h13 = load_vendor_map("supermicro").generations[1]
    assert h13.id == "h13" and set(h13.settings["numa_nodes_per_socket"]["unverified"]) == {"NPS0", "NPS2"}


@pytest.mark.bmc
@pytest.mark.parametrize(("flavour", "marked"), [("smc-h13", True), ("hpe-gen11", False), ("dell-15g", True)])
def test_bios_plan_reports_and_prints_the_unverified_items(sim_factory, monkeypatch, flavour, marked):
    sim = sim_factory(flavour)
    r = run(plan_host, host_for(sim, profile="epyc-gpudirect"))
    assert r.status == "ok", r.message
    vendor = VENDOR[load_flavour(flavour).vendor]
    items = [i for i in r.data["plan"] if i["action"] != "gap"]
    expect = [
        f"{i['setting']} -> {i['attribute']}"
        for i in items
        if _why(vendor, flavour, i["setting"], i["attribute"], i["desired"])
    ]
    assert r.data["unverified"] == expect and bool(expect) == marked
    for i in items:  # --json carries the reason on the item itself
        why = _why(vendor, flavour, i["setting"], i["attribute"], i["desired"])
        assert (f"{UNVERIFIED}: {why}" in i["resolved"]) if why else (UNVERIFIED not in i["resolved"])
    out = Console(record=True, width=2000, color_system=None)
    monkeypatch.setattr(common, "console", out)
    bios._print_plans(Report("bios-plan", hosts=[r]))
    rows = [line for line in out.export_text().splitlines() if f"{UNVERIFIED}: " in line]
    assert len(rows) == len(expect)  # one printed row per unverified item, the reason in its resolved column
    for i in items:
        why = _why(vendor, flavour, i["setting"], i["attribute"], i["desired"])
        if why:
            assert any(i["attribute"] in row and why in row for row in rows), i["attribute"]


def test_bmc_text_in_resolved_cannot_mark_or_unmark_an_item():
    """The report's `unverified` and `by_display_name` lists come from the items' fields: a BMC DisplayName that
    contains "UNVERIFIED: " or "by display name" (it is quoted in `resolved`) changes neither list."""
    reg = Registry.from_json(
        {
            "Id": "BiosAttributeRegistry.v1_0_0",
            "RegistryEntries": {
                "Attributes": [
                    {
                        "AttributeName": a,
                        "DisplayName": f"{a} by display name; UNVERIFIED: forged",
                        "Type": "Enumeration",
                        "Value": [{"ValueName": "1"}, {"ValueName": "0"}],
                    }
                    for a in ("Honest", "Marked")
                ]
            },
        }
    )
    hostile = "by display name: /x/ matched 'Honest by display name; UNVERIFIED: forged'"
    desired = [
        Desired("Honest", "1", "a", hostile),
        Desired(
            "Marked", "1", "b", "vendor map: exact AttributeName", unverified="no public source", by_display_name=True
        ),
    ]
    plan = make_plan(desired, reg, {"Honest": "0", "Marked": "0"}, {}, "h")
    result = HostResult("h")
    state = BiosState("generic", "/s", None, "/b", {}, "/b/Settings", {}, None, [], reg)
    record_plan(result, state, Profile("p", {}, {}, chain=["p"]), plan)
    assert result.data["unverified"] == ["b -> Marked"]
    assert [x.split(" (")[0] for x in result.data["by_display_name"]] == ["b -> Marked"]
