"""Issue 41 item 8, on the captured trees that show it (tests/data/captures: registry and Bios as captured; the
plan's own validation, pure, no BMC):

- a read-only attribute the plan keeps at its current value is checked against what the registry's dependencies
  force once the plan's values apply: the Dell R750 (iDRAC9) forces PcieAspmL1, ProcCStates and ProcTurboMode by
  SysProfile and makes them ReadOnly unless it is Custom -- a plan that changes SysProfile and keeps one of them
  at a value the new profile forces otherwise says it cannot be kept (it was planned "ok", and never converged);
- Immutable attributes (DSP8010: "shall not be modified"; the BlueField-3's NicMode, HostPrivilegeLevel,
  InternalCPUModel, not ReadOnly there) and Hidden ones (the X13's 99, hidden by the registry or by a dependency)
  are never planned as writes: a plan that needs one says so; kept at their value they are fine."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import BiosValidationError
from numaforge.bios.plan import make_plan
from numaforge.bios.vendors import Desired

from .capture_trees import capture_host
from .conftest import CAPTURES


def _plan(capture: str, raw: dict):
    reg, bios = capture_host(CAPTURES / capture)
    return make_plan([Desired(k, v, "raw", "raw") for k, v in raw.items()], reg, bios, {}, "h")


def _other(attr, now):
    """A value of ``attr`` other than ``now`` the registry allows (a string one for free text)."""
    if attr.type == "Enumeration":
        return next(v for v in attr.values if v != attr.value_name(now))
    if attr.type == "Integer":
        return (attr.lower or 0) if now != (attr.lower or 0) else (attr.lower or 0) + (attr.increment or 1)
    return "NicMode" if now != "NicMode" else "DpuMode"


def _r750_forced_cases():
    """(SysProfile value, read-only attribute, the value SysProfile forces it to) from the R750's registry."""
    reg, bios = capture_host(CAPTURES / "libredfish-dell-r750")
    out = []
    for profile in reg.attributes["SysProfile"].values:
        if profile == "Custom":
            continue
        state = {**reg.value_names(bios), "SysProfile": profile}
        for dep in reg.dependencies:
            if (
                dep.to_property == "CurrentValue"
                and dep.to_attribute in bios
                and dep.holds(state)
                and any(c.get("MapFromAttribute") == "SysProfile" for c in dep.conditions)
            ):
                out.append((profile, dep.to_attribute, dep.to_value))
    return out


def test_the_r750_shows_sysprofile_forcing_read_only_attributes():
    cases = _r750_forced_cases()
    reg, bios = capture_host(CAPTURES / "libredfish-dell-r750")
    assert {a for _p, a, _v in cases} >= {"PcieAspmL1", "ProcCStates", "ProcTurboMode"}
    assert any(bios[a] != v for _p, a, v in cases), "no case where the kept value differs from the forced one"
    assert all(reg.attributes[a].read_only for _p, a, _v in cases if a in ("PcieAspmL1", "ProcCStates"))


@pytest.mark.parametrize(("profile", "attribute", "forced"), _r750_forced_cases())
def test_a_kept_read_only_value_a_dependency_forces_otherwise_is_refused(profile, attribute, forced):
    reg, bios = capture_host(CAPTURES / "libredfish-dell-r750")
    keep = bios[attribute]
    if reg.value_names(bios)[attribute] == forced:
        plan = _plan("libredfish-dell-r750", {"SysProfile": profile, attribute: keep})
        assert {i.attribute: i.action for i in plan.items}[attribute] == "ok"
        return
    with pytest.raises(BiosValidationError) as exc:
        _plan("libredfish-dell-r750", {"SysProfile": profile, attribute: keep})
    text = str(exc.value)
    assert f"h/{attribute}" in text and f"forces {forced!r}" in text and f"{keep!r} cannot be kept" in text, text
    assert "SysProfile EQU" in text  # the dependency that forces it, as the registry writes it


def _flagged(capture: str):
    """(attribute, why) of every Immutable attribute, and every attribute Hidden as the tree stands (by its own
    flag or a dependency that holds on the captured values), with a value to ask for."""
    reg, bios = capture_host(CAPTURES / capture)
    state = reg.value_names(bios)
    out = []
    for name, a in reg.attributes.items():
        if a.type not in ("Enumeration", "String", "Integer") or (a.type == "Enumeration" and len(a.values) < 2):
            continue
        if a.raw.get("Immutable") and not a.read_only:
            out.append((capture, name, "Immutable"))
        elif reg.effective(name, state).hidden and not reg.effective(name, state).read_only:
            out.append((capture, name, "Hidden"))
    return out


FLAGGED = [
    c
    for cap in ("libredfish-nvidia-bluefield3", "libredfish-supermicro-x13", "libredfish-ami-dgx-viking")
    for c in _flagged(cap)
]


def test_the_captures_show_immutable_and_hidden_attributes():
    kinds = {(c, why) for c, _n, why in FLAGGED}
    assert ("libredfish-nvidia-bluefield3", "Immutable") in kinds and ("libredfish-supermicro-x13", "Hidden") in kinds
    assert {n for _c, n, _w in FLAGGED} >= {"NicMode", "HostPrivilegeLevel"}


@pytest.mark.parametrize(("capture", "name", "why"), FLAGGED, ids=[f"{c[11:]}-{n}" for c, n, _w in FLAGGED])
def test_immutable_and_hidden_attributes_are_never_planned_as_writes(capture, name, why):
    reg, bios = capture_host(CAPTURES / capture)
    attr = reg.attributes[name]
    now = bios.get(name, attr.raw.get("CurrentValue"))
    with pytest.raises(BiosValidationError) as exc:
        _plan(capture, {name: _other(attr, now)})
    text = str(exc.value)
    assert f"h/{name} is {why}" in text and "never written" in text, text
    if name in bios:  # kept at its value: nothing to write, fine
        plan = _plan(capture, {name: now})
        assert [i.action for i in plan.items] == ["ok"]
