"""The Prometheus client against a misbehaving Prometheus (issue 40 items 2 and 5): bounded in time (headers and
body, one deadline per request) and size, no redirect followed, values that are not a latency refused as
"cannot tell", and the gate's minute never widening on them.

Boundary fake: a local HTTP server written here plays a Prometheus that drips, sends 100 MB, redirects or
answers values and shapes a real Prometheus does not send for a P99 query over a real histogram. The client,
its sockets, requests and the gate's minute are the real ones. (tests/canary/test_prometheus.py has the real
Prometheus, including a histogram whose buckets make it answer a negative P99.)
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from numaforge.canary import decide
from numaforge.canary.gate import SloGate, SloSettings
from numaforge.canary.prometheus import MAX_ANSWER_BYTES, CannotTell, Prometheus, PrometheusError
from numaforge.report import HostResult

ROOT = Path(__file__).resolve().parents[2]


class Peer:
    """A misbehaving Prometheus on 127.0.0.1:<free port>; ``mode`` says how it answers. Records each request."""

    def __init__(self, mode: str, payload: object = None):
        self.mode, self.payload = mode, payload
        self.requests: list[dict] = []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                peer.requests.append({"path": self.path, "headers": dict(self.headers)})
                try:
                    peer.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        w = h.wfile
        if self.mode == "drip-body":  # headers at once, then one byte every 0.2 s for 12 s
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n")
            for _ in range(60):
                w.write(b" ")
                w.flush()
                time.sleep(0.2)
        elif self.mode == "drip-headers":  # the status line, then a header byte every 0.2 s for 12 s
            w.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(60):
                w.write(b"a")
                w.flush()
                time.sleep(0.2)
            w.write(b"\r\nContent-Length: 0\r\n\r\n")
        elif self.mode in ("huge-declared", "huge-chunked"):  # 100 MB of answer
            total, block = 100 * 1024 * 1024, b"0" * (1024 * 1024)
            if self.mode == "huge-declared":
                w.write(f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode())
                for _ in range(total // len(block)):
                    w.write(block)
            else:
                w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in range(total // len(block)):
                    w.write(f"{len(block):x}\r\n".encode() + block + b"\r\n")
                w.write(b"0\r\n\r\n")
        elif self.mode == "redirect":
            w.write(f"HTTP/1.1 302 Found\r\nLocation: {self.payload}\r\nContent-Length: 0\r\n\r\n".encode())
        elif self.mode == "json":
            body = json.dumps(self.payload).encode()
            w.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        w.flush()

    def __enter__(self) -> "Peer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def _vector(*values) -> dict:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, v]} for v in values]},
    }


@pytest.mark.parametrize("mode", ["drip-body", "drip-headers"])
def test_a_dripping_answer_ends_at_the_request_deadline(mode):
    """12 s of drip (each byte well within any per-read timeout) ends at the 2 s deadline, headers or body."""
    with Peer(mode) as peer:
        t0 = time.monotonic()
        with pytest.raises(PrometheusError, match=r"did not answer within 2 s \(headers and body") as e:
            Prometheus(peer.url, timeout=2).query("up", time.time())
        took = time.monotonic() - t0
    assert took < 5, f"took {took:.1f} s"
    assert e.value.exit_code == 1 and "overloaded or stalling" in e.value.fix


def test_a_dripping_proxy_from_the_environment_ends_at_the_deadline_too(monkeypatch):
    """requests honours HTTP_PROXY: a proxy that drips is bounded like Prometheus itself."""
    with Peer("drip-body") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        t0 = time.monotonic()
        with pytest.raises(PrometheusError, match=r"did not answer within 2 s"):
            Prometheus("http://prometheus.invalid:9090", timeout=2).query("up", time.time())
        assert proxy.requests and proxy.requests[0]["path"].startswith("http://prometheus.invalid:9090/api/v1/query")
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("mode", ["huge-declared", "huge-chunked"])
def test_a_100_mb_answer_is_refused_with_the_cap_named(mode):
    with Peer(mode) as peer:
        t0 = time.monotonic()
        with pytest.raises(PrometheusError, match=f"larger than {MAX_ANSWER_BYTES} bytes") as e:
            Prometheus(peer.url, timeout=30).query("up", time.time())
    assert time.monotonic() - t0 < 15
    assert "cap for one query answer" in e.value.what


def test_a_redirect_is_never_followed_and_its_location_is_named(monkeypatch):
    """The redirect's target (another "host") never gets a request, with or without the token."""
    monkeypatch.setenv("NF_TEST_PROM_TOKEN", "tok-redirect-40")
    from numaforge.secrets import SecretRef

    with Peer("json", _vector("0.01")) as other, Peer("redirect") as peer:
        peer.payload = f"{other.url}/api/v1/query?stolen=1\x1b[2J"
        with pytest.raises(PrometheusError, match="a redirect to") as e:
            Prometheus(peer.url, token=SecretRef.parse("env:NF_TEST_PROM_TOKEN")).query("up", time.time())
        assert other.requests == []
    assert f"{other.url}/api/v1/query?stolen=1" in e.value.what
    assert "\x1b" not in e.value.what and "does not follow redirects" in e.value.what
    assert "HTTP 302" in e.value.what and "--prometheus" in e.value.fix
    assert peer.requests[0]["headers"].get("Authorization") == "Bearer tok-redirect-40"


def test_a_signal_is_honoured_while_waiting_on_a_drip():
    """SIGINT (the CLI turns SIGTERM into the same) to a process waiting on a drip ends the wait at once. In a
    child process: the test's own may be an xdist worker whose signals belong to its runner."""
    code = (
        "import sys, time\n"
        "from numaforge.canary.prometheus import Prometheus\n"
        "print('asking', flush=True)\n"
        "try:\n"
        "    Prometheus(sys.argv[1], timeout=30).query('up', time.time())\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True); sys.exit(130)\n"
    )
    with Peer("drip-body") as peer:
        proc = subprocess.Popen([sys.executable, "-c", code, peer.url], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "asking\n"
        deadline = time.monotonic() + 10
        while not peer.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # in the drip
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "interrupted" in out
    assert time.monotonic() - t0 < 3


BAD_VALUES = {
    "negative": _vector("-0.5"),
    "infinite": _vector("+Inf"),
    "overflowing": _vector("1e308"),
    "over an hour": _vector("3601"),
    "not a number": _vector("fast"),
    "a number, not a string": _vector(0.5),
    "two series": _vector("0.01", "0.02"),
    "a matrix": {"status": "success", "data": {"resultType": "matrix", "result": []}},
    "data not a mapping": {"status": "success", "data": [1, 2]},
    "value not a pair": {"status": "success", "data": {"resultType": "vector", "result": [{"value": "0.5"}]}},
    "sample not a mapping": {"status": "success", "data": {"resultType": "vector", "result": ["0.5"]}},
}


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_a_value_or_shape_no_p99_has_is_cannot_tell(name):
    with Peer("json", BAD_VALUES[name]) as peer:
        with pytest.raises(CannotTell) as e:
            Prometheus(peer.url).p99_ms("svc_seconds", "instance", ["a"], time.time(), 60)
    assert "\x1b" not in e.value.what


def test_nan_is_no_data_and_a_valid_value_is_ms():
    with Peer("json", _vector("NaN")) as peer:
        assert Prometheus(peer.url).p99_ms("m", "instance", ["a"], time.time(), 60) is None
        peer.payload = _vector("0.0125")
        assert Prometheus(peer.url).p99_ms("m", "instance", ["a"], time.time(), 60) == pytest.approx(12.5)


def test_an_answer_that_is_not_prometheus_names_what_it_is():
    """Was "HTTP 200: None" (the answer of whatever a redirect led to)."""
    with Peer("json", ["not", "prometheus"]) as peer:
        with pytest.raises(PrometheusError, match=r"HTTP 200: not Prometheus's API answer \(starts") as e:
            Prometheus(peer.url).query("up", time.time())
    assert "None" not in e.value.what


def _gate_minute(url: str) -> dict:
    """One minute of the real gate (SloGate._minute) against the peer; locality numbers for 3 hosts."""
    gate = SloGate(
        SloSettings(prometheus=url, metric="svc_seconds"), rollback=lambda h: HostResult(h.name), log=lambda m: None
    )
    hosts = [SimpleNamespace(name=n, vars={}) for n in ("c1", "b1", "b2")]
    prev = {h.name: {"local_node": 0, "other_node": 0} for h in hosts}
    now = {h.name: {"local_node": 1000, "other_node": 10} for h in hosts}
    return gate._minute(Prometheus(url), hosts[:1], hosts[1:], prev, now, 1)


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_the_gate_never_widens_on_a_p99_it_cannot_tell(name):
    """A P99 of -500 ms used to widen the rollout to every host; an overflowing one read "delta nan between
    thresholds". Every such minute holds (the skew here is healthy: it cannot roll back), saying why."""
    with Peer("json", BAD_VALUES[name]) as peer:
        m = _gate_minute(peer.url)
    assert m["decision"] == decide.HOLD, m
    assert "cannot tell" in m["why"] and "nan" not in m["why"], m["why"]
    assert m["p99_delta_ms"] is None


def test_decide_never_widens_on_a_number_that_is_not_finite():
    t = decide.Thresholds()
    for delta in (math.nan, math.inf, -math.inf):
        d, why = decide.decide_minute(delta, -0.1, t)
        assert d == decide.HOLD and "cannot tell" in why
        d, why = decide.decide_minute(delta, -0.95, t)  # the skew still rolls back
        assert d == decide.ROLLBACK
    assert decide.decide_minute(5.0, math.nan, t)[0] == decide.HOLD
    assert decide.decide_minute(5.0, -0.1, t, cannot_tell="cannot tell the canaries' P99")[0] == decide.HOLD
    assert decide.decide_minute(5.0, -0.1, t)[0] == decide.WIDEN
