"""Issue 41: a board of another processor family than the one a vendor-map entry is for (its `processor:` mark),
and a value the host cannot take (a locked ReadOnly attribute), are per-setting gaps -- shown with why, never
written, never resolved to a similarly named attribute. Pure: the real captured registries and Bios values of
tests/data/captures, read from disk; no BMC. The cases come from the captures and the maps' own marks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.hoststate import processor_model
from numaforge.bios.profile import render_profile
from numaforge.bios.registry import Registry
from numaforge.bios.vendormap import PROCESSORS
from numaforge.bios.vendors import detect_vendor, load_vendor_map, translate
from numaforge.lab.bmc.mockup import load_tree

from .conftest import capture_dirs
from .helpers import facts

SHIPPED = Path(__file__).resolve().parents[2] / "bios" / "profiles"
PROFILES = sorted(p.name.removesuffix(".yaml.j2") for p in SHIPPED.glob("*.yaml.j2"))


def _capture(directory: Path) -> dict:
    """The first system with Bios attributes: its vendor, processor model, Model, Bios values and registry."""
    tree = load_tree(directory)
    for member in tree["redfish/v1/systems"].get("Members") or []:
        system = tree.get(member["@odata.id"].strip("/").lower()) or {}
        bios = tree.get(((system.get("Bios") or {}).get("@odata.id") or "").strip("/").lower()) or {}
        current = bios.get("Attributes") or {}
        if not current:
            continue
        docs = [d for d in tree.values() if isinstance((d.get("RegistryEntries") or {}).get("Attributes"), list)]
        reg = max(
            docs, key=lambda d: len({a.get("AttributeName") for a in d["RegistryEntries"]["Attributes"]} & set(current))
        )
        return {
            "name": directory.name,
            "vendor": detect_vendor(tree["redfish/v1"], system),
            "processor": processor_model(system),
            "model": str(system.get("Model") or ""),
            "current": current,
            "registry": Registry.from_json(reg),
        }
    raise AssertionError(f"{directory.name}: no system with Bios attributes")


CAPTURES = [_capture(d) for d in capture_dirs()]
# boards whose System names a processor no `processor:` family of the maps matches (Intel, ARM)
OTHER = [c for c in CAPTURES if c["processor"] and not any(re.search(rx, c["processor"]) for rx in PROCESSORS.values())]


def _translate(cap: dict, profile: str, processor: str | None = None):
    p = render_profile(profile, facts(vendor=cap["vendor"], model=cap["model"]))
    vm = load_vendor_map(cap["vendor"])
    got = translate(
        p.settings,
        {},
        vm,
        cap["registry"],
        "h",
        p.optional,
        cap["model"],
        present=cap["current"],
        processor=cap["processor"] if processor is None else processor,
    )
    return vm, got


def test_the_corpus_has_boards_of_other_processors():
    assert {c["name"] for c in OTHER} >= {"libredfish-dell-r750", "libredfish-nvidia-gh200"}, [c["name"] for c in OTHER]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("cap", OTHER, ids=lambda c: c["name"])
def test_every_setting_marked_for_another_processor_is_a_gap_not_on_this_host(cap, profile):
    vm, got = _translate(cap, profile)
    gen = vm.generation(cap["registry"], cap["model"], cap["processor"])
    marked = {s for s, e in gen.settings.items() if e.get("processor")}
    assert marked, f"{vm.vendor}/{gen.id} marks nothing processor-specific"
    by_setting: dict[str, list] = {}
    for d in got:
        by_setting.setdefault(d.setting, []).append(d)
    for setting in marked:
        [gap] = by_setting[setting]
        assert gap.status == "gap" and gap.attribute == "-" and gap.value is None, gap
        assert gap.resolved.startswith(f"not on this host ({cap['processor']})"), gap.resolved
        assert f"{gen.settings[setting]['processor']} processors only" in gap.resolved
        cited = gen.settings[setting].get("gap_source") or gen.settings[setting].get("source")
        assert vm.source_text(cited) and vm.source_text(cited) in gap.source, (setting, gap.source)
    # nothing is resolved for them: no attribute of this host is written in their name
    assert not [d for d in got if d.setting in marked and d.status == "set"]


def test_the_mark_changes_nothing_on_an_epyc_host():
    """The HPE capture is an EPYC 7763: its marked entries resolve as before (the processor named or not)."""
    [hpe] = [c for c in CAPTURES if c["vendor"] == "hpe"]
    assert re.search(PROCESSORS["AMD EPYC"], hpe["processor"])
    for profile in PROFILES:
        _, named = _translate(hpe, profile)
        _, unnamed = _translate(hpe, profile, processor="")
        assert named == unnamed and not [d for d in named if d.status == "gap" and "not on this host" in d.resolved]


def test_a_generation_for_other_processors_is_chosen_only_by_the_processor():
    """The R750 registry names no AMD model: without the System's processor no Dell generation fits (a clear
    error naming what was read); with it the Intel generation does."""
    [r750] = [c for c in CAPTURES if c["name"] == "libredfish-dell-r750"]
    vm = load_vendor_map("dell")
    with pytest.raises(VendorMapError) as ei:
        vm.generation(r750["registry"], r750["model"], "")
    assert "processor: not read" in ei.value.what and "processor /" in ei.value.fix
    assert vm.generation(r750["registry"], r750["model"], r750["processor"]).id == "intel"


def test_an_unknown_processor_family_is_a_load_error_with_file_and_line(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "bios" / "vendors" / "dell.yaml").read_text()
    old = "      llc_as_numa:\n        processor: AMD EPYC\n"
    assert old in text
    (tmp_path / "dell.yaml").write_text(text.replace(old, "      llc_as_numa:\n        processor: AMD Opteron\n", 1))
    with pytest.raises(VendorMapError) as ei:
        load_vendor_map("dell", tmp_path)
    line = text[: text.index(old)].count("\n") + 2
    assert "settings.llc_as_numa.processor 'AMD Opteron' is no known processor family" in ei.value.what
    assert ei.value.where == f"{tmp_path / 'dell.yaml'}:{line}" and "AMD EPYC" in ei.value.fix


def test_a_locked_value_is_a_gap_naming_the_attribute_and_no_preset_is_written_for_it():
    """The R750 with DPUs: its registry marks SriovGlobalEnable and SysProfile ReadOnly with no dependency that
    explains it (598 of 687 attributes): the baseline's sriov=false is a gap naming the attribute, and the
    SysProfile preset (itself locked) is not added. The R750 without DPUs: PcieAspmL1 is ReadOnly only while
    SysProfile is not Custom, so it is planned with the preset that frees it."""
    caps = {c["name"]: c for c in CAPTURES}
    _, locked = _translate(caps["libredfish-dell-r750-multi-dpu"], "epyc-baseline")
    [sriov] = [d for d in locked if d.setting == "sriov"]
    assert sriov.status == "gap" and sriov.attribute == "SriovGlobalEnable" and sriov.value is None
    assert "read-only on this host: SriovGlobalEnable is 'Enabled'" in sriov.resolved and "'Disabled'" in sriov.resolved
    assert not [d for d in locked if d.setting == "preset"]
    _, free = _translate(caps["libredfish-dell-r750"], "epyc-baseline")
    chosen = {d.attribute: d.value for d in free if d.status == "set"}
    assert chosen == {"SysProfile": "Custom", "PcieAspmL1": "Enabled", "SriovGlobalEnable": "Disabled"}
