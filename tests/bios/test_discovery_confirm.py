"""Issue 12 item 6: what the discovery cache remembers serves a host only once that host's BMC confirms it.

Real peer: the BMC simulator over TLS; the cache on disk is each test's own (tests/conftest.py). Each test
first runs once to fill the cache, then changes the BMC the way new firmware or new hardware would, and checks
that the second run refuses exactly what `--no-discovery-cache` refuses, writing nothing."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import HostOptions, run_hosts
from numaforge.inventory.model import BMCSpec, HardwareSpec, Host, Location
from numaforge.lab.bmc import BMCSimulator
from numaforge.secrets import SecretRef

pytestmark = pytest.mark.bmc

PW_VAR = "NF_TEST_CONFIRM_PW"
PASSWORD = "confirm-Cache-pw-5"


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv(PW_VAR, PASSWORD)
    s = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=0.2).start()
    yield s
    s.stop()


def _host(sim) -> Host:
    return Host(
        name="gpu-01",
        location=Location("<test>"),
        bmc=BMCSpec(
            url=sim.url,
            username="admin",
            password=SecretRef.parse(f"env:{PW_VAR}"),
            ca_bundle=str(sim.ca_file),
            vendor="generic",
        ),
        hardware=HardwareSpec(platform="t", sockets=2, gpus=["0000:41:00.0"], nics=["0000:81:00.0"]),
        bios_profile="epyc-gpudirect",
    )


def _both(sim, action="apply"):
    """(result with the disk cache, result with --no-discovery-cache), BMC request counts reset in between."""
    host = _host(sim)
    sim.reset_counts()
    # the write path under test; unverified values are refused by default (test_bios_unverified_policy_bmc.py)
    cached = run_hosts([host], action, HostOptions(unverified="allow")).results[0]
    patches = sim.count("PATCH")
    fresh = run_hosts([host], action, HostOptions(discovery_cache=False, unverified="allow")).results[0]
    return cached, patches, fresh


def test_a_cached_registry_is_not_trusted_once_the_bmc_no_longer_allows_a_value(sim, monkeypatch):
    first = run_hosts([_host(sim)], "plan", HostOptions()).results[0]
    assert first.status == "ok", first.message
    # new BIOS firmware: NPS4 is gone from the registry this BMC serves (same id, same attribute names);
    # monkeypatch restores the flavour, which every simulator of this process shares
    for attr in sim.flavour.registry["RegistryEntries"]["Attributes"]:
        if attr["AttributeName"] == "Q0100":
            monkeypatch.setitem(attr, "Value", [v for v in attr["Value"] if v["ValueName"] != "NPS4"])
    cached, patches, fresh = _both(sim)
    assert patches == 0, "the cached registry let a value through that this BMC refuses"
    assert cached.status == fresh.status == "failed"
    assert "NPS4" in cached.message and "NPS4" in fresh.message, cached.message
    assert sim.count("PATCH") == 0


def test_a_cached_system_path_is_not_used_once_the_bmc_manages_two_systems(sim):
    first = run_hosts([_host(sim)], "plan", HostOptions()).results[0]
    assert first.status == "ok", first.message
    sim.extra_systems.append("/redfish/v1/Systems/2")
    cached, patches, fresh = _both(sim)
    assert patches == 0
    assert cached.status == fresh.status == "failed"
    assert "manages 2 systems" in cached.message and "system_id" in cached.message, cached.message
    assert "manages 2 systems" in fresh.message


def test_a_settings_object_without_etag_is_re_read_before_the_patch_and_the_plan_says_so(sim):
    sim.settings_etag = False
    plan = run_hosts([_host(sim)], "plan", HostOptions()).results[0]
    assert any("no ETag" in w and "re-read right before the PATCH" in w for w in plan.data.get("warnings", []))
    sim.reset_counts()
    res = run_hosts([_host(sim)], "apply", HostOptions(unverified="allow")).results[0]
    assert res.status == "changed", res.message
    patch_at = next(i for i, (m, _) in enumerate(sim.requests) if m == "PATCH")
    before = [p for m, p in sim.requests[:patch_at] if m == "GET"]
    assert before.count(sim.settings_path) == 2, "the settings object is read again right before the PATCH"
    step = next(s for s in res.steps if s.name == "patch")
    assert "no ETag" in str(step.detail)
