"""Issue 41 items 1, 5-7, on the captured trees that show them (tests/data/captures, served as captured by the
simulator's mockup mode; real HTTPS, DMTF's `redfish` library as the client; nothing mocked)."""

from __future__ import annotations

import json

import pytest

from numaforge.bios.apply import plan_host

from .conftest import capture_dirs
from .test_bios_apply_bmc import PASSWORD, _bmc_password, host_for, run  # noqa: F401 (fixture)

pytestmark = pytest.mark.bmc

CAPTURES = {c.name: c for c in capture_dirs()}


def _host(sim, **kw):
    """The host of a capture; where the BMC manages several systems, the one with a Bios (as an operator would)."""
    several = len(sim.tree["redfish/v1/systems"].get("Members") or []) > 1
    return host_for(sim, system_id=sim.system_path.rstrip("/").rsplit("/", 1)[-1] if several else None, **kw)


def test_hpe_slot_patterns_resolve_against_the_hosts_bios_not_the_registry(mockup_factory):
    """Item 1: the DL385's A42 registry describes PciSlot<N>Aspm for slots this board lacks, and EmbNicAspm; its
    Bios has only some of them. Only those are planned, every one of them."""
    sim = mockup_factory(CAPTURES["libredfish-hpe-dl385-gen10p"], password=PASSWORD)
    bios = sim.bios_current()
    registry = next(d for k, d in sim.tree.items() if "RegistryEntries" in d and "A42" in str(d.get("Id")))
    described = {a["AttributeName"] for a in registry["RegistryEntries"]["Attributes"]}
    aspm = {a for a in described if a == "EmbNicAspm" or (a.startswith("PciSlot") and a.endswith("Aspm"))}
    assert aspm - set(bios), "the capture no longer shows the registry describing more slots than the Bios has"
    r = run(plan_host, _host(sim, profile="epyc-gpudirect"))
    assert r.status in ("ok", "unchanged"), r.message
    planned = {i["attribute"] for i in r.data["plan"] if i.get("setting") == "pcie_aspm"}
    assert planned == aspm & set(bios), json.dumps(r.data["plan"], indent=1)[:3000]
