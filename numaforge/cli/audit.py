"""Task: numa-audit — read-only NUMA findings per host over SSH (docs/numa-audit.md).

Thin: parse options, call numaforge.audit.run over the fleet runner, print one table per host and a fleet summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ..defaults import AUDIT_WINDOW, FORKS_SSH
from ..display import esc
from ..lazy import lazy_module
from ..report import Report
from . import common, values
from .optionsets import RolloutSpec, task

if TYPE_CHECKING:
    from ..audit import run as audit_run
else:  # imported by the task that uses it (numaforge.lazy)
    audit_run = lazy_module("numaforge.audit.run")

HELP = {
    "window": f"seconds between the two samples of the counters (default {AUDIT_WINDOW:g}: the talk's 'sustained 10 s')",
    "process": "audit only processes whose name (/proc/PID/status Name) matches this glob (default: all)",
}
COLOUR = {"crit": "red", "warn": "yellow", "info": "cyan"}


def _print(report: Report) -> None:
    fleet: dict[tuple[str, str], int] = {}
    for h in report.hosts:
        findings = h.data.get("findings")
        if findings is None:
            continue
        if not findings:
            common.console.print(esc(f"{h.host}: no findings (kernel {h.data.get('kernel') or '?'})"))
            continue
        t = Table(title=esc(f"{h.host}: numa-audit (kernel {h.data.get('kernel') or '?'})"))
        for col in ("severity", "check", "finding", "evidence", "fix"):
            t.add_column(col, overflow="fold")
        for f in findings:
            fleet[(f["check"], f["severity"])] = fleet.get((f["check"], f["severity"]), 0) + 1
            t.add_row(
                f"[{COLOUR.get(f['severity'], 'white')}]{esc(f['severity'])}[/]",
                esc(f["check"]),
                esc(f["what"]),
                esc("\n".join(f["evidence"])),
                esc(f["fix"] or "-"),
            )
        common.console.print(t)
    if len(report.hosts) > 1 and fleet:
        t = Table(title="fleet summary: findings per check")
        for col in ("check", "severity", "hosts' findings"):
            t.add_column(col)
        for (check, sev), n in sorted(fleet.items()):
            t.add_row(esc(check), f"[{COLOUR.get(sev, 'white')}]{esc(sev)}[/]", str(n))
        common.console.print(t)


def _window(value) -> float:
    if value is None:
        return AUDIT_WINDOW
    try:
        w = float(value)
    except ValueError:
        w = -1.0
    if not 0.5 <= w <= 600:
        raise values.OptionValueError(
            f"--window {value!r} is not a number of seconds in 0.5..600", "--window", "pass e.g. --window 10"
        )
    return w


@task(hosts=True, rollout=RolloutSpec(forks=FORKS_SSH, rolling=False), help=HELP, checks={"window": _window})
def numa_audit(c, select, rollout, window=None, process=None, accept_new_host_key=False, json=None):
    """Audit NUMA placement on hosts (read-only, over SSH): scheduler imbalance, cpuset without membind, IRQ and
    NIC contention, zone_reclaim_mode, device numa_node, THP, governor; each finding with evidence and fix."""

    def body(report: Report):
        opts = audit_run.AuditOptions(window=_window(window), process=process, accept_new_host_key=accept_new_host_key)
        _inv, hosts = common.load_selected(c, report, select)
        report.expect_hosts(h.name for h in hosts)
        outcome = audit_run.audit_fleet(hosts, opts, rollout, progress=len(hosts) > 1)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        _print(report)

    common.execute("numa-audit", body, json=json, options={"window": window, "process": process})


TASKS = [numa_audit]
