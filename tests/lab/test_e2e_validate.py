"""End to end on the lab VM: backport -> build-kpatch (real kpatch-build, lab target) -> boot the lab kernel ->
`invoke validate --target lab` loads, verifies, measures the A/B NUMA counts (15 s runs: this checks that both
arms run and are traced, not the effect's size, which is bench/numa_effect.py's job) and unloads.

Cold this builds the lab kernel and module (~25+ min, content-hash cached; the kpatch tier normally did it
already); the lab kernel build takes a lock, so it never runs twice at once. It runs first of the session VM's
tests (SESSION_FIRST: tests/conftest.py sorts it first), so the session VM boots the lab kernel once the module
exists (tests/labvm.py's lab_kernel_name)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest
from labvm import SESSION_GROUP

from numaforge.paths import ROOT

pytestmark = [pytest.mark.lab_vm, pytest.mark.xdist_group(SESSION_GROUP)]  # asks for `lab` in the test
SESSION_FIRST = True

SERIES = "sched-numa-prefer-local-fallback"


@pytest.fixture(scope="module")
def lab_module():
    from numaforge.kernel import backport
    from numaforge.kernel import kpatch as kp

    bp = backport.latest(SERIES, base_version="5.10.262")
    if bp is None:
        bp = backport.backport("debian:linux-source-5.10=5.10.262-1", series=SERIES, compile_check=False)
    return kp.build_kpatch("lab", bp=bp, log=lambda m: print(m, flush=True))


def test_backport_build_validate_with_numa_ab_on_the_lab_vm(lab_module, request, tmp_path):
    lab = request.getfixturevalue("lab")
    assert lab.kernel.name == "lab" and lab.info.release == lab_module.manifest["kernel_release"]
    s = lab.host.ssh
    inv = tmp_path / "lab.yaml"
    inv.write_text(
        f"version: 1\nhosts:\n  lab-vm:\n    ssh: {{address: 127.0.0.1, port: {s.port}, user: root, "
        f"key_file: {s.key_file}, known_hosts: {s.known_hosts}, agent: false}}\n"
        "    kernel: {release: 5.10.262, target: lab}\n"
    )
    report, junit = tmp_path / "validate.json", tmp_path / "validate.xml"
    r = subprocess.run(
        [
            str(ROOT / ".venv/bin/invoke"),
            "validate",
            "--inventory",
            str(inv),
            "--host",
            "lab-vm",
            "--effect-seconds",
            "15",
            "--rounds",
            "1",
            "--measure",
            "--json",
            str(report),
            "--junit",
            str(junit),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(r.stdout[-3000:], r.stderr[-2000:])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    (h,) = json.loads(report.read_text())["hosts"]
    d = h["data"]
    assert h["status"] == "unchanged" and d["final"] == "unloaded"
    assert d["module"] == lab_module.manifest["module_name"] and d["sha256"] == lab_module.manifest["sha256"]
    assert d["transition"]["done"] is True
    v = d["verify"]
    assert v["enabled"] == "1" and v["transition"] == "0" and "task_numa_migrate" in v["patched_functions"]
    assert any(f.startswith("task_numa_migrate") for f in v["objects"]["vmlinux"])
    assert v["loaded_check"]["rc"] == 0 and v["loaded_check"]["script"].endswith("-LOADED.test")
    assert v["dmesg_problems"] == []
    eff = d["numa_effect"]
    assert eff["nodes"] == 4 and eff["workload"]["duration"] == 15
    assert [x["label"] for x in eff["runs"]] == ["off", "on"]
    assert all(len(x["tasks"]) == 3 and x["vmstat_delta"]["numa_hint_faults"] > 0 for x in eff["runs"])
    assert all(x["migrations"] > 0 and x["units"] > 0 for x in eff["runs"])
    assert len(eff["third_node_moves"]["off"]) == 1 and len(eff["stick_local"]["on"]) == 1
    assert eff["verdicts"]["local_ratio"]["on"] == "no verdict: 1 round, need >= 6 for an interval"
    assert ET.parse(junit).getroot().get("failures") == "0"
