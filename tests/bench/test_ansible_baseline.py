"""The Ansible side of bench/bios_fleet.py is configured as safely as ours: it verifies the BMC's TLS certificate
against the BMC's CA (a wrong CA fails the host, nothing is written) and, with the right CA, writes the values.

Real ansible-playbook (installed by scripts/setup.d/60-bench.sh) against a real simulated BMC on 127.0.0.1.
Not timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numaforge.lab.bmc import BMCSimulator

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bios_fleet import PLAYBOOK, PW_VAR, VENV_BIN, write_ansible_inventory

pytestmark = pytest.mark.bmc

PASSWORD = "ansible-Base-pw-5"
ATTRS = {"Q0100": "NPS4", "Q0102": "Disabled"}


def playbook(tmp_path: Path, bmc: dict) -> subprocess.CompletedProcess:
    inv, play, varsfile = tmp_path / "inv.json", tmp_path / "play.yml", tmp_path / "vars.json"
    write_ansible_inventory(inv, [bmc])
    play.write_text(PLAYBOOK)
    varsfile.write_text(json.dumps({"bios_attrs": ATTRS}))
    env = {
        **os.environ,
        PW_VAR: PASSWORD,
        "ANSIBLE_HOME": str(tmp_path / "ah"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "at"),
        "ANSIBLE_NOCOLOR": "1",
    }
    env.pop("REQUESTS_CA_BUNDLE", None)
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(play), "-e", f"@{varsfile}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ansible_baseline_verifies_tls_then_writes(tmp_path):
    with (
        BMCSimulator(flavour="generic", username="admin", password=PASSWORD) as sim,
        BMCSimulator(flavour="generic", username="admin", password=PASSWORD) as other,
    ):
        wrong = playbook(tmp_path, {"name": "bmc000", "url": sim.url, "ca": str(other.ca_file)})
        assert wrong.returncode != 0
        assert "failed=1" in wrong.stdout and "CERTIFICATE_VERIFY_FAILED" in wrong.stdout, wrong.stdout
        assert sim.count("PATCH") == 0 and sim.bios_pending() == {}

        right = playbook(tmp_path, {"name": "bmc000", "url": sim.url, "ca": str(sim.ca_file)})
        assert right.returncode == 0, right.stdout + right.stderr
        assert "changed=1" in right.stdout
        assert sim.count("PATCH") == 1 and sim.bios_pending() == ATTRS
        assert PASSWORD not in right.stdout + right.stderr
