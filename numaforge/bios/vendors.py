"""Abstract settings -> vendor BIOS attributes, from data in bios/vendors/<flavour>.yaml (pure core). The maps
are read and checked by numaforge.bios.vendormap; this module detects the vendor and translates.

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
from typing import Any, Iterable

from .. import paths
from .errors import VendorMapError
from .presets import UNVERIFIED, locks_a_change, mark_of, preset_value
from .registry import Registry
from .vendormap import (  # noqa: F401  (vendors.<name> for callers)
    PROCESSORS,
    Desired,
    Generation,
    VendorMap,
    default_vendors_dir,
    load_vendor_map,
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


def vendor_evidence(root: dict, system: dict | None = None) -> str:
    """What a service root and system say of their maker, for messages: "Vendor 'HPE', Oem/Hpe in the service
    root; Manufacturer 'HPE'" (each text cut at 60 characters)."""

    def cut(v: Any) -> str:
        text = str(v)
        return repr(text if len(text) <= 60 else text[:60] + "...")

    parts = []
    if root.get("Vendor"):
        parts.append(f"Vendor {cut(root['Vendor'])}")
    oem = root.get("Oem")
    if isinstance(oem, dict) and oem:
        parts.append("Oem/" + ", Oem/".join(str(k)[:30] for k in list(oem)[:4]))
    out = [f"{', '.join(parts)} in the service root"] if parts else []
    if system and system.get("Manufacturer"):
        out.append(f"the system's Manufacturer {cut(system['Manufacturer'])}")
    return "; ".join(out)


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
    def __init__(
        self,
        vmap: VendorMap,
        gen: Generation,
        registry: Registry,
        present: Iterable[str] | None = None,
        processor: str = "",
    ):
        self.vmap, self.gen, self.registry = vmap, gen, registry
        # the System's ProcessorSummary.Model ("" when the BMC does not say): an entry specific to another
        # processor family (its `processor:`) is a gap "not on this host" here, never resolved
        self.processor = processor
        # the attributes the host's Bios has: a registry may describe more (HPE's A42 registry of the DL385
        # capture has 402, its Bios 277: PciSlot3Aspm..., EmbNicAspm are not on that board), and an attribute the
        # Bios lacks is never planned (issue 41 item 1)
        self.present = set(present) if present is not None else None

    def _here(self, attrs: list) -> list:
        return attrs if self.present is None else [a for a in attrs if a.name in self.present]

    def _src(self, entry: dict, *keys) -> str:
        return "; ".join(t for t in (self.vmap.source_text(entry.get(k) or []) for k in keys) if t)

    def _ambiguous(self, setting: str, pattern: str, hits: list) -> _Miss:
        """A pattern that should find one attribute matches several on this host: refused, never one picked (the
        AMI DGX's SriovSupport and SRIOVEnable are both "SR-IOV Support"; HPE A42's /determinism/ finds
        DeterminismControl and PerformanceDeterminism: issue 41 item 8)."""
        found = ", ".join(f"{a.name} ({a.display_name!r})" if a.display_name else a.name for a in hits)
        names = sorted(a.name for a in hits)
        return _Miss(
            f"{setting} is ambiguous on this BMC: {pattern} matches {len(hits)} attributes in registry "
            f"{self.registry.id}: {found}; numaforge never picks one",
            f"name the attribute in a vendor map entry: `attribute: <one of {', '.join(names)}>` (or "
            f"`attribute_pattern:` for one setting on every slot) under settings.{setting} of generation "
            f"{self.gen.id} in {paths.editable(self.vmap.path)}; or set the attribute under raw.{self.vmap.vendor}",
            names,
            kind="ambiguous",
        )

    def find(self, setting: str, entry: dict) -> tuple[list, str, bool]:
        """The registry attributes an entry names (exact name first, DisplayName only as the fallback)."""
        reg = self.registry
        if (
            "attribute" in entry
            and entry["attribute"] in reg.attributes
            and self._here([reg.attributes[entry["attribute"]]])
        ):
            return [reg.attributes[entry["attribute"]]], "vendor map: exact AttributeName", False
        if "attribute_pattern" in entry:
            hits = sorted(self._here(reg.by_name_pattern(entry["attribute_pattern"])), key=lambda a: a.name)
            if hits:
                return hits, f"vendor map: names matching /{entry['attribute_pattern']}/", False
        tried = entry.get("attribute") or (f"/{entry['attribute_pattern']}/" if "attribute_pattern" in entry else None)
        if "display_name" in entry:
            rx = entry["display_name"]
            hits = [a for a in self._here(reg.by_display_name(rx)) if not a.hidden]
            if len(hits) == 1:
                how = f"by display name: /{rx}/ matched {hits[0].display_name!r}"
                return hits, (f"{tried} not in registry; fallback " + how) if tried else how, True
            if len(hits) > 1:
                raise self._ambiguous(setting, f"DisplayName /{rx}/", hits)
        names = [entry["attribute"]] if "attribute" in entry else []
        looked = " or ".join(
            x for x in (tried, f"DisplayName /{entry['display_name']}/" if "display_name" in entry else None) if x
        )
        if "gap" in entry:
            looked_for = f" (looked for {looked})" if looked else ""
            raise _Miss(
                f"{setting}: platform gap on {self.gen.title}: {entry['gap']}{looked_for}", "", names, kind="gap"
            )
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
            attr = self.registry.attributes.get(key)
            return (attr if attr is not None and self._here([attr]) else None), key
        hits = sorted(self._here(self.registry.by_name_pattern(key)), key=lambda a: a.name)
        if len(hits) > 1:
            raise self._ambiguous(setting, f"name pattern /{key}/", hits)
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
                f"add `{setting}` to generation {self.gen.id} in {paths.editable(self.vmap.path)}, or set the attribute "
                f"under raw.{self.vmap.vendor}",
            )
        family = entry.get("processor")
        if family and self.processor and not re.search(PROCESSORS[family], self.processor):
            raise _Miss(
                f"{setting}: not on this host ({self.processor}): the {self.vmap.vendor} map has it for "
                f"{family} processors only",
                "",
                kind="gap",
            )
        values = entry.get("values") or {}
        finds = any(k in entry for k in ("attribute", "attribute_pattern", "display_name"))
        if not finds and family and "gap" not in entry and not values:
            raise _Miss(
                f"{setting}: the {self.vmap.vendor} map ({self.gen.title}) has it for {family} processors only, and "
                f"this host's processor is {self.processor or 'not stated by its BMC'}",
                f"set the attribute under raw.{self.vmap.vendor}, or add its mapping to generation {self.gen.id} "
                f"in {paths.editable(self.vmap.path)}",
            )
        if not finds and "gap" in entry and not values:
            raise _Miss(f"{setting}: platform gap on {self.gen.title}: {entry['gap']}", "", kind="gap")
        target = values.get(value) if value in values else None
        names_hint = self._names(setting, entry, target)
        if value not in values:
            raise _Miss(
                f"{setting}={_fmt(value)}: the {self.vmap.vendor} map ({self.gen.title}) has no value for "
                f"it (mapped: {', '.join(_fmt(k) for k in values)})",
                f"add it under settings.{setting}.values in {paths.editable(self.vmap.path)}",
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
        attrs, how, by_display = self.find(setting, entry)
        candidates = target if isinstance(target, list) else [target]
        return [
            Desired(a.name, _pick(candidates, a, setting, value), setting, how, src, by_display_name=by_display)
            for a in attrs
        ]


def translate(
    settings: dict[str, Any],
    raw: dict[str, Any],
    vmap: VendorMap,
    registry: Registry,
    host: str = "",
    optional=(),
    system_model: str = "",
    present: Iterable[str] | dict[str, Any] | None = None,
    processor: str = "",
) -> list[Desired]:
    """Abstract settings (+ raw vendor attributes) -> the vendor attribute values wanted on this BMC.

    A setting's value may be a list: a preference list, the first value this platform offers wins. Only attributes in ``present``
    (the host's Bios attributes, when given) are chosen; given its current values (a mapping), the vendor preset
    is added only when some other value changes. Settings in
    ``optional`` are skipped (status "skipped") where the platform lacks them. A documented platform gap gives a
    status "gap" item, and so does a setting the map has for another processor family than ``processor`` (the
    System's ProcessorSummary.Model, "" when unknown) names. Every other problem is collected and raised at once."""
    gen = vmap.generation(registry, system_model, processor)
    t = _Translation(_Resolver(vmap, gen, registry, present, processor), dict(raw or {}), set(optional))
    for setting, value in settings.items():
        t.setting(setting, value)
    t.add_raw()
    if t.errors:
        where = f"{host} ({gen.title}, {vmap.path})" if host else vmap.path
        raise VendorMapError(
            "profile cannot be mapped to this BMC's attributes:\n    " + "\n    ".join(t.errors),
            where,
            "; ".join(f for f in dict.fromkeys(t.fixes) if f),
        )
    # the host's current values as ValueNames, read once for the locked values and the presets (None: not given)
    now = registry.value_names(present) if isinstance(present, dict) else None
    locked = _locked_gaps(t.out, registry, now)
    for d in locked:
        del t.out[d.attribute]
    return (
        _presets(gen, vmap, registry, t.out, now)
        + list(t.out.values())
        + [n for n in t.notes if n.status in ("gap", "skipped")]
        + locked
    )


def _presets(
    gen: Generation, vmap: VendorMap, registry: Registry, out: dict[str, Desired], now: dict[str, Any] | None
) -> list[Desired]:
    """The generation's presets to write, in order, each set to the value that frees what it locks: only when
    another value changes (issue 41 item 7: on a host where nothing else changes, writing it costs a reboot for
    nothing; without the current values, ``now`` None, it is kept), and an ``only_when_locking`` one only when its
    current value locks or forces a value the plan changes (HPE's AMDPerformanceWorkloadProfile: issue 41 item 8)."""
    wanted = {n: _want(registry, n, d.value) for n, d in out.items()}
    changed = {n for n, v in wanted.items() if now is None or n not in now or now[n] != v}
    if not gen.presets or (now is not None and not changed):
        return []
    now = now or {}
    pre: list[Desired] = []
    for preset in gen.presets:
        if now and _locked(registry, preset["attribute"], now):
            continue  # a preset this host locks itself is never added (issue 41: the R750 with DPUs)
        state = {**now, **{d.attribute: _want(registry, d.attribute, d.value) for d in pre}, **wanted}
        if preset.get("only_when_locking") and not locks_a_change(preset, registry, state, wanted, changed):
            continue
        got = preset_value(preset, registry, {**out, **{d.attribute: d for d in pre}})
        if got:
            pre.append(Desired(*got[:4], vmap.source_text(preset["source"]), unverified=got[4]))
    return pre


def _want(registry: Registry, name: str, value):
    attr = registry.attributes.get(name)
    return attr.value_name(value) if attr is not None else value


def _locked(registry: Registry, name: str, current: dict[str, Any]) -> bool:
    """The registry marks ``name`` ReadOnly and no dependency of it explains that in the current state (so none
    can lift it: iDRAC's R750 capture with DPUs marks 598 of its 687 attributes so), or every dependency that
    makes it read-only there hangs on attributes that are themselves locked."""
    attr = registry.attributes.get(name)
    if attr is None or not attr.read_only:
        return False
    blockers = registry.blocking(name, current)
    if not blockers:
        return True
    froms = {c.get("MapFromAttribute") for b in blockers for c in b.conditions} - {name}
    return all(
        isinstance(f, str)
        and (a := registry.attributes.get(f)) is not None
        and a.read_only
        and not registry.blocking(f, current)
        for f in froms
    )


def _locked_gaps(out: dict[str, Desired], registry: Registry, now: dict[str, Any] | None) -> list[Desired]:
    """The values this host cannot take (issue 41): an attribute whose value differs from the profile's and
    that is locked (``_locked``) is a gap naming it -- shown, never written. Without the current values (``now``
    None) nothing is judged here; the plan's validation still refuses a read-only attribute it would write."""
    if now is None:
        return []
    gaps = []
    for name, d in out.items():
        if d.status != "set" or d.setting == "raw":
            continue
        want = _want(registry, name, d.value)
        if name in now and now[name] != want and _locked(registry, name, now):
            why = (
                f"read-only on this host: {name} is {now[name]!r} and the registry marks it ReadOnly with no "
                f"dependency this plan can lift (the profile wants {want!r})"
            )
            gaps.append(Desired(name, None, d.setting, why, d.source, status="gap"))
    return gaps


class _Translation:
    """One translate(): the attribute values chosen so far (``out``), the notes (gaps, skipped settings, raw
    values that superseded a failing setting) and the problems, all raised together at the end."""

    def __init__(self, res: _Resolver, raw: dict[str, Any], optional: set):
        self.res, self.gen, self.raw, self.optional = res, res.gen, raw, optional
        self.out: dict[str, Desired] = {}
        self.notes: list[Desired] = []
        self.errors: list[str] = []
        self.fixes: list[str] = []

    def setting(self, setting: str, value) -> None:
        """One abstract setting: its preference list tried in order, the first value the platform offers kept."""
        prefs = value if isinstance(value, list) else [value]
        passed: list[str] = []
        last: _Miss | None = None
        for v in prefs:
            try:
                chosen = self.res.one(setting, v)
            except _Miss as miss:
                last = miss
                if miss.kind in ("gap", "absent", "ambiguous"):
                    break  # the platform lacks the setting (or names it twice): no other value can help
                passed.append(f"{_fmt(v)}: {miss.what.split(': ', 1)[-1]}")
                continue
            self._keep(setting, chosen, prefs, v, passed)
            return
        assert last is not None
        self._missed(setting, last, prefs, passed)

    def _keep(self, setting: str, chosen: list[Desired], prefs: list, v, passed: list[str]) -> None:
        entry = self.gen.settings.get(setting) or {}
        for d in chosen:
            why = self._mark(entry, d, v)
            if why:
                d.resolved += f"; {UNVERIFIED}: {why}"
                d.unverified = why
            if len(prefs) > 1:
                d.resolved += f"; preference {' > '.join(map(_fmt, prefs))}: chose {_fmt(v)}" + (
                    f" ({'; '.join(passed)})" if passed else " (first choice)"
                )
            prev = self.out.get(d.attribute)
            if prev is not None and prev.value != d.value:
                self.errors.append(
                    f"{prev.setting} and {d.setting} both set {d.attribute} ({prev.value!r} vs {d.value!r})"
                )
                self.fixes.append("drop one of the two settings from the profile")
            self.out[d.attribute] = d

    def _mark(self, entry: dict, d: Desired, v) -> str:
        """Why no public source shows the value ``d`` writes (the entry's mark on that value: on the ValueName
        written, or on the map's candidate that chose it), "" when it is not marked (issue 41 item 9)."""
        marks = entry.get("unverified")
        if not marks:
            return ""
        target = (entry.get("values") or {}).get(v)
        if isinstance(target, dict):
            target = [
                x for k, x in target.items() if k == d.attribute or (k.startswith("^") and re.search(k, d.attribute))
            ]
        attr = self.res.registry.attributes.get(d.attribute)
        cands = [
            c for c in (target if isinstance(target, list) else [target]) for c in (c if isinstance(c, list) else [c])
        ]
        chose = [c for c in cands if attr is not None and attr.value_name(c) == attr.value_name(d.value)]
        return mark_of(marks, d.value, *chose)

    def _superseded(self, setting: str, miss: _Miss) -> bool:
        """A raw value on an attribute the failing setting concerns supersedes it (noted on the raw item)."""
        hit = sorted(set(miss.attrs) & set(self.raw))
        for a in hit:
            self.notes.append(
                Desired(
                    a,
                    self.raw[a],
                    "raw",
                    f"raw, supersedes {setting} (its mapping failed: {miss.what})",
                    "profile raw:",
                    status="raw",
                )
            )
        return bool(hit)

    def _missed(self, setting: str, last: _Miss, prefs: list, passed: list[str]) -> None:
        if self._superseded(setting, last):
            return
        entry = self.gen.settings.get(setting) or {}
        if last.kind == "ambiguous" and "gap" in entry:
            # a map whose entries say where they find nothing is a gap (the generic map): an ambiguous DisplayName
            # there is refused for this setting -- shown, never one of them picked, never written
            last = _Miss(f"{setting}: refused, ambiguous: {last.what.split(': ', 1)[-1]} ({last.fix})", "", kind="gap")
        if last.kind == "gap":
            status = "skipped" if setting in self.optional else "gap"
            source = self.res._src(entry, "gap_source", "source")
            self.notes.append(Desired("-", None, setting, last.what.split(": ", 1)[-1], source, status=status))
        elif last.kind == "absent" and setting in self.optional:
            self.notes.append(
                Desired("-", None, setting, f"optional, skipped: {last.what.split(': ', 1)[-1]}", "", status="skipped")
            )
        else:
            if len(prefs) > 1 and passed:
                self.errors.append(f"{setting}: no preferred value is available ({'; '.join(passed)})")
            else:
                self.errors.append(last.what)
            self.fixes.append(last.fix)

    def add_raw(self) -> None:
        """The profile's raw attributes, over any mapped setting on the same attribute."""
        for aname, aval in self.raw.items():
            note = "raw (profile escape hatch)"
            if aname in self.out:
                note += f", supersedes {self.out[aname].setting}"
            self.out[aname] = Desired(aname, aval, "raw", note, "profile raw:")
        for n in self.notes:  # a raw attribute that superseded a setting: say so on the raw item
            if n.status == "raw" and n.attribute in self.out:
                self.out[n.attribute].resolved = n.resolved
