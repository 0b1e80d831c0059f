"""Issue 40 item 2 (Redfish): every read of a BMC is bounded in total time -- connect, headers AND body, one
deadline per request inside the host's budget, a stop request honoured while waiting -- and in size (a cap per
kind of answer, named in the message). Real peers: the BMC simulator over TLS with its "drip_body" (headers at
once, then the body one byte at a time) and "huge" faults; the client is the real one (DMTF's library)."""

from __future__ import annotations

import threading
import time

import pytest

from numaforge import budget
from numaforge.bios import deadline
from numaforge.bios.apply import HostOptions, RegistryCache, plan_host
from numaforge.bios.exchange import RetryPolicy
from numaforge.bios.redfish import RedfishClient
from numaforge.errors import NumaforgeError
from numaforge.lab.bmc import BMCSimulator
from numaforge.report import HostResult
from numaforge.secrets import SecretRef

from .helpers import host

pytestmark = pytest.mark.bmc
PW = "bounded-Bmc-pw-40"


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("NF_BOUNDED_PW", PW)
    s = BMCSimulator(tls=True, username="admin", password=PW, power_delay=0.2).start()
    try:
        yield s
    finally:
        budget.clear_stop()
        s.stop()


def _client(sim, **policy) -> RedfishClient:
    policy.setdefault("read_timeout", 5)
    return RedfishClient(
        sim.url,
        "admin",
        PW,
        host="h1",
        ca_file=str(sim.ca_file),
        policy=RetryPolicy(attempts=3, backoff=0.05, **policy),
        auth="session",
    )


def test_a_body_dripped_after_the_headers_ends_at_the_total_deadline(sim):
    sim.inject("drip_body", f"^{sim.bios_path}$", method="GET", count=5, interval=0.3)
    t0 = time.monotonic()
    with _client(sim, total_timeout=2) as client:
        with pytest.raises(NumaforgeError) as exc:
            client.get(sim.bios_path)
    assert time.monotonic() - t0 < 5  # main: ~20 min (4 KiB at 0.3 s), headers in at once
    assert "no complete answer within its total deadline of 2 s" in exc.value.what
    assert sim.count("GET", sim.bios_path + "$") == 1  # not retried


def test_a_body_dripped_after_the_headers_ends_on_the_host_budget(sim):
    sim.inject("drip_body", f"^{sim.bios_path}$", method="GET", count=5, interval=0.3)
    with _client(sim) as client, budget.host_deadline(1.5, "h1"):
        t0 = time.monotonic()
        with pytest.raises(budget.HostTimeout) as exc:
            client.get(sim.bios_path)
    assert time.monotonic() - t0 < 2.5
    assert "--host-timeout of 1.5 s" in exc.value.what


def test_a_body_dripped_after_the_headers_ends_on_a_stop_request(sim):
    sim.inject("drip_body", f"^{sim.bios_path}$", method="GET", count=5, interval=0.3)
    with _client(sim) as client:
        threading.Timer(1.0, budget.request_stop, args=("interrupted (SIGTERM)",)).start()
        t0 = time.monotonic()
        with pytest.raises(budget.Stopped) as exc:
            client.get(sim.bios_path)
        assert time.monotonic() - t0 < 2.5
    assert "interrupted (SIGTERM)" in exc.value.what


def test_bios_plan_with_host_timeout_ends_a_dripping_host_within_its_budget(sim):
    """The fleet's view: --host-timeout 3 ends the host in about 3 s (+1), its message naming the budget."""
    sim.inject("drip_body", f"^{sim.bios_path}$", method="GET", count=50, interval=0.3)
    h = host(url=sim.url, password=SecretRef("env", "NF_BOUNDED_PW"), ca_bundle=str(sim.ca_file), auth="session")
    result = HostResult(h.name)
    t0 = time.monotonic()
    with budget.host_deadline(3, h.name):
        plan_host(h, HostOptions(policy=RetryPolicy(read_timeout=5)), RegistryCache(), result)
    assert time.monotonic() - t0 < 4.0
    assert result.status == "failed" and "--host-timeout of 3 s" in result.message


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "no-content-length"])
def test_a_100_mb_bios_answer_is_refused_with_the_cap_named(sim, length):
    sim.inject("huge", f"^{sim.bios_path}$", method="GET", count=5, size=100 * 1024 * 1024, length=length)
    kind, cap = deadline.answer_cap(sim.bios_path)
    t0 = time.monotonic()
    with _client(sim) as client:
        with pytest.raises(NumaforgeError) as exc:
            client.get(sim.bios_path)
    assert time.monotonic() - t0 < 10
    assert f"larger than the {cap // deadline.MiB} MiB cap for a {kind}" in exc.value.what, exc.value.what
    assert exc.value.fix and sim.count("GET", sim.bios_path + "$") == 1  # the same answer again: not retried


def test_a_huge_login_answer_is_refused_with_the_cap_named(sim):
    sim.inject("huge", "SessionService/Sessions$", method="POST", size=20 * 1024 * 1024, length=False)
    with pytest.raises(NumaforgeError) as exc:
        with _client(sim):
            pass
    assert "the BMC's answer is larger than the 8 MiB cap for a Redfish resource" in exc.value.what, exc.value.what
    assert "cannot reach" not in exc.value.what


def test_an_answer_under_its_cap_is_read_whole(sim):
    """The cap is per kind: a registry-sized answer at a registry path passes where a Bios of that size would not."""
    kind, cap = deadline.answer_cap("/redfish/v1/Registries/BiosAttributeRegistry.v1")
    assert cap > deadline.answer_cap(sim.bios_path)[1]
    sim.inject("huge", "^/redfish/v1/Registries/X$", method="GET", size=9 * 1024 * 1024)
    with _client(sim) as client:
        r = client.get("/redfish/v1/Registries/X")
    assert len(r.body["Pad"]) > 9 * 1024 * 1024 - 100


@pytest.mark.parametrize(
    "path",
    ["/redfish/v1/", "/redfish/v1/Systems/1/Bios", "/redfish/v1/Systems/1/Bios/Settings", "/redfish/v1/Registries/R"],
)
def test_every_kind_of_answer_has_a_cap(path):
    kind, cap = deadline.answer_cap(path)
    assert kind and 0 < cap <= 64 * deadline.MiB
