"""Issue 26 item 8: bios-job-delete deletes BIOS configuration jobs only -- never a queued firmware update whose
name says "BIOS" -- and a BMC whose account must change its password fails that host with the fix while the
rollout goes on. Real HTTPS simulators on 127.0.0.1, DMTF's `redfish` library as the client; nothing mocked."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import apply_host, run_hosts
from numaforge.bios.errors import RedfishPasswordChangeRequiredError
from numaforge.bios.hostsession import connect
from numaforge.bios.resources import ServiceRoot
from numaforge.fleet import Rollout

from .test_bios_apply_bmc import _bmc_password, host_for, opts, run, sim_factory  # noqa: F401
from .test_bios_operations_bmc import op, queue_dell_job

pytestmark = pytest.mark.bmc


def test_job_delete_never_deletes_a_queued_firmware_update_of_the_bios(sim_factory):
    sim = sim_factory("dell")
    firmware = sim.state.queue_firmware_job("Firmware Update: BIOS")["Id"]  # DellJob JobType FirmwareUpdate
    queue_dell_job(sim)
    bios_job = next(j["Id"] for j in sim.jobs() if j["Id"] != firmware)
    h = host_for(sim)

    listed = op("jobs", h)
    assert [j["id"] for j in listed.data["operation"]["jobs"]] == [bios_job]
    every = {j["id"]: j for j in op("jobs", h, all_jobs=True).data["operation"]["jobs"]}
    assert every[firmware]["type"] == "FirmwareUpdate" and not every[firmware]["bios_config"]

    deleted = op("job-delete", h)
    assert deleted.status == "changed", deleted.message
    assert [j["Id"] for j in sim.jobs()] == [firmware]
    assert run(apply_host, h).status == "changed"  # a queued firmware update does not block BIOS values

    named = op("job-delete", h, job_id=firmware)
    assert named.status == "failed"
    assert f"job {firmware} is not deleted" in named.message and "not a BIOS configuration job" in named.message
    assert firmware in [j["Id"] for j in sim.jobs()] and sim.count("DELETE", firmware) == 0


def test_password_change_required_fails_that_host_with_the_fix_and_the_rollout_goes_on(sim_factory):
    locked, fine = sim_factory("generic"), sim_factory("generic")
    locked.password_change_required = True
    hosts = [host_for(locked, name="gpu-01"), host_for(fine, name="gpu-02")]
    out = run_hosts(
        hosts,
        "plan",
        opts(),
        rollout=Rollout(forks=1, max_fail=100.0),
    )
    assert not out.internal_error and not out.stopped, out.reason
    first, second = out.results
    assert first.status == "failed" and second.status == "ok", (first.message, second.message)
    assert "password of account 'admin' to be changed" in first.message
    assert "PATCH of Password at /redfish/v1/AccountService/Accounts/1" in first.message
    assert "bmc.password" in first.message
    # nothing read: the first request that needs the account (a session login, or with HTTP Basic the first
    # read past the public service root) is refused, and a session is logged out
    assert locked.count("GET", "Bios") == 0 and locked.count("GET", "Systems") <= 1 and locked.sessions == {}


def test_a_403_password_change_required_mid_session_is_the_same_clear_error(sim_factory):
    sim = sim_factory("generic")
    with connect(host_for(sim), opts()) as client:
        root = ServiceRoot.load(client)
        sim.password_change_required = True  # e.g. the password expired between two requests
        with pytest.raises(RedfishPasswordChangeRequiredError) as exc:
            root.system()
        assert exc.value.status == 403 and "ConfigureComponents" not in exc.value.render()
    assert sim.sessions == {}
