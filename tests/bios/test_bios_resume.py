"""An interrupted `bios-apply --reboot` resumes from its journal and never resets a host twice.

Real peers: the BMC simulator over TLS, and `invoke bios-apply` in a subprocess that is SIGKILLed while the
host is power-cycling — the crash a build server or an operator's Ctrl-C leaves behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numaforge.lab.bmc import BMCSimulator

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).parents[2]
PASSWORD = "resume-Bmc-pw-3"


def test_killed_mid_reboot_resumes_and_verifies_without_a_second_reset(tmp_path):
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=6.0).start()
    try:
        inv = tmp_path / "inv.yaml"
        inv.write_text(
            "hosts:\n  gpu-01:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_RESUME_PW', ca_bundle: '{sim.ca_file}'}}\n"
            "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-gpudirect\n")
        env = {**os.environ, "NF_RESUME_PW": PASSWORD, "NUMAFORGE_STATE": str(tmp_path / "state"),
               "COLUMNS": "200"}
        cmd = [sys.executable, "-m", "invoke", "bios-apply", "-i", str(inv), "--reboot"]
        first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        deadline = time.monotonic() + 180
        while sim.count("POST", "Reset") == 0:
            assert first.poll() is None, "bios-apply ended before it requested the reset"
            assert time.monotonic() < deadline, "no reset request within 180 s"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        journals = list((tmp_path / "state" / "journal").glob("*.json"))
        assert len(journals) == 1
        text = journals[0].read_text()
        assert '"phase": "patched"' in text and '"phase": "reboot-requested"' in text
        assert '"phase": "verified"' not in text
        assert PASSWORD not in text

        again = subprocess.run(cmd + ["--json", str(tmp_path / "r.json")], cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "resuming an interrupted run" in again.stdout
        assert sim.count("POST", "Reset") == 1, "the resumed run must not reset the host again"
        assert sim.count("PATCH") == 1
        assert sim.bios_pending() == {}
        assert not journals[0].exists(), "a finished run removes its journal"
        assert "resumed an interrupted run" in again.stdout
    finally:
        sim.stop()
