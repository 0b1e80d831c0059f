"""Vendor maps: abstract settings -> vendor attributes, with display-name resolution from the registry."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.profile import SETTINGS_SCHEMA, VENDORS, render_profile
from numaforge.bios.vendors import detect_vendor, load_vendor_map, translate

from .helpers import facts, registry

GPUDIRECT = render_profile("epyc-gpudirect", facts()).settings


def test_every_shipped_vendor_map_entry_cites_a_public_source_for_its_name_values_and_gaps():
    """Every entry of every generation names where its attribute name (source), its values (values_source) and
    a platform gap (gap_source) are documented; every source has a title and a url or a repository path."""
    for v in VENDORS:
        vm = load_vendor_map(v)
        for sid, src in vm.sources.items():
            assert src["title"] and (
                src.get("url", "").startswith("https://") or (src.get("repo") and src.get("path"))
            ), sid
        for g in vm.generations:
            assert set(g.settings) == set(SETTINGS_SCHEMA), f"{v}/{g.id}"
            for name, entry in g.settings.items():
                names_it = any(k in entry for k in ("attribute", "attribute_pattern", "display_name")) or (
                    entry.get("values") and "gap" not in entry
                )
                if names_it:
                    assert entry.get("source") and entry.get("values_source"), f"{v}/{g.id}/{name}"
                    assert vm.source_text(entry["source"]) and vm.source_text(entry["values_source"])
                if "gap" in entry:
                    assert vm.source_text(entry.get("gap_source") or entry["source"]), f"{v}/{g.id}/{name}"
                if entry.get("processor") and not names_it:  # only its family has it: where its absence shows
                    assert vm.source_text(entry.get("gap_source") or []), f"{v}/{g.id}/{name}"
    # two AMD generations each, and (issue 41) Dell, Lenovo and Supermicro one for their Intel boards
    assert {v: len(load_vendor_map(v).generations) for v in ("dell", "hpe", "supermicro", "lenovo")} == {
        "dell": 3,
        "hpe": 2,
        "supermicro": 3,
        "lenovo": 3,
    }


def test_hpe_values_are_hpes_own():
    gens = {g.id: g for g in load_vendor_map("hpe").generations}
    for g in gens.values():
        s = g.settings
        assert s["numa_nodes_per_socket"]["values"][4] == "FourMemoryDomainsPerSocket"
        assert s["pcie_acs"]["attribute"] == "AccessControlService"
        assert s["pcie_aspm"]["values"]["l1"] == "AspmL1Enabled"
    assert "gap" in gens["gen11"].settings["memory_interleaving"]
    assert gens["gen10p"].settings["memory_interleaving"]["attribute"] == "AmdMemoryInterleaving"


def test_dell_gpudirect_maps_to_dell_names_and_falls_back_to_display_names_where_the_name_differs():
    got = {
        d.attribute: d
        for d in translate(GPUDIRECT, {}, load_vendor_map("dell"), registry("registry-dell-like.json"), "gpu-01")
    }
    assert {k: d.value for k, d in got.items()} == {
        "NumaNodesPerSocket": "4",
        "CcxAsNumaDomain": "Disabled",
        "MemInterleave": "Disabled",
        "PcieAcsCtl": "Disabled",
        "PcieAspmL1": "Disabled",
        "IommuSupport": "Enabled",
        "SriovGlobalEnable": "Enabled",
        "DeterminismSlider": "PerfDeterminism",
    }
    assert got["MemInterleave"].resolved == (
        "MemoryInterleaving not in registry; fallback by display name: /memory interleav/ matched 'Memory Interleaving'"
        "; UNVERIFIED: Enabled and Disabled are not seen (the R6515 export shows Auto); the DisplayName fallback is a guess"
    )
    assert got["PcieAcsCtl"].resolved.startswith("by display name")
    # "4" is shown for 15G (cybozu-go/setup-hw writes it to R6525/R7525): no mark (issue 41 item 9)
    assert got["NumaNodesPerSocket"].resolved == "vendor map: exact AttributeName"
    assert not got["NumaNodesPerSocket"].unverified
    # the preference list: Dell has no L0s-only value, so ASPM L1 goes off, and the plan says why
    aspm = got["PcieAspmL1"].resolved
    assert "preference l0s > disabled: chose disabled" in aspm and "only L1 control" in aspm
    assert "ironlib" in got["NumaNodesPerSocket"].source and "cybozu-go/setup-hw" in got["NumaNodesPerSocket"].source


def test_hpe_per_slot_aspm_preference_and_two_attribute_determinism():
    got = {
        d.attribute: d
        for d in translate(GPUDIRECT, {}, load_vendor_map("hpe"), registry("registry-hpe-like-per-slot-aspm.json"))
    }
    assert got["PciSlot1Aspm"].value == got["PciSlot2Aspm"].value == got["PciSlot3Aspm"].value == "Disabled"
    assert "no L0s-only value" in got["PciSlot1Aspm"].resolved
    assert got["DeterminismControl"].value == "DeterminismCtrlManual"
    assert got["PerformanceDeterminism"].value == "PerformanceDeterministic"
    assert got["NumaMemoryDomainsPerSocket"].value == "FourMemoryDomainsPerSocket"
    assert got["AccessControlService"].value == "Disabled"
    assert got["AccessControlService"].resolved == "vendor map: exact AttributeName"


def test_preference_list_takes_the_first_value_when_the_platform_has_it():
    got = {
        d.attribute: d
        for d in translate(
            {"pcie_aspm": ["l1", "disabled"]},
            {},
            load_vendor_map("hpe"),
            registry("registry-hpe-like-per-slot-aspm.json"),
        )
    }
    assert got["PciSlot1Aspm"].value == "AspmL1Enabled" and "(first choice)" in got["PciSlot1Aspm"].resolved


def test_preference_list_with_no_available_value_lists_every_reason():
    with pytest.raises(VendorMapError) as ei:
        translate(
            {"pcie_aspm": ["l0s", "l0s_l1"]},
            {},
            load_vendor_map("hpe"),
            registry("registry-hpe-like-per-slot-aspm.json"),
            "h",
        )
    assert "pcie_aspm: no preferred value is available" in ei.value.what
    assert "l0s: HPE's slot ASPM" in ei.value.what and "l0s_l1: HPE's slot ASPM" in ei.value.what


def test_hpe_nps0_is_refused_with_a_fix():
    with pytest.raises(VendorMapError) as ei:
        translate(
            {"numa_nodes_per_socket": 0},
            {},
            load_vendor_map("hpe"),
            registry("registry-hpe-like-per-slot-aspm.json"),
            "gpu-hpe-01",
        )
    assert "numa_nodes_per_socket=0" in ei.value.what and "Auto" in ei.value.what
    assert "1, 2 or 4" in ei.value.fix and ei.value.where.startswith("gpu-hpe-01 (ProLiant Gen10 Plus")


def test_generic_display_name_ambiguity_is_refused_as_a_gap_and_a_missing_value_is_an_error():
    """The generic map's entries say where they find nothing (`gap:`): a DisplayName two attributes match is
    refused for that setting -- a gap naming both, neither picked nor written (issue 41, the AMI board's SR-IOV)
    -- while a value the one matching attribute does not allow still fails the plan."""
    reg = registry("registry-generic-two-interleaving-attributes-no-nps0.json")
    with pytest.raises(VendorMapError) as ei:
        translate(
            {"memory_interleaving": False, "numa_nodes_per_socket": 0, "pcie_acs": False},
            {},
            load_vendor_map("generic"),
            reg,
            "gpu-x",
        )
    what = ei.value.what
    assert "none of NPS0, 0 is allowed by Q4" in what and "memory interleav" not in what
    assert "raw.<vendor>" in ei.value.fix
    got = translate({"memory_interleaving": False, "pcie_acs": False}, {}, load_vendor_map("generic"), reg, "gpu-x")
    [gap] = [d for d in got if d.setting == "memory_interleaving"]
    assert gap.status == "gap" and gap.attribute == "-" and gap.value is None
    assert "refused, ambiguous: DisplayName /memory interleav/ matches 2 attributes" in gap.resolved
    assert "Q1" in gap.resolved and "Q2" in gap.resolved and "raw.generic" in gap.resolved
    assert not {d.attribute for d in got} & {"Q1", "Q2"}


def test_raw_overrides_a_mapped_attribute_and_says_so():
    got = {
        d.attribute: d
        for d in translate(
            {"sriov": True},
            {"SriovGlobalEnable": "Disabled", "AssetTag": "x"},
            load_vendor_map("dell"),
            registry("registry-dell-like.json"),
        )
    }
    assert got["SriovGlobalEnable"].value == "Disabled" and "supersedes sriov" in got["SriovGlobalEnable"].resolved
    assert got["AssetTag"].setting == "raw"


def test_raw_supersedes_a_mapped_setting_whose_mapping_fails():
    """NPS0 has no HPE value: without raw the profile fails; with a raw value for the same attribute it plans."""
    reg = registry("registry-hpe-like-per-slot-aspm.json")
    with pytest.raises(VendorMapError):
        translate({"numa_nodes_per_socket": 0, "sriov": True}, {}, load_vendor_map("hpe"), reg, "h")
    got = {
        d.attribute: d
        for d in translate(
            {"numa_nodes_per_socket": 0, "sriov": True},
            {"NumaMemoryDomainsPerSocket": "Auto"},
            load_vendor_map("hpe"),
            reg,
            "h",
        )
    }
    assert got["NumaMemoryDomainsPerSocket"].value == "Auto" and got["Sriov"].value == "Enabled"
    assert (
        "supersedes numa_nodes_per_socket (its mapping failed: numa_nodes_per_socket=0"
        in got["NumaMemoryDomainsPerSocket"].resolved
    )
    # per-slot attributes: a raw value on one slot supersedes a value HPE does not offer (no L0s)
    got = {
        d.attribute: d
        for d in translate({"pcie_aspm": "l0s"}, {"PciSlot2Aspm": "Disabled"}, load_vendor_map("hpe"), reg, "h")
    }
    assert list(got) == ["PciSlot2Aspm"] and "supersedes pcie_aspm" in got["PciSlot2Aspm"].resolved
    # an ambiguous display-name match is superseded by a raw value on one of the candidates
    amb = registry("registry-generic-two-interleaving-attributes-no-nps0.json")
    got = {
        d.attribute: d
        for d in translate({"memory_interleaving": False}, {"Q1": "Disabled"}, load_vendor_map("generic"), amb)
    }
    assert list(got) == ["Q1"] and "supersedes memory_interleaving" in got["Q1"].resolved


def test_missing_attribute_is_an_error_unless_optional_or_a_documented_gap():
    reg = registry("registry-hpe-like-per-slot-aspm.json")
    del reg.attributes["Sriov"]
    with pytest.raises(VendorMapError) as ei:
        translate({"sriov": True}, {}, load_vendor_map("hpe"), reg, "h")
    assert "sriov: no attribute Sriov in registry" in ei.value.what and "optional" in ei.value.fix
    [skipped] = translate({"sriov": True}, {}, load_vendor_map("hpe"), reg, "h", optional={"sriov"})
    assert skipped.status == "skipped" and skipped.setting == "sriov" and "optional, skipped" in skipped.resolved


def test_documented_platform_gap_is_a_gap_not_a_failure():
    gen11 = registry("registry-hpe-like-per-slot-aspm.json")
    gen11.id = "BiosAttributeRegistryA55.v1_2_68"
    gen11.doc = {"SupportedSystems": [{"ProductName": "ProLiant DL385 Gen11"}]}
    got = translate({"memory_interleaving": False, "sriov": True}, {}, load_vendor_map("hpe"), gen11, "h")
    gap = [d for d in got if d.setting == "memory_interleaving"]
    assert [d.status for d in gap] == ["gap"] and "Gen11" in gap[0].resolved and "iLO 6" in gap[0].source
    assert [
        d.status
        for d in translate(
            {"memory_interleaving": False}, {}, load_vendor_map("hpe"), gen11, optional={"memory_interleaving"}
        )
    ] == ["skipped"]


def test_generation_is_chosen_by_registry_id_or_model_and_an_unknown_one_is_a_clear_error():
    vm = load_vendor_map("hpe")
    reg = registry("registry-hpe-like-per-slot-aspm.json")
    assert vm.generation(reg).id == "gen10p"
    reg.id, reg.doc = "BiosAttributeRegistryU30.v1_0_0", {"SupportedSystems": [{"ProductName": "ProLiant DL380 Gen10"}]}
    with pytest.raises(VendorMapError) as ei:
        vm.generation(reg)
    assert "no generation of the hpe map fits registry 'BiosAttributeRegistryU30.v1_0_0'" in ei.value.what
    assert "gen10p" in ei.value.fix and "bmc.vendor: generic" in ei.value.fix


@pytest.mark.parametrize(
    "edit, what, line",  # line: (anchor text in the edited map, lines after it), so an edit above keeps it true
    [
        (
            ("display_name: 'memory interleav'", "display_name: 'memory (interleav'"),
            "not a valid regular expression",
            ("display_name: 'memory (interleav'", 0),
        ),
        (
            (
                "    values: {true: [Enabled, Auto], false: Disabled}",
                "    values: {true: [Enabled, [Auto]], false: Disabled}",
            ),
            "values.True has the wrong shape",
            ("    values: {true: [Enabled, [Auto]], false: Disabled}", 0),
        ),
        (
            (
                '        source: ironlib-r6515\n        values_source: ironlib-r6515\n        unverified: {"Enabled": &15g_memory_interleaving "Enabled and Disabled are not seen (the R6515',
                '        source: ironlib-r6515\n        unverified: {"Enabled": &15g_memory_interleaving "Enabled and Disabled are not seen (the R6515',
            ),
            "does not cite the source of its values",
            ("      memory_interleaving:\n", 1),  # the entry's first key
        ),
        (
            (
                '        source: ironlib-r6515\n        values_source: ironlib-r6515\n        unverified: {"Enabled": &15g_memory_interleaving "Enabled and Disabled are not seen (the R6515',
                '        source: no-such-doc\n        values_source: ironlib-r6515\n        unverified: {"Enabled": &15g_memory_interleaving "Enabled and Disabled are not seen (the R6515',
            ),
            "unknown source 'no-such-doc'",
            ("        source: no-such-doc", 0),
        ),
        (("  - id: 16g", "  - id: 15g"), None, None),
        (
            (
                "      llc_as_numa:\n        processor: AMD EPYC\n        attribute: CcxAsNumaDomain",
                "      llc_as_numa:\n        processor: AMD EPYC\n        atribute: CcxAsNumaDomain",
            ),
            "unknown key 'atribute'",
            ("        atribute: CcxAsNumaDomain", 0),
        ),
        (
            (
                "      iommu:\n        processor: AMD EPYC\n        attribute: IommuSupport\n        gap:",
                "      iommu:\n        processor: AMD EPYC\n        attribute: IommuSupport\n        iommu: 1\n        gap:",
            ),
            "unknown key 'iommu'",
            ("        iommu: 1", 0),
        ),
    ],
)
def test_vendor_map_mistakes_are_clear_errors_with_file_and_line(tmp_path, edit, what, line):
    from numaforge.bios.vendors import default_vendors_dir

    text = (default_vendors_dir() / "dell.yaml").read_text()
    old, new = edit
    assert old in text, old
    edited = text.replace(old, new, 1)
    (tmp_path / "dell.yaml").write_text(edited)
    if line:  # the line the error must name: where its anchor text starts in the edited map, plus an offset
        anchor, offset = line
        line = edited.count("\n", 0, edited.index(anchor)) + 1 + offset
    if what is None:  # a duplicated generation id is fine for YAML; two identical keys in a mapping are not
        (tmp_path / "dell.yaml").write_text(
            text.replace("      llc_as_numa:", "      sriov: {}\n      llc_as_numa:", 1)
        )
        what, line = "duplicate key 'sriov'", None
    with pytest.raises(VendorMapError) as ei:
        load_vendor_map("dell", tmp_path)
    assert what in ei.value.what, ei.value.what
    if line:
        assert ei.value.where == f"{tmp_path / 'dell.yaml'}:{line}"
    else:
        assert ei.value.where.startswith(f"{tmp_path / 'dell.yaml'}:")


@pytest.mark.parametrize(
    "root, system, want",
    [
        ({"Vendor": "Dell"}, {}, "dell"),
        ({"Oem": {"Hpe": {}}}, {}, "hpe"),
        ({}, {"Manufacturer": "Supermicro"}, "supermicro"),
        ({"Vendor": "Lenovo"}, {}, "lenovo"),
        ({"Vendor": "Contoso"}, {"Manufacturer": "Contoso"}, "generic"),
    ],
)
def test_detect_vendor(root, system, want):
    assert detect_vendor(root, system) == want
