"""The SLO canary gate end to end: `os-apply --canary 1 --gate slo` over real OpenSSH sshd hosts, with a real
Prometheus scraping one service per host.

Boundary fakes, as in tests/hostos/test_ssh_hostos.py: each host's /proc and /sys are a tree of captured files
(``hostos_root``; the test must not retune the build server's kernel), and each host's service is a small HTTP
server on the test machine (tests/canary/promlab.py) that really sleeps and really is scraped. The planted fault
is tied to the change: once os-apply saved the canary's previous values (its change is live), the canary's service
sleeps 60 ms more (latency fault) or its allocations go remote (locality fault); a rollback removes them.
SSH, os-apply and its rollback, the gate's loop, Prometheus's HTTP API, the CLI and --json are the real ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from hostos.helpers import build_tree  # tests/hostos (tests/ is on sys.path: conftest.py)
from sshd_fixture import free_port

from .promlab import METRIC, PrometheusServer, Service, higher_priority

pytestmark = pytest.mark.ssh
ROOT = Path(__file__).resolve().parents[2]
NIC = "0000:21:04.0"
SAVED = "var/lib/numaforge/hostos/previous.json"


class _Allocations(threading.Thread):
    """Bumps each tree's node0 numastat like page allocations: 99% local; a canary whose change is live gets
    ``canary_after`` (local, other) per tick."""

    def __init__(self, roots: list[Path], canary_after: tuple[int, int]):
        super().__init__(daemon=True)
        self.roots, self.after, self.stop = roots, canary_after, threading.Event()

    def run(self):
        counts = {r: [0, 0] for r in self.roots}
        while not self.stop.is_set():
            for i, r in enumerate(self.roots):
                dl, do = self.after if i == 0 and (r / SAVED).exists() else (99, 1)
                counts[r][0] += dl
                counts[r][1] += do
                f = r / "sys/devices/system/node/node0/numastat"
                tmp = f.with_name(".numastat.tmp")
                tmp.write_text(
                    f"numa_hit {counts[r][0]}\nnuma_miss 0\nlocal_node {counts[r][0]}\nother_node {counts[r][1]}\n"
                )
                os.replace(tmp, f)
            time.sleep(0.05)


def _interrupted(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run argv and send it SIGINT (Ctrl-C) once the gate printed its first minute."""
    p = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, "PYTHONUNBUFFERED": "1"}
    )
    out = []
    assert p.stdout is not None
    for line in p.stdout:
        out.append(line)
        if line.startswith("slo gate minute 1:"):
            p.send_signal(signal.SIGINT)
            break
    rest, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, p.returncode, "".join(out) + rest, err)


def _inventory(path: Path, hosts, roots, services) -> Path:
    doc: dict = {"version": 1, "hosts": {}}
    for h, root, svc in zip(hosts, roots, services):
        doc["hosts"][h.name] = {
            "ssh": {
                "address": h.address,
                "port": h.port,
                "user": "root",
                "key_file": str(h.client_key),
                "known_hosts": str(h.known_hosts),
                "agent": False,
            },
            "hardware": {"sockets": 4, "nics": [NIC]},
            "vars": {
                "hostos_profile": "lab-vm-host",
                "hostos_root": str(root),
                "slo_instance": svc.instance,
                "slo_gate": {"metric": METRIC, "window": 2, "minute": 3},
            },
        }
    path.write_text(yaml.safe_dump(doc))
    return path


def _run_gate(netns_lab, tmp_path, fault: str, n: int = 3, extra: tuple[str, ...] = (), interrupt: bool = False):
    hosts = [netns_lab.add_host(f"s{i}") for i in range(n)]
    roots = [build_tree(tmp_path / f"root{i}") for i in range(n)]
    canary_live = lambda: fault == "latency" and (roots[0] / SAVED).exists()
    canary = Service(fault=canary_live, loaders=0 if fault == "no-traffic" else 2)
    services = [canary] + [Service() for _ in range(n - 1)]
    traffic = _Allocations(roots, (40, 60) if fault == "locality" else (99, 1))
    inv = _inventory(tmp_path / "inv.yaml", hosts, roots, services)
    env = {**os.environ, "NUMAFORGE_BUILD": str(tmp_path / "b"), "NUMAFORGE_STATE": str(tmp_path / "b/state")}
    traffic.start()
    try:
        with higher_priority(), contextlib.ExitStack() as stack:
            for svc in services:
                stack.enter_context(svc)
            with PrometheusServer(tmp_path / "prom", [s.instance for s in services], free_port()) as prom:
                prom.wait_for_samples(METRIC, n)  # a service without traffic still exposes its (empty) histogram
                argv = [
                    str(Path(sys.executable).with_name("invoke")),
                    "os-apply",
                    "-i",
                    str(inv),
                    "--all",
                    "--canary",
                    "1",
                    "--gate",
                    "slo",
                    "--prometheus",
                    prom.url,
                    "--slo",
                    "range=6",
                    *extra,
                    "--output",
                    "plain",
                    "--json",
                    str(tmp_path / "r.json"),
                ]
                r = (
                    _interrupted(argv, env)
                    if interrupt
                    else subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
                )
    finally:
        traffic.stop.set()
        traffic.join()
    (tmp_path / "os-apply.out").write_text(r.stdout + r.stderr)  # kept for reading a failed run
    return r, json.loads((tmp_path / "r.json").read_text()), roots


def test_healthy_canary_widens(netns_lab, tmp_path):
    r, report, roots = _run_gate(netns_lab, tmp_path, fault="none")
    assert r.returncode == 0, r.stdout + r.stderr
    gate = report["data"]["gate"]
    assert gate["decision"] == "widen" and len(gate["minutes"]) == 2
    for m in gate["minutes"]:
        assert m["decision"] == "widen" and abs(m["p99_delta_ms"]) < 15 and m["skew"] is not None
    assert {h["host"]: h["status"] for h in report["hosts"]} == {"s0": "changed", "s1": "changed", "s2": "changed"}
    assert "slo gate minute 2:" in r.stdout and "slo gate: widen: every minute of the last 2 widened" in r.stdout
    assert all((root / SAVED).exists() for root in roots)


# one low host among n has skew -(n-2)/sqrt(n-1): -0.71 for 3 hosts, so the locality fault needs 4 to cross -0.8
@pytest.mark.parametrize(("fault", "n"), [("latency", 3), ("locality", 4)])
def test_planted_fault_rolls_the_canary_back(netns_lab, tmp_path, fault, n):
    r, report, roots = _run_gate(netns_lab, tmp_path, fault=fault, n=n)
    assert r.returncode == 1, r.stdout + r.stderr
    gate = report["data"]["gate"]
    assert gate["decision"] == "rollback" and len(gate["minutes"]) == 1
    m = gate["minutes"][0]
    if fault == "latency":
        assert m["p99_delta_ms"] > 25 and "P99 delta" in m["why"]
    else:
        assert m["skew"] < -0.8 and m["local_share"]["s0"] < 0.5 and "skew" in m["why"]
    assert gate["rolled_back"]["s0"]["status"] == "changed"  # os-apply --rollback's status
    assert "findings" in gate["captures"]["s0"]  # numa-audit's read of the canary
    status = {h["host"]: h["status"] for h in report["hosts"]}
    assert status == {"s0": "failed", **{f"s{i}": "not-run" for i in range(1, n)}}
    assert not any((root / SAVED).exists() for root in roots)  # canary undone, the rest never touched
    assert "slo gate: rollback" in r.stdout and "rolled back" in r.stdout
    assert not Path(report["data"]["journal"]["path"]).exists()  # a decision, not an interruption: no resume


def test_no_latency_data_holds_extends_and_stops_without_widening(netns_lab, tmp_path):
    """The canary's service gets no requests: no P99 for it, so no minute may widen; the window (1 minute) is
    extended once, then the rollout stops as held with the canary kept."""
    r, report, roots = _run_gate(netns_lab, tmp_path, fault="no-traffic", extra=("--slo", "window=1"))
    assert r.returncode == 1, r.stdout + r.stderr
    gate = report["data"]["gate"]
    assert gate["decision"] == "hold" and [m["decision"] for m in gate["minutes"]] == ["hold", "hold"]
    assert all(m["p99_canary_ms"] is None and "no P99 data" in m["why"] for m in gate["minutes"])
    assert "held through 1 extension" in gate["reason"] and "window extended by 1 minute" in r.stdout
    status = {h["host"]: h["status"] for h in report["hosts"]}
    assert status == {"s0": "changed", "s1": "not-run", "s2": "not-run"}
    assert (roots[0] / SAVED).exists() and not (roots[1] / SAVED).exists()


def test_ctrl_c_during_the_gate_exits_130_with_the_minutes_so_far(netns_lab, tmp_path):
    r, report, roots = _run_gate(netns_lab, tmp_path, fault="none", extra=("--slo", "window=10"), interrupt=True)
    assert r.returncode == 130, r.stdout + r.stderr
    gate = report["data"]["gate"]
    assert gate["decision"] == "interrupted" and len(gate["minutes"]) >= 1
    assert report["status"] == "interrupted" and report["ok"] is False and "SIGINT" in gate["reason"]
    status = {h["host"]: h["status"] for h in report["hosts"]}
    assert status["s0"] == "changed" and status["s1"] == status["s2"] == "not-run"
    assert (roots[0] / SAVED).exists() and not (roots[1] / SAVED).exists()  # canary kept, nothing widened
