"""The Debian target's module on Debian's own kernel: boot linux-image-5.10.0-46-amd64 (5.10.262-1) in the 4-node
lab VM and run `invoke validate --target debian-5.10.0-46-amd64` (preflight, load, transition, verify with the
series' LOADED test, unload). Needs the module built by tests/kpatch/test_debian_build.py (kpatch tier, warm
cache only); skipped with that reason otherwise. Reuses the session VM when it runs the Debian kernel (then it is
in the session VM's xdist group), else boots its own and never starts the session VM: asking for `lab` only to
read its kernel name booted a second session VM on whichever worker ran this test."""

from __future__ import annotations

import json
import subprocess

import pytest
from labvm import SESSION_GROUP, lab_kernel_name
from sshd_fixture import free_port

from numaforge.lab import vm
from numaforge.paths import ROOT, kpatch_build_dir

ON_SESSION_VM = lab_kernel_name() == "debian"
pytestmark = [pytest.mark.lab_vm] + ([pytest.mark.xdist_group(SESSION_GROUP)] if ON_SESSION_VM else [])

DEB = "debian-5.10.0-46-amd64"
MANIFEST = kpatch_build_dir() / DEB / "manifest.json"


@pytest.fixture(scope="module")
def debian_vm(request, tmp_path_factory):
    if not MANIFEST.is_file():
        pytest.skip(
            f"no Debian live patch built ({MANIFEST} missing): the kpatch tier builds it only with a warm "
            "prepared Debian tree (tests/kpatch/test_debian_build.py)"
        )
    if ON_SESSION_VM:
        lab = request.getfixturevalue("lab")
        if lab.kernel.name == "debian":  # not when the lab module was built meanwhile (test_e2e_validate.py)
            yield lab.host.ssh
            return
    state = tmp_path_factory.mktemp("debianvm")
    vm.up(kernel="debian", state_dir=state, ssh_port=free_port())
    try:
        info = vm.status(state)
        yield vm.lab_ssh(state, info.ssh_port)
    finally:
        vm.down(state)


def test_debian_module_validates_on_debians_kernel(debian_vm, tmp_path):
    man = json.loads(MANIFEST.read_text())
    s = debian_vm
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"version: 1\nhosts:\n  debian-vm:\n    ssh: {{address: 127.0.0.1, port: {s.port}, user: root, "
        f"key_file: {s.key_file}, known_hosts: {s.known_hosts}, agent: false}}\n"
        f"    kernel: {{release: 5.10.0-46-amd64, target: {DEB}}}\n"
    )
    report = tmp_path / "validate.json"
    r = subprocess.run(
        [
            str(ROOT / ".venv/bin/invoke"),
            "validate",
            "--inventory",
            str(inv),
            "--host",
            "debian-vm",
            "--json",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(r.stdout[-3000:], r.stderr[-2000:])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    (h,) = json.loads(report.read_text())["hosts"]
    d = h["data"]
    assert h["status"] == "unchanged" and d["final"] == "unloaded" and d["measure"] is False
    assert d["preflight"]["uname_r"] == "5.10.0-46-amd64" and d["sha256"] == man["sha256"]
    assert d["transition"]["done"] is True
    v = d["verify"]
    assert v["enabled"] == "1" and "task_numa_migrate" in v["patched_functions"]
    assert v["loaded_check"]["rc"] == 0 and v["dmesg_problems"] == []
    assert {"K", "O"} <= set(v["taint"]["now"]["flags"])
