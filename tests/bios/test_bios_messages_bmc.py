"""Clear, true messages for what a BMC really did (issue 40, "Crashes and unclear messages"): a BMC of another vendor
than the inventory says is named as such; a JSON list where the Bios belongs is not "read-only BIOS"; a stuck Dell
job is not "still booting, watch the console"; a registry 404 does not suggest system_id/vendor; a login answered
without a token does not say "check the credentials".

Each against the BMC simulator with a fault (numaforge.lab.bmc.faults: "answer" serves any JSON value, status and
headers; the state's stuck_jobs keeps an iDRAC job Running after POST). Real HTTPS on 127.0.0.1; nothing mocked."""

from __future__ import annotations

import re

import pytest

from numaforge.bios.apply import apply_host, plan_host
from numaforge.bios.power import Timeouts
from numaforge.bios.profile import VENDORS
from numaforge.bios.vendors import detect_vendor
from numaforge.lab.bmc.flavours import ALL_FLAVOURS, load_flavour

from .test_bios_apply_bmc import _bmc_password, host_for, opts, run, sim_factory  # noqa: F401 (fixtures)

pytestmark = pytest.mark.bmc


def _detected(flavour: str) -> str:
    f = load_flavour(flavour)
    return detect_vendor({"Vendor": f.vendor}, {"Manufacturer": f.vendor})


@pytest.mark.parametrize("flavour", [f for f in ALL_FLAVOURS if _detected(f) != "generic"])
def test_a_bmc_of_another_vendor_than_the_inventory_says_is_named(sim_factory, flavour):
    sim = sim_factory(flavour)
    real = _detected(flavour)
    for claimed in [v for v in VENDORS if v not in ("generic", real)]:
        r = run(plan_host, host_for(sim, vendor=claimed))
        assert r.status == "failed", r.message
        assert f"inventory says {claimed} (bmc.vendor), BMC says {real}" in r.message, r.message
        assert repr(sim.flavour.vendor) in r.message and "set bmc.vendor: " + real in r.message
        hw = run(plan_host, host_for(sim, hw_vendor=claimed))
        assert f"inventory says {claimed} (hardware.vendor), BMC says {real}" in hw.message, hw.message
    assert sim.count("PATCH") == 0
    assert run(plan_host, host_for(sim, vendor=real)).status == "ok"


def test_a_json_list_as_the_bios_is_named_not_read_only(sim_factory):
    sim = sim_factory("dell")
    sim.inject("answer", re.escape(sim.bios_path) + "$", count=10, method="GET", body=[{"Attributes": {}}])
    r = run(plan_host, host_for(sim))
    assert r.status == "failed"
    assert f"GET {sim.bios_path} answered a JSON list (HTTP 200)" in r.message, r.message
    assert "read-only" not in r.message and "not a Redfish answer" in r.message


def test_a_stuck_dell_job_is_named_not_still_booting(sim_factory):
    sim = sim_factory("dell")
    sim.state.stuck_jobs = True
    short = Timeouts(graceful=1.0, power_on=3.0, job=5.0, poll=0.1, settle=1.0)
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=short))
    assert r.status == "failed", r.message
    assert "the job is stuck, not the host" in r.message and "config job Running" in r.message, r.message
    assert "still booting" not in r.message and "watch the host console" not in r.message
    assert sim.state.resets == {"GracefulRestart": 1}, "a stuck job is never answered with another reset"


@pytest.mark.parametrize("flavour", ["dell", "hpe"])
def test_a_registry_404_names_the_registry_store_not_system_id(sim_factory, flavour):
    sim = sim_factory(flavour)
    rid = re.escape(sim.flavour.registry_id)
    sim.inject("5xx", rf"/Registries(/{rid})?/?$", count=20, method="GET", status=404)
    r = run(plan_host, host_for(sim))
    assert r.status == "failed"
    assert re.search(r"Registries collection /redfish/v1/Registries/? the service root names answered 404", r.message)
    assert "system_id" not in r.message and "vendor" not in r.message.split("fix:")[-1]


def test_a_login_answered_without_a_token_is_named(sim_factory):
    sim = sim_factory("dell")
    sim.inject(
        "answer",
        r"/SessionService/Sessions/?$",
        count=5,
        method="POST",
        status=201,
        body={"@odata.id": "/redfish/v1/SessionService/Sessions/1", "Id": "1", "UserName": "admin"},
    )
    r = run(plan_host, host_for(sim, auth="session"))
    assert r.status == "failed"
    assert "without an X-Auth-Token header" in r.message, r.message
    assert "check bmc.username" not in r.message and "refused the credentials" not in r.message
    assert sim.count("PATCH") == 0
