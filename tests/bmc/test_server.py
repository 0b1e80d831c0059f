"""The simulator over real HTTPS: auth, sessions, TLS trust, BIOS settings flow per flavour, ETags, Dell jobs,
power transitions, faults, request counting, and the daemon entry point."""

from __future__ import annotations

import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from numaforge.lab.bmc import FLAVOURS, BMCSimulator, BMCSimulatorError
from numaforge.lab.bmc.server import Hub

from .conftest import PASSWORD, Client, wait_for

pytestmark = pytest.mark.bmc

# one valid change per flavour: (attribute, new value)
CHANGE = {
    "dell": ("NumaNodesPerSocket", "4"),
    "hpe": ("NumaMemoryDomainsPerSocket", "FourMemoryDomainsPerSocket"),
    "supermicro": ("NUMANodesPerSocket", "NPS4"),
    "lenovo": ("Processors_NUMANodesPerSocket", "NPS4"),
    "generic": ("Q0100", "NPS4"),
}


def settings_uri(c: Client) -> str:
    system = c.get(c.sim.system_path).json()
    bios = c.get(system["Bios"]["@odata.id"]).json()
    return bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]


def msg_ids(resp) -> list[str]:
    return [m["MessageId"].rsplit(".", 1)[-1] for m in resp.json()["error"]["@Message.ExtendedInfo"]]


# ---------------------------------------------------------------------------------------------- auth & TLS
def test_service_root_is_public_everything_else_needs_auth(make_sim):
    sim = make_sim()
    anon = Client(sim, auth=None)
    assert anon.get("/redfish/v1/").status_code == 200
    assert anon.get("/redfish/v1/$metadata").status_code == 200
    r = anon.get(sim.system_path)
    assert r.status_code == 401 and "Basic" in r.headers["WWW-Authenticate"]
    assert msg_ids(r) == ["NoValidSession"]
    assert Client(sim, auth=("admin", "wrong")).get(sim.system_path).status_code == 401
    assert Client(sim).get(sim.system_path).status_code == 200


def test_session_login_use_and_logout(make_sim):
    sim = make_sim()
    anon = Client(sim, auth=None)
    r = anon.post("/redfish/v1/SessionService/Sessions", json={"UserName": "admin", "Password": PASSWORD})
    assert r.status_code == 201
    token, location = r.headers["X-Auth-Token"], r.headers["Location"]
    assert location == r.json()["@odata.id"] and location.startswith("/redfish/v1/SessionService/Sessions/")
    hdr = {"X-Auth-Token": token}
    assert anon.get(sim.system_path, headers=hdr).status_code == 200
    assert anon.delete(location, headers=hdr).status_code == 204
    assert anon.get(sim.system_path, headers=hdr).status_code == 401
    bad = anon.post("/redfish/v1/SessionService/Sessions", json={"UserName": "admin", "Password": "nope"})
    assert bad.status_code == 401 and "X-Auth-Token" not in bad.headers
    missing = anon.post("/redfish/v1/SessionService/Sessions", json={"UserName": "admin"})
    assert missing.status_code == 400 and msg_ids(missing) == ["CreateFailedMissingReqProperties"]


def test_tls_is_verified_against_the_generated_ca(make_sim):
    sim = make_sim()
    s = requests.Session()
    s.trust_env = False
    with pytest.raises(requests.exceptions.SSLError):
        s.get(sim.url + "/redfish/v1/", timeout=10)  # system CAs do not know the simulator
    assert s.get(sim.url + "/redfish/v1/", verify=str(sim.ca_file), timeout=10).status_code == 200
    by_name = f"https://localhost:{sim.port}/redfish/v1/"  # the certificate also names localhost
    assert s.get(by_name, verify=str(sim.ca_file), timeout=10).status_code == 200


def test_plain_http_when_tls_is_off(make_sim):
    sim = make_sim(tls=False)
    assert sim.url.startswith("http://") and sim.ca_file is None
    assert Client(sim).get(sim.system_path).json()["PowerState"] == "On"


def test_busy_port_is_a_clear_error(make_sim):
    sim = make_sim()
    with pytest.raises(BMCSimulatorError) as exc:
        BMCSimulator(port=sim.port, password=PASSWORD).start()
    assert str(sim.port) in exc.value.where and exc.value.fix


@pytest.mark.parametrize("latency", [-0.1, 61, "0.05"])
def test_a_bad_latency_is_a_clear_error(latency):
    with pytest.raises(BMCSimulatorError) as exc:
        BMCSimulator(password=PASSWORD, latency=latency)
    assert exc.value.where == "latency" and "0..60" in exc.value.what


def test_responses_go_out_without_waiting_for_the_clients_ack(make_sim):
    """The simulator sets TCP_NODELAY on every connection, as web servers do: otherwise the body, written after
    the headers, waits for the client's delayed ACK (~40 ms per response on Linux), and benchmarks measure that
    stall instead of the client. Checked on the socket the server accepted, not by timing."""
    sim = make_sim()
    seen = []
    orig = sim._count_connection

    def spy(resumed):
        seen.append(resumed)
        orig(resumed)

    sim._count_connection = spy
    with requests.Session() as s:
        s.trust_env = False
        for _ in range(3):
            assert s.get(sim.url + "/redfish/v1/", verify=str(sim.ca_file)).status_code == 200
        with sim._server.conn_lock:  # the kept-alive connection, still open
            conns = list(sim._server.connections)
        assert len(conns) == 1 and conns[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert sim.connections == 1 and seen == [False]  # one connection for three requests


# ---------------------------------------------------------------------------------------------- BIOS flow
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_patch_stays_pending_until_host_reset_then_applies(make_sim, flavour):
    sim = make_sim(flavour)
    c = Client(sim)
    attr, value = CHANGE[flavour]
    uri = settings_uri(c)
    bios = c.get(sim.bios_path).json()
    assert bios["AttributeRegistry"] == sim.flavour.registry_id
    assert bios["@Redfish.Settings"]["SupportedApplyTimes"] == list(sim.flavour.supported_apply_times)
    body = {"Attributes": {attr: value}}
    if flavour == "dell":
        body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
    r = c.patch(uri, json=body, headers={"If-Match": c.get(uri).headers["ETag"]})
    assert r.status_code in (200, 202), r.text
    assert sim.bios_pending() == {attr: value} and sim.bios_current()[attr] != value
    assert c.get(uri).json()["Attributes"][attr] == value
    assert c.get(sim.bios_path).json()["Attributes"][attr] != value
    # a BMC (manager) reset does NOT apply BIOS settings
    mgr = c.get(sim.system_path).json()["Links"]["ManagedBy"][0]["@odata.id"]
    target = c.get(mgr).json()["Actions"]["#Manager.Reset"]["target"]
    assert c.post(target, json={"ResetType": "GracefulRestart"}).status_code == 204
    wait_for(lambda: c.get(sim.bios_path).status_code == 200, what="BMC back after its reset")
    assert sim.bios_pending() == {attr: value} and sim.bios_current()[attr] != value
    # a host reset does
    reset = c.get(sim.system_path).json()["Actions"]["#ComputerSystem.Reset"]
    assert {"GracefulRestart", "ForceRestart", "On", "ForceOff"} <= set(reset["ResetType@Redfish.AllowableValues"])
    assert c.post(reset["target"], json={"ResetType": "GracefulRestart"}).status_code == 204
    assert c.get(sim.system_path).json()["PowerState"] == "Off"
    wait_for(lambda: c.get(sim.system_path).json()["PowerState"] == "On", what="power on")
    assert c.get(sim.bios_path).json()["Attributes"][attr] == value
    assert sim.bios_pending() == {}
    settings = c.get(sim.bios_path).json()["@Redfish.Settings"]
    assert settings["Messages"][0]["RelatedProperties"] == [f"#/Attributes/{attr}"]


def test_invalid_patch_is_rejected_whole_with_extended_info(make_sim):
    sim = make_sim("dell")
    c = Client(sim)
    uri = settings_uri(c)
    r = c.patch(
        uri,
        json={"Attributes": {"SriovGlobalEnable": "Enabled", "NumaNodesPerSocket": "3", "SystemBiosVersion": "1.0"}},
    )
    assert r.status_code == 400
    infos = r.json()["error"]["@Message.ExtendedInfo"]
    assert [(m["MessageId"].rsplit(".", 1)[-1], m["MessageArgs"], m["RelatedProperties"]) for m in infos] == [
        ("PropertyValueNotInList", ["3", "NumaNodesPerSocket"], ["#/Attributes/NumaNodesPerSocket"]),
        ("PropertyNotWritable", ["SystemBiosVersion"], ["#/Attributes/SystemBiosVersion"]),
    ]
    assert sim.bios_pending() == {}  # the valid SriovGlobalEnable was not half-applied


def test_stale_etag_gets_412_and_changes_nothing(make_sim):
    sim = make_sim("hpe")
    c = Client(sim)
    uri = settings_uri(c)
    etag = c.get(uri).headers["ETag"]
    assert c.patch(uri, json={"Attributes": {"Sriov": "Disabled"}}, headers={"If-Match": etag}).status_code == 200
    r = c.patch(uri, json={"Attributes": {"ProcAmdIoVt": "Disabled"}}, headers={"If-Match": etag})
    assert r.status_code == 412 and msg_ids(r) == ["PreconditionFailed"]
    assert r.headers["ETag"] == c.get(uri).headers["ETag"] != etag
    assert sim.bios_pending() == {"Sriov": "Disabled"}
    # DSP8010 Settings.ETag is the ETag of the resource the settings were applied to (the current Bios): a
    # pending change leaves it alone, and it is never the settings object's
    annotation = c.get(sim.bios_path).json()["@Redfish.Settings"]["ETag"]
    assert annotation != c.get(uri).headers["ETag"] and annotation != etag


def test_hpe_paths_lowercase_link_and_trailing_slashes(make_sim):
    sim = make_sim("hpe")
    c = Client(sim)
    root = c.get("/redfish/v1/").json()
    assert root["Systems"]["@odata.id"] == "/redfish/v1/Systems/"
    uri = settings_uri(c)
    assert uri == "/redfish/v1/systems/1/bios/settings/"
    assert c.get(uri).json()["@odata.id"] == uri
    assert c.get("/redfish/v1/Systems/1/Bios/Settings").status_code == 200


def test_patch_to_current_bios_is_not_allowed(make_sim):
    sim = make_sim("generic")
    r = Client(sim).patch(sim.bios_path, json={"Attributes": {"Q0100": "NPS2"}})
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD" and sim.bios_pending() == {}


def test_attribute_registry_is_reachable_from_bios(make_sim):
    sim = make_sim("dell")
    c = Client(sim)
    reg_id = c.get(sim.bios_path).json()["AttributeRegistry"]
    reg_file = c.get(f"/redfish/v1/Registries/{reg_id}").json()
    registry = c.get(reg_file["Location"][0]["Uri"]).json()
    assert registry["Id"] == reg_id
    names = {a["AttributeName"] for a in registry["RegistryEntries"]["Attributes"]}
    assert set(c.get(sim.bios_path).json()["Attributes"]) == names


def test_bad_requests(make_sim):
    sim = make_sim()
    c = Client(sim)
    r = c.get("/redfish/v1/Chassis/nope")
    assert r.status_code == 404 and msg_ids(r) == ["ResourceNotFound"]
    r = c.patch(settings_uri(c), data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and msg_ids(r) == ["MalformedJSON"]
    target = f"{sim.system_path}/Actions/ComputerSystem.Reset"
    r = c.post(target, json={"ResetType": "Nmi"})
    assert r.status_code == 400 and msg_ids(r) == ["ActionParameterValueNotInList"]
    assert msg_ids(c.post(target, json={})) == ["ActionParameterMissing"]
    assert c.delete(sim.system_path).status_code == 405
    assert c.head(sim.system_path).status_code == 200


# ---------------------------------------------------------------------------------------------- Dell jobs
def test_dell_pending_without_job_is_not_applied_by_a_reboot(make_sim):
    sim = make_sim("dell")
    c = Client(sim)
    r = c.patch(settings_uri(c), json={"Attributes": {"SriovGlobalEnable": "Enabled"}})
    assert r.status_code == 200
    c.post(f"{sim.system_path}/Actions/ComputerSystem.Reset", json={"ResetType": "ForceRestart"})
    wait_for(lambda: sim.power_state() == "On" and sim.state.boot_count == 1, what="reboot")
    assert (
        sim.bios_pending() == {"SriovGlobalEnable": "Enabled"} and sim.bios_current()["SriovGlobalEnable"] == "Disabled"
    )


def test_dell_config_job_lifecycle_and_conflicts(make_sim):
    sim = make_sim("dell")
    c = Client(sim)
    uri = settings_uri(c)
    jobs = c.get(sim.manager_path).json()["Links"]["Oem"]["Dell"]["Jobs"]["@odata.id"]
    assert jobs == "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"
    r = c.post(jobs, json={"TargetSettingsURI": uri})
    assert r.status_code == 400 and msg_ids(r) == ["JCP000"]  # nothing pending yet
    assert c.patch(uri, json={"Attributes": {"IommuSupport": "Enabled"}}).status_code == 200
    r = c.post(jobs, json={"TargetSettingsURI": uri})
    assert r.status_code == 200
    job_uri = r.headers["Location"]
    assert c.get(job_uri).json()["JobState"] == "Scheduled"
    assert c.get(jobs).json()["Members"] == [{"@odata.id": job_uri}]
    # a pending config job blocks new changes and new jobs (iDRAC SYS011)
    r = c.patch(uri, json={"Attributes": {"SriovGlobalEnable": "Enabled"}})
    assert r.status_code == 400 and msg_ids(r) == ["SYS011"]
    assert msg_ids(c.post(jobs, json={"TargetSettingsURI": uri})) == ["SYS011"]
    c.post(f"{sim.system_path}/Actions/ComputerSystem.Reset", json={"ResetType": "GracefulRestart"})
    assert c.get(job_uri).json()["JobState"] == "Running"
    wait_for(lambda: c.get(job_uri).json()["JobState"] == "Completed", what="job completed")
    assert sim.bios_current()["IommuSupport"] == "Enabled" and sim.bios_pending() == {}
    assert c.patch(uri, json={"Attributes": {"SriovGlobalEnable": "Enabled"}}).status_code == 200
    assert c.post(jobs, json={"TargetSettingsURI": "/redfish/v1/Systems/Other/Bios/Settings"}).status_code == 400


def test_dell_apply_time_creates_job_and_delete_discards(make_sim):
    sim = make_sim("dell")
    c = Client(sim)
    uri = settings_uri(c)
    r = c.patch(
        uri, json={"Attributes": {"CcxAsNumaDomain": "Enabled"}, "@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}}
    )
    assert r.status_code == 202
    assert c.get(uri).json()["@Redfish.SettingsApplyTime"]["ApplyTime"] == "OnReset"
    job_uri = r.headers["Location"]
    assert c.delete(job_uri).status_code == 200
    assert c.get(job_uri).status_code == 404 and sim.bios_pending() == {}


# ---------------------------------------------------------------------------------------------- power
def test_graceful_restart_ignored_by_hung_os_force_restart_works(make_sim):
    sim = make_sim("lenovo")
    sim.graceful_ignored = True
    c = Client(sim)
    target = f"{sim.system_path}/Actions/ComputerSystem.Reset"
    assert c.post(target, json={"ResetType": "GracefulRestart"}).status_code == 204
    assert sim.power_state() == "On" and sim.state.boot_count == 0
    assert c.post(target, json={"ResetType": "ForceRestart"}).status_code == 204
    assert sim.power_state() == "Off"
    wait_for(lambda: sim.power_state() == "On", what="power on")
    assert sim.state.boot_count == 1


def test_force_off_then_on(make_sim):
    sim = make_sim()
    c = Client(sim)
    target = f"{sim.system_path}/Actions/ComputerSystem.Reset"
    c.post(target, json={"ResetType": "ForceOff"})
    assert c.get(sim.system_path).json()["PowerState"] == "Off"
    c.post(target, json={"ResetType": "On"})
    assert c.get(sim.system_path).json()["PowerState"] == "PoweringOn"
    wait_for(lambda: c.get(sim.system_path).json()["PowerState"] == "On", what="power on")


# ---------------------------------------------------------------------------------------------- faults
def test_fault_503_with_retry_after_then_normal(make_sim):
    sim = make_sim()
    c = Client(sim)
    sim.inject("503", r"/Bios$", count=1, retry_after=7)
    r = c.get(sim.bios_path)
    assert r.status_code == 503 and r.headers["Retry-After"] == "7"
    assert msg_ids(r) == ["ServiceTemporarilyUnavailable"]
    assert c.get(sim.bios_path).status_code == 200


def test_fault_5xx_before_changes_nothing_after_changes_state(make_sim):
    sim = make_sim()
    c = Client(sim)
    uri = settings_uri(c)
    sim.inject("5xx", "Settings", method="PATCH", status=502)
    assert c.patch(uri, json={"Attributes": {"Q0106": "Enabled"}}).status_code == 502
    assert sim.bios_pending() == {}
    sim.inject("5xx", "Settings", method="PATCH", after=True)
    assert c.patch(uri, json={"Attributes": {"Q0106": "Enabled"}}).status_code == 500
    assert sim.bios_pending() == {"Q0106": "Enabled"}  # applied, answer lost: the retry hazard


def test_fault_reset_drops_the_connection(make_sim):
    sim = make_sim()
    c = Client(sim)
    sim.inject("reset", "/Systems")
    with pytest.raises(requests.exceptions.ConnectionError):
        c.get(sim.system_path)
    assert c.get(sim.system_path).status_code == 200


def test_fault_bad_json_and_slow(make_sim):
    sim = make_sim()
    c = Client(sim)
    sim.inject("bad_json", r"/Systems/1$")
    r = c.get(sim.system_path)
    assert r.status_code == 200
    with pytest.raises(ValueError):
        r.json()
    sim.inject("slow", r"/Systems/1$", seconds=0.2)
    assert c.get(sim.system_path).json()["Id"] == "1"
    assert [k for k, _, _ in sim.faults.fired] == ["bad_json", "slow"]


def test_every_request_is_counted(make_sim):
    sim = make_sim()
    c = Client(sim)
    c.get("/redfish/v1/")
    c.get(sim.system_path)
    sim.inject("503")
    c.get(sim.bios_path)
    assert sim.requests == [("GET", "/redfish/v1/"), ("GET", sim.system_path), ("GET", sim.bios_path)]
    assert sim.count("GET", "Bios") == 1 and sim.count("PATCH") == 0
    sim.reset_counts()
    assert sim.requests == []


# ---------------------------------------------------------------------------------------------- daemon
def _start_daemon(state_dir: Path, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "numaforge.lab.bmc",
            "--flavour",
            "supermicro",
            "--port",
            "0",
            "--state-dir",
            str(state_dir),
            "--power-delay",
            "0.2",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_daemon_writes_its_files_serves_and_stops(tmp_path):
    d = tmp_path / "bmc"
    proc = _start_daemon(d)
    try:
        wait_for(lambda: (d / "url").exists() or proc.poll() is not None, what="daemon url")
        assert proc.poll() is None, proc.stderr.read()
        url = (d / "url").read_text().strip()
        password = (d / "password").read_text().strip()
        assert stat.S_IMODE((d / "password").stat().st_mode) == 0o600 and len(password) >= 16
        assert int((d / "pid").read_text()) == proc.pid
        s = requests.Session()
        s.trust_env = False
        r = s.get(url + "/redfish/v1/Systems/1/Bios", auth=("admin", password), verify=str(d / "ca.pem"), timeout=10)
        assert r.status_code == 200 and "NUMANodesPerSocket" in r.json()["Attributes"]
        # a second daemon on the same state dir refuses to start
        second = _start_daemon(d)
        assert second.wait(timeout=30) == 2 and "already runs" in second.stderr.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0 and not (d / "pid").exists() and not (d / "url").exists()
    assert (d / "password").read_text().strip() == password  # kept for the next start


def test_daemon_on_a_busy_port_exits_2_with_a_fix(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "numaforge.lab.bmc", "--port", str(port), "--state-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert f"127.0.0.1:{port}" in proc.stderr and "fix:" in proc.stderr and "Traceback" not in proc.stderr


def test_manager_reset_drops_sessions_and_answers_503_while_rebooting(make_sim):
    sim = make_sim("supermicro")
    sim.manager_reset_seconds = 600
    anon = Client(sim, auth=None)
    token = anon.post("/redfish/v1/SessionService/Sessions", json={"UserName": "admin", "Password": PASSWORD}).headers[
        "X-Auth-Token"
    ]
    r = anon.post(
        f"{sim.manager_path}/Actions/Manager.Reset", json={"ResetType": "ForceRestart"}, headers={"X-Auth-Token": token}
    )
    assert r.status_code == 204
    r = anon.get(sim.system_path, headers={"X-Auth-Token": token})
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1
    sim._unavailable_until = 0  # the BMC is back
    assert anon.get(sim.system_path, headers={"X-Auth-Token": token}).status_code == 401  # session gone
    assert sim.state.manager_resets == 1 and sim.state.boot_count == 0


def test_dell_immediate_apply_time_restarts_the_host(make_sim):
    sim = make_sim("dell")
    c = Client(sim)
    r = c.patch(
        settings_uri(c),
        json={
            "Attributes": {"DeterminismSlider": "PerfDeterminism"},
            "@Redfish.SettingsApplyTime": {"ApplyTime": "Immediate"},
        },
    )
    assert r.status_code == 202
    wait_for(lambda: sim.power_state() == "On" and sim.state.boot_count == 1, what="immediate reboot")
    assert sim.bios_current()["DeterminismSlider"] == "PerfDeterminism"
    assert [j["JobState"] for j in sim.jobs()] == ["Completed"]


def test_reset_bios_stages_defaults_applied_on_reboot(make_sim):
    sim = make_sim("generic")
    sim.set_bios(Q0100="NPS4", Q0105="Enabled")
    c = Client(sim)
    target = c.get(sim.bios_path).json()["Actions"]["#Bios.ResetBios"]["target"]
    assert c.post(target, json={}).status_code == 204
    assert sim.bios_pending() == {"Q0100": "NPS1", "Q0105": "Disabled"}
    c.post(f"{sim.system_path}/Actions/ComputerSystem.Reset", json={"ResetType": "ForceRestart"})
    wait_for(lambda: sim.bios_pending() == {}, what="defaults applied")
    assert sim.bios_current()["Q0100"] == "NPS1"
    with pytest.raises(KeyError):
        sim.set_bios(NoSuch="x")


def test_a_stopped_bmc_stops_answering_on_kept_alive_connections(make_sim, tmp_path):
    sim = make_sim()
    c = Client(sim)
    ca = tmp_path / "ca.pem"  # stop() removes the simulator's temp state dir
    ca.write_bytes(sim.ca_file.read_bytes())
    c.s.verify = str(ca)
    assert c.get(sim.system_path).status_code == 200  # opens a keep-alive connection
    sim.stop()
    with pytest.raises(requests.exceptions.ConnectionError):
        c.get(sim.system_path)


def test_a_standalone_simulator_stops_at_once_woken_not_polled():
    """Issue 43: a simulator on its own served with ``serve_forever(poll_interval=0.2)``, so every stop() waited
    for the next poll (about 0.2 s; the bmc tier starts hundreds of simulators) and an idle one woke five times a
    second. Its thread now sleeps on its own hub's wake-up socket: stop() wakes it and joins it at once. Ten
    stops, each after a real request, take well under the ten polls (2 s) they took; each thread has ended."""
    stopping = 0.0
    for _ in range(10):
        sim = BMCSimulator(username="admin", password=PASSWORD, power_delay=0.1).start()
        assert Client(sim).get("/redfish/v1/").status_code == 200
        (thread,) = [t for t in threading.enumerate() if t.name == "bmc-sim-generic"]
        t0 = time.monotonic()
        sim.stop()
        stopping += time.monotonic() - t0
        assert not thread.is_alive(), "stop() returned with the simulator's thread still serving"
        assert sim.errors == [], f"simulator bugs: {sim.errors}"
    assert stopping < 1.0, f"10 stops took {stopping:.2f} s: stop() waits for a poll"


# ---------------------------------------------------------------------------------------------- many BMCs, one hub
def test_a_hub_serves_many_bmcs_with_one_thread_and_a_stopped_one_stops_answering(tmp_path):
    """Issue 43 item 6: N simulators on one Hub cost one accepting thread, not one serve_forever thread each
    (10,000 of those kept two cores busy waking every 0.2 s). Every flavour is served; each BMC answers with its
    own state over its own TLS; a stopped one refuses while the others keep answering; close() ends the hub."""
    before = {t.ident for t in threading.enumerate()}
    hub = Hub()
    sims = [
        BMCSimulator(flavour=f, username="admin", password=PASSWORD, power_delay=0.1).start(hub=hub)
        for f in FLAVOURS
        for _ in range(4)
    ]
    try:
        started = [t.name for t in threading.enumerate() if t.ident not in before]
        assert started == ["bmc-sim-hub"], f"an idle BMC on the hub must cost no thread: {started}"
        for sim in sims:  # each answers for itself: its own system, with its own CA
            c = Client(sim)
            assert c.get(sim.system_path).json()["@odata.id"].rstrip("/") == sim.system_path.rstrip("/")
        a, b = [s for s in sims if s.flavour.name == "generic"][:2]  # two BMCs of one flavour: two states
        a.set_bios(**dict([CHANGE["generic"]]))
        assert b.bios_current() != a.bios_current()
        url, ca = a.url, tmp_path / "a-ca.pem"
        ca.write_bytes(a.ca_file.read_bytes())  # stop() removes the simulator's CA file; the check stays verified
        a.stop()
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(url + "/redfish/v1/", verify=str(ca), timeout=5)
        assert Client(b).get("/redfish/v1/").status_code == 200
    finally:
        for sim in sims:
            sim.stop()
            assert sim.errors == [], f"simulator bugs: {sim.errors}"
        hub.close()
    wait_for(
        lambda: not [t for t in threading.enumerate() if t.ident not in before],
        what="the hub's and the connections' threads to end",
    )
