"""Signals at each step of a write task (issue 40): SIGINT, SIGTERM and SIGHUP sent to `invoke bios-apply --reboot`
while it reads the BMC, while its PATCH is on the wire, and while the host reboots; and SIGINT to a run started
with SIGINT ignored (as a job started with `&` from a script is).

Real peers: the BMC simulator over TLS (its "slow" fault holds one request so the signal lands in that step) and
the task in a subprocess, as an operator or a CI runner starts it. Each run must stop, print the summary with
"interrupted (SIG...)", write the --json report with the host "interrupted", and exit 130 / 143 / 129.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostos.helpers import build_tree
from sshd_fixture import SshdHost, descendants, free_port

from numaforge.bios.applysteps import STATES
from numaforge.lab.bmc import BMCSimulator

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).parents[2]
PASSWORD = "signal-Bmc-pw-7"
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
SLOW = dict(kind="slow", seconds=8)
# step -> (BMC flavour, fault the simulator holds the step with, whether the values were written when the signal
# came, the request that must have been made before the fault is queued -- or None)
STEPS = {
    "read": ("generic", dict(SLOW, path_regex=r"/Bios$", method="GET"), False, None),
    "job-check": ("dell", dict(SLOW, path_regex=r"/Jobs/?(\?.*)?$", method="GET"), False, None),
    "patch": ("generic", dict(SLOW, path_regex=r"/Bios/Settings$", method="PATCH", after=True), True, None),
    "job": ("dell", dict(SLOW, path_regex=r"/Jobs/[^/?]+$", method="GET"), True, None),
    "reboot": ("generic", dict(SLOW, path_regex=r"/Actions/ComputerSystem\.Reset$", method="POST"), True, None),
}
# steps held by another test of this file (each named test must exist: test_every_bios_apply_step_is_held_...)
ELSEWHERE = {
    "connect": "test_a_signal_while_a_host_waits_in_connect_for_its_models_discovery",
    "plan": "test_a_signal_mid_render_reports_the_host_interrupted",
    "verify": "test_a_signal_during_the_verify_read_after_the_reboot",
    "resume": "test_a_signal_while_a_resumed_run_waits_for_the_previous_runs_reset",
}


def _step_literals(path: Path, function: str) -> list[str]:
    """The names ``result.step("...")`` gives inside ``function`` of a module (the steps as the code names them)."""
    tree = ast.parse(path.read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    return [
        str(c.args[0].value)
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and c.func.attr == "step"
        and c.args
        and isinstance(c.args[0], ast.Constant)
    ]


def bios_apply_steps() -> list[str]:
    """Every step bios-apply's host result can have: the BMC session's, apply_host's own, and its state machine's
    (numaforge.bios.applysteps.STATES, each ``with result.step(current)``); apply_host runs apply_steps."""
    pkg = ROOT / "numaforge" / "bios"
    # apply_steps: apply_host's body as a generator (numaforge.waits), so a host in a POST wait holds no worker
    steps = _step_literals(pkg / "hostsession.py", "bmc_session") + _step_literals(pkg / "apply.py", "apply_steps")
    return list(dict.fromkeys(steps + [s for s in STATES if s != "result"]))


def test_every_bios_apply_step_is_held_by_a_signal_test():
    steps = bios_apply_steps()
    held = set(STEPS) | set(ELSEWHERE)
    assert set(steps) == held, (
        f"steps with no signal test: {set(steps) - held}; gone from the code: {held - set(steps)}"
    )
    tests = {n for n, f in globals().items() if n.startswith("test_") and callable(f)}
    assert set(ELSEWHERE.values()) <= tests, f"no such test: {set(ELSEWHERE.values()) - tests}"


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


def _start(cmd, env, sim: BMCSimulator, ignore_sigint: bool = False, fault: dict | None = None, when=None):
    """Start the task and return once the simulator holds the faulted request (the step under test); ``fault``
    is queued once the request ``when`` (method, path regex) was made, or at once."""
    preexec = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    if fault is not None and when is None:
        sim.inject(**fault)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec
    )
    deadline = time.monotonic() + 120
    while not sim.faults.fired:
        if fault is not None and when is not None and sim.count(*when):
            sim.inject(**fault)
            when = None
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
    handled like SIGTERM, with its own code. The report names the step the signal cut."""
    flavour, fault, written, when = STEPS[step]
    sim = BMCSimulator(flavour=flavour, tls=True, username="admin", password=PASSWORD, power_delay=2.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim)
        proc = _start(cmd, env, sim, fault=fault, when=when)
        patches = sim.count("PATCH")
        os.kill(proc.pid, sig)
        _judge(proc, sig, report, written, sim)
        host = json.loads(report.read_text())["hosts"][0]
        assert host["steps"][-1]["name"] == step, host["steps"]
        assert sim.count("PATCH") == patches, "a PATCH was sent after the signal"
    finally:
        sim.stop()


def _two_of_a_model(tmp_path: Path, sims: list[BMCSimulator]):
    """bios-apply --reboot over two BMCs of one model (the inventory states vendor and platform): the first host
    to connect discovers the model, the other waits in its connect step until that discovery ends."""
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n"
        + "".join(
            f"  gpu-0{i}:\n"
            f"    bmc: {{url: '{sim.url}', username: admin, password: 'env:NF_SIG_PW', ca_bundle: '{sim.ca_file}', "
            "vendor: generic}\n"
            "    hardware: {sockets: 2, platform: sig-model, gpus: ['0000:41:00.0']}\n    bios_profile: epyc-gpudirect\n"
            for i, sim in enumerate(sims, 1)
        )
    )
    env = {
        **os.environ,
        "NF_SIG_PW": PASSWORD,
        "NUMAFORGE_STATE": str(tmp_path / "state"),
        "NUMAFORGE_REDFISH_CACHE": str(tmp_path / "redfish-cache"),  # no shape known from an earlier run
        "COLUMNS": "250",
    }
    report = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "invoke", "bios-apply", "-i", str(inv), "--all", "--forks", "2", "--reboot"]
    cmd += ["--unverified", "allow", "--json", str(report)]
    return env, cmd, report


@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_while_a_host_waits_in_connect_for_its_models_discovery(tmp_path, sig):
    """The connect step makes no request of its own; what can hold it is the wait for another host of the same
    model that is discovering it (numaforge.bios.discovery.RegistryCache.claim, up to connect + read timeout).
    The discovering host's read is held; the signal comes while the other one waits in connect: both are
    interrupted, neither is written, the waiting one's last step is connect, and the exit code is the signal's."""
    sims = [
        BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=1.0).start()
        for _ in range(2)
    ]
    try:
        for sim in sims:
            sim.inject(**STEPS["read"][1])
        env, cmd, report = _two_of_a_model(tmp_path, sims)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not any(sim.faults.fired for sim in sims):
            assert proc.poll() is None, "".join(proc.communicate())
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.5)
        (waiting,) = [i for i, sim in enumerate(sims, 1) if not sim.faults.fired]
        assert sims[waiting - 1].count("GET", r"/Bios$") == 0, "both hosts read: neither waited in connect"
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
        text = " ".join((out + err).split())
        assert proc.returncode == CODES[sig], text
        assert f"interrupted ({sig.name})" in text and "Traceback" not in text, text
        doc = json.loads(report.read_text())
        assert doc["ok"] is False and doc["status"] == "interrupted", doc
        hosts = {h["host"]: h for h in doc["hosts"]}
        assert {h["status"] for h in hosts.values()} == {"interrupted"}, hosts
        assert hosts[f"gpu-0{waiting}"]["steps"][-1]["name"] == "connect", hosts[f"gpu-0{waiting}"]["steps"]
        assert all(sim.count("PATCH") == 0 and sim.count("POST", "Reset") == 0 for sim in sims)
        assert PASSWORD not in text + report.read_text()
    finally:
        for sim in sims:
            sim.stop()


def _after_the_reset_a_bios_read_follows_a_bios_read(sim: BMCSimulator):
    """The verify read, told apart from the reboot poll's (GET System, then GET Bios: verify's GET Bios comes
    right after the poll's): a reset was requested and the request before this one was a GET of a Bios too."""

    def when() -> bool:
        last = sim.requests[-2:]
        bios = [m == "GET" and re.search(r"/Bios$", p) for m, p in last]
        return bool(sim.state.resets) and len(last) == 2 and all(bios)

    return when


@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_during_the_verify_read_after_the_reboot(tmp_path, sig):
    """The verify step's one request, GET Bios, is also what the reboot step polls: the simulator holds it only
    when it follows the poll's own GET Bios after the reset (a ``when`` condition on the fault). The values were
    written and the host reset: the host is interrupted (not changed, not failed), the report keeps what was
    written, nothing is sent after the signal and no second reset."""
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=1.0).start()
    try:
        sim.inject(
            **dict(SLOW, path_regex=r"/Bios$", method="GET"), when=_after_the_reset_a_bios_read_follows_a_bios_read(sim)
        )
        env, cmd, report = _setup(tmp_path, sim)
        proc = _start(cmd, env, sim)
        sent = len(sim.requests)
        os.kill(proc.pid, sig)
        _judge(proc, sig, report, True, sim)
        host = json.loads(report.read_text())["hosts"][0]
        assert host["steps"][-1]["name"] == "verify", host["steps"]
        assert [s["name"] for s in host["steps"]][-2] == "reboot", host["steps"]
        assert host["data"].get("changed"), "what was written before the signal is in the report"
        assert sim.count("POST", "Reset") == 1
        assert all(m == "GET" or "Sessions" in p for m, p in sim.requests[sent:]), sim.requests[sent:]
    finally:
        sim.stop()


def _after_the_read_step(sim: BMCSimulator):
    """The resumed run's first poll, told apart from the read step's GET System (the read step is GET Systems,
    then GET System and GET Bios in either order: GET Bios came first in 9 of 15 runs, and then the read step's
    own GET System was held): a GET System and a GET Bios both came after the last GET of the Systems
    collection. A late request of the stopped first run (its reboot poll is GET System, GET Bios) is logged
    before that collection read."""

    def when() -> bool:
        log = list(sim.requests)
        reads = [i for i, (m, p) in enumerate(log) if m == "GET" and p.rstrip("/").endswith("/Systems")]
        since = log[reads[-1] : -1] if reads else []
        return any(m == "GET" and re.search(r"/Bios$", p) for m, p in since) and any(
            m == "GET" and re.search(r"/Systems/[^/]+$", p) for m, p in since
        )

    return when


@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_while_a_resumed_run_waits_for_the_previous_runs_reset(tmp_path, sig):
    """The resume step exists only in a run that resumes a journal: a first run is stopped (SIGINT) after its
    reset was accepted, then the same command resumes and waits for that reset (never sends another). Its first
    poll (GET System after the resumed run's read) is held and the signal comes: the host is interrupted in the
    resume step, the resumed run sent no reset and no PATCH, and its report says it resumed."""
    # the host stays in its reset for 60 s: the first run is stopped while it waits, the second resumes the wait
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=60.0).start()
    try:
        env, cmd, report = _setup(tmp_path, sim)
        first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while sim.count("POST", r"/Actions/ComputerSystem\.Reset$") == 0:
            assert first.poll() is None, "".join(first.communicate())
            assert time.monotonic() < deadline
            time.sleep(0.02)
        polls = sim.count("GET", r"/Systems/[^/]+$")
        while sim.count("GET", r"/Systems/[^/]+$") == polls:  # the reset was answered: the run polls
            assert first.poll() is None, "".join(first.communicate())
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGINT)
        assert first.wait(timeout=120) == 130
        sim.reset_counts()
        # the simulator holds the resume step's first poll. A condition in the test's own loop (a GET Bios was
        # logged) raced a late request of the stopped first run, logged after reset_counts on a loaded machine,
        # and held the read step's GET System
        sim.inject(**dict(SLOW, path_regex=r"/Systems/[^/]+$", method="GET"), when=_after_the_read_step(sim))
        proc = _start(cmd, env, sim)
        os.kill(proc.pid, sig)
        _judge(proc, sig, report, True, sim)
        host = json.loads(report.read_text())["hosts"][0]
        assert [s["name"] for s in host["steps"]][-1] == "resume", host["steps"]
        assert sim.count("POST", "Reset") == 0 and sim.count("PATCH") == 0, sim.requests
        doc = json.loads(report.read_text())
        assert doc["data"]["journal"]["resumed"], doc["data"]
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
        proc = _start(cmd, env, sim, ignore_sigint=True, fault=STEPS["read"][1])
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
        proc = _start(cmd, env, sim, fault=STEPS["read"][1])
        proc.stdout.close()
        proc.stderr.close()
        os.kill(proc.pid, signal.SIGHUP)
        assert proc.wait(timeout=120) == 129
        doc = json.loads(report.read_text())
        assert doc["status"] == "interrupted" and doc["hosts"][0]["status"] == "interrupted", doc
        assert sim.count("PATCH") == 0
    finally:
        sim.stop()


# ------------------------------------------------------------------------------------------ os-apply over SSH
OS_HOLD = """#!/bin/sh
# ForceCommand of the test's sshd: keeps each command's stdin (the script os-apply sends), and holds the one the
# test names (a text the script holds, and which of the scripts holding it) for 8 s before running it
D=DIR
f=$D/in.$$
cat > "$f"
if [ -f "$D/hold" ] && [ ! -f "$D/held" ]; then
  pat=$(sed -n 1p "$D/hold"); want=$(sed -n 2p "$D/hold")
  if grep -qF -- "$pat" "$f"; then
    k=$(( $(cat "$D/seen" 2>/dev/null || echo 0) + 1 )); echo "$k" > "$D/seen"
    if [ "$k" = "$want" ]; then touch "$D/held"; sleep 8; touch "$D/released"; fi
  fi
fi
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" < "$f"
"""
# os-apply step -> (a text of the script the step sends, which of those scripts, whether it wrote before the signal)
OS_STEPS = {
    "plan": ("head -c", 1, False),
    # the apply script's own text (previous.json, held here before, is also a file the plan's snapshot reads: that
    # case held the plan step, which only the step name in the report -- asserted now -- shows)
    "apply": ("numaforge: cannot write", 1, True),
    "verify": ("head -c", 2, True),
}
# the steps only a canary host of `--gate locality` has: its snapshots are the same script as plan's and verify's
# (locality-before takes two before plan's; locality-after two after verify's)
GATE = ["--canary", "1", "--gate", "locality", "--gate-seconds", "0.1"]
OS_GATE_STEPS = {
    "locality-before": ("head -c", 1, False),
    "locality-after": ("head -c", 5, True),
}


def test_every_os_apply_step_is_held_by_a_signal_test():
    run = ROOT / "numaforge" / "hostos" / "run.py"
    steps = _step_literals(run, "apply_host") + _step_literals(run, "_apply_steps")  # apply_host runs _apply_steps
    held = set(OS_STEPS) | set(OS_GATE_STEPS)
    assert set(steps) == held, (
        f"steps with no signal test: {set(steps) - held}; gone from the code: {held - set(steps)}"
    )


@pytest.fixture(scope="module")
def held_sshd(tmp_path_factory):
    """A real sshd whose ForceCommand (OS_HOLD) holds the step under test."""
    d = tmp_path_factory.mktemp("hold")
    script = d / "hold.sh"
    script.write_text(OS_HOLD.replace("DIR", str(d / "cmds")))
    script.chmod(0o755)
    h = SshdHost(name="sig", address="127.0.0.1", port=free_port(), dir=d / "sshd")
    h.extra_config = f"ForceCommand {script}\n"
    try:
        yield h.start(), d / "cmds"
    finally:
        h.stop()


@pytest.mark.ssh
@pytest.mark.parametrize("step", list(OS_STEPS))
@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_at_each_os_apply_step_stops_reports_and_exits_with_its_code(tmp_path, held_sshd, sig, step):
    _os_apply_held(tmp_path, held_sshd, sig, step, OS_STEPS[step])


@pytest.mark.ssh
@pytest.mark.parametrize("step", list(OS_GATE_STEPS))
@pytest.mark.parametrize("sig", list(CODES), ids=[s.name for s in CODES])
def test_a_signal_at_each_locality_gate_step_stops_reports_and_exits_with_its_code(tmp_path, held_sshd, sig, step):
    """os-apply --canary 1 --gate locality: the canary's locality measurement before the write and after it."""
    _os_apply_held(tmp_path, held_sshd, sig, step, OS_GATE_STEPS[step], GATE)


def _os_apply_held(tmp_path, held_sshd, sig, step, spec, extra=()):
    host, cmds = held_sshd
    if cmds.exists():
        shutil.rmtree(cmds)
    cmds.mkdir()
    pattern, nth, written = spec
    (cmds / "hold").write_text(f"{pattern}\n{nth}\n")
    root = build_tree(tmp_path / "root")
    before = (root / "proc/sys/vm/swappiness").read_text()
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  os-01:\n"
        f"    ssh: {{address: 127.0.0.1, port: {host.port}, user: root, key_file: '{host.client_key}', "
        f"known_hosts: '{host.known_hosts}', agent: false}}\n"
        f"    hardware: {{sockets: 4, nics: ['0000:21:04.0']}}\n"
        f"    vars: {{hostos_profile: lab-vm-host, hostos_root: '{root}'}}\n"
    )
    report = tmp_path / "r.json"
    env = {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state"), "COLUMNS": "250"}
    cmd = [sys.executable, "-m", "invoke", "os-apply", "-i", str(inv), "--json", str(report), *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not (cmds / "held").exists():
        assert proc.poll() is None, "os-apply ended before it reached the step: " + "".join(proc.communicate())
        assert time.monotonic() - t0 < 120
        time.sleep(0.02)
    time.sleep(0.3)
    sent = len(list(cmds.glob("in.*")))
    os.kill(proc.pid, sig)
    t_sig = time.monotonic()
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - t_sig
    text = " ".join((out + err).split())
    assert proc.returncode == CODES[sig], text
    assert f"interrupted ({sig.name})" in text and "os-01" in text, text
    assert "Traceback" not in text
    doc = json.loads(report.read_text())
    assert doc["ok"] is False and doc["status"] == "interrupted", doc
    (h,) = doc["hosts"]
    assert h["status"] == "interrupted", h
    # the host's own result, with its steps and what it wrote (it was the fleet's bare "interrupted" before)
    # a write on the host is never cut half-way: the apply ends (its step ok) and the host stops before verify
    stops_at = "verify" if step == "apply" else step
    assert h.get("steps") and h["steps"][-1]["name"] == stops_at, h
    assert step == stops_at or [x["status"] for x in h["steps"] if x["name"] == step] == ["ok"], h
    if written:
        assert h["data"].get("changed") or h["data"].get("outcome_unknown"), h
        assert "written before it stopped" in h["message"] or "outcome unknown" in h["message"], h
    else:
        assert not h.get("data", {}).get("changed"), h
    # a read is cut at once (stop_grace=0); a write on the host is never cut half-way: it ends (bounded by its
    # timeout) -- the held write here sleeps 8 s, then runs
    assert took < (8 + 5 if step == "apply" else 5), f"took {took:.1f} s after the signal"
    # the held command has run (it was on the host before the signal), and every session the run opened has ended
    # (the listener has no child left): no command of the run can still arrive (a fixed 9 s sleep before)
    deadline = time.monotonic() + 60
    while not (cmds / "released").exists() or descendants(host.proc.pid):
        assert time.monotonic() < deadline, f"the host's sessions did not end: {descendants(host.proc.pid)}"
        time.sleep(0.05)
    assert len(list(cmds.glob("in.*"))) == sent, "a command was sent to the host after the signal"
    if not written:
        assert (root / "proc/sys/vm/swappiness").read_text() == before, "written though the signal came first"
