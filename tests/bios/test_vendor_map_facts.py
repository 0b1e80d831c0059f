"""Issue 26, issue 41 item 9: every vendor-map value is shown by a source its entry cites, for its generation, or
the entry marks that value `unverified: {value: why}`. Each map's `sources:` record what each source shows per
generation (`shows:` AttributeName -> values seen; `labels:` setup label or DisplayName -> values seen; a
`capture:` source is a captured tree in tests/data/captures, whose registry shows its names and allowed values for
the generations it names); this test derives, value by value, what no cited source shows and holds the marks to it
both ways: a value cannot lose its mark while it is unshown, nor keep it once a source shows it. A mark sits on a
value (never on a whole entry), and no marked value is one a capture in the repo shows, cited or not. Refusals
(`{unsupported: ...}`) write nothing and are not values; documented gaps are claims of absence, not checked here.
Pure: no BMC."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.presets import entry_values, ids
from numaforge.bios.profile import VENDORS
from numaforge.bios.vendors import default_vendors_dir, detect_vendor, load_vendor_map
from numaforge.lab.bmc.mockup import load_tree

from .capture_trees import capture_registry
from .conftest import capture_dirs

MAPS = Path(__file__).resolve().parents[2] / "bios" / "vendors"


def captured(name: str, kind: str) -> dict[str, list[str]]:
    """What a capture's registry shows: AttributeName (kind shows) or DisplayName (kind labels) -> the
    ValueNames and ValueDisplayNames it allows."""
    out: dict[str, list[str]] = {}
    for a in capture_registry(name).attributes.values():
        if a.values:
            key = a.name if kind == "shows" else a.display_name
            out.setdefault(key, []).extend([*a.values, *(d for d in a.value_display.values() if d)])
    return out


def _facts(vm, sids, gen: str, kind: str) -> dict[str, list[str]]:
    """name -> values shown for generation `gen` by the sources `sids` (kind: shows | labels)."""
    out: dict[str, list[str]] = {}
    for sid in ids(sids):
        src = vm.sources.get(sid) or {}
        for name, values in (src.get(kind) or {}).get(gen, {}).items():
            out.setdefault(str(name), []).extend(str(v) for v in values)
        cap = src.get("capture") or {}
        if gen in (cap.get("generations") or []):
            for name, values in captured(cap["name"], kind).items():
                out.setdefault(name, []).extend(values)
    return out


def _matching(key: str, names, how: str) -> list[str]:
    """The recorded names `key` finds: exact (attribute), regex (attribute_pattern, `^` keys) or label
    (display_name: a case-insensitive regex on a setup label / DisplayName)."""
    if how == "label":
        return [n for n in names if re.search(key, n, re.I)]
    if how == "regex":
        return [n for n in names if re.search(key, n)]
    return [n for n in names if n == key]


def unshown(vm, gen: str, entry: dict) -> list[str]:
    """What of this entry (its attribute name and each vendor value it may write) no source it cites shows for
    generation `gen`: [] when everything is shown."""
    kind, how, key = "shows", "exact", entry.get("attribute")
    if not key and entry.get("attribute_pattern"):
        how, key = "regex", entry["attribute_pattern"]
    if not key and entry.get("display_name"):
        kind, how, key = "labels", "label", entry["display_name"]
    names, vals = _facts(vm, entry.get("source"), gen, kind), _facts(vm, entry.get("values_source"), gen, kind)
    missing: list[str] = []
    if key and not _matching(key, names, how):
        missing.append(f"name {key}")
    for a, v in (entry.get("values") or {}).items():
        if isinstance(v, dict) and "unsupported" in v:
            continue
        abstract = str(a).lower() if isinstance(a, bool) else a  # as a profile writes it
        if isinstance(v, dict):  # several attributes: {AttributeName or ^regex: value}
            names_, vals_ = (
                _facts(vm, entry.get("source"), gen, "shows"),
                _facts(vm, entry.get("values_source"), gen, "shows"),
            )
            for attr, value in v.items():
                h = "regex" if attr.startswith("^") else "exact"
                if not _matching(attr, names_, h):
                    missing.append(f"name {attr}")
                if str(value) not in [x for n in _matching(attr, vals_, h) for x in vals_[n]]:
                    missing.append(f"{abstract}: {attr}={value}")
            continue
        seen = [x for n in _matching(key, vals, how) for x in vals[n]] if key else []
        for value in v if isinstance(v, list) else [v]:
            if str(value) not in seen:
                missing.append(f"{abstract}: {key}={value}")
    return sorted(set(missing))


def unshown_preset(vm, gen: str, preset: dict) -> list[str]:
    facts = _facts(vm, preset.get("source"), gen, "shows")
    if preset["attribute"] not in facts:
        return [f"name {preset['attribute']}"]
    return [
        f"preset: {preset['attribute']}={v}" for v in ids(preset["values"]) if str(v) not in facts[preset["attribute"]]
    ]


def _entries(vendor: str):
    vm = load_vendor_map(vendor, MAPS)
    for g in vm.generations:
        for name, entry in g.settings.items():
            if "values" in entry or any(k in entry for k in ("attribute", "attribute_pattern", "display_name")):
                yield vm, g.id, name, entry
        for preset in g.presets:
            yield vm, g.id, "preset", preset


def unshown_values(vm, gen: str, name: str, entry: dict) -> set[str]:
    """The vendor values of an entry (or preset) that no source it cites shows for `gen`: every value when its
    name is not shown."""
    missing = unshown_preset(vm, gen, entry) if name == "preset" else unshown(vm, gen, entry)
    values = ids(entry["values"]) if name == "preset" else entry.get("values") or {}
    if any(m.startswith("name ") for m in missing):
        return set(entry_values(values))
    return {m.rsplit("=", 1)[1] for m in missing}


def marked(entry: dict) -> set[str]:
    return {str(k).lower() if isinstance(k, bool) else str(k) for k in entry.get("unverified") or {}}


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_value_is_marked_unverified_exactly_when_its_sources_do_not_show_it(vendor):
    wrong = []
    for vm, gen, name, entry in _entries(vendor):
        unseen, marks = unshown_values(vm, gen, name, entry), marked(entry)
        if unseen != marks:
            wrong.append(
                f"{vendor}/{gen}/{name}: not shown but unmarked {sorted(unseen - marks)}; "
                f"marked but shown {sorted(marks - unseen)}"
            )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_mark_sits_on_a_value_the_entry_writes(vendor):
    """Marks name values (issue 41 item 9): `unverified:` maps values of the entry to reasons."""
    for _vm, gen, name, entry in _entries(vendor):
        marks = entry.get("unverified")
        if marks is None:
            continue
        values = ids(entry["values"]) if name == "preset" else entry.get("values") or {}
        assert isinstance(marks, dict) and marks, (gen, name)
        assert marked(entry) <= set(entry_values(values)), (gen, name, sorted(marked(entry)))
        assert all(isinstance(w, str) and w.strip() for w in marks.values()), (gen, name)


def _capture_sources():
    """(vendor, source id, capture name, generations) of every map source that is a capture."""
    return [
        (v, sid, src["capture"]["name"], src["capture"]["generations"])
        for v in VENDORS
        for sid, src in load_vendor_map(v, MAPS).sources.items()
        if src.get("capture")
    ]


def _vendor_of(capture) -> str:
    tree = load_tree(capture)
    systems = [d for d in tree.values() if str(d.get("@odata.type", "")).startswith("#ComputerSystem.")]
    return detect_vendor(tree.get("redfish/v1") or {}, systems[0] if systems else None)


def test_every_capture_of_a_mapped_vendor_is_a_source_of_its_map():
    """The corpus is accounted for: each capture whose BMC a vendor map covers is recorded in that map, with the
    generations its registry shows (none for another platform's naming), so the checks here read it."""
    named = {(v, c) for v, _sid, c, _g in _capture_sources()}
    for capture in capture_dirs():
        vendor = _vendor_of(capture)
        if vendor != "generic":
            assert (vendor, capture.name) in named, f"{capture.name} ({vendor}) is no source of the {vendor} map"
    assert {c for _v, c in named} <= {c.name for c in capture_dirs()}


def test_no_marked_value_is_one_a_capture_in_the_repo_shows():
    """Cited by the entry or not: a value a capture's registry allows for the entry's attribute, for a generation
    the capture shows, carries no mark (the Dell 15G SR-IOV mark said Disabled was not seen; the R750 registry
    lists it)."""
    wrong = []
    for vendor, _sid, cap, gens in _capture_sources():
        shows, labels = captured(cap, "shows"), captured(cap, "labels")
        for _vm, gen, name, entry in _entries(vendor):
            if gen not in gens or not entry.get("unverified"):
                continue
            if name == "preset":
                keys = [(entry["attribute"], "exact", shows)]
            else:
                keys = [
                    (entry[k], h, f)
                    for k, h, f in (
                        ("attribute", "exact", shows),
                        ("attribute_pattern", "regex", shows),
                        ("display_name", "label", labels),
                    )
                    if entry.get(k)
                ]
                for v in (entry.get("values") or {}).values():
                    if isinstance(v, dict) and "unsupported" not in v:
                        keys += [(a, "regex" if a.startswith("^") else "exact", shows) for a in v]
            seen = {x for key, how, facts in keys for n in _matching(key, facts, how) for x in facts[n]}
            if marked(entry) & seen:
                wrong.append(f"{vendor}/{gen}/{name}: {cap} shows {sorted(marked(entry) & seen)}")
    assert not wrong, "\n".join(wrong)


def test_the_dell_15g_marks_the_sources_contradict_are_gone():
    """Issue 41 item 9: cybozu-go/setup-hw writes NumaNodesPerSocket 0, 1, 2 and 4 to R6525/R7525; the R750
    registry (iDRAC9 15G) lists SriovGlobalEnable Disabled."""
    g15 = load_vendor_map("dell", MAPS).generations[0]
    assert g15.id == "15g"
    assert not marked(g15.settings["numa_nodes_per_socket"]) and not marked(g15.settings["sriov"])


def test_the_check_finds_a_value_its_sources_do_not_show(tmp_path):
    """HPE gen11's ProcAmdIoVt values are shown by the iLO 6 resource definitions; drop Disabled from what that
    source records and the check names it (and the map, unmarked, would fail the test above)."""
    text = (MAPS / "hpe.yaml").read_text()
    old = "ProcAmdIoVt: [Enabled, Disabled]"
    assert text.count(old) == 2  # gen10p (A42 registry) and gen11 (iLO 6 definitions)
    (tmp_path / "hpe.yaml").write_text(text.replace(old, "ProcAmdIoVt: [Enabled]"))
    vm = load_vendor_map("hpe", tmp_path)
    gen11 = next(g for g in vm.generations if g.id == "gen11")
    assert unshown(vm, "gen11", gen11.settings["iommu"]) == ["false: ProcAmdIoVt=Disabled"]
    assert unshown(vm, "gen11", gen11.settings["sriov"]) == []


def test_a_value_shown_for_another_generation_does_not_count():
    """The Dell 16G ProcVirtualization... : weka-settings shows SysProfile=Custom for the R6615 (16G) only, and
    the R750 capture is recorded for 15G (and the intel generation): the 15G preset's Custom is shown by the capture,
    not by weka."""
    vm = load_vendor_map("dell", MAPS)
    g15, g16 = vm.generations[:2]
    only_weka = {**g15.preset, "source": ["weka-settings"]}
    assert unshown_preset(vm, "15g", only_weka) == ["name SysProfile"]  # weka shows it for the 16G only
    assert unshown_preset(vm, "15g", g15.preset) == [] and "unverified" not in g15.preset
    assert unshown_preset(vm, "16g", g16.preset) == [] and "unverified" not in g16.preset


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        ("    shows:\n      nogen: {X: [a]}\n", "names unknown generation 'nogen'"),
        ("    shows:\n      gen11: {X: a}\n", "must map each name to the list of values the source shows"),
        ("    labels: [a]\n", "must map generation ids to names and values"),
    ],
)
def test_recorded_facts_of_the_wrong_shape_are_load_errors(tmp_path, bad, what):
    text = (default_vendors_dir() / "hpe.yaml").read_text()
    anchor = "    path: docs/redfishServices/ilos/ilo6/ilo6_170/ilo6_bios_resourcedefns170.md\n"
    body = text.split(anchor)
    assert len(body) == 2
    # replace that source's recorded facts with the bad ones
    rest = body[1].split("  weka-defaults:", 1)
    (tmp_path / "hpe.yaml").write_text(body[0] + anchor + bad + "  weka-defaults:" + rest[1])
    with pytest.raises(VendorMapError) as exc:
        load_vendor_map("hpe", tmp_path)
    assert what in exc.value.what and "hpe-ilo6-bios" in exc.value.what
    assert exc.value.where.startswith(str(tmp_path / "hpe.yaml") + ":")


DOC = Path(__file__).resolve().parents[2] / "docs" / "bios-profiles.md"
TITLE = {"hpe": "HPE", "dell": "Dell", "supermicro": "Supermicro", "lenovo": "Lenovo", "generic": "generic"}


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_docs_table_has_a_row_per_generation_true_to_the_marks(vendor):
    """docs/bios-profiles.md's per-vendor table: one row per generation, naming the captures; its last column
    counts the values the generation may write and the marked ones: "nothing", "all N values" or "M of N
    values", true to the map; every value it lists as marked is marked."""
    lines = [line.split("|") for line in DOC.read_text().splitlines() if line.startswith("| ")]
    rows = {cells[1].strip(): cells for cells in lines if len(cells) == 7}
    for g in load_vendor_map(vendor, MAPS).generations:
        cells = rows.get(f"{TITLE[vendor]} {g.id}")
        assert cells, f"no row for {TITLE[vendor]} {g.id}"
        cell = cells[-2].strip()
        entries = [(n, e) for n, e in g.settings.items() if "values" in e] + [("preset", p) for p in g.presets]
        total = sum(len(entry_values(ids(e["values"]) if n == "preset" else e["values"])) for n, e in entries)
        marks = sum(len(marked(e)) for _n, e in entries)
        if marks == 0:
            assert cell == "nothing", cell
        elif marks == total:
            assert cell.startswith(f"all {total} values"), cell
        else:
            assert cell.startswith(f"{marks} of {total} values"), cell
        captures = cells[-3]
        for _v, _sid, cap, gens in _capture_sources():
            if _v == vendor and g.id in gens:
                assert cap in captures, (g.id, cap)


@pytest.mark.parametrize(
    ("mark", "what"),
    [
        ("unverified: 'a whole entry'", "must map each value no public source shows to why (marks sit on values)"),
        ("unverified: {Enabled: ' '}", "unverified.Enabled must say why no public source shows it"),
        ("unverified: {Maybe: 'guess'}", "unverified names 'Maybe', which is no value of this entry"),
    ],
)
def test_a_mark_that_does_not_sit_on_a_value_is_a_load_error(tmp_path, mark, what):
    text = (MAPS / "hpe.yaml").read_text()
    old = "        values: {true: Enabled, false: Disabled}\n        source: hpe-ilo6-bios\n"
    assert text.count(old) == 1  # gen11 iommu, unmarked
    (tmp_path / "hpe.yaml").write_text(text.replace(old, old + f"        {mark}\n", 1))
    with pytest.raises(VendorMapError) as exc:
        load_vendor_map("hpe", tmp_path)
    assert what in exc.value.what and "generation gen11: settings.iommu" in exc.value.what
    assert exc.value.where.startswith(str(tmp_path / "hpe.yaml") + ":") and "values: Enabled, Disabled" in exc.value.fix
