"""Tasks: os-plan, os-apply (--rollback), os-verify — host OS profiles applied over SSH (docs/HOSTOS.md).

Thin: parse options, call numaforge.hostos.run, print. Logic lives in numaforge/hostos/.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from ..defaults import DEFAULT_GATE_THRESHOLD, FORKS_SSH
from ..lazy import lazy_module
from ..report import Report
from . import common, gateopts, values
from .optionsets import RolloutSpec, exit_on_changes, task

if TYPE_CHECKING:
    from ..hostos import profile as hprofile
    from ..hostos import run as hostos_run
else:  # imported by the task that uses it (numaforge.lazy)
    hprofile = lazy_module("numaforge.hostos.profile")
    hostos_run = lazy_module("numaforge.hostos.run")

HELP = {
    "profile": "host OS profile name (hostos/profiles/NAME.yaml.j2) or path; default: each host's vars.hostos_profile",
}


def _s(v) -> str:
    return "-" if v is None else escape(str(v))


def _print(report: Report) -> None:
    colour = {"change": "yellow", "ok": "green", "fail": "red"}
    for h in report.hosts:
        items, checks = h.data.get("items") or [], h.data.get("checks") or []
        if not items and not checks:
            continue
        t = Table(title=f"{escape(h.host)}: host profile {escape(str(h.data.get('profile')))}")
        for col in ("kind", "setting", "current", "desired", "action"):
            t.add_column(col, overflow="fold")
        for i in items:
            t.add_row(
                i["kind"],
                _s(i["name"]),
                _s(i["current"]),
                _s(i["desired"]),
                f"[{colour.get(i['action'], 'white')}]{i['action']}[/]",
            )
        for c in checks:
            t.add_row(
                "check",
                _s(c["name"]),
                _s(c["evidence"]),
                _s(c["why"]) if c["why"] else "-",
                f"[{colour.get(c['verdict'], 'white')}]{c['verdict']}[/]",
            )
        common.console.print(t)


def _number(value, default: float, option: str, lo: float, hi: float) -> float:
    if value is None:
        return default
    try:
        v = float(value)
    except ValueError:
        v = float("nan")
    if not lo <= v <= hi:
        raise values.OptionValueError(
            f"{option} must be a number from {lo:g} to {hi:g}, got {value!r}", option, f"pass e.g. {option} {default:g}"
        )
    return v


def _overrides(given) -> dict[str, int]:
    out = {}
    for v in given or []:
        addr, _, node = str(v).partition("=")
        if not node.isdigit():
            raise values.OptionValueError(
                f"--numa-node-override {v!r} is not ADDR=NODE",
                "--numa-node-override",
                "pass e.g. --numa-node-override 0000:41:00.0=1",
            )
        out[addr] = int(node)
    return out


# the option checks of the host OS tasks, run before any host is asked (numaforge.cli.values.preflight)
PROFILE_CHECK = {"profile": lambda v: hprofile.find_profile(str(v))}


def _run(
    c,
    name: str,
    action: str,
    opts: hostos_run.OsOptions,
    select,
    rollout,
    json,
    options: dict,
) -> Report:
    def body(report: Report):
        _inv, hosts = common.load_selected(c, report, select)
        gate = None
        if action == "apply" and not opts.rollback:
            undo = lambda h: hostos_run.apply_host(h, dataclasses.replace(opts, rollback=True, journal=None))
            gate = gateopts.slo_gate(rollout, hosts, undo, opts.accept_new_host_key, other_gates=("locality",))
        if gate is not None:
            report.data["gate"] = gate.record  # filled while the gate runs (an interrupted run keeps it)
        if action != "apply" or opts.rollback:
            outcome = hostos_run.run_os(hosts, action, opts, rollout, progress=True)
        else:
            # an interrupted os-apply resumes: hosts it applied and verified are only verified (docs/journal.md)
            key = (
                f"os-apply profile={opts.profile or '-'} inventory={common.selected_inventory(report)} "
                f"hosts={','.join(h.name for h in hosts)} gate={rollout.gate or '-'} "
                f"override={sorted(opts.numa_override.items())}"
            )
            with common.resume_journal(report, key, rollout) as opts.journal:
                outcome = hostos_run.run_os(hosts, action, opts, rollout, progress=True, slo_gate=gate)
                rolled_back = gate is not None and gate.record.get("decision") == "rollback"
                if outcome.ok or rolled_back:
                    opts.journal.finish()  # a gate rollback is a decision, not an interruption: nothing to resume
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        _print(report)
        if gate is not None:
            gateopts.print_gate(gate.record)

    return common.execute(name, body, json=json, options=options)


SSH_READ = RolloutSpec(forks=FORKS_SSH, rolling=False)


@task(hosts=True, rollout=SSH_READ, help=HELP, checks=PROFILE_CHECK)
def os_plan(c, select, rollout, profile=None, accept_new_host_key=False, detailed_exitcode=False, json=None):
    """Show, per host, current / desired / action of every host OS setting and the device NUMA checks. Writes nothing."""
    opts = hostos_run.OsOptions(profile=profile, accept_new_host_key=accept_new_host_key)
    report = _run(c, "os-plan", "plan", opts, select, rollout, json, {"profile": profile})
    exit_on_changes(
        report, detailed_exitcode, lambda h: [i for i in h.data.get("items") or () if i.get("action") == "change"]
    )


@task(
    hosts=True,
    write=True,
    rollout=RolloutSpec(forks=FORKS_SSH, gate=True),
    iterable=["numa_node_override"],
    checks={
        **PROFILE_CHECK,
        "gate_seconds": lambda v: _number(v, 10.0, "--gate-seconds", 0.1, 3600),
        "gate_threshold": lambda v: _number(v, DEFAULT_GATE_THRESHOLD, "--gate-threshold", 0.0, 1.0),
        "numa_node_override": lambda v: _overrides([v]),
    },
    help={
        **HELP,
        "rollback": "restore the values saved on each host by its first os-apply and remove numaforge's files",
        "gate": "locality: judge each canary host's NUMA locality before/after the apply; widen only if not worse; "
        "slo: judge the canaries' P99 latency and locality skew against the other hosts minute by minute "
        "(docs/canary-gate.md)",
        "gate_seconds": "seconds per locality sample window (default 10)",
        "gate_threshold": f"largest allowed drop of a local share, absolute (default {DEFAULT_GATE_THRESHOLD})",
        "numa_node_override": "ADDR=NODE: write NODE to the device's sysfs numa_node (the talk's workaround for firmware "
        "without proximity info; taints the kernel, lost at reboot; fix the BIOS instead)",
    },
)
def os_apply(
    c,
    select,
    rollout,
    profile=None,
    rollback=False,
    gate_seconds=None,
    gate_threshold=None,
    numa_node_override=None,
    accept_new_host_key=False,
    json=None,
):
    """Write only what differs (live and persisted: sysctl.d, a boot unit for THP/governor/IRQs, irqbalance
    policy), saving the previous values on the host; then read everything back. --rollback restores them."""
    opts = hostos_run.OsOptions(
        profile=profile,
        rollback=rollback,
        gate_seconds=_number(gate_seconds, 10.0, "--gate-seconds", 0.1, 3600),
        gate_threshold=_number(gate_threshold, DEFAULT_GATE_THRESHOLD, "--gate-threshold", 0.0, 1.0),
        numa_override=_overrides(numa_node_override),
        accept_new_host_key=accept_new_host_key,
    )
    _run(
        c,
        "os-apply",
        "apply",
        opts,
        select,
        rollout,
        json,
        {"profile": profile, "rollback": rollback},
    )


@task(hosts=True, rollout=SSH_READ, help=HELP, checks=PROFILE_CHECK)
def os_verify(c, select, rollout, profile=None, accept_new_host_key=False, json=None):
    """Read every host OS setting back (sysctls, THP, governor, /proc/irq/*/smp_affinity_list, persisted files) and
    check each device's numa_node against the BIOS NPS; fails on any difference."""
    opts = hostos_run.OsOptions(profile=profile, accept_new_host_key=accept_new_host_key)
    _run(c, "os-verify", "verify", opts, select, rollout, json, {"profile": profile})


TASKS = [os_plan, os_apply, os_verify]
