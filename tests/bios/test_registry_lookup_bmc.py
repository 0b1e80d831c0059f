"""Issue 26 item 1: the BIOS attribute registry is found the way sushy finds one -- candidates from the Registries
collection, the document's own identity decides -- with the spellings and version drift of real BMCs:

- iDRAC9 (NVIDIA/libredfish tests/mockups/dell, PowerEdge R750): the Bios names BiosAttributeRegistry.v1_0_3,
  the collection lists BiosAttributeRegistry.v1_0_0 (Registry "BiosAttributeRegistry1.0"), the document says
  v1_0_3 (flavour dell-15g);
- Supermicro (tests/mockups/supermicro): BiosAttributeRegistry.v1_0_0 in the Bios, file Id
  "BiosAttributeRegistry" with Registry "BiosAttributeRegistry.1.0.0", document Id BiosAttributeRegistry.1_0_0,
  Location /registries/BiosAttributeRegistry.1.0.0.json (a variant of smc-h13 built here).

Real HTTPS simulators on 127.0.0.1, DMTF's `redfish` library as the client; nothing mocked."""

from __future__ import annotations

import dataclasses

import pytest

from numaforge.bios.apply import plan_host
from numaforge.bios.discovery import registry_fit, registry_identity
from numaforge.lab.bmc import load_flavour

from .test_bios_apply_bmc import _bmc_password, host_for, run, sim_factory  # noqa: F401 (fixtures)

pytestmark = pytest.mark.bmc


def _variant(name: str, doc_id: str | None = None, **kw):
    f = load_flavour(name)
    registry = {**f.registry, "Id": doc_id} if doc_id else f.registry
    return dataclasses.replace(f, registry=registry, registry_id=doc_id or f.registry_id, **kw)


def test_registry_identity_reads_every_spelling():
    for text in ("BiosAttributeRegistry.v1_0_3", "BiosAttributeRegistry.1.0.3", "biosattributeregistry.1_0_3"):
        assert registry_identity(text) == ("biosattributeregistry", (1, 0, 3)), text
    assert registry_identity("BiosAttributeRegistry1.0") == ("biosattributeregistry", (1, 0))
    assert registry_identity("biosattributeregistrya55.1.2.68") == ("biosattributeregistrya55", (1, 2, 68))
    assert registry_identity("BiosAttributeRegistry") == ("biosattributeregistry", ())
    assert registry_fit("BiosAttributeRegistry.v1_0_0", registry_identity("BiosAttributeRegistry.1_0_0")) == "exact"
    assert registry_fit("BiosAttributeRegistry.v1_0_3", registry_identity("BiosAttributeRegistry.v1_0_0")) == "drift"
    assert registry_fit("BiosAttributeRegistry.v2_0_0", registry_identity("BiosAttributeRegistry.v1_0_0")) is None
    assert (
        registry_fit("BiosAttributeRegistryA43.v1_2_80", registry_identity("BiosAttributeRegistryA42.v1_2_80")) is None
    )


def test_idrac9_registry_named_v1_0_3_listed_as_v1_0_0_is_found_by_its_document(sim_factory):
    sim = sim_factory("dell-15g")
    r = run(plan_host, host_for(sim))
    assert r.status == "ok", r.message
    assert r.data["registry"] == "BiosAttributeRegistry.v1_0_3"
    gets = [p for m, p in sim.requests if m == "GET"]
    assert "/redfish/v1/Registries/BiosAttributeRegistry.v1_0_0" in gets
    assert gets.count(sim.flavour.registry_uri) == 1
    assert not any("same major version" in w for w in r.data.get("warnings", []))  # the document is v1_0_3


def test_supermicro_registry_spelt_three_ways_is_one_registry(sim_factory):
    flavour = _variant(
        "smc-h13",
        "BiosAttributeRegistry.1_0_0",
        bios_registry_id="BiosAttributeRegistry.v1_0_0",
        registry_member="/redfish/v1/Registries/BiosAttributeRegistry",
        registry_file_registry="BiosAttributeRegistry.1.0.0",
        registry_uri="/registries/BiosAttributeRegistry.1.0.0.json",
    )
    sim = sim_factory(flavour)
    r = run(plan_host, host_for(sim))
    assert r.status == "ok", r.message
    assert r.data["registry"] == "BiosAttributeRegistry.1_0_0"
    assert sim.count("GET", r"^/registries/BiosAttributeRegistry\.1\.0\.0\.json$") == 1


def test_version_drift_within_a_major_version_is_used_and_said(sim_factory):
    flavour = _variant("generic", bios_registry_id="BiosAttributeRegistryContosoEPYC.v1_2_0")
    sim = sim_factory(flavour)
    r = run(plan_host, host_for(sim))
    assert r.status == "ok", r.message
    assert any(
        "names registry BiosAttributeRegistryContosoEPYC.v1_2_0; the BMC serves "
        "BiosAttributeRegistryContosoEPYC.v1_0_0 (same major version" in w
        for w in r.data["warnings"]
    )


def test_no_fitting_registry_names_every_candidate_tried(sim_factory):
    """The file says it is v2_0_0 (as the Bios does), its document is v1_0_0: another major version, refused."""
    flavour = _variant(
        "generic",
        bios_registry_id="BiosAttributeRegistryContosoEPYC.v2_0_0",
        registry_file_registry="BiosAttributeRegistryContosoEPYC.v2_0_0",
    )
    sim = sim_factory(flavour)
    r = run(plan_host, host_for(sim))
    assert r.status == "failed"
    assert "serves registry BiosAttributeRegistryContosoEPYC.v2_0_0; candidates tried: " in r.message
    assert (
        "/redfish/v1/Registries/BiosAttributeRegistryContosoEPYC.v1_0_0 (Id 'BiosAttributeRegistryContosoEPYC"
        ".v1_0_0', Registry 'BiosAttributeRegistryContosoEPYC.v2_0_0') -> "
        "/redfish/v1/Registries/BiosAttributeRegistryContosoEPYC.v1_0_0.json is registry "
        "'BiosAttributeRegistryContosoEPYC.v1_0_0'"
    ) in r.message
    assert "raw:" in r.message and sim.count("PATCH") == 0
