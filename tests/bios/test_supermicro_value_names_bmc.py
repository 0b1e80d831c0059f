"""Issue 26 item 2 (part): a Supermicro's registry ValueNames are codes ("0"/"1") while its Bios shows display
strings ("Enabled"), as on NVIDIA/libredfish's Supermicro capture (tests/mockups/supermicro). Plans compare and
write in the registry's ValueName space: a compliant host plans 0 changes, and `raw: Enabled` is written as its
ValueName. The smc-h13 simulator flavour answers in that shape (its PATCH takes ValueNames only). Real HTTPS
simulators on 127.0.0.1, DMTF's `redfish` library as the client; nothing mocked."""

from __future__ import annotations

import dataclasses
import time

import pytest

from numaforge.bios.apply import apply_host, plan_host, verify_host
from numaforge.lab.bmc import load_flavour

from .test_bios_apply_bmc import _bmc_password, admin_session, host_for, opts, run, sim_factory  # noqa: F401

pytestmark = pytest.mark.bmc


def _reset_and_wait(sim) -> None:
    sim.state.reset("ForceRestart")                      # the host boots: pending values become current
    deadline = time.monotonic() + 10
    while (sim.power_state() != "On" or sim.bios_pending()) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_compliant_host_shown_in_display_strings_plans_zero_changes(sim_factory):
    sim = sim_factory("smc-h13")
    h = host_for(sim)
    first = run(apply_host, h)
    assert first.status == "changed", first.message
    assert sim.bios_pending()["SR_IOVSupport_0067"] == "1"          # written as the registry's ValueName
    _reset_and_wait(sim)
    shown = admin_session(sim).get(sim.url + sim.bios_path).json()["Attributes"]
    assert shown["SR_IOVSupport_0067"] == "Enabled" and shown["NUMANodesPerSocket_703E"] == "NPS4"

    sim.reset_counts()
    again = run(plan_host, h)
    assert again.status == "unchanged", (again.message, again.data["would_change"])
    assert again.data["would_change"] == [] and sim.count("PATCH") == 0
    assert run(verify_host, h).status == "ok"


def test_a_raw_value_given_as_its_display_name_is_accepted_and_written_as_its_value_name(sim_factory, tmp_path):
    (tmp_path / "smc-raw.yaml.j2").write_text(
        "settings:\n  iommu: true\nraw:\n  supermicro:\n    SR_IOVSupport_0067: Enabled\n")
    sim = sim_factory("smc-h13")
    h = host_for(sim, profile="smc-raw")
    plan = run(plan_host, h, opts(profiles_dir=str(tmp_path)))
    assert plan.status == "ok", plan.message
    item = next(i for i in plan.data["plan"] if i["attribute"] == "SR_IOVSupport_0067")
    assert item["desired"] == "1" and "'Enabled' is the display name of ValueName '1'" in item["resolved"]
    applied = run(apply_host, h, opts(profiles_dir=str(tmp_path)))
    assert applied.status == "changed", applied.message
    assert sim.bios_pending() == {"SR_IOVSupport_0067": "1", "IOMMU_00EA": "1"}


def _real_registry_shape(model: str):
    """smc-h13 as the public Supermicro capture names its registry: BiosAttributeRegistry.1_0_0 for
    "SuperMicroServer" (no H12/H13 in it); the System resource's Model is the board's."""
    f = load_flavour("smc-h13")
    registry = {**f.registry, "Id": "BiosAttributeRegistry.1_0_0",
                "SupportedSystems": [{"ProductName": "SuperMicroServer", "SystemId": "SuperMicroServer"}]}
    return dataclasses.replace(f, registry=registry, registry_id="BiosAttributeRegistry.1_0_0", model=model)


def test_the_generation_comes_from_the_systems_model_when_the_registry_names_none(sim_factory):
    sim = sim_factory(_real_registry_shape("AS -1115CS-TNR"))
    r = run(plan_host, host_for(sim))
    assert r.status == "ok", r.message
    assert r.data["registry"] == "BiosAttributeRegistry.1_0_0"
    assert any(i["attribute"] == "NUMANodesPerSocket_703E" for i in r.data["plan"])


def test_an_unknown_system_model_is_named_in_the_error(sim_factory):
    sim = sim_factory(_real_registry_shape("X99-UNKNOWN"))
    r = run(plan_host, host_for(sim))
    assert r.status == "failed"
    assert "no generation of the supermicro map fits registry 'BiosAttributeRegistry.1_0_0'" in r.message
    assert "models: SuperMicroServer; system model: X99-UNKNOWN" in r.message
    assert "h13: registry /H13/ or model /H13|AS ?-?1115CS/ or system /H13|AS ?-?1115CS/" in r.message
    assert sim.count("PATCH") == 0
