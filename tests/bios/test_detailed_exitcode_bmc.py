"""Issue 39 item 8: `bios-plan --detailed-exitcode` (terraform's semantics) against a simulator BMC: 2 while the
BMC differs from the profile, 0 once bios-apply --reboot wrote and verified it, 1 on an error; without the flag a
plan with changes exits 0 as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.lab.bmc import BMCSimulator

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).parents[2]
PASSWORD = "detailed-Bmc-pw-3"


def invoke(*args):
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "250", "NF_DETAILED_BMC_PW": PASSWORD},
        timeout=300,
    )


def test_bios_plan_detailed_exitcode(tmp_path):
    sim = BMCSimulator(flavour="dell", tls=True, username="admin", password=PASSWORD, power_delay=0.3).start()
    try:
        inv = tmp_path / "inv.yaml"
        inv.write_text(
            "version: 1\nhosts:\n  gpu-dell:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_DETAILED_BMC_PW', "
            f"ca_bundle: '{sim.ca_file}'}}\n"
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n"
            "    bios_profile: epyc-gpudirect\n"
        )
        r = invoke("bios-plan", "-i", str(inv))
        assert r.returncode == 0 and "to change" in r.stdout, r.stdout + r.stderr  # without the flag: as before
        r = invoke("bios-plan", "-i", str(inv), "--detailed-exitcode")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "changes present on 1 host(s): gpu-dell (--detailed-exitcode: exit 2)" in r.stderr
        assert sim.count("PATCH") == 0

        r = invoke("bios-apply", "-i", str(inv), "--reboot", "--unverified", "allow")  # the simulator's values
        assert r.returncode == 0, r.stdout + r.stderr
        r = invoke("bios-plan", "-i", str(inv), "--detailed-exitcode")
        assert r.returncode == 0, r.stdout + r.stderr  # nothing to change, nothing pending
        assert "changes present" not in r.stderr
    finally:
        sim.stop()
    r = invoke("bios-plan", "-i", str(inv), "--detailed-exitcode")  # the BMC is gone: an error is 1, not 0 or 2
    assert r.returncode == 1, r.stdout + r.stderr
