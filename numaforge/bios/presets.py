"""Vendor-map data beyond the setting entries (pure): the preset that locks or overrides other settings and the
value that frees them (Dell SysProfile, HPE WorkloadProfile, Lenovo operating mode: issue 26 item 5), and the
waits around a reset (numaforge.bios.power). Read by numaforge.bios.vendors."""

from __future__ import annotations

from typing import Any

from .errors import VendorMapError
from .registry import Registry

UNVERIFIED = "UNVERIFIED"  # what the plan says of an entry no public source shows (`unverified: why`)
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


def check_preset(g, sources: dict, spath: str) -> None:
    """A generation's ``preset: {attribute, values, source[, unverified]}``, checked on load (file:line)."""
    preset = g.get("preset")
    if preset is None:
        return
    ok = isinstance(preset, dict) and preset.get("attribute") and preset.get("values") and preset.get("source")
    if not ok or any(s not in sources for s in ids(preset.get("source"))):
        raise _fail(
            f"generation {g['id']}: `preset:` needs attribute, values (the ValueNames that free the settings it "
            "locks) and source (ids from sources)",
            spath,
            g.line_of("preset"),
            "e.g. preset: {attribute: SysProfile, values: [Custom], source: dell-registry}",
        )
    why = preset.get("unverified")
    if "unverified" in preset and not (isinstance(why, str) and why.strip()):
        raise _fail(
            f"generation {g['id']}: preset.unverified must say why no public source shows it",
            spath,
            g.line_of("preset"),
            "e.g. unverified: 'Custom is seen on a 16G only'",
        )


def preset_value(preset: dict | None, registry: Registry, taken) -> tuple[str, Any, str, str] | None:
    """(attribute, value, "preset", how) of the generation's preset set to the value that frees the settings it
    locks, when this registry has the attribute and the profile does not set it itself (``taken``)."""
    attr = registry.attributes.get(preset["attribute"]) if preset else None
    if preset is None or attr is None or attr.name in taken:
        return None
    cands = [attr.value_name(v) for v in ids(preset["values"])]
    value = next((v for v in cands if v in attr.values), None)
    if value is None:
        return None
    how = f"vendor preset: {attr.name}={value!r} frees the settings it locks; written first, in the same write"
    if preset.get("unverified"):
        how += f"; {UNVERIFIED}: {preset['unverified']}"
    return attr.name, value, "preset", how
