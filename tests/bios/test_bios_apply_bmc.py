"""plan/apply/reboot/verify against the project's Redfish BMC simulator (a real HTTPS server on 127.0.0.1).

Nothing is mocked: the client is DMTF's `redfish` library over real TLS; the simulator enforces registries,
ETags, pending-until-reset, Dell config jobs and injected faults.
"""

from __future__ import annotations

import base64
import threading

import pytest
import requests

from numaforge.bios.apply import HostOptions, RegistryCache, Timeouts, apply_host, plan_host, run_hosts, verify_host
from numaforge.bios.exchange import RetryPolicy
from numaforge.fleet import Rollout
from numaforge.lab.bmc import FLAVOURS, BMCSimulator
from numaforge.report import HostResult, Report
from numaforge.secrets import SecretRef

from .helpers import PROFILES, host

pytestmark = pytest.mark.bmc

PASSWORD = "s3cret-Bmc-pw"
FAST = Timeouts(graceful=5.0, power_on=20.0, job=10.0, poll=0.1, settle=5.0)
POLICY = RetryPolicy(attempts=4, backoff=0.05, max_wait=1.0, connect_timeout=5, read_timeout=10)


@pytest.fixture(autouse=True)
def _bmc_password(monkeypatch):
    monkeypatch.setenv("NF_TEST_BMC_PASSWORD", PASSWORD)


@pytest.fixture
def sim_factory():
    sims = []

    def make(flavour="dell", **kw):
        kw.setdefault("power_delay", 0.3)
        sim = BMCSimulator(flavour=flavour, tls=True, username="admin", password=PASSWORD, **kw).start()
        sims.append(sim)
        return sim

    yield make
    for s in sims:
        assert s.errors == [], f"simulator bugs: {s.errors}"
        s.stop()


def host_for(sim, name="gpu-01", **kw):
    return host(
        name=name, url=sim.url, password=SecretRef("env", "NF_TEST_BMC_PASSWORD"), ca_bundle=str(sim.ca_file), **kw
    )


def admin_session(sim) -> requests.Session:
    """Another administrator's client (plain requests + basic auth) changing the same BMC."""
    s = requests.Session()
    s.trust_env = False  # verify with the lab CA, not a CA bundle from the environment
    s.verify = str(sim.ca_file)
    s.auth = ("admin", PASSWORD)
    return s


def opts(**kw) -> HostOptions:
    kw.setdefault("timeouts", FAST)
    kw.setdefault("policy", POLICY)
    # these tests exercise the write path; the simulator's registries carry values the vendor maps mark
    # unverified, which bios-apply refuses by default (tests/bios/test_bios_unverified_policy_bmc.py)
    kw.setdefault("unverified", "allow")
    return HostOptions(**kw)


def run(fn, h, o=None, cache=None) -> HostResult:
    r = HostResult(h.name)
    fn(h, o or opts(), cache or RegistryCache(), r)
    return r


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_plan_apply_reboot_verify_then_second_apply_makes_zero_patch(sim_factory, flavour):
    sim = sim_factory(flavour)
    h = host_for(sim)
    before = sim.bios_current()

    plan = run(plan_host, h)
    assert plan.status == "ok", plan.message
    changes = {i["attribute"]: i["desired"] for i in plan.data["plan"] if i["action"] == "change"}
    assert changes and sim.count("PATCH") == 0 and sim.bios_pending() == {}
    assert plan.data["would_change"] == sorted(changes) and plan.data["pending"] == []
    # names the vendor map does not know for this BMC are found by display name, and the plan says so (the HPE
    # flavour carries HPE's own names: every attribute is found by its exact name)
    assert bool(plan.data["by_display_name"]) == (flavour != "hpe"), plan.data["by_display_name"]

    not_verified = run(verify_host, h)
    assert not_verified.status == "failed" and len(not_verified.data["mismatches"]) == len(changes)

    applied = run(apply_host, h, opts(reboot=True))
    assert applied.status == "changed", applied.message
    assert sorted(applied.data["changed"]) == sorted(changes)
    assert applied.data["mismatches"] == [] and applied.data["pending"] == []
    assert sim.count("PATCH") == 1
    now = sim.bios_current()
    assert {k: now[k] for k in changes} == changes
    assert {k: v for k, v in now.items() if k not in changes} == {k: v for k, v in before.items() if k not in changes}
    assert sim.bios_pending() == {}

    sim.reset_counts()
    again = run(apply_host, h, opts(reboot=True))
    assert again.status == "unchanged", again.message
    assert sim.count("PATCH") == 0 and sim.count("POST", "Reset") == 0
    assert sim.count() == 7  # root, Systems, system, Bios, settings, registry entry + file (HTTP Basic)

    ok = run(verify_host, h)
    assert ok.status == "ok" and ok.data["mismatches"] == []


def test_apply_without_reboot_leaves_values_pending_and_a_later_run_does_not_patch_again(sim_factory):
    sim = sim_factory("supermicro")
    h = host_for(sim)
    first = run(apply_host, h)
    assert first.status == "changed" and "pending until the host resets" in first.message
    pending = sim.bios_pending()
    assert pending and sim.bios_current() != {**sim.bios_current(), **pending}
    sim.reset_counts()
    second = run(apply_host, h)
    assert second.status == "unchanged" and "already pending" in second.message
    assert sim.count("PATCH") == 0
    third = run(apply_host, h, opts(reboot=True))
    assert third.status == "changed" and third.data["mismatches"] == [] and sim.count("PATCH") == 0


def test_registry_is_fetched_once_per_run_across_hosts(sim_factory):
    a, b = sim_factory("lenovo"), sim_factory("lenovo")
    outcome = run_hosts([host_for(a, "h-a"), host_for(b, "h-b")], "plan", opts(), rollout=Rollout(forks=1))
    assert [r.status for r in outcome.results] == ["ok", "ok"]
    assert outcome.registry_fetches == 1
    assert a.count("GET", "Registr") + b.count("GET", "Registr") == 2  # Registries/<id> + the file, once
    # the second BMC gets the cached registry only after a HEAD of its registry file answers the same ETag
    # (numaforge.bios.apply.confirm_registry): root, Systems, system, Bios, settings, HEAD (HTTP Basic: no
    # login or logout request)
    assert (a.count(), b.count()) == (7, 6)
    assert b.count("HEAD", "Registr") == 1


@pytest.mark.parametrize(
    "profile, expect",
    [
        (
            "readonly-and-out-of-bounds-raw",
            [
                "TpmSecurity",
                "AcPwrRcvryUserDelay=30 is below the lower bound 60",
                "AssetTag is 15 characters",
                "NoSuchAttribute: not in registry",
            ],
        ),
    ],
)
def test_invalid_or_read_only_values_fail_before_any_write(sim_factory, profile, expect):
    sim = sim_factory("dell")
    r = run(apply_host, host_for(sim, profile=profile), opts(profiles_dir=str(PROFILES), reboot=True))
    assert r.status == "failed"
    for e in expect[1:]:
        assert e in r.message
    assert sim.count("PATCH") == 0 and sim.count("POST", "Jobs|Reset") == 0 and sim.bios_pending() == {}


def test_system_bios_version_read_only_on_the_simulator_registry(sim_factory, tmp_path):
    sim = sim_factory("dell")
    (tmp_path / "ro.yaml.j2").write_text("settings: {sriov: true}\nraw:\n  dell: {SystemBiosVersion: '9.9.9'}\n")
    r = run(apply_host, host_for(sim, profile="ro"), opts(profiles_dir=str(tmp_path)))
    assert r.status == "failed" and "SystemBiosVersion is ReadOnly" in r.message
    assert sim.count("PATCH") == 0


def test_registry_dependency_blocks_a_write_before_any_patch(sim_factory, tmp_path):
    sim = sim_factory("hpe")
    (tmp_path / "dep.yaml.j2").write_text("raw:\n  hpe: {PerformanceDeterminism: PowerDeterministic}\n")
    r = run(apply_host, host_for(sim, profile="dep"), opts(profiles_dir=str(tmp_path)))
    assert r.status == "failed"
    assert "made read-only by registry dependency: if DeterminismControl EQU 'DeterminismCtrlAuto'" in r.message
    assert sim.count("PATCH") == 0


def test_hpe_nps0_fails_with_fix_and_no_write(sim_factory, tmp_path):
    sim = sim_factory("hpe")
    r = run(apply_host, host_for(sim, profile="hpe-nps0"), opts(profiles_dir=str(PROFILES)))
    assert r.status == "failed" and "numa_nodes_per_socket=0" in r.message and "1, 2 or 4" in r.message
    assert sim.count("PATCH") == 0


def test_stale_etag_412_rereads_and_replans_once(sim_factory):
    """Another client changes the settings object between our read and our PATCH (real concurrent PATCH)."""
    sim = sim_factory("generic")
    sim.inject("slow", r"/Registries/", count=1, seconds=1.5)  # hold our client after it read the ETag

    def other_admin():
        s = admin_session(sim)
        for _ in range(100):
            if sim.count("GET", r"Bios/Settings$") >= 1:
                break
            threading.Event().wait(0.02)
        s.patch(sim.url + sim.settings_path, json={"Attributes": {"Q0202": "rack-7"}}).raise_for_status()

    t = threading.Thread(target=other_admin)
    t.start()
    r = run(apply_host, host_for(sim))
    t.join()
    assert r.status == "changed", r.message
    assert r.data.get("replanned_after_412") is True
    patch_step = [s for s in r.steps if s.name == "patch"][0]
    assert "412" in patch_step.detail
    assert sim.count("PATCH") == 3  # theirs, our stale one (412), our re-planned one
    pending = sim.bios_pending()
    assert pending["Q0202"] == "rack-7"  # the other admin's change is kept, not clobbered
    assert pending["Q0105"] == "Enabled"  # ours landed too


def test_dell_existing_config_job_is_reported_not_clobbered(sim_factory):
    sim = sim_factory("dell")
    s = admin_session(sim)
    s.patch(sim.url + sim.settings_path, json={"Attributes": {"AssetTag": "other"}}).raise_for_status()
    s.post(
        sim.url + "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs", json={"TargetSettingsURI": sim.settings_path}
    ).raise_for_status()
    jobs_before = sim.jobs()
    sim.reset_counts()
    r = run(apply_host, host_for(sim), opts(reboot=True))
    assert r.status == "failed"
    assert "already queued" in r.message and jobs_before[0]["Id"] in r.message
    assert sim.count("PATCH") == 0 and sim.count("DELETE", "Jobs") == 0 and sim.count("POST", "Reset") == 0
    assert sim.jobs() == jobs_before and sim.bios_pending() == {"AssetTag": "other"}


def test_dell_job_is_created_and_completes_on_reboot(sim_factory):
    sim = sim_factory("dell")
    r = run(apply_host, host_for(sim), opts(reboot=True))
    assert r.status == "changed", r.message
    assert r.data["job"]["state"] == "Completed"
    assert [j["JobState"] for j in sim.jobs()] == ["Completed"]


def test_graceful_restart_ignored_then_force_restart(sim_factory):
    sim = sim_factory("lenovo")
    sim.graceful_ignored = True
    r = run(apply_host, host_for(sim), opts(reboot=True, timeouts=Timeouts(graceful=1.0, power_on=20, job=5, poll=0.1)))
    assert r.status == "changed", r.message
    resets = [x["type"] for x in [s for s in r.steps if s.name == "reboot"][0].detail["resets"]]
    assert resets == ["GracefulRestart", "ForceRestart"]
    assert r.data["mismatches"] == []


@pytest.mark.parametrize(
    "kind, kw",
    [
        ("503", {"retry_after": 1}),
        ("5xx", {"status": 502}),
        ("bad_json", {}),
        ("reset", {}),
    ],
)
def test_transient_faults_on_reads_are_retried(sim_factory, kind, kw):
    sim = sim_factory("generic")
    sim.inject(kind, r"Bios$", count=1, **kw)
    o = opts(policy=RetryPolicy(attempts=4, backoff=0.05, max_wait=2.0, connect_timeout=5, read_timeout=1.0))
    r = run(plan_host, host_for(sim), o)
    assert r.status == "ok", r.message
    assert sim.faults.fired and sim.faults.fired[0][0] == kind


def test_a_read_timeout_is_not_retried_and_names_the_option(sim_factory):
    """Issue 39 item 7: a BMC silent for a whole read timeout is hung, not busy: asking three more times cost 54 s
    per host. One try, one clear line naming the request and --bmc-read-timeout."""
    sim = sim_factory("generic")
    sim.inject("slow", r"Bios$", count=4, seconds=3)
    o = opts(policy=RetryPolicy(attempts=4, backoff=0.05, max_wait=2.0, connect_timeout=5, read_timeout=1.0))
    r = run(plan_host, host_for(sim), o)
    assert r.status == "failed" and sim.count("GET", r"Bios$") == 1, r.message
    assert f"GET {sim.bios_path} timed out" in r.message and "--bmc-read-timeout" in r.message, r.message
    assert "Pool(" not in r.message and "gave up after" not in r.message


def test_patch_503_is_retried_because_the_bmc_did_not_act(sim_factory):
    sim = sim_factory("supermicro")
    sim.inject("503", r"Bios/SD", count=1, method="PATCH", retry_after=0)
    r = run(apply_host, host_for(sim))
    assert r.status == "changed", r.message
    assert sim.count("PATCH") == 2 and sim.bios_pending()


def test_patch_500_before_processing_is_not_retried_and_nothing_is_half_written(sim_factory):
    sim = sim_factory("hpe")
    sim.inject("5xx", r"(?i)bios/settings", count=1, method="PATCH", status=500)
    r = run(apply_host, host_for(sim))
    assert r.status == "failed"
    assert "answered 500" in r.message and "nothing was written" in r.message
    assert sim.count("PATCH") == 1 and sim.bios_pending() == {}


def test_patch_answer_lost_after_processing_is_checked_not_resent(sim_factory):
    sim = sim_factory("lenovo")
    sim.inject("reset", r"Bios/Pending", count=1, method="PATCH", after=True)
    r = run(apply_host, host_for(sim))
    assert r.status == "changed", r.message
    assert sim.count("PATCH") == 1
    assert any("holds every value sent" in w for w in r.data["warnings"])


def test_a_failing_host_does_not_stop_the_others(sim_factory):
    bad, good = sim_factory("dell"), sim_factory("hpe")
    bad.inject("5xx", r"Bios", count=50, status=500)
    outcome = run_hosts(
        [host_for(bad, "bad"), host_for(good, "good")], "apply", opts(reboot=True), rollout=Rollout(forks=2)
    )
    by = {r.host: r for r in outcome.results}
    assert by["bad"].status == "failed" and "gave up after 4 attempts" in by["bad"].message
    assert by["good"].status == "changed" and by["good"].data["mismatches"] == []
    assert bad.count("PATCH") == 0 and bad.bios_pending() == {}


def test_wrong_password_and_untrusted_ca_are_clear_errors(sim_factory, monkeypatch, tmp_path):
    sim = sim_factory("generic")
    monkeypatch.setenv("NF_TEST_BMC_PASSWORD", "wrong")
    r = run(plan_host, host_for(sim))
    assert r.status == "failed" and "refused the credentials" in r.message
    monkeypatch.setenv("NF_TEST_BMC_PASSWORD", PASSWORD)
    other = sim_factory("generic")
    r = run(
        plan_host, host(url=sim.url, password=SecretRef("env", "NF_TEST_BMC_PASSWORD"), ca_bundle=str(other.ca_file))
    )
    assert r.status == "failed" and "TLS certificate" in r.message and "bmc.ca_bundle" in r.message
    r = run(plan_host, host(url=sim.url, password=SecretRef("env", "NF_TEST_BMC_PASSWORD")))
    assert r.status == "failed" and "TLS certificate" in r.message  # default store does not trust the lab CA
    r = run(plan_host, host(url=sim.url, password=SecretRef("env", "NF_TEST_BMC_PASSWORD")), opts(insecure=True))
    assert r.status == "ok" and any("TLS verification is OFF" in w for w in r.data["warnings"])


def test_sessions_are_logged_out_even_when_the_host_fails(sim_factory):
    sim = sim_factory("dell")
    r = run(
        apply_host,
        host_for(sim, profile="readonly-and-out-of-bounds-raw", auth="session"),
        opts(profiles_dir=str(PROFILES)),
    )
    assert r.status == "failed"
    assert sim.count("POST", "Sessions") == 1 and sim.count("DELETE", "Sessions") == 1
    assert sim.sessions == {}


def test_json_report_never_contains_the_password_or_token(sim_factory, tmp_path):
    sim = sim_factory("generic")
    rep = Report("bios-apply")
    outcome = run_hosts([host_for(sim)], "apply", opts(reboot=True))
    rep.hosts.extend(outcome.results)
    path = rep.write(tmp_path / "r.json")
    text = path.read_text()
    assert PASSWORD not in text
    assert "X-Auth-Token" not in text and "x-auth-token" not in text.lower()
    assert outcome.results[0].data["auth"] == "basic"
    assert base64.b64encode(f"admin:{PASSWORD}".encode()).decode() not in text and "Basic " not in text
    assert '"changed"' in text


def test_dell_pending_values_keep_their_one_job_across_runs(sim_factory):
    sim = sim_factory("dell")
    h = host_for(sim)
    first = run(apply_host, h)
    assert first.status == "changed" and first.data["job"]["state"] == "Scheduled"
    sim.reset_counts()
    second = run(apply_host, h)
    assert second.status == "unchanged" and sim.count("PATCH") == 0 and sim.count("POST", "Jobs") == 0
    assert second.data["job"]["id"] == first.data["job"]["id"]
    third = run(apply_host, h, opts(reboot=True))
    assert third.status == "changed" and third.data["mismatches"] == []
    assert [(j["Id"], j["JobState"]) for j in sim.jobs()] == [(first.data["job"]["id"], "Completed")]


def test_verify_reports_each_mismatch_after_someone_else_changed_a_pending_value(sim_factory):
    sim = sim_factory("supermicro")
    h = host_for(sim)
    assert run(apply_host, h).status == "changed"
    s = admin_session(sim)
    s.patch(sim.url + sim.settings_path, json={"Attributes": {"SRIOVSupport": "Disabled"}}).raise_for_status()
    s.post(
        sim.url + sim.system_path + "/Actions/ComputerSystem.Reset", json={"ResetType": "ForceRestart"}
    ).raise_for_status()
    for _ in range(100):
        if sim.power_state() == "On" and not sim.bios_pending():
            break
        threading.Event().wait(0.1)
    r = run(verify_host, h)
    assert r.status == "failed"
    assert r.data["mismatches"] == [
        {"attribute": "SRIOVSupport", "setting": "sriov", "desired": "Enabled", "current": "Disabled", "pending": None}
    ]
    assert "SRIOVSupport (sriov) is 'Disabled', wanted 'Enabled'" in r.message
    assert len(r.data["verified"]) == 8  # the H12 determinism sets DeterminismControl with the slider


def test_session_login_503_is_retried_and_a_broken_session_service_falls_back_to_basic(sim_factory):
    sim = sim_factory("generic")
    sim.inject("503", r"SessionService/Sessions$", count=1, method="POST", retry_after=0)
    r = run(plan_host, host_for(sim, auth="session"))
    assert r.status == "ok" and r.data["auth"] == "session"
    assert sim.count("POST", "Sessions$") == 2 and sim.count("DELETE", "Sessions/") == 1

    sim.inject("5xx", r"SessionService/Sessions$", count=1, method="POST", status=501)
    r = run(plan_host, host_for(sim, auth="session"))
    assert r.status == "ok" and r.data["auth"] == "basic"
    assert any("basic authentication" in w for w in r.data["warnings"])


def test_412_twice_stops_without_writing_more(sim_factory):
    """The settings object changes under every PATCH (here: the iLO-like object also shows current values, and
    someone keeps changing one in BIOS setup): after one re-read and re-plan the host fails, nothing written."""
    sim = sim_factory("hpe")
    sim.inject("slow", r"(?i)bios/settings", count=2, method="PATCH", seconds=1.0)

    def console_user():
        for k in (1, 2):
            for _ in range(200):
                if sim.count("PATCH") >= k:
                    break
                threading.Event().wait(0.01)
            sim.set_bios(ServerAssetTag=f"tag-{k}")

    t = threading.Thread(target=console_user)
    t.start()
    r = run(apply_host, host_for(sim))
    t.join()
    assert r.status == "failed" and "412 twice" in r.message and "coordinate" in r.message
    assert sim.count("PATCH") == 2 and sim.bios_pending() == {}
