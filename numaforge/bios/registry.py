"""A BIOS AttributeRegistry (DMTF AttributeRegistry schema) as data: attributes, their rules, dependencies.

Pure: built from the registry JSON document; the redfish adapter fetches it. Only what validation needs is
modelled: Type, ReadOnly, Hidden/GrayOut, Value[] (enumerations), LowerBound/UpperBound/ScalarIncrement,
MinLength/MaxLength/ValueExpression, and ``Dependencies`` of Type ``Map``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Attribute:
    name: str
    type: str
    display_name: str = ""
    read_only: bool = False
    hidden: bool = False
    gray_out: bool = False
    immutable: bool = False  # DSP8010: "Immutable attributes shall not be modified" (a hardware state)
    values: list[str] = field(default_factory=list)  # Enumeration ValueName
    value_display: dict[str, str] = field(default_factory=dict)  # ValueName -> ValueDisplayName
    lower: int | float | None = None
    upper: int | float | None = None
    increment: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    expression: str | None = None
    raw: dict = field(default_factory=dict)

    def value_name(self, value: Any) -> Any:
        """The ValueName ``value`` stands for: itself when it is one (or the attribute is no enumeration), else
        the one ValueName whose ValueDisplayName it is -- exactly, then ignoring case. Some BMCs show current
        values as display strings while their registry's ValueNames are codes (a Supermicro: "Enabled" for
        ValueName "1"); plans compare and write in the registry's ValueName space."""
        if self.type != "Enumeration" or not isinstance(value, str) or value in self.values:
            return value
        for same in (lambda d: d == value, lambda d: d.lower() == value.lower()):
            hits = [n for n, d in self.value_display.items() if d and same(d)]
            if len(hits) == 1:
                return hits[0]
        return value

    def display(self, value: Any) -> str:
        """An enumeration value's ValueDisplayName when it says more than the value itself ("NPS4" beside the
        ValueName "3" of a Supermicro H13), else ""."""
        if self.type != "Enumeration" or not isinstance(value, str):
            return ""
        shown = self.value_display.get(value) or ""
        return shown if shown and shown != value else ""

    def allowed_text(self) -> str:
        if self.type == "Enumeration":
            return "allowed: " + ", ".join(self.values)
        if self.type == "Integer":
            return (
                f"allowed: integer {self.lower if self.lower is not None else '-inf'}.."
                f"{self.upper if self.upper is not None else 'inf'}"
                + (f" in steps of {self.increment}" if self.increment else "")
            )
        if self.type == "Boolean":
            return "allowed: true, false"
        if self.type in ("String", "Password"):
            parts = []
            if self.min_length is not None:
                parts.append(f"at least {self.min_length} characters")
            if self.max_length is not None:
                parts.append(f"at most {self.max_length} characters")
            if self.expression:
                parts.append(f"matching /{self.expression}/")
            return "allowed: string" + (" " + ", ".join(parts) if parts else "")
        return f"type {self.type}"


# How a MapFrom condition without MapTerms combines with the result so far. DMTF's schema gives no default; iDRAC
# omits MapTerms on every condition, and its multi-condition dependencies only make sense as OR (the iDRAC9
# BiosAttributeRegistry v1_0_3: EmbSata EQU RaidMode, EmbSata EQU Off -> SecurityFreezeLock ReadOnly; BootMode
# EQU Bios, ForceInt10 EQU Enabled -> SecureBoot ReadOnly; docs/bios-profiles.md).
DEFAULT_TERM = "OR"


def _joins(conditions: list[dict]) -> list[str]:
    """The term joining condition i (i >= 1) to the result so far, per condition ("" for the first). DSP0266
    does not fix where MapTerms sits: iDRAC and the X13 put it on the later condition; Lenovo's XCC puts it on
    the earlier one and none on the last (the SR670 V2 capture: iSCSIParametersviaDHCP [AND] TCPIPParametersviaDHCP
    -> iSCSIName GrayOut), which read the other way was OR (issue 41 item 8). The X13 also leaves MapTerms off
    some conditions and writes a comma list on a later one ("OR,AND,OR" on the 4th of 4): on every one of its
    dependencies the terms listed add up to one join per condition after the first, so a list gives the joins of
    the conditions before it left without one, in order, then its own (read as one term it was AND)."""
    after = len(conditions) > 1 and bool(conditions[0].get("MapTerms")) and not conditions[-1].get("MapTerms")
    out = [""]
    if after:
        return out + [str(conditions[i - 1].get("MapTerms") or DEFAULT_TERM) for i in range(1, len(conditions))]
    pending = 0  # conditions since the last term that carried none
    for c in conditions[1:]:
        terms = [t.strip() for t in str(c.get("MapTerms") or "").split(",") if t.strip()]
        if not terms:
            pending += 1
            continue
        # a list shorter than the bare conditions before it leaves the earliest of them to the default
        lead = [DEFAULT_TERM] * max(0, pending + 1 - len(terms)) + terms[-(pending + 1) :]
        out += lead
        pending = 0
    return out + [DEFAULT_TERM] * pending


@dataclass
class MapDependency:
    """``Dependencies[].Dependency`` of Type Map: if MapFrom conditions hold, MapToProperty of MapToAttribute = MapToValue."""

    for_attribute: str
    conditions: list[dict]
    to_attribute: str
    to_property: str
    to_value: Any

    def describe(self) -> str:
        parts = []
        joins = _joins(self.conditions)
        for i, c in enumerate(self.conditions):
            term = f" {joins[i]} " if i else ""
            parts.append(
                f"{term}{c.get('MapFromAttribute')} {c.get('MapFromCondition', 'EQU')} "
                f"{c.get('MapFromValueShown', c.get('MapFromValue'))!r}"
            )
        return f"if {''.join(parts)} then {self.to_attribute}.{self.to_property} = {self.to_value!r}"

    def holds(self, state: dict[str, Any]) -> bool:
        result: bool | None = None
        for c, join in zip(self.conditions, _joins(self.conditions)):
            attribute = c.get("MapFromAttribute")
            value = state.get(attribute) if isinstance(attribute, str) else None
            ok = _compare(value, c.get("MapFromCondition", "EQU"), c.get("MapFromValue"))
            if result is None:
                result = ok
            elif join == "OR":
                result = result or ok
            else:
                result = result and ok
        return bool(result)


def _in_value_names(condition: dict, attrs: dict[str, Attribute]) -> dict:
    """A MapFrom condition with its MapFromValue in the registry's ValueName space, as the states it is held
    against are (Registry.value_names). The X13 capture's registry (NVIDIA/libredfish tests/mockups/supermicro)
    writes all 420 enumeration conditions in display strings ("PowerTechnology_FF77 NEQ 'Custom'", ValueName "2")
    while its ValueNames are codes: compared as written, 30 of its 350 dependencies flipped (issue 41 item 2).
    The value as written stays in MapFromValueShown, for messages."""
    attr = attrs.get(condition.get("MapFromAttribute") or "")
    value = condition.get("MapFromValue")
    if attr is None or (condition.get("MapFromProperty") or "CurrentValue") != "CurrentValue":
        return condition
    name = attr.value_name(value)
    return condition if name == value else {**condition, "MapFromValue": name, "MapFromValueShown": value}


def _compare(left, op: str, right) -> bool:
    try:
        if op == "EQU":
            return left == right
        if op == "NEQ":
            return left != right
        if left is None:
            return False
        if op == "GTR":
            return left > right
        if op == "GEQ":
            return left >= right
        if op == "LSS":
            return left < right
        if op == "LEQ":
            return left <= right
    except TypeError:
        return False
    return False


@dataclass
class Registry:
    id: str
    attributes: dict[str, Attribute]
    dependencies: list[MapDependency] = field(default_factory=list)
    doc: dict = field(default_factory=dict, repr=False, compare=False)  # the JSON as served (for the disk cache)
    source_uri: str | None = field(default=None, repr=False, compare=False)  # where the BMC served it
    etag: str | None = field(default=None, repr=False, compare=False)  # its ETag then (cache confirmation)

    @classmethod
    def from_json(cls, doc: dict) -> "Registry":
        entries = doc.get("RegistryEntries") or {}
        attrs: dict[str, Attribute] = {}
        for a in entries.get("Attributes") or []:
            name = a.get("AttributeName")
            if not name:
                continue
            values = [v.get("ValueName") for v in a.get("Value") or [] if v.get("ValueName") is not None]
            attrs[name] = Attribute(
                name=name,
                type=a.get("Type", "String"),
                display_name=a.get("DisplayName") or "",
                read_only=bool(a.get("ReadOnly", False)),
                hidden=bool(a.get("Hidden", False)),
                immutable=bool(a.get("Immutable", False)),
                gray_out=bool(a.get("GrayOut", False)),
                values=values,
                value_display={v.get("ValueName"): v.get("ValueDisplayName") or "" for v in a.get("Value") or []},
                lower=a.get("LowerBound"),
                upper=a.get("UpperBound"),
                increment=a.get("ScalarIncrement"),
                min_length=a.get("MinLength"),
                max_length=a.get("MaxLength"),
                expression=a.get("ValueExpression"),
                raw=a,
            )
        deps = []
        for d in entries.get("Dependencies") or []:
            if d.get("Type", "Map") != "Map":
                continue
            dep = d.get("Dependency") or {}
            deps.append(
                MapDependency(
                    for_attribute=d.get("DependencyFor") or dep.get("MapToAttribute", ""),
                    conditions=list(dep.get("MapFrom") or []),
                    to_attribute=dep.get("MapToAttribute", ""),
                    to_property=dep.get("MapToProperty", ""),
                    to_value=dep.get("MapToValue"),
                )
            )
        for dep in deps:
            dep.conditions = [_in_value_names(c, attrs) for c in dep.conditions]
            to = attrs.get(dep.to_attribute)
            if dep.to_property == "CurrentValue" and to is not None:
                dep.to_value = to.value_name(dep.to_value)
        return cls(id=doc.get("Id", ""), attributes=attrs, dependencies=deps, doc=doc)

    def value_names(self, values: dict[str, Any] | None) -> dict[str, Any]:
        """``values`` (current or pending Bios attributes) in the registry's ValueName space (Attribute.value_name)."""
        out = dict(values or {})
        for k, v in out.items():
            attr = self.attributes.get(k)
            if attr is not None:
                out[k] = attr.value_name(v)
        return out

    def as_shown(self, values: dict[str, Any], shown: dict[str, Any]) -> dict[str, Any]:
        """``values`` (ValueNames) in the form the Bios shows them (``shown``: its current attributes as read):
        an enumeration whose current value the Bios shows as a ValueDisplayName gets its display string. A
        Supermicro X13 (NVIDIA/libredfish tests/mockups/supermicro) shows "Enabled" for the ValueName "1"; every
        public client writes the display strings and nothing public shows one accepting codes (issue 41 item 3)."""
        out = dict(values)
        for k, v in values.items():
            attr, now = self.attributes.get(k), shown.get(k)
            if attr is None or attr.type != "Enumeration" or v not in attr.values or not isinstance(now, str):
                continue
            if now not in attr.values and attr.value_name(now) != now and attr.value_display.get(v):
                out[k] = attr.value_display[v]
        return out

    def by_display_name(self, pattern: str) -> list[Attribute]:
        rx = re.compile(pattern, re.IGNORECASE)
        return [a for a in self.attributes.values() if rx.search(a.display_name or "")]

    def by_name_pattern(self, pattern: str) -> list[Attribute]:
        rx = re.compile(pattern)
        return [a for a in self.attributes.values() if rx.search(a.name)]

    def effective(self, name: str, state: dict[str, Any], current: dict[str, Any] | None = None) -> Attribute:
        """The attribute with every Map dependency that holds in ``state`` applied to its properties.

        ReadOnly as of the current state (iDRAC: PcieAspmL1 says ReadOnly while SysProfile is not Custom): with
        ``current``, a ReadOnly flag that a ReadOnly dependency explains in ``current`` is lifted when no such
        dependency holds in ``state`` (the same plan sets the preset that frees it)."""
        base = self.attributes[name]
        a = Attribute(**{**base.__dict__})
        if a.read_only and current is not None and self.blocking(name, current) and not self.blocking(name, state):
            a.read_only = False
        for dep in self.dependencies:
            if dep.to_attribute != name or not dep.holds(state):
                continue
            prop = dep.to_property
            if prop == "ReadOnly":
                a.read_only = bool(dep.to_value)
            elif prop == "Hidden":
                a.hidden = bool(dep.to_value)
            elif prop == "GrayOut":
                a.gray_out = bool(dep.to_value)
            elif prop == "LowerBound":
                a.lower = dep.to_value
            elif prop == "UpperBound":
                a.upper = dep.to_value
            elif prop == "MinLength":
                a.min_length = dep.to_value
            elif prop == "MaxLength":
                a.max_length = dep.to_value
        return a

    def forced_values(self, name: str, state: dict[str, Any]) -> list[tuple[MapDependency, Any]]:
        """Dependencies that force ``name``'s CurrentValue in ``state``."""
        return [
            (d, d.to_value)
            for d in self.dependencies
            if d.to_attribute == name and d.to_property == "CurrentValue" and d.holds(state)
        ]

    def hiding(self, name: str, state: dict[str, Any]) -> list[MapDependency]:
        """Dependencies that make ``name`` Hidden in ``state`` (for the error message)."""
        return [
            d
            for d in self.dependencies
            if d.to_attribute == name and d.to_property == "Hidden" and d.to_value is True and d.holds(state)
        ]

    def blocking(self, name: str, state: dict[str, Any]) -> list[MapDependency]:
        """Dependencies that make ``name`` ReadOnly/GrayOut in ``state`` (for the error message)."""
        return [
            d
            for d in self.dependencies
            if d.to_attribute == name
            and d.to_property in ("ReadOnly", "GrayOut")
            and d.to_value is True
            and d.holds(state)
        ]
