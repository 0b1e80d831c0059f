"""Fixtures for the bmc tier: real simulators on 127.0.0.1 (real TLS, real HTTP) and a requests client that
trusts only the simulator's CA."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from numaforge.lab.bmc import BMCSimulator

PASSWORD = "s1m-Pa55word"
# DMTF files vendored in the repository (numaforge/lab/bmc/dmtf/README.md says which and why)
DMTF = Path(__file__).resolve().parents[2] / "numaforge" / "lab" / "bmc" / "dmtf"


class Client:
    """A tiny Redfish client for tests: TLS verified against the simulator's CA only."""

    def __init__(self, sim: BMCSimulator, auth=("admin", PASSWORD)):
        self.sim = sim
        self.s = requests.Session()
        self.s.trust_env = False  # REQUESTS_CA_BUNDLE would otherwise override the CA we pass
        self.s.verify = str(sim.ca_file) if sim.tls else False
        if auth:
            self.s.auth = auth

    def __getattr__(self, method):
        def call(path, **kw):
            kw.setdefault("timeout", 30)
            return self.s.request(method.upper(), self.sim.url + path, **kw)

        return call


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def make_sim():
    started = []

    def make(flavour="generic", **kw):
        kw.setdefault("power_delay", 0.3)
        sim = BMCSimulator(flavour=flavour, username="admin", password=PASSWORD, **kw).start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        sim.stop()
        assert sim.errors == [], f"simulator bugs: {sim.errors}"
