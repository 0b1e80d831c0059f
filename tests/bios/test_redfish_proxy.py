"""A Redfish request through an HTTPS proxy from the environment is bounded like one straight to the BMC (issue 40
item 2: one deadline per request over connect, headers and body): a proxy that drips its CONNECT answer is cut at
the request's deadline, not left to the read timeout, which a drip never trips.

Boundary fake: a TCP listener written here plays the proxy, because a real proxy cannot be made to drip; the
adapter, requests, urllib3 and their sockets are the real ones."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import requests
from listener import Listener

from numaforge.bios.deadline import DeadlineAdapter, cut_reason


class DrippingProxy(Listener):
    """Accepts a CONNECT and answers it one byte every ``interval`` s, for at most ``give_up`` s (so a client that
    is never cut fails the test instead of hanging it)."""

    def __init__(self, interval: float = 0.2, give_up: float = 20.0):
        self.interval, self.give_up = interval, give_up
        self.requests: list[bytes] = []
        super().__init__(backlog=8)

    def handle(self, conn: socket.socket) -> None:
        threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.requests.append(conn.recv(4096))
                end = time.monotonic() + self.give_up
                while time.monotonic() < end:
                    conn.sendall(b"H")
                    time.sleep(self.interval)
            except OSError:
                return


@pytest.fixture
def proxy(monkeypatch):
    p = DrippingProxy()
    for var in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", p.url)
    yield p
    p.close()


def test_a_proxy_dripping_its_connect_answer_ends_at_the_request_deadline(proxy):
    session = requests.Session()
    session.mount("https://", DeadlineAdapter(total_timeout=2.0))
    t0 = time.monotonic()
    with pytest.raises(requests.RequestException):
        session.get("https://bmc.invalid/redfish/v1", timeout=(5, 5))
    took = time.monotonic() - t0
    assert proxy.requests and proxy.requests[0].startswith(b"CONNECT bmc.invalid:443"), proxy.requests
    assert took < 5, f"the dripping proxy held the request {took:.1f} s (deadline 2 s)"
    assert cut_reason() == "deadline"
