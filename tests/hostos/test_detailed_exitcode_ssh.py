"""Issue 39 item 8: `os-plan --detailed-exitcode` (terraform's semantics) over a real sshd: 2 while the host
differs from its profile, 0 after os-apply, 1 on an error; without the flag a plan with changes exits 0.

Boundary fake, as in test_ssh_hostos.py: the host's /proc and /sys are a tree built from the lab VM's captured
snapshot (``hostos_root``), because the sshd host shares the build server's kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import build_tree
from .test_ssh_hostos import _inventory

pytestmark = pytest.mark.ssh
ROOT = Path(__file__).resolve().parents[2]


def _invoke(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state"), "NUMAFORGE_BUILD": str(tmp_path / "b")},
    )


def test_os_plan_detailed_exitcode(sshd_host, tmp_path):
    root = build_tree(tmp_path / "root")
    sshd_host.name = "h0"
    inv = _inventory(tmp_path / "inv.yaml", [(sshd_host, root)])
    r = _invoke(tmp_path, "os-plan", "-i", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr  # without the flag: as before
    r = _invoke(tmp_path, "os-plan", "-i", str(inv), "--detailed-exitcode")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "changes present on 1 host(s): h0 (--detailed-exitcode: exit 2)" in r.stderr
    assert (root / "proc/sys/vm/swappiness").read_text() == "60\n"  # a plan writes nothing

    r = _invoke(tmp_path, "os-apply", "-i", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr
    r = _invoke(tmp_path, "os-plan", "-i", str(inv), "--detailed-exitcode")
    assert r.returncode == 0 and "changes present" not in r.stderr, r.stdout + r.stderr

    sshd_host.stop()
    r = _invoke(tmp_path, "os-plan", "-i", str(inv), "--detailed-exitcode")
    assert r.returncode == 1, r.stdout + r.stderr
