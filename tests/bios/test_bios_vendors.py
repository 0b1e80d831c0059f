"""Vendor maps: abstract settings -> vendor attributes, with display-name resolution from the registry."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import VendorMapError
from numaforge.bios.profile import VENDORS, render_profile
from numaforge.bios.vendors import detect_vendor, load_vendor_map, translate

from .helpers import facts, registry

GPUDIRECT = render_profile("epyc-gpudirect", facts()).settings


def test_every_shipped_vendor_map_loads_and_documents_every_source():
    for v in VENDORS:
        vm = load_vendor_map(v)
        assert set(vm.settings) == {"numa_nodes_per_socket", "llc_as_numa", "memory_interleaving", "pcie_acs",
                                    "pcie_aspm", "iommu", "sriov", "determinism"}
        for name in vm.settings:
            assert vm.source_text(name), f"{v}: {name} has no source"


def test_dell_gpudirect_maps_to_dell_names_and_resolves_acs_and_interleaving_by_display_name():
    got = {d.attribute: d for d in translate(GPUDIRECT, {}, load_vendor_map("dell"), registry("registry-dell-like.json"),
                                             "gpu-01")}
    assert {k: d.value for k, d in got.items()} == {
        "NumaNodesPerSocket": "4", "CcxAsNumaDomain": "Disabled", "MemInterleave": "Disabled",
        "PcieAcsCtl": "Disabled", "PcieAspmL1": "Disabled", "IommuSupport": "Enabled",
        "SriovGlobalEnable": "Enabled", "DeterminismSlider": "PerfDeterminism"}
    assert got["MemInterleave"].resolved == "by display name: /memory interleav/ matched 'Memory Interleaving'"
    assert got["PcieAcsCtl"].resolved.startswith("by display name")
    assert got["NumaNodesPerSocket"].resolved == "vendor map"


def test_hpe_per_slot_aspm_and_two_attribute_determinism():
    got = {d.attribute: d.value for d in translate(GPUDIRECT, {}, load_vendor_map("hpe"),
                                                   registry("registry-hpe-like-per-slot-aspm.json"))}
    assert got["PciSlot1Aspm"] == got["PciSlot2Aspm"] == got["PciSlot3Aspm"] == "L0s"
    assert got["DeterminismControl"] == "Manual" and got["PerformanceDeterminism"] == "PerformanceDeterministic"
    assert got["NumaMemoryDomainsPerSocket"] == "FourMemoryDomains"


def test_hpe_nps0_is_refused_with_a_fix():
    with pytest.raises(VendorMapError) as ei:
        translate({"numa_nodes_per_socket": 0}, {}, load_vendor_map("hpe"),
                  registry("registry-hpe-like-per-slot-aspm.json"), "gpu-hpe-01")
    assert "numa_nodes_per_socket=0" in ei.value.what and "Auto" in ei.value.what
    assert "1, 2 or 4" in ei.value.fix and ei.value.where == "gpu-hpe-01"


def test_generic_display_name_ambiguity_and_missing_value_are_reported_together():
    with pytest.raises(VendorMapError) as ei:
        translate({"memory_interleaving": False, "numa_nodes_per_socket": 0, "pcie_acs": False}, {},
                  load_vendor_map("generic"), registry("registry-generic-two-interleaving-attributes-no-nps0.json"),
                  "gpu-x")
    what = ei.value.what
    assert "2 attributes have a DisplayName matching /memory interleav/" in what and "Q1" in what and "Q2" in what
    assert "none of NPS0, 0 is allowed by Q4" in what or "NPS0" in what
    assert "raw.generic" in ei.value.fix


def test_raw_overrides_a_mapped_attribute_and_says_so():
    got = {d.attribute: d for d in translate({"sriov": True}, {"SriovGlobalEnable": "Disabled", "AssetTag": "x"},
                                             load_vendor_map("dell"), registry("registry-dell-like.json"))}
    assert got["SriovGlobalEnable"].value == "Disabled" and "overrides sriov" in got["SriovGlobalEnable"].resolved
    assert got["AssetTag"].setting == "raw"


def test_mapped_attribute_missing_from_registry_is_an_error():
    with pytest.raises(VendorMapError) as ei:
        translate({"sriov": True}, {}, load_vendor_map("lenovo"), registry("registry-dell-like.json"), "h")
    assert "SRIOV is not in this BMC's registry" in ei.value.what


@pytest.mark.parametrize("root, system, want", [
    ({"Vendor": "Dell"}, {}, "dell"),
    ({"Oem": {"Hpe": {}}}, {}, "hpe"),
    ({}, {"Manufacturer": "Supermicro"}, "supermicro"),
    ({"Vendor": "Lenovo"}, {}, "lenovo"),
    ({"Vendor": "Contoso"}, {"Manufacturer": "Contoso"}, "generic"),
])
def test_detect_vendor(root, system, want):
    assert detect_vendor(root, system) == want
