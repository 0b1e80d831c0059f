"""Abstract settings -> vendor BIOS attributes, from data in bios/vendors/<flavour>.yaml (pure core).

A vendor map lists ``sources`` (public documents: title + url, or repo + path) and ``generations``; each
generation says which BMCs it is for (``match:`` a regex on the registry id, on the registry's SupportedSystems
ProductName and/or on the System resource's Model -- real Supermicro registries are named
``BiosAttributeRegistry.1_0_0`` for "SuperMicroServer", so only the System's Model tells H12 from H13) and maps
every abstract setting. docs/bios-profiles.md is the reference; a
mapping entry resolves its attribute in this order:

1. ``attribute: NumaNodesPerSocket`` -- the documented AttributeName, exactly; or
   ``attribute_pattern: '^PciSlot(\\d+)Aspm$'`` -- every registry attribute whose name matches (per-slot
   settings, or per-board name suffixes);
2. only if that finds nothing: ``display_name: 'memory interleav'`` -- the documented fallback, a
   case-insensitive regex on the registry's DisplayName that must find exactly one visible attribute
   (several: an error listing them);
3. nothing found: the entry's documented platform gap (``gap:``, shown as a gap in the plan), else an error.

``values`` maps each abstract value to a ValueName, a list of candidate ValueNames (the first the registry
allows wins, ValueDisplayName as fallback), a mapping AttributeName -> ValueName (one setting, several
attributes), or ``{unsupported: why, fix: how}``. ``source`` cites the attribute name, ``values_source`` the
values (ids from ``sources``). ``translate`` returns ``Desired`` items; nothing here talks to a BMC.

Profiles add (see profile.py): ``raw`` attributes supersede any mapped setting on the same attribute, even one
whose mapping fails; ``optional`` settings are skipped where the platform lacks them; preference lists try
values in order and say why earlier ones were passed over.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths, yamlsrc
from ..safeio import file_stamp
from .errors import VendorMapError
from .presets import UNVERIFIED, check_preset, preset_value, reboot_waits
from .profile import SETTINGS_SCHEMA, VENDORS
from .registry import Registry

ENTRY_KEYS = {
    "attribute",
    "attribute_pattern",
    "display_name",
    "values",
    "source",
    "values_source",
    "gap",
    "gap_source",
    "note",
    "unverified",  # why no public source shows this name/value for this generation (said in the plan)
}


def default_vendors_dir() -> Path:
    """The project's bios/vendors, else the built-in one (numaforge.paths)."""
    return paths.data_dir("bios", "vendors")


@dataclass
class Desired:
    attribute: str
    value: Any
    setting: str  # abstract setting name, or "raw"
    resolved: str = "vendor map"  # how the AttributeName (and value) were found (said in the plan)
    source: str = ""
    status: str = "set"  # set | gap (documented platform gap) | skipped (optional, platform lacks it)


@dataclass
class Generation:
    id: str
    title: str
    registry_rx: str | None
    model_rx: str | None
    settings: dict[str, dict]
    where: str  # file:line of the generation
    system_rx: str | None = None  # on the System resource's Model (what the BMC reports for the machine)
    # the vendor preset that locks or overrides other settings, and the value that frees them:
    # {attribute, values: [candidate ValueNames], source} (Dell SysProfile, HPE WorkloadProfile, Lenovo mode)
    preset: dict | None = None

    def matches(self, registry: Registry, by: str, system_model: str = "") -> bool:
        if by == "registry":
            return bool(self.registry_rx and re.search(self.registry_rx, registry.id or ""))
        if by == "system":
            return bool(self.system_rx and system_model and re.search(self.system_rx, system_model))
        models = [
            str(s.get("ProductName", ""))
            for s in (registry.doc or {}).get("SupportedSystems") or []
            if isinstance(s, dict)
        ]
        return bool(self.model_rx) and any(re.search(self.model_rx, m) for m in models)


@dataclass
class VendorMap:
    vendor: str
    path: str
    generations: list[Generation]
    sources: dict[str, dict] = field(default_factory=dict)
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)
    reboot: dict[str, float] = field(default_factory=dict)  # waits around a reset (numaforge.bios.power)

    def generation(self, registry: Registry, system_model: str = "") -> Generation:
        # the registry id decides first, the registry's model where it cannot, then the System's Model
        for by in ("registry", "model", "system"):
            for g in self.generations:
                if g.matches(registry, by, system_model):
                    return g
        models = (
            ", ".join(
                str(s.get("ProductName"))
                for s in (registry.doc or {}).get("SupportedSystems") or []
                if isinstance(s, dict)
            )
            or "none stated"
        )
        rules = "; ".join(
            f"{g.id}: registry /{g.registry_rx or '-'}/ or model /{g.model_rx or '-'}/ or system /{g.system_rx or '-'}/"
            for g in self.generations
        )
        raise VendorMapError(
            f"no generation of the {self.vendor} map fits registry {registry.id!r} (models: {models};"
            f" system model: {system_model or 'not read'})",
            self.path,
            f"add a generation for it to {self.path} (known: {rules}), or set bmc.vendor: generic",
        )

    def source_text(self, ids) -> str:
        ids = ids if isinstance(ids, list) else [ids]
        out = []
        for s in ids:
            src = self.sources.get(s)
            if not src:
                continue
            where = src.get("url") or f"{src.get('repo')}:{src.get('path')}"
            out.append(f"{src.get('title')} <{where}>")
        return "; ".join(out)


def _fail(what: str, path: str, line: int | None, fix: str) -> VendorMapError:
    return VendorMapError(what, f"{path}:{line}" if line else path, fix)


def _regex(rx, path, line, what) -> None:
    if not isinstance(rx, str):
        raise _fail(f"{what} must be a string (a regular expression)", path, line, "quote the pattern")
    try:
        re.compile(rx)
    except re.error as exc:
        raise _fail(
            f"{what} /{rx}/ is not a valid regular expression: {exc}",
            path,
            line,
            "fix the pattern (Python re syntax; quote it with single quotes in YAML)",
        ) from None


def _check_entry(name: str, entry, gen_id: str, sources: dict, path: str) -> None:
    line = getattr(entry, "line", None)
    if not isinstance(entry, dict):
        raise _fail(
            f"generation {gen_id}: settings.{name} must be a mapping (attribute/values/source)",
            path,
            line,
            "see docs/bios-profiles.md (vendor maps)",
        )
    ln = entry.line_of
    if name not in SETTINGS_SCHEMA:
        raise _fail(
            f"generation {gen_id}: unknown abstract setting '{name}'",
            path,
            line,
            f"use one of: {', '.join(SETTINGS_SCHEMA)}",
        )
    extra = sorted(set(entry) - ENTRY_KEYS)
    if "unverified" in entry and not (isinstance(entry["unverified"], str) and entry["unverified"].strip()):
        raise _fail(
            f"generation {gen_id}: settings.{name}.unverified must say why no public source shows it",
            path,
            ln("unverified"),
            "e.g. unverified: 'values seen on an SR635 V3 only'",
        )
    if extra:
        raise _fail(
            f"generation {gen_id}: settings.{name} has unknown key '{extra[0]}'",
            path,
            ln(extra[0]),
            f"allowed: {', '.join(sorted(ENTRY_KEYS))}",
        )
    if "attribute" in entry and "attribute_pattern" in entry:
        raise _fail(
            f"generation {gen_id}: settings.{name} has both attribute and attribute_pattern",
            path,
            line,
            "keep one (attribute: the exact name; attribute_pattern: every matching name)",
        )
    for key in ("attribute_pattern", "display_name"):
        if key in entry:
            _regex(entry[key], path, ln(key), f"settings.{name}.{key}")
    if "attribute" in entry and not isinstance(entry["attribute"], str):
        raise _fail(
            f"generation {gen_id}: settings.{name}.attribute must be one AttributeName",
            path,
            ln("attribute"),
            "write `attribute: Name` (use attribute_pattern for several)",
        )
    values = entry.get("values")
    finds = any(k in entry for k in ("attribute", "attribute_pattern", "display_name"))
    multi = (
        isinstance(values, dict)
        and values
        and all(isinstance(v, dict) and "unsupported" not in v for v in values.values())
    )
    if not finds and not multi and "gap" not in entry:
        raise _fail(
            f"generation {gen_id}: settings.{name} names no attribute",
            path,
            line,
            "give attribute, attribute_pattern or display_name (or `gap:` where the platform lacks it)",
        )
    if "gap" in entry:
        if not isinstance(entry["gap"], str) or not entry["gap"].strip():
            raise _fail(
                f"generation {gen_id}: settings.{name}.gap must say why the platform lacks it",
                path,
                ln("gap"),
                "write the documented reason as text",
            )
        if not entry.get("gap_source") and not entry.get("source"):
            raise _fail(
                f"generation {gen_id}: settings.{name}: a platform gap must cite where it is documented",
                path,
                ln("gap"),
                "add `gap_source:` (ids from `sources:`)",
            )
    if finds or multi:
        if not isinstance(values, dict) or not values:
            raise _fail(
                f"generation {gen_id}: settings.{name} needs `values:` (abstract value -> vendor value)",
                path,
                ln("values") if "values" in entry else line,
                "see docs/bios-profiles.md",
            )
        for k, v in values.items():
            vline = values.line_of(k) if hasattr(values, "line_of") else line
            if isinstance(v, dict) and "unsupported" in v:
                continue
            if isinstance(v, dict):
                bad = [a for a, x in v.items() if not isinstance(x, (str, int, bool, list))]
            elif isinstance(v, list):
                bad = [x for x in v if not isinstance(x, (str, int, bool))]
            else:
                bad = [] if isinstance(v, (str, int, bool)) else [v]
            if bad or v in ([], {}):
                raise _fail(
                    f"generation {gen_id}: settings.{name}.values.{k} has the wrong shape",
                    path,
                    vline,
                    "give a ValueName, a list of ValueNames, {Attribute: ValueName, ...} or "
                    "{unsupported: why, fix: how}",
                )
        if not entry.get("source"):
            raise _fail(
                f"generation {gen_id}: settings.{name} does not cite its public source",
                path,
                line,
                "add `source:` (ids from `sources:`) for the attribute name",
            )
        if not entry.get("values_source"):
            raise _fail(
                f"generation {gen_id}: settings.{name} does not cite the source of its values",
                path,
                line,
                "add `values_source:` (ids from `sources:`)",
            )
    for key in ("source", "values_source", "gap_source"):
        ids = entry.get(key)
        for sid in ids if isinstance(ids, list) else [ids] if ids else []:
            if sid not in sources:
                raise _fail(
                    f"generation {gen_id}: settings.{name}.{key} names unknown source '{sid}'",
                    path,
                    ln(key),
                    f"define it under `sources:` (known: {', '.join(sources) or 'none'})",
                )


def load_vendor_map(vendor: str, vendors_dir: Path | None = None) -> VendorMap:
    if vendors_dir:
        path = Path(vendors_dir) / f"{vendor}.yaml"
    else:  # a project's own map overrides the built-in one of the same vendor
        path = paths.find_data("bios", "vendors", f"{vendor}.yaml") or default_vendors_dir() / f"{vendor}.yaml"
    if not path.is_file():
        raise VendorMapError(
            f"no vendor map for '{vendor}'",
            str(path),
            f"use one of: {', '.join(VENDORS)} (inventory bmc.vendor / hardware.vendor)",
        )
    return _read_vendor_map_cached(path, vendor)


_MAPS: dict[tuple, VendorMap] = {}
_MAPS_LOCK = threading.Lock()


def _read_vendor_map_cached(path: Path, vendor: str) -> VendorMap:
    """A vendor map file is read and checked once per process while it is unchanged (same inode, size and
    mtime): a fleet run asks for it once per host. VendorMap is not mutated by its users."""
    key = (str(path), vendor, file_stamp(path))
    with _MAPS_LOCK:
        hit = _MAPS.get(key)
    if hit is None:
        hit = _read_vendor_map(path, vendor)
        with _MAPS_LOCK:
            _MAPS[key] = hit
    return hit


def _read_vendor_map(path: Path, vendor: str) -> VendorMap:
    spath = str(path)
    try:
        doc = yamlsrc.load(path, error=VendorMapError, what="vendor map", fix_missing="check bios/vendors/")
    except VendorMapError as exc:  # yamlsrc's errors carry file:line; say they are about a vendor map
        raise VendorMapError(f"vendor map: {exc.what}", exc.where or spath, exc.fix or "fix the YAML") from None
    if not isinstance(doc, dict):
        raise _fail(
            "a vendor map must be a mapping (vendor/sources/generations)",
            spath,
            1,
            "see docs/bios-profiles.md (vendor maps)",
        )
    sources = doc.get("sources") or {}
    for sid, src in sources.items():
        ok = isinstance(src, dict) and src.get("title") and (src.get("url") or (src.get("repo") and src.get("path")))
        if not ok:
            raise _fail(
                f"source '{sid}' must give a title and a url, or a title, repo and path",
                spath,
                sources.line_of(sid),
                "e.g. {title: 'iLO 6 Bios resource definitions', url: 'https://...'}",
            )
    gens = doc.get("generations")
    if not isinstance(gens, list) or not gens:
        raise _fail(
            "a vendor map needs `generations:` (a list)",
            spath,
            doc.line_of("generations"),
            "see docs/bios-profiles.md (vendor maps)",
        )
    out = []
    for i, g in enumerate(gens):
        gline = gens.line_of(i)
        if not isinstance(g, dict) or not g.get("id") or not isinstance(g.get("settings"), dict):
            raise _fail(
                f"generation #{i + 1} needs id, match and settings",
                spath,
                gline,
                "see docs/bios-profiles.md (vendor maps)",
            )
        match = g.get("match") or {}
        if not isinstance(match, dict) or not (match.get("registry") or match.get("model") or match.get("system")):
            raise _fail(
                f"generation {g['id']}: `match:` needs registry, model and/or system (regular expressions)",
                spath,
                g.line_of("match"),
                "e.g. match: {registry: '^BiosAttributeRegistryA55\\.'}",
            )
        for key in ("registry", "model", "system"):
            if key in match:
                _regex(match[key], spath, match.line_of(key), f"generation {g['id']} match.{key}")
        for name, entry in g["settings"].items():
            _check_entry(name, entry, g["id"], sources, spath)
        check_preset(g, sources, spath)
        out.append(
            Generation(
                id=str(g["id"]),
                title=str(g.get("title", g["id"])),
                registry_rx=match.get("registry"),
                model_rx=match.get("model"),
                settings=dict(g["settings"]),
                where=f"{spath}:{gline}",
                system_rx=match.get("system"),
                preset=dict(g["preset"]) if g.get("preset") else None,
            )
        )
    return VendorMap(
        vendor=str(doc.get("vendor", vendor)),
        path=spath,
        generations=out,
        sources=dict(sources),
        reboot=reboot_waits(doc, spath),
    )


def detect_vendor(root: dict, system: dict | None = None) -> str:
    """Vendor flavour from the service root (Vendor, Oem keys) or the system's Manufacturer."""
    text = " ".join(
        [
            str(root.get("Vendor", "")),
            " ".join((root.get("Oem") or {}).keys()),
            str((system or {}).get("Manufacturer", "")),
            " ".join(((system or {}).get("Oem") or {}).keys()),
        ]
    )
    low = text.lower()
    for needle, flavour in (
        ("dell", "dell"),
        ("hpe", "hpe"),
        ("hewlett", "hpe"),
        ("hp ", "hpe"),
        ("supermicro", "supermicro"),
        ("lenovo", "lenovo"),
    ):
        if needle in low + " ":
            return flavour
    return "generic"


def _fmt(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


class _Miss(Exception):
    """One setting could not be mapped: ``attrs`` are the attributes it concerns (a raw value on any of them
    supersedes it); ``kind`` is error | gap | absent (the platform lacks the attribute)."""

    def __init__(self, what: str, fix: str, attrs=(), kind: str = "error"):
        super().__init__(what)
        self.what, self.fix, self.attrs, self.kind = what, fix, set(attrs), kind


def _pick(candidates: list, attr, setting: str, value) -> Any:
    if attr.type == "Boolean" and isinstance(value, bool):
        return value
    if attr.type != "Enumeration":
        return candidates[0]
    for c in candidates:
        if str(c) in attr.values:
            return str(c)
    for c in candidates:  # documented fallback: the ValueDisplayName, case-insensitively
        for vname, vdisp in attr.value_display.items():
            if vdisp and vdisp.lower() == str(c).lower():
                return vname
    raise _Miss(
        f"{setting}={_fmt(value)}: none of {', '.join(map(str, candidates))} is allowed by {attr.name}",
        f"{attr.allowed_text()}; set the value by name under raw.<vendor> in the profile",
        [attr.name],
    )


class _Resolver:
    def __init__(self, vmap: VendorMap, gen: Generation, registry: Registry):
        self.vmap, self.gen, self.registry = vmap, gen, registry

    def _src(self, entry: dict, *keys) -> str:
        return "; ".join(t for t in (self.vmap.source_text(entry.get(k) or []) for k in keys) if t)

    def find(self, setting: str, entry: dict) -> tuple[list, str]:
        """The registry attributes an entry names (exact name first, DisplayName only as the fallback)."""
        reg = self.registry
        if "attribute" in entry and entry["attribute"] in reg.attributes:
            return [reg.attributes[entry["attribute"]]], "vendor map: exact AttributeName"
        if "attribute_pattern" in entry:
            hits = sorted(reg.by_name_pattern(entry["attribute_pattern"]), key=lambda a: a.name)
            if hits:
                return hits, f"vendor map: names matching /{entry['attribute_pattern']}/"
        tried = entry.get("attribute") or (f"/{entry['attribute_pattern']}/" if "attribute_pattern" in entry else None)
        if "display_name" in entry:
            rx = entry["display_name"]
            hits = [a for a in reg.by_display_name(rx) if not a.hidden]
            if len(hits) == 1:
                how = f"by display name: /{rx}/ matched {hits[0].display_name!r}"
                return hits, (f"{tried} not in registry; fallback " + how) if tried else how
            if len(hits) > 1:
                found = ", ".join(f"{a.name} ({a.display_name!r})" for a in hits)
                raise _Miss(
                    f"{setting}: {len(hits)} attributes have a DisplayName matching /{rx}/ in registry "
                    f"{reg.id}: {found}",
                    f"set the right one by name under raw.{self.vmap.vendor}",
                    [a.name for a in hits],
                )
        names = [entry["attribute"]] if "attribute" in entry else []
        looked = " or ".join(
            x for x in (tried, f"DisplayName /{entry['display_name']}/" if "display_name" in entry else None) if x
        )
        if "gap" in entry:
            raise _Miss(f"{setting}: platform gap on {self.gen.title}: {entry['gap']}", "", names, kind="gap")
        raise _Miss(
            f"{setting}: no attribute {looked} in registry {reg.id} ({self.gen.title})",
            f"the BIOS may not offer it here: mark the setting optional, or set the attribute under "
            f"raw.{self.vmap.vendor}",
            names,
            kind="absent",
        )

    def _one_attribute(self, setting: str, key: str, keys: list[str]):
        """(attribute, name) for one key of a several-attributes value: an exact AttributeName, or -- a key
        starting with ^ -- the one attribute whose name matches that regex (per-board name suffixes)."""
        if not key.startswith("^"):
            return self.registry.attributes.get(key), key
        hits = sorted(self.registry.by_name_pattern(key), key=lambda a: a.name)
        if len(hits) > 1:
            raise _Miss(
                f"{setting}: {len(hits)} attributes match /{key}/ in registry {self.registry.id}: "
                + ", ".join(a.name for a in hits),
                f"set the right one by name under raw.{self.vmap.vendor}",
                [a.name for a in hits],
            )
        return (hits[0], hits[0].name) if hits else (None, key)

    def _names(self, setting: str, entry: dict, target) -> list[str]:
        """The attributes a failing value concerns (a raw value on any of them supersedes the setting)."""
        if isinstance(target, dict) and "unsupported" not in target:
            names: list[str] = []
            for key in target:
                hits = [a.name for a in self.registry.by_name_pattern(key)] if key.startswith("^") else []
                names += hits or [key]
            return names
        try:
            return [a.name for a in self.find(setting, entry)[0]]
        except _Miss as miss:
            return sorted(miss.attrs)

    def one(self, setting: str, value) -> list[Desired]:
        entry = self.gen.settings.get(setting)
        if entry is None:
            raise _Miss(
                f"{setting}: the {self.vmap.vendor} map ({self.gen.title}) has no mapping for it",
                f"add `{setting}` to generation {self.gen.id} in {self.vmap.path}, or set the attribute "
                f"under raw.{self.vmap.vendor}",
            )
        values = entry.get("values") or {}
        finds = any(k in entry for k in ("attribute", "attribute_pattern", "display_name"))
        if not finds and "gap" in entry and not values:
            raise _Miss(f"{setting}: platform gap on {self.gen.title}: {entry['gap']}", "", kind="gap")
        target = values.get(value) if value in values else None
        names_hint = self._names(setting, entry, target)
        if value not in values:
            raise _Miss(
                f"{setting}={_fmt(value)}: the {self.vmap.vendor} map ({self.gen.title}) has no value for "
                f"it (mapped: {', '.join(_fmt(k) for k in values)})",
                f"add it under settings.{setting}.values in {self.vmap.path}",
                names_hint,
            )
        if isinstance(target, dict) and "unsupported" in target:
            raise _Miss(
                f"{setting}={_fmt(value)}: {target['unsupported']}",
                target.get("fix", "choose another value"),
                names_hint,
                kind="value",
            )
        src = self._src(entry, "source", "values_source")
        if isinstance(target, dict):  # several attributes for one setting
            out = []
            for key, aval in target.items():
                attr, aname = self._one_attribute(setting, key, list(target))
                if attr is None:
                    if "gap" in entry:
                        raise _Miss(
                            f"{setting}: platform gap on {self.gen.title}: {entry['gap']}", "", list(target), kind="gap"
                        )
                    raise _Miss(
                        f"{setting}: attribute {aname} is not in registry {self.registry.id}",
                        f"mark the setting optional, or set the attributes under raw.{self.vmap.vendor}",
                        list(target),
                        kind="absent",
                    )
                out.append(
                    Desired(
                        aname,
                        _pick(aval if isinstance(aval, list) else [aval], attr, setting, value),
                        setting,
                        "vendor map: exact AttributeName" if aname == key else f"vendor map: name matching /{key}/",
                        src,
                    )
                )
            return out
        attrs, how = self.find(setting, entry)
        candidates = target if isinstance(target, list) else [target]
        return [Desired(a.name, _pick(candidates, a, setting, value), setting, how, src) for a in attrs]


def translate(
    settings: dict[str, Any],
    raw: dict[str, Any],
    vmap: VendorMap,
    registry: Registry,
    host: str = "",
    optional=(),
    system_model: str = "",
) -> list[Desired]:
    """Abstract settings (+ raw vendor attributes) -> the vendor attribute values wanted on this BMC.

    A setting's value may be a list: a preference list, the first value this platform offers wins. Settings in
    ``optional`` are skipped (status "skipped") where the platform lacks them. A documented platform gap gives a
    status "gap" item. Every other problem is collected and raised at once."""
    gen = vmap.generation(registry, system_model)
    res = _Resolver(vmap, gen, registry)
    raw = dict(raw or {})
    out: dict[str, Desired] = {}
    notes: list[Desired] = []
    errors: list[str] = []
    fixes: list[str] = []

    def superseded(setting: str, miss: _Miss, attrs) -> bool:
        hit = sorted(set(attrs) & set(raw))
        for a in hit:
            notes.append(
                Desired(
                    a,
                    raw[a],
                    "raw",
                    f"raw, supersedes {setting} (its mapping failed: {miss.what})",
                    "profile raw:",
                    status="raw",
                )
            )
        return bool(hit)

    for setting, value in settings.items():
        prefs = value if isinstance(value, list) else [value]
        chosen, passed = None, []
        last: _Miss | None = None
        for v in prefs:
            try:
                chosen = res.one(setting, v)
                break
            except _Miss as miss:
                last = miss
                if miss.kind in ("gap", "absent"):
                    break  # the platform lacks the setting: no other value can help
                passed.append(f"{_fmt(v)}: {miss.what.split(': ', 1)[-1]}")
        if chosen is not None:
            why = (gen.settings.get(setting) or {}).get("unverified")
            for d in chosen:
                if why:
                    d.resolved += f"; {UNVERIFIED}: {why}"
                if len(prefs) > 1:
                    d.resolved += f"; preference {' > '.join(map(_fmt, prefs))}: chose {_fmt(v)}" + (
                        f" ({'; '.join(passed)})" if passed else " (first choice)"
                    )
                prev = out.get(d.attribute)
                if prev is not None and prev.value != d.value:
                    errors.append(
                        f"{prev.setting} and {d.setting} both set {d.attribute} ({prev.value!r} vs {d.value!r})"
                    )
                    fixes.append("drop one of the two settings from the profile")
                out[d.attribute] = d
            continue
        assert last is not None
        if superseded(setting, last, last.attrs):
            continue
        if last.kind == "gap":
            status = "skipped" if setting in optional else "gap"
            notes.append(
                Desired(
                    "-",
                    None,
                    setting,
                    last.what.split(": ", 1)[-1],
                    res._src(gen.settings.get(setting) or {}, "gap_source", "source"),
                    status=status,
                )
            )
        elif last.kind == "absent" and setting in optional:
            notes.append(
                Desired("-", None, setting, f"optional, skipped: {last.what.split(': ', 1)[-1]}", "", status="skipped")
            )
        else:
            if len(prefs) > 1:
                errors.append(f"{setting}: no preferred value is available ({'; '.join(passed)})")
            else:
                errors.append(last.what)
            fixes.append(last.fix)
    for aname, aval in raw.items():
        note = "raw (profile escape hatch)"
        if aname in out:
            note += f", supersedes {out[aname].setting}"
        out[aname] = Desired(aname, aval, "raw", note, "profile raw:")
    for n in notes:  # a raw attribute that superseded a setting: say so on the raw item
        if n.status == "raw" and n.attribute in out:
            out[n.attribute].resolved = n.resolved
    if errors:
        where = f"{host} ({gen.title}, {vmap.path})" if host else vmap.path
        raise VendorMapError(
            "profile cannot be mapped to this BMC's attributes:\n    " + "\n    ".join(errors),
            where,
            "; ".join(f for f in dict.fromkeys(fixes) if f),
        )
    got = preset_value(gen.preset, registry, out)
    pre = [Desired(*got, vmap.source_text(gen.preset["source"]))] if got and gen.preset else []
    return pre + list(out.values()) + [n for n in notes if n.status in ("gap", "skipped")]
