"""A real Prometheus server and a small service with a latency histogram, for the SLO gate's tests.

- :class:`Service`: an HTTP server on 127.0.0.1:<free port> that serves ``/work`` (sleeps ``base`` seconds, plus
  ``slow`` while ``fault()`` is true: the planted latency fault) and ``/metrics``, the handler's measured
  latencies as a Prometheus histogram in the text exposition format, written by hand (prometheus_client is not
  installed). Load threads call ``/work`` in a loop, so the histogram fills like a service's. The latencies
  are measured, so a busy machine shows in them: tests give the P99 a range of several seconds.
- :class:`PrometheusServer`: Debian's ``/usr/bin/prometheus`` (scripts/packages.txt, tier canary) with its own
  config (scrape_interval 1s over the services) and data dir in tmp, on a free port; stopped by its pid.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import requests
import yaml

METRIC = "svc_request_duration_seconds"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class Service:
    def __init__(
        self, base: float = 0.002, slow: float = 0.06, fault: Callable[[], bool] = lambda: False, loaders: int = 2
    ):
        self.base, self.slow, self.fault = base, slow, fault
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        svc = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/work":
                    t0 = time.monotonic()
                    time.sleep(svc.base + (svc.slow if svc.fault() else 0.0))
                    svc.observe(time.monotonic() - t0)
                    body = b"ok\n"
                elif self.path == "/metrics":
                    body = svc.exposition().encode()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.instance = f"127.0.0.1:{self.port}"
        # several load threads: more requests per window make the P99 less noisy on a busy machine
        self.threads = [threading.Thread(target=self.server.serve_forever, daemon=True)] + [
            threading.Thread(target=self._load, daemon=True) for _ in range(loaders)
        ]

    def observe(self, seconds: float) -> None:
        with self.lock:
            self.total += seconds
            for i, le in enumerate(BUCKETS):
                if seconds <= le:
                    self.counts[i] += 1
                    return
            self.counts[-1] += 1

    def exposition(self) -> str:
        with self.lock:
            counts, total = list(self.counts), self.total
        lines = [f"# HELP {METRIC} Time spent serving /work.", f"# TYPE {METRIC} histogram"]
        running = 0
        for le, n in zip(BUCKETS, counts):
            running += n
            lines.append(f'{METRIC}_bucket{{le="{le}"}} {running}')
        running += counts[-1]
        lines += [f'{METRIC}_bucket{{le="+Inf"}} {running}', f"{METRIC}_sum {total}", f"{METRIC}_count {running}"]
        return "\n".join(lines) + "\n"

    def _load(self) -> None:
        url = f"http://{self.instance}/work"
        while not self.stop.is_set():
            try:
                urllib.request.urlopen(url, timeout=5).read()
            except OSError:
                pass
            self.stop.wait(0.02)

    def __enter__(self) -> "Service":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        for t in self.threads:
            t.join(timeout=10)


@contextlib.contextmanager
def higher_priority(nice: int = -10):
    """Run the services (and what this thread starts: their threads, Prometheus, the CLI) at a lower nice value
    (root only), so their measured latencies show the planted fault rather than the two TCG VMs beside them on a
    2-core machine. Linux nice is per thread: threads created inside inherit it; the old value comes back after."""
    old = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, old)


def make_tls(tmp: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 (openssl, base tier): (ca.pem, cert, key)."""
    tmp.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, cwd=tmp)
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=numaforge test CA")
    run("req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    (tmp / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "1",
        "-extfile",
        "san.cnf",
    )
    return tmp / "ca.pem", tmp / "srv.pem", tmp / "srv.key"


class PrometheusServer:
    def __init__(self, tmp: Path, targets: list[str], port: int, tls: tuple[Path, Path, Path] | None = None):
        self.dir = tmp
        self.port = port
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "svc", "static_configs": [{"targets": targets}]}],
        }
        (tmp / "data").mkdir(parents=True, exist_ok=True)
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        self.proc: subprocess.Popen | None = None

    @property
    def _verify(self) -> bool | str:
        return str(self.tls[0]) if self.tls else True

    def __enter__(self) -> "PrometheusServer":
        log = open(self.dir / "prometheus.log", "w")
        argv = [
            "/usr/bin/prometheus",
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        if self.tls:
            web = {"tls_server_config": {"cert_file": str(self.tls[1]), "key_file": str(self.tls[2])}}
            (self.dir / "web.yml").write_text(yaml.safe_dump(web))
            argv.append(f"--web.config.file={self.dir / 'web.yml'}")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.dir / 'prometheus.log').read_text()[-2000:]}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2, verify=self._verify).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError("prometheus did not become ready in 60 s")

    def wait_for_samples(self, metric: str, n_targets: int, timeout: float = 60) -> None:
        """Until every target has been scraped a few times (rate() needs two samples per series)."""
        deadline = time.monotonic() + timeout
        q = f"count(count_over_time({metric}_count[10s]) >= 3)"
        while time.monotonic() < deadline:
            r = requests.get(f"{self.url}/api/v1/query", params={"query": q}, timeout=5, verify=self._verify).json()
            res = r["data"]["result"]
            if res and int(float(res[0]["value"][1])) >= n_targets:
                return
            time.sleep(0.5)
        raise RuntimeError(f"prometheus has not scraped {n_targets} targets in {timeout} s")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
