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
        inv, env, cmd = _setup(tmp_path, sim)
        first = _start_and_wait_for_reset(cmd, env, sim)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        journals = list((tmp_path / "state" / "journal").glob("*.json"))
        assert len(journals) == 1
        text = journals[0].read_text()
        assert '"phase": "patched"' in text and '"phase": "reboot-requested"' in text
        assert '"phase": "verified"' not in text
        assert PASSWORD not in text

        again = subprocess.run(
            cmd + ["--json", str(tmp_path / "r.json")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert "resuming an interrupted run" in again.stdout
        assert sim.count("POST", "Reset") == 1, "the resumed run must not reset the host again"
        assert sim.count("PATCH") == 1
        assert sim.bios_pending() == {}
        assert not journals[0].exists(), "a finished run removes its journal"
        assert "resumed an interrupted run" in again.stdout
    finally:
        sim.stop()


def _setup(tmp_path, sim):
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  gpu-01:\n"
        f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_RESUME_PW', ca_bundle: '{sim.ca_file}'}}\n"
        "    hardware: {sockets: 2, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-gpudirect\n"
        "    vars: {bios_unverified: allow}\n"  # the write path under test (test_bios_unverified_policy_bmc.py)
    )
    env = {**os.environ, "NF_RESUME_PW": PASSWORD, "NUMAFORGE_STATE": str(tmp_path / "state"), "COLUMNS": "250"}
    return inv, env, [sys.executable, "-m", "invoke", "bios-apply", "-i", str(inv), "--reboot"]


def _start_and_wait_for_reset(cmd, env, sim):
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 180
    while sim.count("POST", "Reset") == 0:
        assert proc.poll() is None, "bios-apply ended before it requested the reset"
        assert time.monotonic() < deadline, "no reset request within 180 s"
        time.sleep(0.05)
    return proc


def test_resume_whose_wait_runs_out_never_resets_again(tmp_path):
    """Issue 12 item 3: killed after the reset request, re-run while the host has not come back (here: its OS
    ignores the graceful restart, so it never will on its own) with a short --power-timeout. The re-run used to
    give up waiting and send a second reset while saying 'not reset again'. After an operator power-cycles the
    host (the simulator's own API, not Redfish), the same command verifies, still without a reset."""
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=1.0).start()
    try:
        sim.graceful_ignored = True
        inv, env, cmd = _setup(tmp_path, sim)
        first = _start_and_wait_for_reset(cmd, env, sim)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        short = subprocess.run(
            cmd + ["--power-timeout", "1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        text = " ".join((short.stdout + short.stderr).split())
        assert short.returncode == 1, text
        assert sim.count("POST", "Reset") == 1, "a resumed host must never be reset again"
        assert "reset requested by the previous run at" in text and "it was not reset again" in text, text
        sim.graceful_ignored = False
        sim.state.reset("ForceRestart")  # the operator's power cycle
        final = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        text = " ".join((final.stdout + final.stderr).split())
        assert final.returncode == 0, text
        assert "reset requested by the previous run at" in text and "not reset again" in text
        assert sim.count("POST", "Reset") == 1 and sim.count("PATCH") == 1 and sim.bios_pending() == {}
    finally:
        sim.stop()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_mid_reboot_says_so_exits_non_zero_and_reports_interrupted(tmp_path, sig, code):
    """Issue 12 item 10: Ctrl-C during bios-apply --reboot printed nothing and exited 0 with "ok": true."""
    import json

    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=5.0).start()
    try:
        inv, env, cmd = _setup(tmp_path, sim)
        proc = _start_and_wait_for_reset(cmd + ["--json", str(tmp_path / "r.json")], env, sim)
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == code, out + err
        text = " ".join((out + err).split())
        assert f"interrupted ({sig.name})" in text, text
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["ok"] is False and doc["status"] == "interrupted"
        (h,) = doc["hosts"]
        assert h["status"] == "interrupted", h  # issue 25 item 5: not "failed"
        assert h["data"]["changed"] and h["data"]["reset_requested"], h  # what was written and reset
        assert "a reset was requested at" in h["message"]
        assert sim.count("POST", "Reset") == 1
        journal = list((tmp_path / "state" / "journal").glob("*.json"))
        assert len(journal) == 1 and '"phase": "reboot-requested"' in journal[0].read_text()
    finally:
        sim.stop()


def test_double_ctrl_c_mid_reboot_reports_the_host_interrupted_with_what_was_done(tmp_path):
    """Issue 25 item 5: after a double Ctrl-C the host that had been patched and reset was reported "not-run"
    with no data. Two SIGINTs back to back, as an impatient operator sends them."""
    import json

    sim = BMCSimulator(flavour="dell", tls=True, username="admin", password=PASSWORD, power_delay=5.0).start()
    try:
        inv, env, cmd = _setup(tmp_path, sim)
        proc = _start_and_wait_for_reset(cmd + ["--json", str(tmp_path / "r.json")], env, sim)
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, out + err
        doc = json.loads((tmp_path / "r.json").read_text())
        (h,) = doc["hosts"]
        assert doc["status"] == "interrupted" and h["status"] == "interrupted", h
        assert h["data"]["changed"] and h["data"]["reset_requested"], h
        assert "1 interrupted" in " ".join(err.split()), err
    finally:
        sim.stop()
