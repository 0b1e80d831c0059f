"""Issue 29: how numaforge authenticates to a BMC (bmc.auth; numaforge/bios/redfish.py says why HTTP Basic over
verified TLS is as safe as a session). Real peer: the BMC simulator over TLS, which counts every request."""

from __future__ import annotations

import pytest

from numaforge.bios.apply import HostOptions, run_hosts
from numaforge.errors import NumaforgeError
from numaforge.inventory.loader import load_inventory
from numaforge.lab.bmc import BMCSimulator
from numaforge.secrets import SecretRef

from .helpers import host

pytestmark = pytest.mark.bmc

PW_VAR = "NF_TEST_AUTH_PW"
PASSWORD = "auth-Mode-pw-9"


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv(PW_VAR, PASSWORD)
    s = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=0.2).start()
    yield s
    assert s.errors == []
    s.stop()


def _host(sim, auth="auto", **kw):
    return host(
        url=sim.url, password=SecretRef("env", PW_VAR), ca_bundle=str(sim.ca_file), vendor="generic", auth=auth, **kw
    )


def _plan(h):
    return run_hosts([h], "plan", HostOptions(discovery_cache=False)).results[0]


def test_auto_is_http_basic_over_verified_tls_with_no_login_or_logout(sim):
    r = _plan(_host(sim))
    assert r.status == "ok" and r.data["auth"] == "basic", r.message
    assert sim.count("POST", "Sessions") == 0 and sim.count("DELETE") == 0 and sim.sessions == {}
    assert r.data["requests"] == sim.count()


def test_session_stays_available_and_is_logged_out(sim):
    r = _plan(_host(sim, auth="session"))
    assert r.status == "ok" and r.data["auth"] == "session", r.message
    assert sim.count("POST", "Sessions$") == 1 and sim.count("DELETE", "Sessions/") == 1 and sim.sessions == {}


def test_auto_on_an_insecure_connection_logs_in_with_a_session(sim):
    r = run_hosts(
        [host(url=sim.url, password=SecretRef("env", PW_VAR), vendor="generic", insecure=True)],
        "plan",
        HostOptions(discovery_cache=False),
    ).results[0]
    assert r.status == "ok" and r.data["auth"] == "session", r.message
    assert sim.count("POST", "Sessions$") == 1


def test_a_bmc_that_refuses_basic_gets_a_session_in_auto_and_a_clear_error_in_basic(sim):
    sim.basic_auth = False
    r = _plan(_host(sim))
    assert r.status == "ok" and r.data["auth"] == "session", r.message
    assert any("refused HTTP Basic" in w for w in r.data["warnings"])
    assert sim.count("POST", "Sessions$") == 1 and sim.count("DELETE", "Sessions/") == 1 and sim.sessions == {}
    sim.reset_counts()
    r = _plan(_host(sim, auth="basic"))
    assert r.status == "failed" and "refused the credentials (HTTP Basic" in r.message
    assert "bmc.auth: session" in r.message
    assert sim.count("POST", "Sessions") == 0 and sim.count("GET", "Bios") == 0


def test_a_wrong_password_is_refused_once_per_mode_and_never_retried_blindly(sim, monkeypatch):
    monkeypatch.setenv(PW_VAR, "wrong")
    r = _plan(_host(sim))
    assert r.status == "failed" and "refused the credentials" in r.message
    # auto: the first Basic read is refused, then one session login is tried (the BMC may allow sessions only)
    assert sim.count("POST", "Sessions$") == 1 and sim.count("GET", "Bios") == 0
    assert PASSWORD not in r.message and "wrong" not in r.message


def test_the_inventory_takes_bmc_auth(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  a:\n    bmc: {url: 'https://10.0.0.5', password: 'env:X', auth: session}\n"
        "  b:\n    bmc: {url: 'https://10.0.0.6', password: 'env:X'}\n"
    )
    hosts = load_inventory(inv).hosts
    assert (hosts["a"].bmc.auth, hosts["b"].bmc.auth) == ("session", "auto")
    inv.write_text("hosts:\n  a:\n    bmc: {url: 'https://10.0.0.5', password: 'env:X', auth: digest}\n")
    with pytest.raises(NumaforgeError) as err:
        load_inventory(inv)
    assert "bmc.auth 'digest' is not known" in err.value.render()


def test_reads_sent_at_once_keep_the_hosts_timeout(sim):
    """The reads prefetch sends in worker threads are the host's work: a BMC that drips its Systems answer is cut
    at --host-timeout (3 s), not at the 180 s total deadline of a request with no host budget."""
    import time

    from numaforge.fleet import Rollout

    sim.faults.add("drip", r"^/redfish/v1/Systems/?$", method="GET", interval=0.5)
    t0 = time.monotonic()
    out = run_hosts([_host(sim)], "plan", HostOptions(discovery_cache=False), rollout=Rollout(host_timeout=3))
    r = out.results[0]
    assert time.monotonic() - t0 < 30, r.message
    assert r.status == "failed" and "--host-timeout of 3 s" in r.message, r.message
