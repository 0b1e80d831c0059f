"""numa-audit on the real 4-node lab VM (qemu TCG, one CPU per node) with the issue's four faults made for real,
and nothing on the clean VM.

Two VMs: the default one, booted once for this module (no device reports a NUMA node: one info note), for the
clean audit and three faults, and tests/conftest.py's `nic_lab`, with the NUMA-local virtio NIC (numaforge.lab.vm
numa_nic: a virtio-net on node 1 with three MSI-X IRQs) and the persistent disk, for the IRQ fault; that VM is
shared with the host OS test (tests/hostos/test_lab_vm_hostos.py), which runs first and restores what it
changes. The second VM's root-bus devices report node -1 while the virtio NIC reports node 1, which numa-audit's
device-node rule flags on its own; that VM is only asked for the IRQ fault.

Planted (nothing faked; every number is the guest kernel's):
- a process pinned by taskset without membind, its memory on another node: tests/data/audit/lab/toucher.c (built
  static here) first-touches 32 MiB while `taskset -c 1` (node 1), then `taskset -p 1` moves it to cpu0 (node 0);
  it never touches the pages again, so NUMA balancing leaves them on node 1 (numa_maps shows N1=8192+);
- the virtio NIC's IRQs forced onto one CPU: `echo 3 > /proc/irq/N/smp_affinity_list` for each (its local CPU
  is cpu1);
- vm.zone_reclaim_mode=1;
- a CPU hog imbalance: three busy loops pinned to cpu0 (node 0 runs 3 tasks per CPU, node 1 none).
The clean VM's i8042 (keyboard and aux, legacy ISA IRQs 1 and 12 on the IO-APIC, pinned to cpu0 by the platform)
is an info note, not a finding that fails the host.
"""

from __future__ import annotations

import contextlib
import subprocess

import pytest
from labvm import NIC_PCI
from sshd_fixture import free_port

from numaforge.audit.run import AuditOptions, audit_host
from numaforge.errors import NumaforgeError
from numaforge.inventory.model import HardwareSpec, Host, Location
from numaforge.lab import vm
from numaforge.paths import ROOT
from numaforge.remote.ssh import connect

pytestmark = pytest.mark.lab_vm
TOUCHER = ROOT / "tests" / "data" / "audit" / "lab" / "toucher.c"
WINDOW = 5.0


@contextlib.contextmanager
def _vm(tmp_path_factory, name: str):
    """One booted lab VM as an inventory host (the lab kernel, else Debian's), stopped afterwards."""
    state, port = tmp_path_factory.mktemp(name), free_port()
    try:
        try:
            vm.up(kernel="lab", state_dir=state, ssh_port=port)
        except NumaforgeError:
            vm.up(kernel="debian", state_dir=state, ssh_port=port)
        yield Host(
            name=name,
            location=Location("<test>"),
            hardware=HardwareSpec(sockets=4),
            ssh=vm.lab_ssh(state, port),
        )
    finally:
        vm.down(state)


@pytest.fixture(scope="module")
def plain_vm(tmp_path_factory):
    with _vm(tmp_path_factory, "audit-vm") as host:
        yield host


@pytest.fixture(scope="module")
def nic_vm(nic_lab):
    """tests/conftest.py's NIC VM, shared with the host OS test (which runs first and restores what it changes)."""
    return Host(name="audit-nic-vm", location=Location("<test>"), hardware=HardwareSpec(sockets=4), ssh=nic_lab.ssh)


def _by_check(findings: list[dict], check: str, severity: str = "warn") -> list[dict]:
    return [f for f in findings if f["check"] == check and f["severity"] == severity]


def test_clean_vm_has_no_findings(plain_vm):
    res = audit_host(plain_vm, AuditOptions(window=WINDOW))
    assert res.status == "ok", res.data["findings"]
    assert [f for f in res.data["findings"] if f["severity"] != "info"] == []
    notes = {f["check"]: f["what"] for f in res.data["findings"]}
    assert "legacy ISA IRQs 1,12 (IO-APIC) pinned to cpu0" in notes["irq-placement"]
    assert "no PCI device reports a NUMA node" in notes["device-node"]


def test_planted_memory_zone_reclaim_and_hog_faults_are_found(plain_vm, tmp_path):
    exe = tmp_path / "toucher"
    subprocess.run(["gcc", "-static", "-O2", "-o", str(exe), str(TOUCHER)], check=True, capture_output=True)
    plant = (
        "echo 1 > /proc/sys/vm/zone_reclaim_mode; "
        "taskset -c 1 /tmp/nf-toucher 32 /tmp/nf-ready </dev/null >/dev/null 2>&1 & echo $! > /tmp/nf-mem; "
        "i=0; while [ ! -e /tmp/nf-ready ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i+1)); done; "
        "taskset -p 1 $(cat /tmp/nf-mem) >/dev/null; "
        "for i in 1 2 3 4; do taskset -c 0 sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & "
        "echo $! >> /tmp/nf-hogs; done; "
        # each hog is pinned to cpu0 and taskset has exec'd its sh before the audit samples: on a loaded TCG
        # guest the audit's first sample came before the last hogs ran, and node 0's gap fell under the limit
        "for p in $(cat /tmp/nf-hogs); do i=0; "
        "until [ \"$(cat /proc/$p/comm)\" = sh ] && grep -q '^Cpus_allowed_list:[[:space:]]*0$' /proc/$p/status "
        "|| [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done; done; "
        "cat /proc/$(cat /tmp/nf-mem)/numa_maps"
    )
    # the planted processes are gone (waited for, at most 10 s each) before the audit that must find nothing
    clean = (
        "echo 0 > /proc/sys/vm/zone_reclaim_mode; pids=$(cat /tmp/nf-hogs /tmp/nf-mem 2>/dev/null); "
        "kill $pids 2>/dev/null; for p in $pids; do i=0; "
        "while kill -0 $p 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; done; "
        "rm -f /tmp/nf-hogs /tmp/nf-mem /tmp/nf-ready /tmp/nf-toucher"
    )
    try:
        with connect(plain_vm.ssh, plain_vm.name) as r:
            r.put(exe, "/tmp/nf-toucher", mode=0o755)
            maps = r.run(plant, timeout=120).stdout
        assert any("N1=8192" in line or " N1=819" in line for line in maps.splitlines()), maps  # really on node 1
        res = audit_host(plain_vm, AuditOptions(window=WINDOW))
    finally:
        with connect(plain_vm.ssh, plain_vm.name) as r:
            r.run(clean, timeout=60, check=False)
    found = res.data["findings"]
    assert res.status == "failed", res.message
    zr = _by_check(found, "zone-reclaim")
    assert zr and zr[0]["evidence"] == ["/proc/sys/vm/zone_reclaim_mode: 1"] and "zone_reclaim_mode: 0" in zr[0]["fix"]
    mem = [f for f in _by_check(found, "cpuset-membind") if f["what"].startswith("nf-toucher")]
    assert mem, found
    assert "runs on node(s) 0" in mem[0]["what"] and "N1=" in mem[0]["evidence"][1]
    assert "--cpunodebind=0 --membind=0" in mem[0]["fix"]
    hog = [f for f in _by_check(found, "sched-imbalance") if f["what"].startswith("node 0 runs")]
    assert hog and hog[0]["evidence"][0].startswith(res.data["sched_debug"]), found
    assert all(f["evidence"] and f["fix"] for f in found if f["severity"] != "info")

    after = audit_host(plain_vm, AuditOptions(window=WINDOW))
    assert [f for f in after.data["findings"] if f["severity"] != "info"] == [], after.data["findings"]


def test_virtio_nic_irqs_forced_onto_one_cpu_are_found(nic_vm):
    with connect(nic_vm.ssh, nic_vm.name) as r:
        # the NIC's virtio device (the VM's persistent disk is a virtio device too, with IRQs of its own)
        dev = r.run(f"basename /sys/bus/pci/devices/{NIC_PCI}/virtio*", timeout=30).stdout.strip()
        assert dev.startswith("virtio"), dev
        irqs = r.run(f"grep ' {dev}-' /proc/interrupts | cut -d: -f1", timeout=30).stdout.split()
        assert len(irqs) >= 2, irqs
        r.run("; ".join(f"echo 3 > /proc/irq/{i}/smp_affinity_list" for i in irqs), timeout=30)
    res = audit_host(nic_vm, AuditOptions(window=WINDOW))
    irq = [f for f in _by_check(res.data["findings"], "irq-placement") if f["what"].startswith(f"{dev}:")]
    assert irq, res.data["findings"]
    assert f"{len(irqs)} of its {len(irqs)} IRQs are pinned to cpu3 alone" in irq[0]["what"]
    assert f"/proc/irq/{irqs[0]}/smp_affinity_list: 3" in irq[0]["evidence"]
    assert "os-apply irq_affinity" in irq[0]["fix"]
    # the only other failing findings on this VM are the root bus's devices without a node (module docstring),
    # and the planted fault's own load: every NIC interrupt -- the audit's SSH traffic among them -- is handled on
    # cpu3 (node 3, one CPU per node), so on a loaded host its softirq work plus the audit's reader can keep node 3
    # at 2 runnable tasks in both samples (seen in CI with the probe-direction VM running beside this one)
    other = [
        f
        for f in res.data["findings"]
        if f["severity"] != "info"
        and f is not irq[0]
        and not (f["check"] == "sched-imbalance" and f["what"].startswith("node 3 runs"))
    ]
    assert all(f["check"] == "device-node" and "numa_node -1" in f["what"] for f in other), other
