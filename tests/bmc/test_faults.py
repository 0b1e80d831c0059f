"""Fault plan semantics (pure): matching, counting, before/after stage, bad options; and the answers of the
faults issue 40 added (drip_body, huge), served by the real simulator."""

import http.client
import json
import ssl
import time

import pytest
import requests

from numaforge.lab.bmc import BMCSimulator
from numaforge.lab.bmc.faults import FaultPlan


def test_fault_matches_path_and_is_used_up():
    plan = FaultPlan()
    plan.add("503", r"/Bios$", count=2, retry_after=3)
    assert plan.take("GET", "/redfish/v1/Systems/1", after=False) is None
    f1 = plan.take("GET", "/redfish/v1/Systems/1/Bios", after=False)
    f2 = plan.take("GET", "/redfish/v1/Systems/1/Bios", after=False)
    assert f1.options == {"retry_after": 3} and f2 is f1
    assert plan.take("GET", "/redfish/v1/Systems/1/Bios", after=False) is None
    assert plan.fired == [("503", "GET", "/redfish/v1/Systems/1/Bios")] * 2


def test_method_filter_and_after_stage():
    plan = FaultPlan()
    plan.add("reset", "Settings", method="patch", after=True)
    assert plan.take("GET", "/x/Settings", after=True) is None
    assert plan.take("PATCH", "/x/Settings", after=False) is None
    assert plan.take("PATCH", "/x/Settings", after=True).kind == "reset"
    assert plan.pending() == 0


def test_slow_after_processing_is_a_late_answer():
    """slow + after=True: the request is processed, then answered ``seconds`` late (past a client's timeout)."""
    plan = FaultPlan()
    plan.add("slow", "Settings", method="PATCH", after=True, seconds=3)
    assert plan.take("PATCH", "/x/Settings", after=False) is None
    fault = plan.take("PATCH", "/x/Settings", after=True)
    assert (fault.kind, fault.options) == ("slow", {"seconds": 3})


@pytest.mark.parametrize(
    "kind,kw", [("teapot", {}), ("503", {"after": True}), ("503", {"seconds": 1}), ("5xx", {"count": 0})]
)
def test_bad_fault_requests_are_refused(kind, kw):
    with pytest.raises(ValueError):
        FaultPlan().add(kind, **kw)


def test_drip_body_sends_the_headers_at_once_then_drips_the_body():
    """The real simulator: the status line and headers arrive at once, the body one byte per interval."""

    with BMCSimulator(tls=True) as sim:
        # a 2 s interval: the headers (TLS handshake included) arrive well inside it even on a loaded CI machine
        sim.inject("drip_body", "^/redfish/v1/$", interval=2.0)
        host, port = sim.url.split("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPSConnection(
            host, int(port), context=ssl.create_default_context(cafile=str(sim.ca_file)), timeout=5
        )
        t0 = time.monotonic()
        conn.request("GET", "/redfish/v1/")
        resp = conn.getresponse()
        assert resp.status == 200 and time.monotonic() - t0 < 1.9
        assert resp.read(2) == b'{"' and time.monotonic() - t0 >= 3.9
        conn.close()


def test_huge_streams_a_valid_body_of_the_size_asked():

    with BMCSimulator(tls=True) as sim:
        for length in (True, False):
            sim.inject("huge", "^/redfish/v1/$", size=3 * 1024 * 1024, length=length)
            r = requests.get(sim.url + "/redfish/v1/", verify=str(sim.ca_file), timeout=10)
            assert len(r.content) == 3 * 1024 * 1024 and json.loads(r.content)["Pad"].startswith("xx")
            assert ("content-length" in r.headers) is length


def test_answer_serves_the_status_body_and_headers_given():
    with BMCSimulator(tls=True) as sim:
        sim.inject("answer", "^/redfish/v1/$", status=201, body={"Attributes": None}, headers={"X-Test": "1"})
        r = requests.get(sim.url + "/redfish/v1/", verify=str(sim.ca_file), timeout=10)
        assert (r.status_code, r.json(), r.headers["x-test"]) == (201, {"Attributes": None}, "1")
        again = requests.get(sim.url + "/redfish/v1/", verify=str(sim.ca_file), timeout=10)
        assert again.json()["@odata.id"] == "/redfish/v1/"  # used up: the real document again
