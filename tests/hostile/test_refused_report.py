"""Issue 40: one rule for a run refused before its first host -- the --json report is written and says so.

The rule (docs/operating.md "Refused runs", docs/RELIABILITY.md): a usage error found before any host is touched
(a bad option value, a bad NUMAFORGE_* variable, a bad gate setting, a write task with no selection) exits 2 and
writes the --json report (and --junit) with status "refused", ok false, the error (what, where, fix) and no host
with a step. A CI job that always reads the report then reads why, not "file not found" -- nor the previous run's
report left at that path, which a refusal that wrote nothing used to leave in place. A --json path that is
itself the refused value gets nothing.

Derived from the code: every task of ``namespace()`` under a refusal every task has (a bad
$NUMAFORGE_KERNEL_JOBS, numaforge.cli.environment), and under a bad value of its first option that takes one.
Runs in-process (the hostile harness's program over tasks.py); the inventory's hosts are a socket that counts
connections.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.hostile

sys.path.insert(0, str(Path(__file__).parent))
from harness import cli  # noqa: E402
from listener import Listener  # noqa: E402
from test_generated_options import POSITIONAL  # noqa: E402

from numaforge.cli.environment import CHECKS  # noqa: E402
from numaforge.cli.main import namespace  # noqa: E402

STALE = '{"ok": true, "status": "ok", "note": "the previous run\'s report"}\n'
CONTROL = "a\x1b[2Jb"


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    listener = Listener()
    for var in CHECKS:
        monkeypatch.delenv(var, raising=False)
    for var in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.setenv(var, str(tmp_path / "state" / var.lower()))
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # a task that went ahead finds no qemu, make, gcc...
    monkeypatch.setenv("NF_REFUSED_PW", "refused-pw-40")
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "hosts:\n  h1:\n"
        f"    bmc: {{url: 'https://127.0.0.1:{listener.port}', username: admin, password: 'env:NF_REFUSED_PW', "
        "vendor: dell}\n"
        f"    ssh: {{address: 127.0.0.1, port: {listener.port}, user: root, agent: false}}\n"
        "    hardware: {platform: t, vendor: dell, sockets: 2}\n    bios_profile: epyc-gpudirect\n"
    )
    monkeypatch.setenv("NUMAFORGE_INVENTORY", str(inv))
    work = tmp_path / "cwd"
    work.mkdir()
    yield listener, work
    listener.sock.close()


def _args(task: str) -> tuple[list[str], list[str], list[str]]:
    """(positional values, options that take a value besides the reports', report options) of a task."""
    args = namespace()[task].get_arguments()
    positional = [POSITIONAL[(task, a.name)] for a in args if a.positional]
    valued = [a.name for a in args if a.kind is not bool and not a.positional]
    return (
        positional,
        [v for v in valued if v not in ("json", "junit", "output")],
        [v for v in valued if v in ("json", "junit")],
    )


def _refused(report: Path, where: str) -> list[str]:
    """What is wrong with a refused run's report (empty: nothing)."""
    if not report.is_file():
        return ["no --json report"]
    text = report.read_text()
    if text == STALE:
        return ["the previous run's report was left in place"]
    doc = json.loads(text)
    bad = []
    if doc.get("status") != "refused" or doc.get("ok") is not False:
        bad.append(f"status {doc.get('status')!r}, ok {doc.get('ok')!r}")
    err = doc.get("error") or {}
    if where not in f"{err.get('where')} {err.get('what')}" or not err.get("fix"):
        bad.append(f"error does not name {where} with a fix: {err}")
    if any(h.get("steps") for h in doc.get("hosts", [])):
        bad.append("a host has steps")
    if "refused-pw-40" in text:
        bad.append("the BMC password is in the report")
    return bad


def _junit_refused(path: Path) -> list[str]:
    if not path.is_file():
        return ["no --junit file"]
    suite = ET.parse(path).getroot()
    return (
        [] if suite.get("errors") == "1" and suite.find("testcase/error") is not None else ["junit without the error"]
    )


def _case(listener: Listener, work: Path, argv: list[str], where: str, has_junit: bool) -> list[str]:
    report, junit = work / "report.json", work / "junit.xml"
    report.write_text(STALE)
    junit.unlink(missing_ok=True)
    argv = argv + ["--json", str(report)] + (["--junit", str(junit)] if has_junit else [])
    out = cli(*argv, cwd=work)
    bad = [] if out.code == 2 else [f"exit {out.code}"]
    bad += _refused(report, where)
    bad += _junit_refused(junit) if has_junit else []
    if listener.accepts:
        bad.append(f"{listener.accepts} connection(s)")
        listener.accepts = 0
    if "Traceback" in out.output:
        bad.append("traceback")
    return [f"{' '.join(a if len(a) < 60 else '...' for a in argv[:3])}: {b}" for b in bad]


def test_every_task_refused_before_any_host_writes_a_report_saying_refused(sandbox, monkeypatch, record_property):
    listener, work = sandbox
    failures: list[str] = []
    counts = {"tasks": 0, "environment": 0, "option": 0}
    for task in sorted(namespace().task_names):
        counts["tasks"] += 1
        positional, valued, reports = _args(task)
        assert "json" in reports, f"{task} takes no --json: the rule has nothing to write"
        has_junit = "junit" in reports
        monkeypatch.setenv("NUMAFORGE_KERNEL_JOBS", "abc")  # every task checks the environment first
        failures += _case(listener, work, [task, *positional], "NUMAFORGE_KERNEL_JOBS", has_junit)
        counts["environment"] += 1
        monkeypatch.delenv("NUMAFORGE_KERNEL_JOBS")
        if valued:  # every option refuses control characters (test_generated_options)
            flag = "--" + valued[0].replace("_", "-")
            failures += _case(listener, work, [task, *positional, flag, CONTROL], flag, has_junit)
            counts["option"] += 1
    summary = (
        f"refused-run reports: {counts['tasks']} tasks, {counts['environment']} environment and "
        f"{counts['option']} option refusals; {len(failures)} without a refused report"
    )
    record_property("refused_reports", summary)
    print(summary)
    assert counts["tasks"] > 20 and counts["option"] >= counts["tasks"] - 3
    assert not failures, "\n".join(failures)


def test_a_refused_json_path_gets_no_report_and_the_junit_still_says_refused(sandbox):
    """--json naming a directory is the refused value itself: nothing is written there (nor at a name with a
    control character); the --junit file, a valid path, still records the refusal."""
    listener, work = sandbox
    junit = work / "junit.xml"
    out = cli("bios-plan", "--json", str(work), "--junit", str(junit), cwd=work)
    assert out.code == 2 and "--json" in out.output, out.output
    assert not _junit_refused(junit)
    out = cli("bios-plan", "--json", str(work / "r\x1b[2J.json"), cwd=work)
    assert out.code == 2 and "--json" in out.output
    assert sorted(p.name for p in work.iterdir()) == ["junit.xml"]
    assert not listener.accepts


def test_output_json_prints_the_refused_report(sandbox):
    listener, work = sandbox
    out = cli("bios-plan", "--output", "json", "--forks", "0", cwd=work)
    assert out.code == 2
    start = out.output.index("{")
    doc, _ = json.JSONDecoder().raw_decode(out.output[start:])
    assert doc["status"] == "refused" and "--forks" in doc["error"]["where"] + doc["error"]["what"], doc


def test_a_write_task_with_no_selection_is_refused_in_the_body_and_says_so(sandbox, tmp_path):
    """The body's own refusals before any host (numaforge.cli.common.execute: a usage error while no host has a
    step) follow the same rule: bios-apply on a two-host inventory with no selection."""
    listener, work = sandbox
    inv = tmp_path / "two.yaml"
    inv.write_text(
        "hosts:\n"
        + "".join(
            f"  {n}:\n    bmc: {{url: 'https://127.0.0.1:{listener.port}', username: a, password: 'env:NF_REFUSED_PW'}}\n"
            for n in ("a", "b")
        )
    )
    report = work / "r.json"
    report.write_text(STALE)
    out = cli("bios-apply", "--inventory", str(inv), "--json", str(report), cwd=work)
    assert out.code == 2, out.output
    assert not _refused(report, "two.yaml"), report.read_text()
    assert not listener.accepts


def test_only_a_refusal_before_any_step_is_called_refused(tmp_path):
    """The body's errors: a refusal class (marked ``refusal``: selection, inventory, gate, option...) with no host
    step is "refused"; the same after a host's step, or an exit-2 error of work already done (a tree that cannot
    take a series), is "failed" -- "refused" never hides work that was done."""
    from invoke.exceptions import Exit

    from numaforge.cli import common
    from numaforge.errors import SelectionError
    from numaforge.kernel.backport import BackportError

    def run(body) -> dict:
        report = tmp_path / "r.json"
        with pytest.raises(Exit) as exc:
            common.execute("bios-plan", body, json=str(report))
        assert exc.value.code == 2
        return json.loads(report.read_text())

    def refused_at_once(rep):
        raise SelectionError("no host matches", "--host", "pick one")

    def refused_after_a_step(rep):
        with pytest.raises(KeyError), rep.host("h1").step("read"):
            raise KeyError("x")
        raise SelectionError("no host matches", "--host", "pick one")

    def work_failed(rep):
        raise BackportError("the tree has an am in progress", "tree", "git am --abort")

    assert run(refused_at_once)["status"] == "refused"
    assert run(refused_after_a_step)["status"] == "failed"
    assert run(work_failed)["status"] == "failed"
