"""Signals at each step of a write task (issue 40): SIGINT, SIGTERM and SIGHUP sent to `invoke bios-apply --reboot`
while it reads the BMC, while its PATCH is on the wire, and while the host reboots; and SIGINT to a run started
with SIGINT ignored (as a job started with `&` from a script is).

Real peers: the BMC simulator over TLS (its "slow" fault holds one request so the signal lands in that step) and
the task in a subprocess, as an operator or a CI runner starts it. Each run must stop, print the summary with
"interrupted (SIG...)", write the --json report with the host "interrupted", and exit 130 / 143 / 129.
"""

from __future__ import annotations

import json
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
PASSWORD = "signal-Bmc-pw-7"
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
# step -> (fault the simulator holds the step with, whether the values were written when the signal came)
STEPS = {
    "read": (dict(kind="slow", path_regex=r"/Bios$", method="GET", seconds=8), False),
    "patch": (dict(kind="slow", path_regex=r"/Bios/Settings$", method="PATCH", seconds=8, after=True), True),
    "reboot": (dict(kind="slow", path_regex=r"/Actions/ComputerSystem\.Reset$", method="POST", seconds=8), True),
}


def _setup(tmp_path: Path, sim: BMCSimulator, profile: str = "epyc-gpudirect"):
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  gpu-01:\n"
        f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_SIG_PW', ca_bundle: '{sim.ca_file}'}}\n"
        f"    hardware: {{sockets: 2, gpus: ['0000:41:00.0']}}\n    bios_profile: {profile}\n"
    )
    env = {**os.environ, "NF_SIG_PW": PASSWORD, "NUMAFORGE_STATE": str(tmp_path / "state"), "COLUMNS": "250"}
    report = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "invoke", "bios-apply", "-i", str(inv), "--reboot", "--unverified", "allow"]
    cmd += ["--json", str(report)]
    return env, cmd, report


def _start(cmd, env, sim: BMCSimulator, ignore_sigint: bool = False) -> subprocess.Popen:
    """Start the task and return once the simulator holds the faulted request (the step under test)."""
    preexec = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec
    )
    deadline = time.monotonic() + 120
    while not sim.faults.fired:
        assert proc.poll() is None, "bios-apply ended before it reached the step: " + "".join(proc.communicate())
        assert time.monotonic() < deadline, "the step was not reached within 120 s"
        time.sleep(0.02)
    time.sleep(0.2)
    return proc


def _judge(proc: subprocess.Popen, sig: signal.Signals, report: Path, written: bool, sim: BMCSimulator) -> None:
    out, err = proc.communicate(timeout=120)
    text = " ".join((out + err).split())
    assert proc.returncode == CODES[sig], text
    assert f"interrupted ({sig.name})" in text, text
    assert "numaforge bios-apply" in text and "gpu-01" in text, "the summary table must be printed: " + text
    doc = json.loads(report.read_text())
    assert doc["ok"] is False and doc["status"] == "interrupted", doc
    (host,) = doc["hosts"]
    assert host["status"] == "interrupted", host
    assert "Traceback" not in text
    assert PASSWORD not in text + report.read_text()
    if not written:
        assert sim.count("PATCH") == 0, "interrupted before any write: nothing may be written"
    assert sim.count("POST", "Reset") <= 1


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_at_each_step_stops_reports_and_exits_with_its_code(tmp_path, sig, step):
    """SIGHUP used to kill the run with no summary and no report (exit 129 by the default action): it must be
    handled like SIGTERM, with its own code."""
    fault, written = STEPS[step]
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=5.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim)
        sim.inject(**fault)
        proc = _start(cmd, env, sim)
        os.kill(proc.pid, sig)
        _judge(proc, sig, report, written, sim)
    finally:
        sim.stop()


SLOW_PROFILE = """{% set ns = namespace(n=0) %}{% for i in range(1500) %}{% for j in range(1000) %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}
description: a profile that takes a few seconds to render ({{ ns.n }} steps)
extends: epyc-baseline
settings: {}
"""


@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_mid_render_reports_the_host_interrupted(tmp_path, sig):
    """Issue 40: SIGTERM while the host's profile rendered reported the host "unchanged" and done; after the
    render budget learnt to stop, the host was "failed" with "profile went past its render budget" and a fix
    telling the operator to remove a loop. It is interrupted, nothing is written, and the exit code is the
    signal's."""
    project = tmp_path / "project"
    (project / "bios" / "profiles").mkdir(parents=True)
    (project / "bios" / "profiles" / "slow.yaml.j2").write_text(SLOW_PROFILE)
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=1.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim, profile="slow")
        env["NUMAFORGE_ROOT"] = str(project)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while sim.count("GET", r"/Bios$") == 0:  # the reads are done: the render comes next
            assert proc.poll() is None, "".join(proc.communicate())
            time.sleep(0.01)
        time.sleep(0.5)
        os.kill(proc.pid, sig)
        _judge(proc, sig, report, False, sim)
        host = json.loads(report.read_text())["hosts"][0]
        assert "profile render" in host["message"] and "render budget" not in host["message"], host
    finally:
        sim.stop()


def test_sigint_stops_a_run_started_with_sigint_ignored(tmp_path):
    """Issue 40: in one of six runs a SIGINT was ignored entirely (exit 0, full apply). A process started with
    SIGINT ignored -- `numaforge ... &` from a script without job control -- inherits SIG_IGN, and Python then
    installs no KeyboardInterrupt handler: the run wrote, rebooted and exited 0."""
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=5.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim)
        sim.inject(**STEPS["read"][0])
        proc = _start(cmd, env, sim, ignore_sigint=True)
        os.kill(proc.pid, signal.SIGINT)
        _judge(proc, signal.SIGINT, report, False, sim)
    finally:
        sim.stop()


def test_sighup_under_nohup_is_left_ignored(tmp_path):
    """`nohup numaforge ...` asks the run to outlive the terminal: a SIGHUP ignored at start stays ignored."""
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=1.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim)
        sim.inject(kind="slow", path_regex=r"/Bios$", method="GET", seconds=2)
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        )
        while not sim.faults.fired:
            assert proc.poll() is None
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGHUP)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
        assert json.loads(report.read_text())["ok"] is True
    finally:
        sim.stop()


def test_sighup_after_the_terminal_went_away_still_writes_the_report(tmp_path):
    """A real hangup: the terminal is gone, so every print fails (EIO/EPIPE; here: both pipes closed before the
    signal). The --json report is still written and the exit code is still 129, not a traceback or Python's 120
    for an output it could not flush."""
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=5.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim)
        sim.inject(**STEPS["read"][0])
        proc = _start(cmd, env, sim)
        proc.stdout.close()
        proc.stderr.close()
        os.kill(proc.pid, signal.SIGHUP)
        assert proc.wait(timeout=120) == 129
        doc = json.loads(report.read_text())
        assert doc["status"] == "interrupted" and doc["hosts"][0]["status"] == "interrupted", doc
        assert sim.count("PATCH") == 0
    finally:
        sim.stop()
