"""Issue 26: every vendor-map entry's name and values are shown by a source it cites, for its generation, or the
entry says `unverified: why`. Each map's `sources:` record what each source shows per generation (`shows:`
AttributeName -> values seen; `labels:` setup label or DisplayName -> values seen); this test derives, entry by
entry, what no cited source shows and holds the `unverified` mark to it both ways: an entry cannot lose the mark
while something is unshown, nor keep it once its sources show everything. Refusals (`{unsupported: ...}`) write
nothing and are not values; documented gaps are claims of absence, not checked here. Pure: no BMC."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.presets import ids
from numaforge.bios.profile import VENDORS
from numaforge.bios.vendors import default_vendors_dir, load_vendor_map

MAPS = Path(__file__).resolve().parents[2] / "bios" / "vendors"


def _facts(vm, sids, gen: str, kind: str) -> dict[str, list[str]]:
    """name -> values shown for generation `gen` by the sources `sids` (kind: shows | labels)."""
    out: dict[str, list[str]] = {}
    for sid in ids(sids):
        for name, values in ((vm.sources.get(sid) or {}).get(kind) or {}).get(gen, {}).items():
            out.setdefault(str(name), []).extend(str(v) for v in values)
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
        if g.preset:
            yield vm, g.id, "preset", g.preset


@pytest.mark.parametrize("vendor", VENDORS)
def test_an_entry_is_marked_unverified_exactly_when_a_name_or_value_is_not_shown_by_its_sources(vendor):
    wrong = []
    for vm, gen, name, entry in _entries(vendor):
        missing = unshown_preset(vm, gen, entry) if name == "preset" else unshown(vm, gen, entry)
        marked = bool(entry.get("unverified"))
        if bool(missing) != marked:
            state = "marked unverified, but its sources show everything" if marked else f"not shown: {missing}"
            wrong.append(f"{vendor}/{gen}/{name}: {state}")
    assert not wrong, "\n".join(wrong)


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
    """The Dell 15G preset cites weka-settings, which shows SysProfile=Custom for the R6615 (16G) only."""
    vm = load_vendor_map("dell", MAPS)
    g15, g16 = vm.generations[:2]
    assert unshown_preset(vm, "15g", g15.preset) == ["preset: SysProfile=Custom"] and g15.preset["unverified"]
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
    """docs/bios-profiles.md's per-vendor table: one row per generation; "nothing" only where no entry of that
    generation is marked, "all" only where every mapped entry is."""
    lines = [line.split("|") for line in DOC.read_text().splitlines() if line.startswith("| ")]
    rows = {cells[1].strip(): cells[-2].strip() for cells in lines if len(cells) > 3}
    for g in load_vendor_map(vendor, MAPS).generations:
        cell = rows.get(f"{TITLE[vendor]} {g.id}")
        assert cell, f"no row for {TITLE[vendor]} {g.id}"
        mapped = [e for e in g.settings.values() if "values" in e] + ([g.preset] if g.preset else [])
        marked = [e for e in mapped if e.get("unverified")]
        if cell == "nothing":
            assert not marked
        if cell.startswith("all"):
            assert marked == mapped
        if 0 < len(marked) < len(mapped):
            assert cell != "nothing" and not cell.startswith("all"), cell


def test_an_empty_preset_unverified_reason_is_a_load_error(tmp_path):
    text = (MAPS / "dell.yaml").read_text()
    start = text.index('             unverified: "Custom is not in the R6515 export')
    end = text.index('"}', start)
    (tmp_path / "dell.yaml").write_text(text[:start] + "             unverified: ' '" + text[end + 1 :])
    with pytest.raises(VendorMapError) as exc:
        load_vendor_map("dell", tmp_path)
    assert "generation 15g: preset.unverified must say why no public source shows it" in exc.value.what
    assert exc.value.where.startswith(str(tmp_path / "dell.yaml") + ":")
