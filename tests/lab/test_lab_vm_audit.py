"""numa-audit on the session lab VM (tests/lab/conftest.py `lab`: 4 nodes, one CPU each, e1000) with faults made
for real, then the same VM cleaned up: the faults are found, with evidence and fix, and nothing is left after.

Planted: vm.zone_reclaim_mode=1; a process whose memory was touched on node 1 (cpu1) and which was then moved
by `taskset -p` to cpu0 (node 0) without membind; three CPU hogs pinned to cpu0 (node 0 overloaded, the others
idle). The session VM has one e1000 NIC with one INTx IRQ, so the "virtio NIC IRQs forced onto one CPU" fault
is covered by tests/audit/test_audit_pure.py over captures, not here.
"""

from __future__ import annotations

import pytest

from numaforge.audit.run import AuditOptions, audit_host

pytestmark = pytest.mark.lab_vm

PLANT = (
    "echo 1 > /proc/sys/vm/zone_reclaim_mode; "
    # 16 MiB touched while running on cpu1 (node 1), then the process moves to cpu0: its pages stay on node 1
    "taskset -c 1 sh -c 'x=$(head -c 16777216 /dev/zero | tr \"\\\\000\" a); sleep 600' </dev/null >/dev/null 2>&1 & echo $! > /tmp/nf-audit-mem; "
    "sleep 3; taskset -p 1 $(cat /tmp/nf-audit-mem) >/dev/null; "
    "for i in 1 2 3; do taskset -c 0 sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $! >> /tmp/nf-audit-hogs; done"
)
CLEAN = (
    "echo 0 > /proc/sys/vm/zone_reclaim_mode; "
    "for p in $(cat /tmp/nf-audit-hogs /tmp/nf-audit-mem 2>/dev/null); do kill $p $(pgrep -P $p) 2>/dev/null; done; "
    "rm -f /tmp/nf-audit-hogs /tmp/nf-audit-mem; sleep 2"
)


def test_audit_finds_the_planted_faults_and_nothing_after_cleanup(lab):
    opts = AuditOptions(window=10)
    try:
        with lab.remote() as r:
            r.run(PLANT, timeout=60)
        res = audit_host(lab.host, opts)
    finally:
        with lab.remote() as r:
            r.run(CLEAN, timeout=60, check=False)
    found = res.data["findings"]
    assert res.status == "failed", res.message
    by = {(f["check"], f["severity"]) for f in found}
    assert ("zone-reclaim", "warn") in by
    mem = [f for f in found if f["check"] == "cpuset-membind" and f["severity"] == "warn"]
    assert mem and "--cpunodebind=0 --membind=0" in mem[0]["fix"] and "N1=" in mem[0]["evidence"][1]
    node = [f for f in found if f["check"] == "sched-imbalance" and f["what"].startswith("node 0 runs")]
    assert node and node[0]["evidence"][0].startswith(res.data["sched_debug"])
    assert all(f["evidence"] and f["fix"] for f in found if f["severity"] != "info")

    after = audit_host(lab.host, opts)
    assert after.status == "ok", after.data["findings"]
    assert [f for f in after.data["findings"] if f["severity"] != "info"] == []
