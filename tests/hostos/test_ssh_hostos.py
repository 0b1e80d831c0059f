"""os-plan / os-apply / os-verify / --rollback over real OpenSSH sshd hosts (tests/sshd_fixture.py).

Boundary fake (documented in numaforge/hostos/run.py): each host's /proc and /sys are a tree built from the lab
VM's captured snapshot (``hostos_root``), because these "hosts" share the build server's kernel -- applying for
real would retune the machine running the tests, and sysfs cannot be created by a test. SSH, sudo, the shell
scripts, the fleet runner and the CLI are the real ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from numaforge.fleet import Rollout
from numaforge.hostos.run import OsOptions, run_os
from numaforge.inventory.model import HardwareSpec, Host, Location

from .helpers import build_tree

pytestmark = pytest.mark.ssh
ROOT = Path(__file__).resolve().parents[2]
NIC = "0000:21:04.0"
sys.path.insert(0, str(ROOT / "tests"))
from sshd_fixture import TEST_HOMES  # noqa: E402


def _inventory(path: Path, hosts) -> Path:
    doc: dict[str, Any] = {"version": 1, "hosts": {}}
    for h, root in hosts:
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
            "vars": {"hostos_profile": "lab-vm-host", "hostos_root": str(root)},
        }
    path.write_text(yaml.safe_dump(doc))
    return path


def _invoke(*args, check_rc=None, build=None):
    env = (
        {**os.environ, "NUMAFORGE_BUILD": str(build), "NUMAFORGE_STATE": str(build / "state")} if build else None
    )  # journal in tmp
    r = subprocess.run(
        [str(Path(sys.executable).with_name("invoke")), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    if check_rc is not None:
        assert r.returncode == check_rc, r.stdout + r.stderr
    return r


def test_fleet_cli_canary_apply_verify_rollback(netns_lab, tmp_path):
    hosts = [netns_lab.add_host(f"h{i}") for i in range(3)]
    roots = [build_tree(tmp_path / f"root{i}") for i in range(3)]
    shutil.rmtree(roots[1] / "sys/bus/pci/devices" / NIC)  # h1: the NIC is not there
    inv = _inventory(tmp_path / "inv.yaml", zip(hosts, roots))
    swappiness = roots[0] / "proc/sys/vm/swappiness"
    b = tmp_path / "build"

    plan = _invoke("os-plan", "-i", str(inv), "--json", str(tmp_path / "plan.json"), check_rc=1, build=b)
    assert "no such PCI device on the host" in plan.stdout + plan.stderr
    assert swappiness.read_text() == "60\n"  # os-plan writes nothing

    _invoke(
        "os-apply",
        "-i",
        str(inv),
        "--all",
        "--canary",
        "1",
        "--json",
        str(tmp_path / "apply.json"),
        "--junit",
        str(tmp_path / "apply.xml"),
        check_rc=1,
        build=b,
    )
    report = json.loads((tmp_path / "apply.json").read_text())
    status = {h["host"]: h["status"] for h in report["hosts"]}
    assert status == {"h0": "changed", "h1": "failed", "h2": "changed"}
    assert report["data"]["fleet"]["batches"] == [["h0"], ["h1", "h2"]]
    assert not (roots[1] / "var/lib/numaforge").exists()  # rejected before anything was written
    assert swappiness.read_text() == "10"
    for i in (0, 2):
        for irq in ("29", "30", "31"):
            assert (roots[i] / f"proc/irq/{irq}/smp_affinity_list").read_text().strip() == "1"
        assert "vm.swappiness = 10" in (roots[i] / "etc/sysctl.d/60-numaforge-hostos.conf").read_text()
        assert (roots[i] / "etc/systemd/system/multi-user.target.wants/numaforge-hostos.service").is_symlink()
    assert 'failures="1"' in (tmp_path / "apply.xml").read_text()
    kept = Path(report["data"]["journal"]["path"])  # a failed run stays resumable
    assert kept.parent == b / "state" / "journal" and kept.exists()

    again = _invoke(
        "os-apply",
        "-i",
        str(inv),
        "--host",
        "h0",
        "--host",
        "h2",
        "--json",
        str(tmp_path / "a2.json"),
        check_rc=0,
        build=b,
    )
    assert all(h["data"]["changed"] == [] for h in json.loads((tmp_path / "a2.json").read_text())["hosts"]), (
        again.stdout
    )
    _invoke("os-verify", "-i", str(inv), "--host", "h0", "--host", "h2", check_rc=0, build=b)

    (roots[2] / "proc/irq/30/smp_affinity_list").write_text("0,2\n")  # the talk's wrong-node affinity
    bad = _invoke("os-verify", "-i", str(inv), "--host", "h2", check_rc=1, build=b)
    assert "irq 30 (0000:21:04.0): 0,2 (want 1)" in " ".join((bad.stdout + bad.stderr).split())

    _invoke("os-apply", "-i", str(inv), "--rollback", "--host", "h0", "--host", "h2", check_rc=0, build=b)
    assert swappiness.read_text() == "60"
    assert (roots[0] / "proc/irq/30/smp_affinity_list").read_text() == "0-3"
    assert not (roots[0] / "etc/sysctl.d/60-numaforge-hostos.conf").exists()
    assert not (roots[0] / "etc/systemd/system/multi-user.target.wants/numaforge-hostos.service").exists()


def _host(h, root, name=None):
    return Host(
        name=name or h.name,
        location=Location("<test>"),
        ssh=h.spec(),
        hardware=HardwareSpec(sockets=4, nics=[NIC]),
        vars={"hostos_profile": "lab-vm-host", "hostos_root": str(root)},
    )


class _Traffic(threading.Thread):
    """Bumps the tree's node0 numastat counters like allocations would: local-heavy until the apply saved its
    previous values, then ``after`` (local, other) per tick."""

    def __init__(self, root: Path, after: tuple[int, int]):
        super().__init__(daemon=True)
        self.root, self.after, self.stop = root, after, threading.Event()

    def run(self):
        f = self.root / "sys/devices/system/node/node0/numastat"
        local = other = 0
        while not self.stop.is_set():
            applied = (self.root / "var/lib/numaforge/hostos/previous.json").exists()
            dl, do = self.after if applied else (95, 5)
            local, other = local + dl, other + do
            tmp = f.with_name(".numastat.tmp")  # atomic, like the kernel's single read
            tmp.write_text(f"numa_hit {local}\nnuma_miss 0\nlocal_node {local}\nother_node {other}\n")
            os.replace(tmp, f)
            time.sleep(0.05)


@pytest.mark.parametrize("after, widened", [((94, 6), True), ((60, 40), False)])
def test_locality_gate_on_the_canary(netns_lab, tmp_path, after, widened):
    hosts = [netns_lab.add_host(f"g{i}") for i in range(2)]
    roots = [build_tree(tmp_path / f"root{i}") for i in range(2)]
    traffic = _Traffic(roots[0], after)
    traffic.start()
    try:
        out = run_os(
            [_host(h, r) for h, r in zip(hosts, roots)],
            "apply",
            OsOptions(gate_seconds=1.0),
            rollout=Rollout(canary=1, gate="locality"),
            progress=False,
        )
    finally:
        traffic.stop.set()
        traffic.join()
    canary, rest = out.results
    gate = canary.data["gate"]
    assert abs(gate["before"]["alloc_local_share"] - 0.95) < 0.01
    if widened:
        assert canary.status == "changed" and rest.status == "changed" and not out.stopped, canary.message
    else:
        assert canary.status == "failed" and "WORSE" in canary.message and "--rollback --host g0" in canary.message
        assert out.stopped and rest.status == "not-run"
        assert (roots[1] / "proc/sys/vm/swappiness").read_text() == "60\n"  # not widened


def _user_tree(user: str) -> Path:
    root = build_tree(TEST_HOMES / user / "hostroot")
    (TEST_HOMES / user).chmod(0o755)
    return root


def test_sudo_user_applies_and_a_user_without_sudo_writes_nothing(sshd_host, test_user):
    pub = f"{sshd_host.client_key}.pub"
    good, bad = test_user(sudo="nopasswd", pubkey=pub), test_user(sudo=None, pubkey=pub)
    for user, ok in ((good, True), (bad, False)):
        root = _user_tree(user)
        host = Host(
            name=user,
            location=Location("<test>"),
            ssh=sshd_host.spec(user=user, sudo=True),
            hardware=HardwareSpec(sockets=4, nics=[NIC]),
            vars={"hostos_profile": "lab-vm-host", "hostos_root": str(root)},
        )
        res = run_os([host], "apply", OsOptions(), progress=False).results[0]
        if ok:
            assert res.status == "changed", res.message
            # issue 39 item 9: JSON "changes: 0" beside the changed items; "changed changed 2" on the host line
            assert res.data["changes"] == len(res.data["changed"]) > 0 and res.data["remaining"] == 0, res.data
            assert res.message.startswith(f"{len(res.data['changed'])} written: "), res.message
            assert (root / "proc/sys/vm/swappiness").read_text() == "10"
            assert (root / "var/lib/numaforge/hostos/previous.json").stat().st_uid == 0
        else:
            assert res.status == "failed" and "passwordless sudo" in res.message, res.message
            assert "`sh -s`" in res.message and "set -eu" not in res.message  # no script dump
            assert (root / "proc/sys/vm/swappiness").read_text() == "60\n"
            assert not (root / "var/lib/numaforge").exists()


def test_interrupted_apply_resumes_from_the_journal(sshd_host, tmp_path):
    """A host the journal holds as verified is only verified on the re-run (no plan/apply steps, no gate wait);
    a host only patched is applied again (idempotent)."""
    from numaforge import journal

    roots = [build_tree(tmp_path / f"root{i}") for i in range(2)]
    hosts = [_host(sshd_host, r, name=f"j{i}") for i, r in enumerate(roots)]
    j = journal.open("os-apply test", tmp_path / "journal")
    out = run_os(hosts[:1], "apply", OsOptions(journal=j), progress=False)
    assert out.results[0].status == "changed" and j.done("j0", journal.VERIFIED) and j.done("j0", journal.PATCHED)
    j2 = journal.open("os-apply test", tmp_path / "journal")  # the re-run reads what the first left
    out = run_os(hosts, "apply", OsOptions(journal=j2), progress=False)
    first, second = out.results
    assert (
        first.status == "unchanged" and first.message.startswith("resumed from") and first.data.get("changed") is None
    )
    assert [s.name for s in first.steps] == ["read"]
    assert second.status == "changed" and "written" in second.message
