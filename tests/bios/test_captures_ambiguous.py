"""Issue 41 item 8: a map entry that finds its attribute by a pattern (a DisplayName regex, the generic map's way)
and matches two or more attributes on a host is refused as ambiguous: the plan names every attribute it matched
and says how to fix it (an explicit `attribute:` entry in a vendor map), and never picks one: a vendor map's
entry fails the plan, the generic map's (whose entries say where they find nothing) is a gap row. Derived from the
corpus (tests/data/captures: each capture's registry and Bios, read from the tree as the simulator's mockup mode
serves it) and the maps: every pattern entry of every map generation that fits a capture. Pure: no BMC."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.profile import VENDORS
from numaforge.bios.vendors import load_vendor_map, translate

from .capture_trees import capture_host
from .conftest import capture_dirs


def _pattern_cases():
    """(capture, vendor, setting, what the entry matches on this host) for every pattern entry that matches two
    or more visible attributes the host's Bios has."""
    out = []
    for capture in capture_dirs():
        reg, bios = capture_host(capture)
        for vendor in VENDORS:
            vm = load_vendor_map(vendor)
            gen = next((g for by in ("registry", "model") for g in vm.generations if g.matches(reg, by)), None)
            for setting, entry in (gen.settings if gen else {}).items():
                if "display_name" not in entry or (entry.get("attribute") or "") in bios:
                    continue
                hits = [a.name for a in reg.by_display_name(entry["display_name"]) if not a.hidden and a.name in bios]
                if len(hits) > 1:
                    out.append((capture.name, vendor, setting, hits))
    return out


CASES = _pattern_cases()


def test_the_corpus_shows_the_ambiguous_patterns_of_the_issue():
    seen = {(c, s): set(h) for c, _v, s, h in CASES}
    assert seen[("libredfish-ami-dgx-viking", "sriov")] == {"SriovSupport", "SRIOVEnable"}
    assert seen[("libredfish-hpe-dl385-gen10p", "determinism")] == {"DeterminismControl", "PerformanceDeterminism"}
    assert seen[("libredfish-hpe-dl385-gen10p", "memory_interleaving")] == {
        "AmdMemoryInterleaving",
        "AmdMemoryIntlvSize",
    }


def _first_value(vendor: str, setting: str):
    gen = load_vendor_map(vendor).generations[0]
    return next(iter((gen.settings.get(setting) or {}).get("values") or {True: 0}))


@pytest.mark.parametrize(("capture", "vendor", "setting", "hits"), CASES, ids=[f"{c}-{v}-{s}" for c, v, s, _h in CASES])
def test_a_pattern_matching_several_attributes_is_refused_naming_them_all(capture, vendor, setting, hits):
    """A vendor map's entry fails the plan; the generic map's entries say where they find nothing (`gap:`), so
    there the setting is refused as a gap row (the plan goes on with the others, the capture still converges:
    tests/bios/test_captures_corpus_bmc.py). Either way every attribute is named, none is picked or written, and
    the fix names the explicit entry."""
    reg, bios = capture_host(next(c for c in capture_dirs() if c.name == capture))
    vm = load_vendor_map(vendor)
    gen = next(g for by in ("registry", "model") for g in vm.generations if g.matches(reg, by))
    for optional in ((), (setting,)):  # optional or not: ambiguity is no platform gap
        if "gap" in gen.settings[setting]:
            got = translate({setting: _first_value(vendor, setting)}, {}, vm, reg, "h", optional=optional, present=bios)
            [row] = [d for d in got if d.setting == setting]
            assert row.status in ("gap", "skipped") and row.attribute == "-" and row.value is None, row
            what = fix = row.resolved
            assert what.startswith(("refused, ambiguous", "optional, skipped")) or "ambiguous" in what, what
            assert not {d.attribute for d in got} & set(hits)
        else:
            with pytest.raises(VendorMapError) as exc:
                translate({setting: _first_value(vendor, setting)}, {}, vm, reg, "h", optional=optional, present=bios)
            what, fix = exc.value.what, exc.value.fix
            assert f"{setting} is ambiguous" in what, what
        assert all(repr(h) in what or h in what for h in hits), what
        assert "never picks one" in what, what
        assert f"attribute: <one of {', '.join(sorted(hits))}>" in fix and f"settings.{setting}" in fix, fix
        assert vm.path in fix or "bios/vendors" in fix, fix
