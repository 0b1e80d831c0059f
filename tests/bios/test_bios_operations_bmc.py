"""bios-jobs / bios-job-delete / bios-clear-pending / bios-reset-defaults, the client-side resources' typed errors,
bios-verify on a conflicting pending value, and a PATCH answered after the client's timeout -- against the
project's BMC simulator (real HTTPS on 127.0.0.1, DMTF's redfish library as the client; nothing mocked)."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import RegistryCache, apply_host, verify_host
from numaforge.bios.errors import (
    RedfishAuthError,
    RedfishBadRequestError,
    RedfishHTTPError,
    RedfishMethodNotAllowedError,
    RedfishNotFoundError,
    RedfishPreconditionFailedError,
    RedfishServerError,
    http_error,
)
from numaforge.bios.exchange import RetryPolicy
from numaforge.bios.hostsession import connect
from numaforge.bios.operations import OpOptions, operate_host
from numaforge.bios.resources import ServiceRoot
from numaforge.report import HostResult
from numaforge.secrets import SecretRef

from .test_bios_apply_bmc import PASSWORD, _bmc_password, admin_session, host_for, opts, run, sim_factory  # noqa: F401

pytestmark = pytest.mark.bmc

JOBS = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"


def op(name, h, **kw) -> HostResult:
    r = HostResult(h.name)
    operate_host(name, h, opts(), OpOptions(**kw), RegistryCache(), r)
    return r


def queue_dell_job(sim) -> str:
    """Another admin stages a value and queues a BIOS config job (what blocks every later bios-apply)."""
    s = admin_session(sim)
    s.patch(sim.url + sim.settings_path, json={"Attributes": {"AssetTag": "other"}}).raise_for_status()
    s.post(sim.url + JOBS, json={"TargetSettingsURI": sim.settings_path}).raise_for_status()
    return sim.jobs()[0]["Id"]


def test_jobs_lists_the_queued_dell_config_job_and_delete_unblocks_apply(sim_factory):
    sim = sim_factory("dell")
    jid = queue_dell_job(sim)
    h = host_for(sim)

    listed = op("jobs", h)
    assert listed.status == "ok", listed.message
    assert [(j["id"], j["state"]) for j in listed.data["operation"]["jobs"]] == [(jid, "Scheduled")]
    assert "1 active" in listed.message and "bios-job-delete" in listed.message

    blocked = run(apply_host, h)
    assert blocked.status == "failed" and "already queued" in blocked.message

    sim.reset_counts()
    planned = op("job-delete", h, dry_run=True)
    assert planned.status == "ok" and f"would delete {jid}" in planned.message
    assert [e["id"] for e in planned.data["operation"]["delete"]] == [jid]
    assert sim.count("DELETE", "Jobs") == 0 and len(sim.jobs()) == 1

    deleted = op("job-delete", h)
    assert deleted.status == "changed", deleted.message
    assert sim.count("DELETE", "Jobs") == 1 and sim.jobs() == []
    assert sim.bios_pending() == {}  # iDRAC discards the values of a deleted scheduled job
    assert deleted.data["operation"]["pending_after"] == []

    again = op("job-delete", h)
    assert again.status == "unchanged" and "nothing to delete" in again.message
    assert run(apply_host, h).status == "changed"


def test_job_delete_refuses_a_running_job_with_a_clear_message(sim_factory):
    sim = sim_factory("dell", power_delay=30)  # the host stays in POST: the job keeps Running
    jid = queue_dell_job(sim)
    sim.state.reset("ForceRestart")
    assert sim.jobs()[0]["JobState"] == "Running"
    sim.reset_counts()
    r = op("job-delete", host_for(sim), job_id=jid)
    assert r.status == "failed"
    assert f"job {jid} is Running: not deleted" in r.message and "wait for it to finish" in r.message
    assert sim.count("DELETE", "Jobs") == 0 and [j["Id"] for j in sim.jobs()] == [jid]
    # the simulator refuses too, as iDRAC does (the client never asks; an admin's DELETE shows it)
    answer = admin_session(sim).delete(sim.url + f"{JOBS}/{jid}")
    assert answer.status_code == 400 and "ResourceInUse" in answer.text


def test_job_delete_of_an_unknown_job_names_the_ones_there(sim_factory):
    sim = sim_factory("dell")
    jid = queue_dell_job(sim)
    r = op("job-delete", host_for(sim), job_id="JID_000000000001")
    assert r.status == "failed" and "JID_000000000001 not found" in r.message and jid in r.message
    assert len(sim.jobs()) == 1


@pytest.mark.parametrize("flavour", ["generic", "hpe", "dell"])
def test_clear_pending_plans_then_clears(sim_factory, flavour):
    sim = sim_factory(flavour)
    h = host_for(sim)
    if flavour == "dell":  # pending without a job (PATCH without an apply time: iDRAC SYS413)
        admin_session(sim).patch(
            sim.url + sim.settings_path, json={"Attributes": {"AssetTag": "other"}}
        ).raise_for_status()
    else:
        assert run(apply_host, h).status == "changed"
    pending = sim.bios_pending()
    assert pending
    sim.reset_counts()
    planned = op("clear-pending", h, dry_run=True)
    assert planned.status == "ok", planned.message
    assert sorted(c["attribute"] for c in planned.data["operation"]["clear"]) == sorted(pending)
    assert sim.count("PATCH") == 0 and sim.count("POST", "ClearPending") == 0 and sim.bios_pending() == pending

    cleared = op("clear-pending", h)
    assert cleared.status == "changed", cleared.message
    assert sim.bios_pending() == {} and cleared.data["operation"]["pending_after"] == {}
    if flavour == "dell":
        assert sim.count("POST", "DellManager.ClearPending") == 1 and sim.count("PATCH") == 0
    else:
        assert sim.count("PATCH") == 1
    assert op("clear-pending", h).status == "unchanged"


def test_clear_pending_refuses_while_a_config_job_would_apply_them(sim_factory):
    sim = sim_factory("dell")
    jid = queue_dell_job(sim)
    sim.reset_counts()
    r = op("clear-pending", host_for(sim))
    assert r.status == "failed" and jid in r.message and "bios-job-delete" in r.message
    assert sim.count("POST", "ClearPending") == 0 and sim.bios_pending() == {"AssetTag": "other"}


@pytest.mark.parametrize("flavour", ["generic", "dell"])
def test_reset_defaults_plan_then_apply_then_reboot(sim_factory, flavour):
    sim = sim_factory(flavour, power_delay=0.2)
    h = host_for(sim)
    assert run(apply_host, h, opts(reboot=True)).status == "changed"
    changed = {k: v for k, v in sim.bios_current().items() if sim.flavour.defaults[k] != v}
    assert changed
    sim.reset_counts()
    planned = op("reset-defaults", h, dry_run=True)
    assert planned.status == "ok", planned.message
    assert {c["attribute"] for c in planned.data["operation"]["to_default"]} == set(changed)
    assert sim.count("POST", "ResetBios") == 0 and sim.bios_pending() == {}

    done = op("reset-defaults", h)
    assert done.status == "changed", done.message
    assert sim.count("POST", "ResetBios") == 1 and "next host reset" in done.message
    assert set(sim.bios_pending()) == set(changed) == set(done.data["operation"]["pending_after"])
    sim.state.reset("ForceRestart")  # Dell too: a ResetBios applies without a config job
    import time

    deadline = time.monotonic() + 10
    while sim.power_state() != "On" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sim.bios_current() == sim.flavour.defaults and sim.bios_pending() == {}


def test_verify_fails_on_a_pending_value_that_conflicts_with_the_profile(sim_factory):
    sim = sim_factory("generic")
    h = host_for(sim)
    assert run(apply_host, h, opts(reboot=True)).status == "changed"
    assert run(verify_host, h).status == "ok"
    admin_session(sim).patch(sim.url + sim.settings_path, json={"Attributes": {"Q0107": "Power"}}).raise_for_status()
    r = run(verify_host, h)
    assert r.status == "failed"
    assert "gpu-01/Q0107" in r.message and "will flip" in r.message and "'Power'" in r.message
    assert [c["attribute"] for c in r.data["conflicts"]] == ["Q0107"]


def test_typed_errors_by_status(sim_factory):
    sim = sim_factory("generic")
    h = host_for(sim)
    with connect(h, opts()) as client:
        root = ServiceRoot.load(client)
        with pytest.raises(RedfishNotFoundError) as nf:
            root.system("NoSuchSystem")
        assert nf.value.status == 404 and "NoSuchSystem" in nf.value.what
        system = root.system()
        bios = system.bios()
        settings = bios.settings()
        stale = settings.etag
        admin_session(sim).patch(sim.url + sim.settings_path, json={"Attributes": {"Q0202": "x"}}).raise_for_status()
        with pytest.raises(RedfishPreconditionFailedError) as pf:
            settings.commit({"Q0107": "Performance"})
        assert pf.value.status == 412 and settings.etag == stale
        settings.refresh()
        assert settings.commit({"Q0107": "Performance"}).status < 300  # the fresh ETag goes through
        with pytest.raises(RedfishBadRequestError) as bad:
            settings.refresh()
            settings.commit({"NoSuchAttribute": 1})
        assert bad.value.status == 400
        with pytest.raises(RedfishMethodNotAllowedError):
            from numaforge.bios.resources.base import check

            check(client, client.patch(bios.path, {"Attributes": {}}), "PATCH")
    bad_pw = host(h, password=SecretRef("env", "NF_WRONG_PW"), auth="session")
    with pytest.raises(RedfishAuthError) as auth:
        import os

        os.environ["NF_WRONG_PW"] = "wrong"
        try:
            connect(bad_pw, opts()).__enter__()
        finally:
            del os.environ["NF_WRONG_PW"]
    assert auth.value.status == 401
    # HTTP Basic has no login request: the first read is refused, with the same typed error
    with pytest.raises(RedfishAuthError) as auth:
        os.environ["NF_WRONG_PW"] = "wrong"
        try:
            with connect(host(bad_pw, auth="basic"), opts()) as client:
                client.get("/redfish/v1/Systems")
        finally:
            del os.environ["NF_WRONG_PW"]
    assert auth.value.status == 401 and "HTTP Basic" in auth.value.what
    assert isinstance(http_error(503, "x"), RedfishServerError) and http_error(418, "x").status == 418
    assert type(http_error(418, "x")) is RedfishHTTPError


def host(h, **kw):
    from dataclasses import replace

    return replace(h, bmc=replace(h.bmc, **kw))


def test_patch_answered_after_the_client_timeout_reports_what_the_bmc_holds(sim_factory):
    """The BMC stages the values and creates the config job, but answers only after our read timeout."""
    sim = sim_factory("dell")
    sim.inject("slow", r"Bios/Settings$", method="PATCH", after=True, seconds=2.5)
    fast_timeout = RetryPolicy(attempts=2, backoff=0.05, max_wait=0.5, connect_timeout=5, read_timeout=1.0)
    r = HostResult("gpu-01")
    apply_host(host_for(sim), opts(policy=fast_timeout), RegistryCache(), r)
    assert "nothing was written" not in r.message
    assert sim.count("PATCH") == 1  # never re-sent
    jobs = sim.jobs()
    assert len(jobs) == 1  # the BMC's job, adopted: no second one
    assert r.status == "changed", r.message
    assert r.data["job"]["id"] == jobs[0]["Id"]
    assert any("timed out" in w and "holds every value" in w for w in r.data["warnings"])
    assert sorted(r.data["changed"]) == sorted(sim.bios_pending())


def test_patch_processed_after_the_client_timeout_is_re_read_not_reported_as_nothing_written(sim_factory):
    """The BMC is slow to even start on the PATCH: at our timeout the settings object does not show the values
    yet; re-reading for up to the read timeout finds them (and the job), so the host continues instead of
    reporting "nothing was written"."""
    sim = sim_factory("dell")
    sim.inject("slow", r"Bios/Settings$", method="PATCH", seconds=2.0)
    fast_timeout = RetryPolicy(attempts=2, backoff=0.05, max_wait=0.5, connect_timeout=5, read_timeout=1.0)
    r = HostResult("gpu-01")
    apply_host(host_for(sim), opts(policy=fast_timeout), RegistryCache(), r)
    assert r.status == "changed", r.message
    assert sim.count("PATCH") == 1 and len(sim.jobs()) == 1 and r.data["job"]["id"] == sim.jobs()[0]["Id"]


def test_patch_lost_and_never_acted_on_reports_what_the_bmc_holds(sim_factory):
    sim = sim_factory("dell")
    sim.inject("reset", r"Bios/Settings$", method="PATCH")  # the connection drops before the BMC acts
    r = HostResult("gpu-01")
    apply_host(
        host_for(sim),
        opts(policy=RetryPolicy(attempts=2, backoff=0.05, max_wait=0.5, connect_timeout=5, read_timeout=1.0)),
        RegistryCache(),
        r,
    )
    assert r.status == "failed"
    assert "got no answer" in r.message and "nothing was written" not in r.message
    assert "the BMC now holds no new pending value; BIOS jobs: none; it may still act" in r.message
    assert "bios-jobs" in r.message
    assert sim.count("PATCH") == 1 and sim.jobs() == [] and sim.bios_pending() == {}
