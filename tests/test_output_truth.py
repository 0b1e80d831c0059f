"""What a run prints and reports is what happened to each host (issue 39 item 9, issue 40).

- numa-effect on an unreachable host said "unchanged" in the table and the JSON: the real task, against a port
  nothing listens on (tests/sshd_fixture.free_port), in a subprocess.
- An interrupted `build-kpatch --check` said "1 host(s) done, 0 interrupted": a step cut by Ctrl-C/SIGTERM left
  its row "ok". kpatch-build cannot run in the core tier, so the body here is the task's own shape (a row, its
  "build-kpatch" step) with the interrupt raised inside the step: a fake at that boundary only; execute(), the
  report and the summary are the real ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import invoke
import pytest
from sshd_fixture import free_port

from numaforge.cli import common
from numaforge.errors import NumaforgeError
from numaforge.fleet import Hangup, Terminated
from numaforge.report import Report

ROOT = Path(__file__).parents[1]


def test_numa_effect_on_an_unreachable_host_is_failed_not_unchanged(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  h1:\n    ssh: {{address: 127.0.0.1, port: {free_port()}, user: root}}\n")
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "numa-effect", "--scenario", "probe", "--knob", "-i", str(inv)]
        + ["--host", "h1", "--json", str(report)],
        cwd=ROOT,
        env={**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = next((line for line in proc.stdout.splitlines() if line.startswith("h1 ")), proc.stdout + proc.stderr)
    assert row.split()[1] == "failed" and "cannot connect" in row, proc.stdout
    doc = json.loads(report.read_text())
    (host,) = doc["hosts"]
    assert host["status"] == "failed" and "cannot connect" in host["message"], host
    assert doc["ok"] is False


@pytest.mark.parametrize("exc", [KeyboardInterrupt, Terminated, Hangup], ids=lambda e: e.__name__)
def test_a_step_cut_by_an_interrupt_leaves_its_host_interrupted(tmp_path, capsys, exc):
    def body(report: Report) -> None:
        row = report.host("target:lab")
        with row.step("build-kpatch"):
            raise exc()

    with pytest.raises(invoke.Exit) as ei:
        common.execute("build-kpatch", body, json=str(tmp_path / "r.json"))
    code = {KeyboardInterrupt: 130, Terminated: 143, Hangup: 129}[exc]
    assert ei.value.code == code
    err = " ".join(capsys.readouterr().err.split())
    assert "0 host(s) done, 1 interrupted" in err, err
    doc = json.loads((tmp_path / "r.json").read_text())
    (host,) = doc["hosts"]
    assert host["status"] == "interrupted" and doc["status"] == "interrupted", host


def test_a_step_that_failed_when_the_task_ended_with_an_error_is_failed(tmp_path):
    def body(report: Report) -> None:
        with report.host("h1").step("connect"):
            raise NumaforgeError("cannot connect: Connection refused", "host h1", "check the host")

    with pytest.raises(invoke.Exit) as ei:
        common.execute("numa-effect", body, json=str(tmp_path / "r.json"))
    assert ei.value.code == 1
    (host,) = json.loads((tmp_path / "r.json").read_text())["hosts"]
    assert host["status"] == "failed" and "cannot connect" in host["message"], host


def test_a_host_that_finished_before_the_error_keeps_its_status(tmp_path):
    def body(report: Report) -> None:
        with report.host("h1").step("apply"):
            pass
        report.host("h1").status = "changed"
        raise NumaforgeError("cannot write the plot", "out/", "check the directory")

    with pytest.raises(invoke.Exit):
        common.execute("numa-effect", body, json=str(tmp_path / "r.json"))
    (host,) = json.loads((tmp_path / "r.json").read_text())["hosts"]
    assert host["status"] == "changed"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_the_summary_prints_waits_for_the_report(tmp_path, monkeypatch, capsys, sig, code):
    """SIGTERM's handler used to be put back to the default before the summary and --json were written: a
    SIGTERM then killed the process with no report. A real signal, sent to this process while the summary
    prints: the report is written whole, then the run exits with the signal's code."""

    def body(report: Report) -> None:
        report.host("h1").status = "changed"

    def summary(self, console=None) -> None:
        os.kill(os.getpid(), sig)

    monkeypatch.setattr(Report, "print_summary", summary)
    with pytest.raises(invoke.Exit) as ei:
        common.execute("os-apply", body, json=str(tmp_path / "r.json"))
    assert ei.value.code == code
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["hosts"][0]["status"] == "changed"
    assert f"interrupted ({sig.name}) after the run had finished" in " ".join(capsys.readouterr().err.split())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the handlers are put back"
