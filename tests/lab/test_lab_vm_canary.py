"""A live-patch rollout with the SLO canary gate over two real lab VMs (qemu TCG), through the CLI:
`livepatch-install --canary 1 --gate slo` with a real Prometheus scraping one service per VM.

Boundary fake: each VM's "service" is a small HTTP server on the test machine (tests/canary/promlab.py: real
sleeps, a hand-written histogram), not a workload inside the guest; its latency fault is tied to the guest's
real state: while the live patch nf_lp_cmdline is enabled on the canary VM (read over SSH every second), the
canary's service sleeps FAULT_S (200 ms) more. The services, Prometheus and the CLI run at nice -10
(promlab.higher_priority), so the two TCG VMs beside them on 2 cores do not drown the fault in scheduling delay.
The gate's thresholds are set for this machine, not the talk's 15/25 ms: a healthy minute read a P99 delta of
31 ms once in CI (2 cores, the other xdist worker's VM busy with hogs) and rolled back; here a minute widens
below 60 ms and rolls back above 100 ms, and the fault puts the canary's P99 near 200 ms.
Everything else is real: insmod and the livepatch transition, the install's
persistence, the gate's numastat reads over SSH, Prometheus's HTTP API, the rollback (unload + persistence
removed). The inventory sorts hosts by name, so vm0-canary is the canary. The planted fault run goes first (its rollback leaves both VMs clean), then the healthy run widens.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from numaforge.errors import NumaforgeError
from numaforge.inventory.model import Host, Location
from numaforge.lab import vm
from numaforge.paths import ROOT
from numaforge.remote.ssh import connect

from .conftest import LP_DATA, manifest_for

sys.path.insert(0, str(ROOT / "tests"))
from canary.promlab import METRIC, PrometheusServer, Service, higher_priority
from sshd_fixture import free_port

pytestmark = pytest.mark.lab_vm
LP = "nf_lp_cmdline"
FAULT_S = 0.2  # the canary service's extra sleep while the live patch is enabled (fault run only)
WIDEN_MS, ROLLBACK_MS = 60, 100  # --slo widen_p99_ms / rollback_p99_ms


@pytest.fixture(scope="module")
def vms(tmp_path_factory):
    booted = []
    try:
        for name in ("vm0-canary", "vm1-baseline"):
            state, port = tmp_path_factory.mktemp(name), free_port()
            try:
                vm.up(kernel="lab", state_dir=state, ssh_port=port, persist=True)
                kernel = "lab"
            except NumaforgeError:
                vm.up(kernel="debian", state_dir=state, ssh_port=port, persist=True)
                kernel = "debian"
            booted.append((state, Host(name=name, location=Location("<test>"), ssh=vm.lab_ssh(state, port)), kernel))
        yield booted
    finally:
        for state, _h, _i in booted:
            vm.down(state)


class _PatchWatch(threading.Thread):
    """Reads the canary's /sys/kernel/livepatch/LP/enabled every second over one SSH connection."""

    def __init__(self, host: Host):
        super().__init__(daemon=True)
        self.host, self.enabled, self.stop = host, False, threading.Event()

    def run(self):
        with connect(self.host.ssh, self.host.name) as r:
            while not self.stop.is_set():
                res = r.run(f"cat /sys/kernel/livepatch/{LP}/enabled 2>/dev/null || echo 0", timeout=30, check=False)
                self.enabled = res.stdout.strip() == "1"
                self.stop.wait(1.0)


def _inventory(path: Path, hosts: list[Host], services) -> Path:
    doc: dict = {"version": 1, "hosts": {}}
    for h, svc in zip(hosts, services):
        ssh = h.ssh
        assert ssh is not None  # the vms fixture gives every VM an ssh section
        doc["hosts"][h.name] = {
            "ssh": {
                "address": ssh.address,
                "port": ssh.port,
                "user": "root",
                "key_file": ssh.key_file,
                "known_hosts": ssh.known_hosts,
                "agent": False,
            },
            "vars": {"slo_instance": svc.instance, "slo_gate": {"metric": METRIC, "window": 2, "minute": 3}},
        }
    path.write_text(yaml.safe_dump(doc))
    return path


def _rollout(tmp_path: Path, hosts: list[Host], ko: Path, fault: bool):
    tmp_path.mkdir(parents=True, exist_ok=True)
    with higher_priority():
        return _rollout_at_priority(tmp_path, hosts, ko, fault)


def _rollout_at_priority(tmp_path: Path, hosts: list[Host], ko: Path, fault: bool):
    watch = _PatchWatch(hosts[0])
    services = [Service(slow=FAULT_S, fault=lambda: fault and watch.enabled), Service()]
    inv = _inventory(tmp_path / "inv.yaml", hosts, services)
    env = {**os.environ, "NUMAFORGE_BUILD": str(tmp_path / "b"), "NUMAFORGE_STATE": str(tmp_path / "b/state")}
    watch.start()
    try:
        with contextlib.ExitStack() as stack:
            for svc in services:
                stack.enter_context(svc)
            with PrometheusServer(tmp_path / "prom", [s.instance for s in services], free_port()) as prom:
                prom.wait_for_samples(METRIC, 2)
                r = subprocess.run(
                    [
                        str(Path(sys.executable).with_name("invoke")),
                        "livepatch-install",
                        "-i",
                        str(inv),
                        "--all",
                        "--module",
                        str(ko),
                        "--canary",
                        "1",
                        "--gate",
                        "slo",
                        "--prometheus",
                        prom.url,
                        "--slo",
                        "range=10",
                        "--slo",
                        "extend=2",
                        "--slo",
                        f"widen_p99_ms={WIDEN_MS}",
                        "--slo",
                        f"rollback_p99_ms={ROLLBACK_MS}",
                        "--output",
                        "plain",
                        "--json",
                        str(tmp_path / "r.json"),
                    ],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    env=env,
                )
    finally:
        watch.stop.set()
        watch.join(timeout=60)
    (tmp_path / "out.txt").write_text(r.stdout + r.stderr)
    return r, json.loads((tmp_path / "r.json").read_text())


def _loaded(host: Host) -> str:
    with connect(host.ssh, host.name) as r:
        return r.run(f"cat /sys/kernel/livepatch/{LP}/enabled 2>/dev/null || echo gone", timeout=30).stdout.strip()


def test_livepatch_rollout_rolls_back_on_latency_then_widens_when_healthy(vms, tmp_path):
    hosts = [h for _s, h, _i in vms]
    kernel = vm.resolve_kernel(vms[0][2])
    ko = manifest_for(
        vm.build_module(LP_DATA / LP, kernel),
        tmp_path / "lp",
        replace=False,
        patched_functions=[{"function": "cmdline_proc_show"}],
    )

    r, report = _rollout(tmp_path / "fault", hosts, ko, fault=True)
    assert r.returncode == 1, r.stdout + r.stderr
    gate = report["data"]["gate"]
    assert gate["decision"] == "rollback" and gate["minutes"][0]["p99_delta_ms"] > ROLLBACK_MS, gate
    assert gate["rolled_back"]["vm0-canary"]["status"] != "failed", gate["rolled_back"]
    assert {h["host"]: h["status"] for h in report["hosts"]} == {"vm0-canary": "failed", "vm1-baseline": "not-run"}
    assert _loaded(hosts[0]) == "gone" and _loaded(hosts[1]) == "gone"
    assert "slo gate minute 1:" in r.stdout and "rolled back" in r.stdout

    r, report = _rollout(tmp_path / "healthy", hosts, ko, fault=False)
    assert r.returncode == 0, r.stdout + r.stderr
    gate = report["data"]["gate"]
    # two VMs under TCG make the machine busy: a noisy minute may hold and extend the window (extend=2)
    assert gate["decision"] == "widen" and [m["decision"] for m in gate["minutes"][-2:]] == ["widen", "widen"], gate
    assert all(m["decision"] != "rollback" for m in gate["minutes"])
    assert {h["host"]: h["status"] for h in report["hosts"]} == {"vm0-canary": "changed", "vm1-baseline": "changed"}
    assert _loaded(hosts[0]) == "1" and _loaded(hosts[1]) == "1"
