"""The registry corpus against the real client: one simulator flavour per vendor generation (numaforge/lab/bmc/registries,
built from public vendor facts) and the DSP0266 registry lookup. Real HTTPS simulators on 127.0.0.1, DMTF's
`redfish` library as the client; nothing is mocked."""

from __future__ import annotations

import dataclasses

import pytest

from numaforge.bios.apply import Timeouts, apply_host, plan_host, verify_host
from numaforge.lab.bmc import CORPUS, load_flavour

from .test_bios_apply_bmc import _bmc_password, host_for, opts, run, sim_factory  # noqa: F401 (fixtures)

pytestmark = pytest.mark.bmc

# what each generation lacks (documented platform gaps in bios/vendors/*.yaml): shown in the plan, not failed
GAPS = {
    "hpe-gen10p": set(),
    "hpe-gen11": {"memory_interleaving"},
    "dell-15g": {"pcie_acs", "iommu"},
    "dell-16g": {"memory_interleaving", "pcie_acs"},
    "smc-h12": {"memory_interleaving", "pcie_aspm", "sriov"},
    "smc-h13": {"determinism"},
    "lenovo-sr665": {"pcie_acs", "pcie_aspm"},
    "lenovo-sr665v3": {"pcie_acs", "pcie_aspm"},
}


@pytest.mark.parametrize("flavour", CORPUS)
@pytest.mark.parametrize("profile", ["epyc-gpudirect", "epyc-baseline"])
def test_both_shipped_profiles_plan_on_every_generation_with_gaps_shown(sim_factory, flavour, profile):
    sim = sim_factory(flavour)
    r = run(plan_host, host_for(sim, profile=profile))
    assert r.status == "ok", r.message
    items = r.data["plan"]
    gaps = {i["setting"] for i in items if i["action"] == "gap"}
    assert gaps == GAPS[flavour]
    assert all(i["resolved"] for i in items if i["action"] == "gap")
    settable = [i for i in items if i["action"] not in ("gap", "skipped")]
    assert settable and all(i["attribute"] in sim.bios_current() for i in settable)
    assert sim.count("PATCH") == 0


def test_registry_is_found_only_through_the_collection_members(sim_factory):
    """iLO 6 shape: the Bios names BiosAttributeRegistryA55.v1_2_68, the collection lists the file at a lower-case,
    dotted URI; Registries/<id> does not exist. The member is recognised by its Id, then Location[].Uri is read."""
    sim = sim_factory("hpe-gen11")
    r = run(plan_host, host_for(sim))
    assert r.status == "ok", r.message
    gets = [p for m, p in sim.requests if m == "GET" and "egistr" in p]
    assert gets[0].rstrip("/").endswith("/Registries/BiosAttributeRegistryA55.v1_2_68")  # the guess: 404
    assert gets[1].rstrip("/") == "/redfish/v1/Registries"  # the collection
    assert "/redfish/v1/Registries/biosattributeregistrya55.1.2.68" in [g.rstrip("/") for g in gets[2:]]
    assert gets[-1].rstrip("/").endswith("/registrystore/registries/en/biosattributeregistrya55.v1_2_68")
    assert r.data["registry"] == "BiosAttributeRegistryA55.v1_2_68"


def test_registry_published_only_outside_the_bmc_is_a_clear_error(sim_factory):
    flavour = dataclasses.replace(
        load_flavour("hpe-gen11"),
        publication_uri="https://vendor.example/registries/BiosAttributeRegistryA55.v1_2_68.json",
    )
    sim = sim_factory(flavour)
    r = run(plan_host, host_for(sim))
    assert r.status == "failed"
    assert "only published outside the BMC (PublicationUri https://vendor.example/" in r.message
    assert "firmware" not in r.message and "reads the registry from the BMC only" in r.message
    assert sim.count("PATCH") == 0


@pytest.mark.parametrize("flavour", CORPUS)
def test_gpudirect_plans_applies_reboots_through_a_long_post_verifies_and_replans_zero(sim_factory, flavour):
    """Issue 26 "done when": on every captured vendor shape the stock GPUDirect profile plans, apply + reboot +
    verify pass, and a second plan shows 0 changes. The restart is warm (PowerState stays On) and POST lasts
    longer than the graceful timeout: the simulator must receive exactly one reset, never a ForceRestart."""
    sim = sim_factory(flavour)
    sim.state.warm_restart, sim.state.post_seconds = True, 2.5
    h = host_for(sim, profile="epyc-gpudirect")
    plan = run(plan_host, h)
    assert plan.status == "ok", plan.message
    assert plan.data["would_change"], "the stock profile should differ from the factory defaults"
    o = opts(reboot=True, timeouts=Timeouts(graceful=1.0, power_on=30.0, job=10.0, poll=0.1, settle=5.0))
    applied = run(apply_host, h, o)
    assert applied.status == "changed", applied.message
    assert applied.data["mismatches"] == [] and sim.bios_pending() == {}
    assert sim.state.resets == {"GracefulRestart": 1}
    assert run(verify_host, h).status == "ok"
    sim.reset_counts()
    again = run(plan_host, h)
    assert again.status == "unchanged" and again.data["would_change"] == [], again.data["would_change"]
    assert sim.count("PATCH") == 0
