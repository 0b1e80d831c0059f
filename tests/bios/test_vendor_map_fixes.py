"""Issue 26 item 6: vendor map entries that public captures showed wrong. Pure: the corpus registries
(numaforge/lab/bmc/registries, built from the cited facts) and small registries shaped like the captures."""

from __future__ import annotations

import pytest

from numaforge.bios.errors import BiosValidationError, VendorMapError
from numaforge.bios.plan import make_plan
from numaforge.bios.registry import Registry
from numaforge.bios.vendors import load_vendor_map, translate
from numaforge.lab.bmc import load_flavour


def _reg(name: str) -> Registry:
    return Registry.from_json(load_flavour(name).registry)


def _xcc(model: str, *attrs) -> Registry:
    """An XCC-shaped registry (names, display names and values as on NVIDIA/libredfish's XCC capture)."""
    return Registry.from_json(
        {
            "Id": "BiosAttributeRegistry.1.0.0",
            "SupportedSystems": [{"ProductName": model}],
            "RegistryEntries": {
                "Attributes": [
                    {
                        "AttributeName": n,
                        "DisplayName": d,
                        "Type": "Enumeration",
                        "Value": [{"ValueName": v} for v in vals],
                    }
                    for n, d, vals in attrs
                ]
            },
        }
    )


def test_hpe_gen10_plus_aspm_covers_the_embedded_nic_too():
    got = {
        d.attribute: d.value
        for d in translate({"pcie_aspm": "disabled"}, {}, load_vendor_map("hpe"), _reg("hpe-gen10p"))
    }
    assert got.pop("WorkloadProfile") == "Custom"  # the preset, first (issue 26 item 5)
    assert got["EmbNicAspm"] == "Disabled" and got["PciSlot1Aspm"] == "Disabled" and len(got) == 9


def test_supermicro_aspm_auto_is_never_written_for_l0s_l1():
    reg = _reg("smc-h13")  # ASPMSupport_006A: "0" Disabled, "1" Auto
    with pytest.raises(VendorMapError) as exc:
        translate({"pcie_aspm": "l0s_l1"}, {}, load_vendor_map("supermicro"), reg)
    assert "none of L0sL1 is allowed by ASPMSupport_006A" in exc.value.what
    got = translate({"pcie_aspm": ["l0s_l1", "disabled"]}, {}, load_vendor_map("supermicro"), reg)
    assert [(d.attribute, d.value) for d in got] == [("ASPMSupport_006A", "0")]  # the ValueName of "Disabled"


def test_supermicro_h12_determinism_sets_determinism_control_manual_with_the_slider():
    reg = _reg("smc-h12")
    desired = translate({"determinism": "performance"}, {}, load_vendor_map("supermicro"), reg)
    assert {d.attribute: d.value for d in desired} == {
        "DeterminismControl": "Manual",
        "DeterminismSlider": "Performance",
    }
    current = {**load_flavour("smc-h12").defaults, "DeterminismControl": "Auto", "DeterminismSlider": "Auto"}
    plan = make_plan(desired, reg, current, {}, "h")  # the slider is read-only while Control is Auto
    assert sorted(plan.changes) == ["DeterminismControl", "DeterminismSlider"]
    with pytest.raises(BiosValidationError):  # what the slider alone would have met
        make_plan([d for d in desired if d.attribute == "DeterminismSlider"], reg, current, {}, "h")


def test_lenovo_sr665_sriov_is_found_by_xccs_name_and_display_name_sriov():
    got = translate({"sriov": True}, {}, load_vendor_map("lenovo"), _reg("lenovo-sr665"))
    assert [(d.attribute, d.value) for d in got] == [
        ("OperatingModes_ChooseOperatingMode", "CustomMode"),
        ("DevicesandIOPorts_SRIOV", "Enabled"),
    ]
    assert _reg("lenovo-sr665").attributes["DevicesandIOPorts_SRIOV"].display_name == "SRIOV"


def test_lenovo_sr665_aspm_is_disabled_or_auto_and_auto_is_no_l0s_l1():
    reg = _xcc("ThinkSystem SR665", ("Power_ASPM", "ASPM", ["Disabled", "Auto"]))
    vm = load_vendor_map("lenovo")
    assert [(d.attribute, d.value) for d in translate({"pcie_aspm": "disabled"}, {}, vm, reg)] == [
        ("Power_ASPM", "Disabled")
    ]
    with pytest.raises(VendorMapError) as exc:
        translate({"pcie_aspm": "l0s_l1"}, {}, vm, reg)
    assert "Disabled/Auto only" in exc.value.what and "raw: {lenovo: {Power_ASPM: Auto}}" in exc.value.fix


def test_map_citations_name_the_documents_they_cite():
    generic = load_vendor_map("generic").sources
    assert not any("DSP0270" in s["title"] for s in generic.values())  # DSP0270 is the Host Interface spec
    assert "AttributeRegistry" in generic["dmtf-dsp8010"]["url"]
    for vendor in ("generic", "supermicro"):
        paths = [s.get("path") for s in load_vendor_map(vendor).sources.values() if s.get("repo") == "FDio/csit"]
        assert paths == ["docs/content/infrastructure/testbed_configuration/sm_zn2_hw_bios_cfg.md"], vendor
    dell = load_vendor_map("dell").path
    assert "one\n# registry id (BiosAttributeRegistry.v1_0_0) on every model" not in open(dell).read()
