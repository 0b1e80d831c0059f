"""Issue 41 item 2 on the captured tree that shows it: the Supermicro X13 (tests/data/captures/
libredfish-supermicro-x13) writes its registry's Dependencies in display strings while its ValueNames are codes
and its Bios shows display strings. Every dependency must hold exactly when it holds for the Bios as the BMC shows
it (the conditions compared as written against the values as shown). Pure: the capture's documents, no BMC."""

from __future__ import annotations

import json

from numaforge.bios.registry import Registry, _compare

from .conftest import capture_dirs

X13 = next(c for c in capture_dirs() if c.name == "libredfish-supermicro-x13")


def _x13() -> tuple[dict, dict]:
    registry = json.loads((X13 / "registries/BiosAttributeRegistry.1.0.0.json/index.json").read_text())
    bios = json.loads((X13 / "redfish/v1/Systems/1/Bios/index.json").read_text())["Attributes"]
    return registry, bios


def _holds_as_shown(dep: dict, shown: dict) -> bool:
    """A dependency judged in the display strings it is written in, against the Bios as shown (MapTerms as
    numaforge reads them: the registry module's rule)."""
    result = None
    for c in dep["Dependency"]["MapFrom"]:
        ok = _compare(shown.get(c.get("MapFromAttribute")), c.get("MapFromCondition", "EQU"), c.get("MapFromValue"))
        result = ok if result is None else (result or ok) if c.get("MapTerms", "OR") == "OR" else (result and ok)
    return bool(result)


def test_x13_dependencies_hold_as_they_do_for_the_bios_as_shown():
    doc, shown = _x13()
    reg = Registry.from_json(doc)
    state = reg.value_names(shown)
    assert state != shown, "the X13 Bios shows display strings for codes: the case this test is about"
    raw = [d for d in doc["RegistryEntries"]["Dependencies"] if d.get("Type", "Map") == "Map"]
    assert len(raw) == len(reg.dependencies) > 300
    flipped = [
        mine.describe() for d, mine in zip(raw, reg.dependencies) if mine.holds(state) != _holds_as_shown(d, shown)
    ]
    assert flipped == [], f"{len(flipped)} of {len(raw)}: {flipped[:5]}"


def test_x13_power_performance_tuning_is_not_blocked_while_power_technology_is_custom():
    """The case seen: PowerPerformanceTuning_3CE0 refused "because PowerTechnology_FF77 NEQ 'Custom'" while the
    Bios shows Custom."""
    doc, shown = _x13()
    reg = Registry.from_json(doc)
    assert shown["PowerTechnology_FF77"] == "Custom"
    state = reg.value_names(shown)
    assert not [d.describe() for d in reg.blocking("PowerPerformanceTuning_3CE0", state)]
    said = [d.describe() for d in reg.dependencies if d.to_attribute == "PowerPerformanceTuning_3CE0"]
    assert any("'Custom'" in t for t in said), said  # messages keep the value as the registry writes it


SR670 = next(c for c in capture_dirs() if c.name == "libredfish-lenovo-sr670v2")


def test_xcc_map_terms_on_the_earlier_condition_join_it_to_the_next():
    """Item 8: Lenovo's XCC (SR670 V2 capture) puts MapTerms on every condition but the last. Its AND dependencies
    hold only when both conditions do; read the iDRAC way (term on the later condition, default OR) they held
    when either did."""
    doc = json.loads((SR670 / "redfish/v1/schemas/registries/BiosAttributeRegistry.1.0.0.json/index.json").read_text())
    reg = Registry.from_json(doc)
    ands = [d for d in reg.dependencies if len(d.conditions) == 2 and d.conditions[0].get("MapTerms") == "AND"]
    assert ands, "the capture no longer shows XCC's AND placement"
    for d in ands:
        first, second = d.conditions
        only_first = {first["MapFromAttribute"]: first["MapFromValue"], second["MapFromAttribute"]: object()}
        both = {first["MapFromAttribute"]: first["MapFromValue"], second["MapFromAttribute"]: second["MapFromValue"]}
        assert not d.holds(only_first) and d.holds(both), d.describe()
        assert " AND " in d.describe()
