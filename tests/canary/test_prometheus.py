"""numaforge.canary.prometheus against a real Prometheus (Debian's package) scraping the test's service.

Runs with the ssh tier (the canary gate's real peers). Nothing is faked: the service really sleeps, Prometheus
really scrapes it every second, the client really asks /api/v1/query.
"""

from __future__ import annotations

import time

import pytest
from sshd_fixture import free_port

from numaforge.canary.prometheus import Prometheus, PrometheusError, p99_query
from numaforge.errors import NumaforgeError

from .promlab import METRIC, PrometheusServer, Service, higher_priority, make_tls

pytestmark = pytest.mark.ssh


def test_p99_of_a_fast_and_a_slow_service(tmp_path):
    """The P99 of each service lands in its sleeps' bucket or the one above it.

    The services run at nice -10 like the gate's own tests, but the ssh tier shares two cores with another
    xdist worker: about 1 % of 62 ms sleeps measured over 100 ms there once (CI: P99 181 ms), so the slow
    service's upper bound is the next bucket's (250 ms), still far from the fast one's."""
    with higher_priority(), Service() as fast, Service(fault=lambda: True) as slow:
        with PrometheusServer(tmp_path, [fast.instance, slow.instance], free_port()) as prom:
            prom.wait_for_samples(METRIC, 2)
            client = Prometheus(prom.url)
            now = time.time()
            f = client.p99_ms(METRIC, "instance", [fast.instance], now, 5)
            s = client.p99_ms(METRIC, "instance", [slow.instance], now, 5)
            both = client.p99_ms(METRIC, "instance", [fast.instance, slow.instance], now, 5)
            # 2 ms sleeps land in the first buckets; measured latencies on a busy 2-core machine reach 10-25 ms
            assert f is not None and f <= 25.0
            assert s is not None and 50.0 < s <= 250.0  # 62 ms sleeps: the (0.05, 0.1] bucket, or (0.1, 0.25]
            assert s > 2 * f
            assert both is not None and f < both <= s
            assert client.p99_ms(METRIC, "instance", ["127.0.0.1:1"], now, 5) is None  # no such series
            with pytest.raises(PrometheusError, match="HTTP 400") as e:
                client.query("histogram_quantile(", now)
            assert e.value.where == f"{prom.url}/api/v1/query"


def test_unreachable_prometheus_and_bad_names():
    with pytest.raises(PrometheusError, match="query failed") as e:
        Prometheus(f"http://127.0.0.1:{free_port()}", timeout=2).query("up", time.time())
    assert "--prometheus" in e.value.fix
    with pytest.raises(NumaforgeError, match="not a Prometheus metric name"):
        p99_query('x"}) or vector(1', "instance", ["a"], 60)
    q = p99_query("m", "instance", ['we"ird.host|x'], 59.5)
    assert q == 'histogram_quantile(0.99, sum by (le) (rate(m_bucket{instance=~"we\\"ird\\\\.host\\\\|x"}[60s])))'


def test_tls_is_verified_against_the_system_cas_or_the_given_ca(tmp_path):
    """Prometheus behind TLS with a private CA: refused without prometheus_ca, answered with it."""
    tls = make_tls(tmp_path / "tls")
    with Service() as svc, PrometheusServer(tmp_path / "prom", [svc.instance], free_port(), tls=tls) as prom:
        prom.wait_for_samples(METRIC, 1)
        with pytest.raises(PrometheusError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            Prometheus(prom.url).query("up", time.time())
        up = Prometheus(prom.url, ca_file=str(tls[0])).query("up", time.time())
        assert up and up[0]["metric"]["instance"] == svc.instance and up[0]["value"][1] == "1"


class _NegativeBuckets:
    """An exporter whose histogram has one bucket with a negative upper bound (le="-0.5") holding every
    observation: a real Prometheus's histogram_quantile answers that bound, a P99 of -500 ms."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        t0 = time.monotonic()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                n = int((time.monotonic() - t0) * 50) + 1
                body = (
                    f"# TYPE {METRIC} histogram\n"
                    f'{METRIC}_bucket{{le="-0.5"}} {n}\n{METRIC}_bucket{{le="0.1"}} {n}\n'
                    f'{METRIC}_bucket{{le="+Inf"}} {n}\n{METRIC}_sum {-0.6 * n}\n{METRIC}_count {n}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.instance = f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        import threading

        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_a_negative_p99_from_a_real_prometheus_is_cannot_tell_and_the_gate_holds(tmp_path):
    """Issue 40 item 5: a P99 of -500 ms widened the rollout to every host. Here a real Prometheus computes it
    from an exporter's negative bucket; the client refuses it (CannotTell) and the gate's minute holds."""
    from types import SimpleNamespace

    from numaforge.canary import decide
    from numaforge.canary.gate import SloGate, SloSettings
    from numaforge.canary.prometheus import CannotTell

    with _NegativeBuckets() as bad, Service() as good:
        with PrometheusServer(tmp_path, [bad.instance, good.instance], free_port()) as prom:
            prom.wait_for_samples(METRIC, 2)
            client = Prometheus(prom.url)
            with pytest.raises(CannotTell, match=r"P99 of '-0.5' s: not a latency"):
                client.p99_ms(METRIC, "instance", [bad.instance], time.time(), 5)
            gate = SloGate(SloSettings(prometheus=prom.url, metric=METRIC, minute=5), rollback=lambda h: None)
            hosts = [
                SimpleNamespace(name=n, vars={"slo_instance": i})
                for n, i in (("c", bad.instance), ("b1", good.instance), ("b2", good.instance))
            ]
            counters = {h.name: {"local_node": 1000, "other_node": 10} for h in hosts}
            zero = {h.name: {"local_node": 0, "other_node": 0} for h in hosts}
            m = gate._minute(client, hosts[:1], hosts[1:], zero, counters, 1)
            assert m["decision"] == decide.HOLD and "cannot tell the canaries' P99" in m["why"], m
