"""Issue 26 item 4: Dell's multi-condition Dependencies. iDRAC's registries carry no MapTerms on any condition,
and DMTF's schema gives no default; every multi-condition dependency of the one public iDRAC9 registry
(BiosAttributeRegistry v1_0_3, an R750 captured in NVIDIA/libredfish tests/mockups/dell: 128 of them) only makes
sense as OR -- e.g. two conditions on the same attribute with different values, which as AND could never hold.
numaforge reads a condition without MapTerms as OR. The dependencies below are that registry's facts (attribute
names, values, conditions), written here as data."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import BiosValidationError
from numaforge.bios.plan import make_plan
from numaforge.bios.registry import Registry
from numaforge.bios.vendors import Desired


def _enum(name: str, values: list[str], read_only: bool = False) -> dict:
    return {
        "AttributeName": name,
        "DisplayName": name,
        "Type": "Enumeration",
        "ReadOnly": read_only,
        "Value": [{"ValueName": v, "ValueDisplayName": v} for v in values],
    }


def _dep(attr: str, conds: list[tuple[str, str, str]], prop: str, value) -> dict:
    return {
        "DependencyFor": attr,
        "Type": "Map",
        "Dependency": {
            "MapFrom": [
                {"MapFromAttribute": a, "MapFromCondition": op, "MapFromProperty": "CurrentValue", "MapFromValue": v}
                for a, op, v in conds
            ],
            "MapToAttribute": attr,
            "MapToProperty": prop,
            "MapToValue": value,
        },
    }


PROFILES = ["PerfPerWattOptimizedDapc", "PerfPerWattOptimizedOs", "PerfOptimized", "PerfWorkStationOptimized"]
REGISTRY = Registry.from_json(
    {
        "Id": "BiosAttributeRegistry.v1_0_3",
        "RegistryEntries": {
            "Attributes": [
                _enum("SysProfile", [*PROFILES, "DenseCfgOptimized", "Custom"]),
                _enum("PcieAspmL1", ["Enabled", "Disabled"], read_only=True),
                _enum("EmbSata", ["AhciMode", "RaidMode", "Off"]),
                _enum("SecurityFreezeLock", ["Enabled", "Disabled"]),
            ],
            "Dependencies": [
                _dep(
                    "SecurityFreezeLock", [("EmbSata", "EQU", "RaidMode"), ("EmbSata", "EQU", "Off")], "ReadOnly", True
                ),
                _dep(
                    "PcieAspmL1",
                    [
                        ("SysProfile", "EQU", p)
                        for p in ("PerfPerWattOptimizedDapc", "PerfPerWattOptimizedOs", "DenseCfgOptimized")
                    ],
                    "CurrentValue",
                    "Enabled",
                ),
                _dep(
                    "PcieAspmL1",
                    [("SysProfile", "EQU", "PerfOptimized"), ("SysProfile", "EQU", "PerfWorkStationOptimized")],
                    "CurrentValue",
                    "Disabled",
                ),
                _dep("PcieAspmL1", [("SysProfile", "NEQ", "Custom")], "ReadOnly", True),
            ],
        },
    }
)


@pytest.mark.parametrize("sata, locked", [("RaidMode", True), ("Off", True), ("AhciMode", False)])
def test_conditions_without_mapterms_are_alternatives(sata, locked):
    (dep,) = [d for d in REGISTRY.dependencies if d.to_attribute == "SecurityFreezeLock"]
    assert dep.holds({"EmbSata": sata}) is locked
    assert "EmbSata EQU 'RaidMode' OR EmbSata EQU 'Off'" in dep.describe()


@pytest.mark.parametrize(
    "profile, forced",
    [
        ("PerfOptimized", "Disabled"),
        ("PerfWorkStationOptimized", "Disabled"),
        ("PerfPerWattOptimizedOs", "Enabled"),
        ("Custom", None),
    ],
)
def test_a_profile_forces_pcie_aspm_l1_whichever_of_its_alternatives_it_is(profile, forced):
    got = [v for _, v in REGISTRY.forced_values("PcieAspmL1", {"SysProfile": profile})]
    assert got == ([forced] if forced else [])


def _want(attr: str, value: str) -> Desired:
    return Desired(setting=attr, attribute=attr, value=value, resolved="raw")


def test_a_plan_that_locks_what_it_also_sets_is_refused_naming_the_alternatives():
    """EmbSata=Off (the second of two alternatives) makes SecurityFreezeLock ReadOnly; read as AND the
    dependency never held and the write reached the BMC, which refuses it."""
    current = {
        "SysProfile": "Custom",
        "PcieAspmL1": "Disabled",
        "EmbSata": "AhciMode",
        "SecurityFreezeLock": "Disabled",
    }
    with pytest.raises(BiosValidationError) as e:
        make_plan([_want("EmbSata", "Off"), _want("SecurityFreezeLock", "Enabled")], REGISTRY, current, host="h1")
    text = str(e.value)
    assert "h1/SecurityFreezeLock is made read-only by registry dependency" in text
    assert "EmbSata EQU 'RaidMode' OR EmbSata EQU 'Off'" in text


def test_with_the_preset_custom_the_same_write_plans_cleanly():
    current = {
        "SysProfile": "PerfOptimized",
        "PcieAspmL1": "Disabled",
        "EmbSata": "AhciMode",
        "SecurityFreezeLock": "Enabled",
    }
    plan = make_plan([_want("SysProfile", "Custom"), _want("PcieAspmL1", "Enabled")], REGISTRY, current, host="h1")
    assert plan.changes == {"SysProfile": "Custom", "PcieAspmL1": "Enabled"}  # the preset frees PcieAspmL1
