"""Issue 41 item 2 on the captured tree that shows it: the Supermicro X13 (tests/data/captures/
libredfish-supermicro-x13) writes its registry's Dependencies in display strings while its ValueNames are codes
and its Bios shows display strings. Every dependency must hold exactly when it holds for the Bios as the BMC shows
it (the conditions compared as written against the values as shown). Pure: the capture's documents, no BMC."""

from __future__ import annotations

import json

from numaforge.bios.registry import Registry, _compare, _joins

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
    conditions = dep["Dependency"]["MapFrom"]
    for c, join in zip(conditions, _joins(conditions)):
        ok = _compare(shown.get(c.get("MapFromAttribute")), c.get("MapFromCondition", "EQU"), c.get("MapFromValue"))
        result = ok if result is None else (result or ok) if join == "OR" else (result and ok)
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


def test_x13_comma_map_terms_give_the_joins_of_the_conditions_before_them():
    """Item 8 (Supermicro): the X13 leaves MapTerms off some conditions and puts a comma list ("OR,AND,OR") on a
    later one. On every one of its dependencies the terms listed add up to exactly one join per condition after
    the first, so a list carries the joins of the conditions left without one, in order, then its own. Read as
    one term (anything but "OR" was AND) with the bare conditions defaulting to OR, MirrorMode_DFFA's GrayOut
    rule ``UEFIARMMirror OR ADDDCSparing AND SMCFKItem2231=6 OR SMCFKItem2231=11`` was read
    ``... OR ... OR ... AND ...``: with ADDDCSparing Enabled (as captured) and SMCFKItem2231=6 it held no GrayOut,
    while the registry shows Mirror Mode greyed out."""
    doc, shown = _x13()
    reg = Registry.from_json(doc)
    commas = [d for d in reg.dependencies if any("," in str(c.get("MapTerms") or "") for c in d.conditions)]
    assert len(commas) >= 10, "the capture no longer shows comma MapTerms"
    for d in reg.dependencies:  # the count that fixes the reading, on every dependency of the capture
        listed = sum(len(str(c["MapTerms"]).split(",")) for c in d.conditions[1:] if c.get("MapTerms"))
        assert listed in (0, len(d.conditions) - 1), d.describe()
        if listed:
            terms = [t for c in d.conditions[1:] if c.get("MapTerms") for t in str(c["MapTerms"]).split(",")]
            assert _joins(d.conditions)[1:] == terms, d.describe()
    mirror = next(d for d in reg.dependencies if d.to_attribute == "MirrorMode_DFFA" and d.to_property == "GrayOut")
    assert [c.get("MapTerms") for c in mirror.conditions] == [None, None, None, "OR,AND,OR"]
    assert _joins(mirror.conditions) == ["", "OR", "AND", "OR"]
    assert " OR " in mirror.describe() and " AND " in mirror.describe() and "OR,AND" not in mirror.describe()
    captured = {a["AttributeName"]: a for a in doc["RegistryEntries"]["Attributes"]}
    assert captured["MirrorMode_DFFA"]["GrayOut"] is True
    state = {**reg.value_names({k: a["CurrentValue"] for k, a in captured.items()}), "SMCFKItem2231": 6}
    assert state["ADDDCSparing_3C3F"] == "1" and mirror.holds(state)
    assert not mirror.holds({**state, "SMCFKItem2231": 0})
