"""Vendor maps (bios/vendors/<flavour>.yaml) read, checked entry by entry (every problem names file:line and how
to fix it) and cached per process while the file is unchanged: the data numaforge.bios.vendors translates with.
docs/bios-profiles.md is the format's reference."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths, yamlsrc
from ..safeio import file_stamp
from .errors import VendorMapError
from .presets import check_marks, check_preset, presets_of, reboot_waits
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
    "unverified",  # {value: why}: the values no public source shows for this generation (said in the plan)
    "processor",  # the processor family the setting exists on (PROCESSORS): a gap "not on this host" elsewhere
}

# Processor families a map entry may be specific to (``processor: AMD EPYC``), each with the regular expression
# that recognises it in the System's ProcessorSummary.Model. A host whose processor model is known and does not
# match gets that entry as a gap "not on this host (<model>)": never written, never resolved to a similarly named
# attribute of another processor (numaforge.bios.vendors). Which entries are specific is the maps' data.
PROCESSORS = {"AMD EPYC": r"\bAMD\b|\bEPYC\b"}


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
    unverified: str = (
        ""  # why no public source shows this value (the map's `unverified: {value: why}`); "" when one does
    )
    by_display_name: bool = False  # the attribute was found by the DisplayName fallback, not by its name


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
    processor_rx: str | None = None  # on the System's ProcessorSummary.Model (boards of another processor)
    # every preset, in write order (the first is ``preset``; HPE Gen10 Plus adds AMDPerformanceWorkloadProfile)
    presets: list[dict] = field(default_factory=list)

    def matches(self, registry: Registry, by: str, system_model: str = "", processor: str = "") -> bool:
        if by == "processor":
            return bool(self.processor_rx and processor and re.search(self.processor_rx, processor))
        if by == "registry":
            return bool(self.registry_rx and re.search(self.registry_rx, registry.id or ""))
        if by == "system":
            return bool(self.system_rx and system_model and re.search(self.system_rx, system_model))
        models = [
            str(s.get("ProductName", ""))
            for s in (registry.doc or {}).get("SupportedSystems") or []
            if isinstance(s, dict)
        ]
        rx = self.model_rx
        if not rx:
            return False
        return any(re.search(rx, m) for m in models)


@dataclass
class VendorMap:
    vendor: str
    path: str
    generations: list[Generation]
    sources: dict[str, dict] = field(default_factory=dict)
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)
    reboot: dict[str, float] = field(default_factory=dict)  # waits around a reset (numaforge.bios.power)
    config_job: bool = False  # pending values apply only through a config job the client schedules (Dell)

    def generation(self, registry: Registry, system_model: str = "", processor: str = "") -> Generation:
        # the registry id decides first, the registry's model where it cannot, then the System's Model, then the
        # System's processor model (a board of another processor family: Intel PowerEdge, ThinkSystem, X13)
        for by in ("registry", "model", "system", "processor"):
            for g in self.generations:
                if g.matches(registry, by, system_model, processor):
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
            f" or processor /{g.processor_rx or '-'}/"
            for g in self.generations
        )
        raise VendorMapError(
            f"no generation of the {self.vendor} map fits registry {registry.id!r} (models: {models};"
            f" system model: {system_model or 'not read'}; processor: {processor or 'not read'})",
            self.path,
            f"add a generation for it to {paths.editable(self.path)} (known: {rules}), or set bmc.vendor: generic",
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
    if not isinstance(entry, yamlsrc.LMap):
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
    if "processor" in entry and entry["processor"] not in PROCESSORS:
        raise _fail(
            f"generation {gen_id}: settings.{name}.processor {entry['processor']!r} is no known processor family",
            path,
            ln("processor"),
            f"use one of: {', '.join(PROCESSORS)} (the family whose processors have this setting)",
        )
    values = entry.get("values")
    finds = any(k in entry for k in ("attribute", "attribute_pattern", "display_name"))
    multi = bool(
        isinstance(values, dict)
        and values
        and all(isinstance(v, dict) and "unsupported" not in v for v in values.values())
    )
    where = _Where(gen_id, name, path, line, ln)
    if not finds and not multi and "gap" not in entry and "processor" not in entry:
        raise _fail(
            f"generation {gen_id}: settings.{name} names no attribute",
            path,
            line,
            "give attribute, attribute_pattern or display_name (or `gap:` where the platform lacks it, or "
            "`processor:` where only another processor family has it)",
        )
    if "gap" in entry:
        _check_gap(entry, where)
    if finds or multi:
        _check_values(entry, values, where)
    if "unverified" in entry:
        check_marks(entry["unverified"], values or {}, f"generation {gen_id}: settings.{name}", path, ln("unverified"))
    _check_source_ids(entry, sources, where)


@dataclass
class _Where:
    """Where a vendor-map entry is: its generation, setting, file, line and line_of its keys."""

    gen_id: str
    name: str
    path: str
    line: int | None
    ln: Any


def _check_gap(entry, w: _Where) -> None:
    gen_id, name, path, ln = w.gen_id, w.name, w.path, w.ln
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


def _check_values(entry, values, w: _Where) -> None:
    gen_id, name, path, line, ln = w.gen_id, w.name, w.path, w.line, w.ln
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
                "give a ValueName, a list of ValueNames, {Attribute: ValueName, ...} or {unsupported: why, fix: how}",
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


def _check_source_ids(entry, sources: dict, w: _Where) -> None:
    gen_id, name, path, ln = w.gen_id, w.name, w.path, w.ln
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


MATCH_KEYS = ("registry", "model", "system", "processor")
SHOWN_KEYS = ("shows", "labels")  # a source's recorded facts: AttributeNames / setup labels, per generation


def _check_shown_facts(sources, gen_ids: set[str], path: str) -> None:
    """A source's ``shows:`` (AttributeName -> values seen) and ``labels:`` (setup label or DisplayName -> values
    seen), each per generation id of this map: what the source shows for that generation, nothing more. An entry
    whose name or a value none of its cited sources shows for its generation is marked ``unverified``
    (tests/bios/test_vendor_map_facts.py holds the maps to that)."""
    for sid, src in sources.items():
        _check_capture(sid, src, gen_ids, path)
        for key in SHOWN_KEYS:
            facts = src.get(key)
            if facts is None:
                continue
            line = getattr(src, "line_of", lambda _k: None)(key)
            fix = f"e.g. {key}: {{<generation id>: {{Name: [Value, ...]}}}} (generations: {', '.join(sorted(gen_ids))})"
            if not isinstance(facts, dict):
                raise _fail(f"source '{sid}'.{key} must map generation ids to names and values", path, line, fix)
            for gid, names in facts.items():
                if gid not in gen_ids:
                    raise _fail(f"source '{sid}'.{key} names unknown generation '{gid}'", path, line, fix)
                good = isinstance(names, dict) and all(
                    isinstance(v, list) and all(isinstance(x, (str, int)) for x in v) for v in names.values()
                )
                if not good:
                    raise _fail(
                        f"source '{sid}'.{key}.{gid} must map each name to the list of values the source shows",
                        path,
                        line,
                        fix,
                    )


def _check_capture(sid: str, src, gen_ids: set[str], path: str) -> None:
    """A source that is a captured BMC tree in the repository: ``capture: {name: <tests/data/captures/NAME>,
    generations: [<ids>]}`` -- the generations of this map whose names and values its registry shows (none: an
    other platform's naming, recorded so the corpus is accounted for). tests/bios/test_vendor_map_facts.py reads
    the capture's registry as what the source shows; the loader only checks the shape."""
    cap = src.get("capture")
    if cap is None:
        return
    line = getattr(src, "line_of", lambda _k: None)("capture")
    fix = (
        f"e.g. capture: {{name: libredfish-dell-r750, generations: [15g]}} (generations: {', '.join(sorted(gen_ids))})"
    )
    gens = cap.get("generations") if isinstance(cap, dict) else None
    if not (isinstance(cap, dict) and isinstance(cap.get("name"), str) and cap["name"] and isinstance(gens, list)):
        raise _fail(f"source '{sid}'.capture needs name and generations (a list)", path, line, fix)
    for g in gens:
        if g not in gen_ids:
            raise _fail(f"source '{sid}'.capture names unknown generation '{g}'", path, line, fix)


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


def _read_generation(g, gline: int, i: int, sources: yamlsrc.LMap, spath: str) -> Generation:
    """One `generations:` entry checked (file:line) into a Generation."""
    if not isinstance(g, yamlsrc.LMap) or not g.get("id") or not isinstance(g.get("settings"), dict):
        raise _fail(
            f"generation #{i + 1} needs id, match and settings",
            spath,
            gline,
            "see docs/bios-profiles.md (vendor maps)",
        )
    match = g.get("match") or {}
    if not isinstance(match, yamlsrc.LMap) or not any(match.get(k) for k in MATCH_KEYS):
        raise _fail(
            f"generation {g['id']}: `match:` needs registry, model, system and/or processor (regular expressions)",
            spath,
            g.line_of("match"),
            "e.g. match: {registry: '^BiosAttributeRegistryA55\\.'}",
        )
    for key in MATCH_KEYS:
        if key in match:
            _regex(match[key], spath, match.line_of(key), f"generation {g['id']} match.{key}")
    for name, entry in g["settings"].items():
        _check_entry(name, entry, g["id"], sources, spath)
    check_preset(g, sources, spath)
    presets = presets_of(g.get("preset"))
    return Generation(
        id=str(g["id"]),
        title=str(g.get("title", g["id"])),
        registry_rx=match.get("registry"),
        model_rx=match.get("model"),
        settings=dict(g["settings"]),
        where=f"{spath}:{gline}",
        system_rx=match.get("system"),
        preset=presets[0] if presets else None,
        presets=presets,
        processor_rx=match.get("processor"),
    )


def _read_vendor_map(path: Path, vendor: str) -> VendorMap:
    spath = str(path)
    try:
        doc = yamlsrc.load(path, error=VendorMapError, what="vendor map", fix_missing="check bios/vendors/")
    except VendorMapError as exc:  # yamlsrc's errors carry file:line; say they are about a vendor map
        raise VendorMapError(f"vendor map: {exc.what}", exc.where or spath, exc.fix or "fix the YAML") from None
    if not isinstance(doc, yamlsrc.LMap):
        raise _fail(
            "a vendor map must be a mapping (vendor/sources/generations)",
            spath,
            1,
            "see docs/bios-profiles.md (vendor maps)",
        )
    sources = doc.get("sources") or yamlsrc.LMap()
    if not isinstance(sources, yamlsrc.LMap):
        raise _fail(
            "`sources:` must be a mapping (id -> {title, url} or {title, repo, path})",
            spath,
            doc.line_of("sources"),
            "see docs/bios-profiles.md (vendor maps)",
        )
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
    if not isinstance(gens, yamlsrc.LSeq) or not gens:
        raise _fail(
            "a vendor map needs `generations:` (a list)",
            spath,
            doc.line_of("generations"),
            "see docs/bios-profiles.md (vendor maps)",
        )
    out = [_read_generation(g, gens.line_of(i), i, sources, spath) for i, g in enumerate(gens)]
    _check_shown_facts(sources, {g.id for g in out}, spath)
    return VendorMap(
        vendor=str(doc.get("vendor", vendor)),
        path=spath,
        generations=out,
        sources=dict(sources),
        reboot=reboot_waits(doc, spath),
        config_job=_config_job(doc, spath),
    )


def _config_job(doc: yamlsrc.LMap, spath: str) -> bool:
    """``config_job: true``: this vendor's BMC applies pending BIOS values only through a job the client
    schedules (numaforge.bios.configjob)."""
    value = doc.get("config_job", False)
    if not isinstance(value, bool):
        raise _fail(
            f"`config_job:` must be true or false, not {value!r}",
            spath,
            doc.line_of("config_job"),
            "config_job: true where the BMC applies BIOS values only through a job the client schedules (Dell)",
        )
    return value
