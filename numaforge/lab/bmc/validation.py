"""Pure validation of a PATCH to the BIOS settings object against the attribute registry.

``validate_settings_patch(registry, effective, body, apply_times)`` returns a list of Base registry messages
(empty = valid). The whole PATCH is rejected when any message is returned: nothing is half-applied.
``effective`` is current + already-pending values; registry dependencies are evaluated over
effective + this PATCH (so a PATCH may change a dependency's source and target together).
"""

from __future__ import annotations

import json

from .messages import message

_CONDITIONS = {
    "EQU": lambda a, b: a == b,
    "NEQ": lambda a, b: a != b,
    "GTR": lambda a, b: a > b,
    "GEQ": lambda a, b: a >= b,
    "LSS": lambda a, b: a < b,
    "LEQ": lambda a, b: a <= b,
}


def _rel(name: str) -> list[str]:
    return [f"#/Attributes/{name}"]


def _json_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def check_value(entry: dict, value) -> list[dict]:
    """Messages for one attribute value (type, allowed values, bounds, length, ReadOnly)."""
    name, kind = entry["AttributeName"], entry["Type"]
    if entry.get("ReadOnly"):
        return [message("PropertyNotWritable", name, related=_rel(name))]
    if kind == "Enumeration":
        if not isinstance(value, str):
            return [message("PropertyValueTypeError", _json_text(value), name, related=_rel(name))]
        allowed = [v["ValueName"] for v in entry.get("Value", [])]
        if value not in allowed:
            return [message("PropertyValueNotInList", value, name, related=_rel(name))]
    elif kind == "Integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return [message("PropertyValueTypeError", _json_text(value), name, related=_rel(name))]
        lo, hi = entry.get("LowerBound"), entry.get("UpperBound")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return [message("PropertyValueOutOfRange", value, name, related=_rel(name))]
        step = entry.get("ScalarIncrement") or 0
        if step > 1 and (value - (lo or 0)) % step:
            return [message("PropertyValueIncorrect", name, value, related=_rel(name))]
    elif kind in ("String", "Password"):
        if not isinstance(value, str):
            return [message("PropertyValueTypeError", _json_text(value), name, related=_rel(name))]
        if entry.get("MaxLength") is not None and len(value) > entry["MaxLength"]:
            return [message("StringValueTooLong", value, entry["MaxLength"], related=_rel(name))]
        if entry.get("MinLength") and len(value) < entry["MinLength"]:
            return [message("PropertyValueIncorrect", name, value, related=_rel(name))]
    elif kind == "Boolean":
        if not isinstance(value, bool):
            return [message("PropertyValueTypeError", _json_text(value), name, related=_rel(name))]
    return []


def _dependency_holds(dep: dict, values: dict) -> bool:
    d = dep["Dependency"]
    result = None
    for term in d.get("MapFrom", []):
        have = values.get(term["MapFromAttribute"])
        want = term["MapFromValue"]
        try:
            ok = _CONDITIONS[term.get("MapFromCondition", "EQU")](have, want)
        except TypeError:
            ok = False
        if result is None:
            result = ok
        elif term.get("MapTerms", "AND") == "OR":
            result = result or ok
        else:
            result = result and ok
    return bool(result)


def _freed(registry: dict, name: str, effective: dict, patch: dict) -> bool:
    """ReadOnly as of the current state (iDRAC): a ReadOnly flag a dependency explains now, and that no
    dependency keeps once this PATCH applies (the PATCH sets the preset that frees it), does not refuse it."""
    deps = [
        d
        for d in registry["RegistryEntries"].get("Dependencies", [])
        if d.get("Type") == "Map"
        and d.get("Dependency", {}).get("MapToAttribute") == name
        and d["Dependency"].get("MapToProperty") == "ReadOnly"
        and d["Dependency"].get("MapToValue") is True
    ]
    values = {**effective, **patch}
    return any(_dependency_holds(d, effective) for d in deps) and not any(_dependency_holds(d, values) for d in deps)


def dependency_violations(registry: dict, effective: dict, patch: dict) -> list[dict]:
    """Messages for PATCHed attributes made ReadOnly by a Map dependency over effective + patch."""
    values = {**effective, **patch}
    out = []
    for dep in registry["RegistryEntries"].get("Dependencies", []):
        d = dep.get("Dependency", {})
        target = d.get("MapToAttribute")
        if dep.get("Type") != "Map" or target not in patch:
            continue
        if d.get("MapToProperty") == "ReadOnly" and d.get("MapToValue") is True and _dependency_holds(dep, values):
            source = d["MapFrom"][0]["MapFromAttribute"]
            out.append(message("PropertyValueConflict", target, source, related=_rel(target) + _rel(source)))
    return out


def validate_settings_patch(registry: dict, effective: dict, body, apply_times: tuple) -> list[dict]:
    """All messages for a PATCH body to the settings object; [] when it may be accepted."""
    if not isinstance(body, dict):
        return [message("PropertyValueTypeError", _json_text(body), "the request body")]
    out = []
    for key in body:
        if key not in ("Attributes", "@Redfish.SettingsApplyTime"):
            out.append(message("PropertyUnknown", key, related=[f"#/{key}"]))
    if "@Redfish.SettingsApplyTime" in body:
        sat = body["@Redfish.SettingsApplyTime"]
        if not isinstance(sat, dict):
            out.append(
                message(
                    "PropertyValueTypeError",
                    _json_text(sat),
                    "@Redfish.SettingsApplyTime",
                    related=["#/@Redfish.SettingsApplyTime"],
                )
            )
        else:
            for k, v in sat.items():
                if k == "@odata.type":
                    continue
                if k != "ApplyTime":
                    out.append(
                        message(
                            "PropertyUnknown",
                            f"@Redfish.SettingsApplyTime/{k}",
                            related=[f"#/@Redfish.SettingsApplyTime/{k}"],
                        )
                    )
                elif v not in apply_times:
                    out.append(
                        message(
                            "PropertyValueNotInList",
                            _json_text(v),
                            "ApplyTime",
                            related=["#/@Redfish.SettingsApplyTime/ApplyTime"],
                        )
                    )
    attrs = body.get("Attributes")
    if "Attributes" not in body:
        if "@Redfish.SettingsApplyTime" not in body:
            out.append(message("PropertyUnknown", "(empty request body)"))
        return out
    if not isinstance(attrs, dict):
        out.append(message("PropertyValueTypeError", _json_text(attrs), "Attributes", related=["#/Attributes"]))
        return out
    entries = {e["AttributeName"]: e for e in registry["RegistryEntries"]["Attributes"]}
    for name, value in attrs.items():
        entry = entries.get(name)
        if entry is None:
            out.append(message("PropertyUnknown", name, related=_rel(name)))
            continue
        if entry.get("ReadOnly") and _freed(registry, name, effective, attrs):
            entry = {**entry, "ReadOnly": False}
        out.extend(check_value(entry, value))
    if not out:
        out.extend(dependency_violations(registry, effective, attrs))
    return out
