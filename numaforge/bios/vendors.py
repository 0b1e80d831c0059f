"""Abstract settings -> vendor BIOS attributes, from data in bios/vendors/<flavour>.yaml (pure core).

A mapping entry (one per abstract setting) names its attribute in one of three ways:

* ``attribute: NumaNodesPerSocket`` -- the publicly documented AttributeName;
* ``attribute_pattern: '^PciSlot(\\d+)Aspm$'`` -- every registry attribute whose name matches (per-slot settings);
* ``display_name: 'memory interleav'`` -- not publicly named: resolved on each BMC from its registry by
  DisplayName (case-insensitive regex); the plan reports the attribute it picked and why.

``values`` maps each abstract value to: a ValueName; a list of candidate ValueNames (the first the registry
allows wins); a mapping of several AttributeName -> ValueName (one setting, several attributes); or
``{unsupported: why, fix: how}``. ``translate`` returns ``Desired`` items; nothing here talks to a BMC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import yamlsrc

from .errors import VendorMapError
from .profile import SETTINGS_SCHEMA, VENDORS
from .registry import Registry


def default_vendors_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "bios" / "vendors"


@dataclass
class Desired:
    attribute: str
    value: Any
    setting: str                  # abstract setting name, or "raw"
    resolved: str = "vendor map"  # how the AttributeName was found (said in the plan)
    source: str = ""


@dataclass
class VendorMap:
    vendor: str
    path: str
    settings: dict[str, dict]
    sources: dict[str, str] = field(default_factory=dict)

    def source_text(self, setting: str) -> str:
        src = (self.settings.get(setting) or {}).get("source", "")
        ids = src if isinstance(src, list) else [src]
        return "; ".join(self.sources.get(s, s) for s in ids if s)


def load_vendor_map(vendor: str, vendors_dir: Path | None = None) -> VendorMap:
    vendors_dir = Path(vendors_dir) if vendors_dir else default_vendors_dir()
    path = vendors_dir / f"{vendor}.yaml"
    if not path.is_file():
        raise VendorMapError(f"no vendor map for '{vendor}'", str(path),
                             f"use one of: {', '.join(VENDORS)} (inventory bmc.vendor / hardware.vendor)")
    doc = yamlsrc.load(path, error=VendorMapError, what="vendor map", empty={},
                       syntax="vendor map is not valid YAML")
    settings = doc.get("settings") or {}
    for name, entry in settings.items():
        where = f"{path}: settings.{name}"
        if name not in SETTINGS_SCHEMA:
            raise VendorMapError(f"unknown abstract setting '{name}'", where,
                                 f"use one of: {', '.join(SETTINGS_SCHEMA)}")
        kinds = [k for k in ("attribute", "attribute_pattern", "display_name") if k in (entry or {})]
        if len(kinds) > 1 or (not kinds and not all(isinstance(v, dict) for v in (entry or {}).get("values", {}).values())):
            raise VendorMapError("a mapping needs exactly one of attribute / attribute_pattern / display_name "
                                 "(or multi-attribute values)", where, "see docs/bios-profiles.md")
        if not isinstance((entry or {}).get("values"), dict):
            raise VendorMapError("a mapping needs `values:` (abstract value -> vendor value)", where,
                                 "see docs/bios-profiles.md")
        if not entry.get("source"):
            raise VendorMapError("every mapping must document its public source", where, "add `source:`")
    return VendorMap(vendor=doc.get("vendor", vendor), path=str(path), settings=settings,
                     sources=dict(doc.get("sources") or {}))


def detect_vendor(root: dict, system: dict | None = None) -> str:
    """Vendor flavour from the service root (Vendor, Oem keys) or the system's Manufacturer."""
    text = " ".join([str(root.get("Vendor", "")), " ".join((root.get("Oem") or {}).keys()),
                     str((system or {}).get("Manufacturer", "")), " ".join(((system or {}).get("Oem") or {}).keys())])
    low = text.lower()
    for needle, flavour in (("dell", "dell"), ("hpe", "hpe"), ("hewlett", "hpe"), ("hp ", "hpe"),
                            ("supermicro", "supermicro"), ("lenovo", "lenovo")):
        if needle in low + " ":
            return flavour
    return "generic"


def _pick_candidate(candidates: list, attr, setting: str, value, host: str) -> Any:
    if attr.type == "Boolean" and isinstance(value, bool):
        return value
    if attr.type != "Enumeration":
        return candidates[0]
    for c in candidates:
        if str(c) in attr.values:
            return str(c)
    for c in candidates:  # then by ValueDisplayName, case-insensitively
        for vname, vdisp in attr.value_display.items():
            if vdisp and vdisp.lower() == str(c).lower():
                return vname
    raise VendorMapError(
        f"{setting}={_fmt(value)}: none of {', '.join(map(str, candidates))} is allowed by {attr.name}",
        f"{host}/{attr.name}",
        f"{attr.allowed_text()}; set the value by name under raw.<vendor> in the profile")


def _fmt(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def translate(settings: dict[str, Any], raw: dict[str, Any], vmap: VendorMap, registry: Registry,
              host: str = "") -> list[Desired]:
    """Abstract settings (+ raw vendor attributes) -> the vendor attribute values wanted on this BMC."""
    out: dict[str, Desired] = {}
    errors: list[str] = []
    fixes: list[str] = []

    def add(d: Desired):
        prev = out.get(d.attribute)
        if prev is not None and prev.value != d.value and prev.setting != "raw":
            raise VendorMapError(f"{prev.setting} and {d.setting} both set {d.attribute} "
                                 f"({prev.value!r} vs {d.value!r})", f"{host}/{d.attribute}",
                                 "drop one of the two settings from the profile")
        out[d.attribute] = d

    def _one(setting, value):
        entry = vmap.settings.get(setting)
        if entry is None:
            errors.append(f"{setting}: no mapping for vendor {vmap.vendor}")
            fixes.append(f"add `{setting}` to {vmap.path} or set the attribute under raw.{vmap.vendor}")
            return
        values = entry["values"]
        key = value
        if key not in values:
            # YAML keys: 0/1/2/4 ints, true/false bools, strings
            errors.append(f"{setting}={_fmt(value)}: the {vmap.vendor} map has no value for it "
                          f"(mapped: {', '.join(_fmt(k) for k in values)})")
            fixes.append(f"add it under settings.{setting}.values in {vmap.path}")
            return
        target = values[key]
        if isinstance(target, dict) and "unsupported" in target:
            errors.append(f"{setting}={_fmt(value)}: {target['unsupported']}")
            fixes.append(target.get("fix", "choose another value"))
            return
        src = vmap.source_text(setting)
        if isinstance(target, dict):  # several attributes for one setting
            for aname, aval in target.items():
                if aname not in registry.attributes:
                    errors.append(f"{setting}: attribute {aname} is not in this BMC's registry {registry.id}")
                    fixes.append(f"check {vmap.path} against the BMC's registry")
                    return
                add(Desired(aname, _pick_candidate(aval if isinstance(aval, list) else [aval],
                                                   registry.attributes[aname], setting, value, host),
                            setting, "vendor map", src))
            return
        candidates = target if isinstance(target, list) else [target]
        if "attribute" in entry:
            name = entry["attribute"]
            attr = registry.attributes.get(name)
            if attr is None:
                errors.append(f"{setting}: attribute {name} is not in this BMC's registry {registry.id}")
                fixes.append(f"this BMC's BIOS may not offer it; set the right name under raw.{vmap.vendor}")
                return
            add(Desired(name, _pick_candidate(candidates, attr, setting, value, host), setting, "vendor map", src))
        elif "attribute_pattern" in entry:
            matches = registry.by_name_pattern(entry["attribute_pattern"])
            if not matches:
                errors.append(f"{setting}: no attribute matching /{entry['attribute_pattern']}/ in registry "
                              f"{registry.id}")
                fixes.append(f"set the attribute by name under raw.{vmap.vendor}")
                return
            for attr in sorted(matches, key=lambda a: a.name):
                add(Desired(attr.name, _pick_candidate(candidates, attr, setting, value, host), setting,
                            f"per slot: name matches /{entry['attribute_pattern']}/", src))
        else:
            pattern = entry["display_name"]
            matches = [a for a in registry.by_display_name(pattern) if not a.hidden]
            if len(matches) != 1:
                found = ", ".join(f"{a.name} ({a.display_name!r})" for a in matches) or "none"
                errors.append(f"{setting}: {len(matches)} attributes have a DisplayName matching /{pattern}/ "
                              f"in registry {registry.id} (found: {found})")
                fixes.append(f"set the attribute by name under raw.{vmap.vendor} in the profile")
                return
            attr = matches[0]
            add(Desired(attr.name, _pick_candidate(candidates, attr, setting, value, host), setting,
                        f"by display name: /{pattern}/ matched {attr.display_name!r}", src))

    for setting, value in settings.items():
        try:
            _one(setting, value)
        except VendorMapError as exc:
            errors.append(exc.what)
            fixes.append(exc.fix or '')
    for aname, aval in (raw or {}).items():
        note = "raw (profile escape hatch)"
        if aname in out:
            note += f", overrides {out[aname].setting}"
        out[aname] = Desired(aname, aval, "raw", note, "profile raw:")
    if errors:
        raise VendorMapError("profile cannot be mapped to this BMC's attributes:\n    " + "\n    ".join(errors),
                             host or vmap.path, "; ".join(dict.fromkeys(fixes)))
    return list(out.values())
