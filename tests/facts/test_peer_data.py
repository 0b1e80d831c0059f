"""Garbage from a host is never facts (issue 40 item 5): every capture is checked against what its command
prints (numaforge.facts.sanity), numbers must be in range, and a host whose captures are not what their commands
print fails with "cannot tell" naming the host and the capture -- the task never says ok. The capture list is
collect.SPECS (a new capture without a check fails test_every_capture_has_a_check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from numaforge.facts import parse_facts, sanity
from numaforge.facts.captures import MAX_CPU, parse_cpulist, try_cpulist
from numaforge.facts.collect import SPECS
from numaforge.facts.run import FactsOptions, run_saved

from .helpers import MACHINES, captures

ROOT = Path(__file__).resolve().parents[2]
GARBAGE = ["Welcome to the jungle\n\x1b[2Jrm -rf /\n", "\n\n   \n", "0" * 5000 + "\n"]


def test_every_capture_has_a_check():
    assert sorted(s.name for s in SPECS) == sorted(sanity.CHECKS)


@pytest.mark.parametrize("machine", MACHINES)
def test_real_captures_are_all_readable(machine):
    assert parse_facts(captures(machine)).unreadable == {}


# every capture x garbage, less the one that is no garbage: an empty iommu_groups listing is real (no IOMMU active)
GARBAGE_CASES = [
    (g, spec.name)
    for g in GARBAGE
    for spec in SPECS
    if not (spec.name == "ls_-1_sys_kernel_iommu_groups.txt" and not g.strip())
]


@pytest.mark.parametrize(("garbage", "name"), GARBAGE_CASES)
def test_garbage_in_any_capture_is_cannot_tell_naming_host_and_capture(tmp_path, name, garbage):
    cap = captures("epyc-7763-2s-nps1-4gpu")
    cap = replace(cap, files={**cap.files, name: garbage}, source="gpu-17")
    facts = parse_facts(cap)
    assert name in facts.unreadable, facts.unreadable
    assert facts.absent[name].startswith(f"cannot tell: what gpu-17 sent for {name}")
    assert "\x1b" not in facts.unreadable[name]
    d = tmp_path / "gpu-17"
    cap.save(d)
    result = run_saved(d, FactsOptions())
    assert result.status == "failed" and result.message.startswith("cannot tell:") and name in result.message


@pytest.mark.parametrize(
    "name, path, value",
    [
        ("head_-v_sys_devices_system_node.txt", "/sys/devices/system/node/node0/distance", "10 0"),
        ("head_-v_sys_devices_system_node.txt", "/sys/devices/system/node/node0/cpulist", "0-4000000000"),
        ("head_-v_sys_bus_pci_devices.txt", "/sys/bus/pci/devices/0000:00:00.0/numa_node", "99999"),
        ("head_-v_sys_bus_pci_devices.txt", "/sys/bus/pci/devices/0000:00:00.0/class", "nan"),
        ("head_-v_sys_devices_system_cpu.txt", "/sys/devices/system/cpu/cpu0/topology/physical_package_id", "-5"),
        ("head_-v_proc_sys_kernel.txt", "/proc/sys/kernel/numa_balancing", "inf"),
        ("head_-v_proc_sys_kernel.txt", "/proc/sys/kernel/tainted", "-1"),
    ],
)
def test_numbers_out_of_range_are_cannot_tell(name, path, value):
    cap = captures("epyc-7763-2s-nps1-4gpu")
    text = cap.files[name] + f"\n==> {path} <==\n{value}\n"
    facts = parse_facts(replace(cap, files={**cap.files, name: text}))
    assert name in facts.unreadable and path in facts.unreadable[name], facts.unreadable


def test_a_huge_cpulist_is_refused_at_once_not_expanded():
    t0 = time.monotonic()
    assert try_cpulist("0-4000000000") is None and try_cpulist(f"{MAX_CPU + 1}") is None
    assert time.monotonic() - t0 < 1
    assert parse_cpulist(f"0-{MAX_CPU}")[-1] == MAX_CPU


# ------------------------------------------------------------------------------------------------ over SSH
GARBAGE_HOST = """#!/bin/sh
# a host whose every command answers with something that is not that command's output
echo "Welcome to gpu-17. Authorized use only."
head -c 200 /dev/urandom | od -An -tx1 | head -n 4
exit 0
"""


@pytest.mark.ssh
def test_facts_from_a_host_answering_garbage_fails_and_never_says_ok(sshd_host, tmp_path):
    """Boundary: sshd's ForceCommand plays a host whose tools answer with garbage (a real sshd, real SSH)."""
    script = tmp_path / "garbage.sh"
    script.write_text(GARBAGE_HOST)
    script.chmod(0o755)
    sshd_host.stop()
    sshd_host.extra_config = f"ForceCommand {script}\n"
    sshd_host.start()
    spec = sshd_host.spec()
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "hosts": {
                    "gpu-17": {
                        "ssh": {
                            "address": spec.address,
                            "port": spec.port,
                            "key_file": spec.key_file,
                            "known_hosts": spec.known_hosts,
                            "agent": False,
                        }
                    }
                }
            }
        )
    )
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "facts", "-i", str(inv), "--host", "gpu-17"]
        + ["--json", str(tmp_path / "r.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "300", "NUMAFORGE_STATE": str(tmp_path / "state")},
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] is False
    [host] = report["hosts"]
    assert host["status"] == "failed" and host["message"].startswith("cannot tell:"), host
    assert set(host["data"]["facts"]["unreadable"]) == {s.name for s in SPECS}
    assert "gpu-17" in host["message"] and "Traceback" not in out
