"""Vendor-map data beyond the setting entries (pure): the preset that locks or overrides other settings and the
value that frees them (Dell SysProfile, HPE WorkloadProfile, Lenovo operating mode: issue 26 item 5), and the
waits around a reset (numaforge.bios.power). Read by numaforge.bios.vendors."""

from __future__ import annotations

from typing import Any

from .errors import VendorMapError
from .registry import Registry

UNVERIFIED = "UNVERIFIED"  # what the plan says of a value no public source shows (`unverified: {value: why}`)
# what bios-apply does with values to write that no public source shows (numaforge.bios.plan.unverified_policy):
# --unverified, else the inventory var, else the profile's `unverified:` key, else the action's default
UNVERIFIED_POLICIES = ("refuse", "warn", "allow")
UNVERIFIED_VAR = "bios_unverified"
REBOOT_KEYS = ("graceful", "power_on")


def _fail(what: str, path: str, line: int | None, fix: str) -> VendorMapError:
    return VendorMapError(what, f"{path}:{line}" if line else path, fix)


def ids(x) -> list:
    return x if isinstance(x, list) else [x] if x else []


def reboot_waits(doc, spath: str) -> dict[str, float]:
    """``reboot: {graceful: s, power_on: s}``: this vendor's waits around a reset (numaforge.bios.power)."""
    waits: Any = doc.get("reboot") or {}
    if not isinstance(waits, dict):
        raise _fail(
            "`reboot:` must be a mapping (graceful, power_on)",
            spath,
            doc.line_of("reboot"),
            "e.g. reboot: {graceful: 300, power_on: 1200}",
        )
    out = {}
    for k, v in waits.items():
        if k not in REBOOT_KEYS or isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise _fail(
                f"reboot.{k}: {v!r} is not a wait (keys: {', '.join(REBOOT_KEYS)}; seconds > 0)",
                spath,
                getattr(waits, "line_of", lambda _: None)(k),  # the YAML loader's mapping knows its lines
                "e.g. reboot: {graceful: 300, power_on: 1200}",
            )
        out[k] = float(v)
    return out


def entry_values(values) -> list[str]:
    """Every vendor value a map entry's ``values:`` (or a preset's ``values:`` list) may write, as text:
    ValueNames, candidates of a list, the values of a several-attributes mapping; ``{unsupported: ...}`` writes
    nothing and is left out."""
    out: list[str] = []

    def add(v) -> None:
        if isinstance(v, dict):
            if "unsupported" not in v:
                for x in v.values():
                    add(x)
        elif isinstance(v, list):
            for x in v:
                add(x)
        else:
            out.append(str(v).lower() if isinstance(v, bool) else str(v))

    add(list(values.values()) if isinstance(values, dict) else values)
    return list(dict.fromkeys(out))


def check_marks(marks, values, what: str, spath: str, line: int | None) -> None:
    """``unverified: {Value: why, ...}``: a mark sits on a value the entry (or preset) may write and says why no
    public source shows that value (issue 41 item 9: marks name values, not whole entries)."""
    writes = entry_values(values)
    fix = f"e.g. unverified: {{{writes[0] if writes else 'Value'}: 'seen on an SR635 V3 only'}} (values: {', '.join(writes)})"
    if not isinstance(marks, dict) or not marks:
        raise _fail(
            f"{what}.unverified must map each value no public source shows to why (marks sit on values)",
            spath,
            line,
            fix,
        )
    for value, why in marks.items():
        key = str(value).lower() if isinstance(value, bool) else str(value)
        if key not in writes:
            raise _fail(f"{what}.unverified names {key!r}, which is no value of this entry", spath, line, fix)
        if not (isinstance(why, str) and why.strip()):
            raise _fail(f"{what}.unverified.{key} must say why no public source shows it", spath, line, fix)


def mark_of(marks, *values) -> str:
    """The reason a value is marked (the first of ``values`` that is: the ValueName written, then the map's
    candidate it was chosen by), "" when none is."""
    if not isinstance(marks, dict):
        return ""
    text = {str(k).lower() if isinstance(k, bool) else str(k): v for k, v in marks.items()}
    for v in values:
        why = text.get(str(v).lower() if isinstance(v, bool) else str(v))
        if why:
            return str(why)
    return ""


PRESET_KEYS = {"attribute", "values", "source", "unverified", "only_when_locking"}


def presets_of(preset) -> list[dict]:
    """A generation's ``preset:`` as a list: one mapping, or a list of them written in that order (HPE Gen10
    Plus: WorkloadProfile, then AMDPerformanceWorkloadProfile)."""
    if preset is None:
        return []
    return [dict(p) for p in preset] if isinstance(preset, list) else [dict(preset)]


def check_preset(g, sources: dict, spath: str) -> None:
    """A generation's ``preset: {attribute, values, source[, unverified][, only_when_locking]}`` (or a list of
    such), checked on load (file:line)."""
    preset = g.get("preset")
    if preset is None:
        return
    for one in preset if isinstance(preset, list) and preset else [preset]:
        ok = isinstance(one, dict) and one.get("attribute") and one.get("values") and one.get("source")
        extra = sorted(set(one) - PRESET_KEYS) if isinstance(one, dict) else []
        if not ok or extra or any(s not in sources for s in ids(one.get("source"))):
            raise _fail(
                f"generation {g['id']}: `preset:` needs attribute, values (the ValueNames that free the settings it "
                "locks) and source (ids from sources)"
                + (f"; unknown key '{extra[0]}' (allowed: {', '.join(sorted(PRESET_KEYS))})" if extra else ""),
                spath,
                g.line_of("preset"),
                "e.g. preset: {attribute: SysProfile, values: [Custom], source: dell-registry}, or a list of them",
            )
        if not isinstance(one.get("only_when_locking", False), bool):
            raise _fail(
                f"generation {g['id']}: preset {one['attribute']}: only_when_locking must be true or false",
                spath,
                g.line_of("preset"),
                "only_when_locking: true writes the preset only when its current value locks a value the plan changes",
            )
        if "unverified" in one:
            check_marks(
                one["unverified"], ids(one["values"]), f"generation {g['id']}: preset", spath, g.line_of("preset")
            )


def locks_a_change(
    preset: dict, registry: Registry, state: dict[str, Any], wanted: dict[str, Any], changed: set[str]
) -> bool:
    """Whether, in ``state`` (the host's values with the plan's other values), a registry dependency on the
    preset's attribute locks (ReadOnly, GrayOut) an attribute the plan changes (``changed``), or forces one the plan
    sets (``wanted``, ValueNames) to another value: what an ``only_when_locking`` preset is written for. HPE A42:
    AMDPerformanceWorkloadProfile=HPCOptimized forces and locks NumaMemoryDomainsPerSocket, DeterminismControl,
    PerformanceDeterminism ...; Disabled locks nothing."""
    for d in registry.dependencies:
        if d.to_attribute not in wanted or not any(
            c.get("MapFromAttribute") == preset["attribute"] for c in d.conditions
        ):
            continue
        locks = d.to_property in ("ReadOnly", "GrayOut") and d.to_value is True and d.to_attribute in changed
        forces = d.to_property == "CurrentValue" and d.to_value != wanted[d.to_attribute]
        if (locks or forces) and d.holds(state):
            return True
    return False


def preset_value(preset: dict | None, registry: Registry, taken) -> tuple[str, Any, str, str, str] | None:
    """(attribute, value, "preset", how, why unverified or "") of the generation's preset set to the value that frees the settings it
    locks, when this registry has the attribute and the profile does not set it itself (``taken``)."""
    attr = registry.attributes.get(preset["attribute"]) if preset else None
    if preset is None or attr is None or attr.name in taken:
        return None
    cands = [attr.value_name(v) for v in ids(preset["values"])]
    value = next((v for v in cands if v in attr.values), None)
    if value is None:
        return None
    how = f"vendor preset: {attr.name}={value!r} frees the settings it locks; written first, in the same write"
    why = mark_of(preset.get("unverified"), value, *(c for c in ids(preset["values"]) if attr.value_name(c) == value))
    if why:
        how += f"; {UNVERIFIED}: {why}"
    return attr.name, value, "preset", how, why
