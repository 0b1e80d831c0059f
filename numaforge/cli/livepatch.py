"""Tasks: livepatch-status, livepatch-install, livepatch-unload — the live-patch lifecycle over a fleet
(numaforge.livepatch.lifecycle, numaforge.livepatch.fleet), with validate's rolling rules (canary, batches,
max-fail), a resume journal for install/unload, and --json."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..defaults import FORKS_LIVEPATCH, FORKS_SSH
from ..display import esc
from ..lazy import lazy_module
from ..report import HostResult, Report
from . import common, gateopts, values
from .optionsets import RolloutSpec, task
from .validate import HELP as VALIDATE_HELP
from .validate import MODULE_CHECKS

if TYPE_CHECKING:
    from .. import livepatch
    from ..livepatch import fleet as lpfleet
else:  # imported by the task that uses them (numaforge.lazy)
    livepatch = lazy_module("numaforge.livepatch")
    lpfleet = lazy_module("numaforge.livepatch.fleet")


def _log(message: str) -> None:
    common.console.print(esc(message))


def _run(c, name: str, body_fn, select, rollout, accept_new_host_key: bool, options: dict, json) -> None:
    """Select, run body_fn(hosts, report, fleet) -- ``fleet``: the keyword arguments every lifecycle entry point
    of numaforge.livepatch.fleet takes (the rollout among them) -- and record the outcome."""

    def body(report: Report):
        _inv, hosts = common.load_selected(c, report, select)
        report.expect_hosts(h.name for h in hosts)
        fleet = {"accept_new_host_key": accept_new_host_key, "progress": len(hosts) > 1, "rollout": rollout}
        outcome = body_fn(hosts, report, fleet)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        if getattr(outcome, "journal", None):
            report.data["journal"] = outcome.journal
        if outcome.reason:
            common.console.print(f"rollout: {esc(outcome.summary())}")

    common.execute(name, body, json=json, options=options)


def _run_key(name: str, report: Report, hosts, what: str) -> str:
    return f"{name} {what} inventory={common.selected_inventory(report)} hosts={','.join(h.name for h in hosts)}"


def status_lines(h: HostResult) -> list[str]:
    """livepatch-status's lines for one host's result: each live patch, then the taint and what loads at boot,
    in words (the boot summary is a dict in the report; printed, it was a Python dict)."""
    lines = []
    for n, lp in sorted((h.data.get("livepatches") or {}).items()):
        fns = ", ".join(lp["functions"]) or "-"
        lines.append(
            f"{h.host}: {n} enabled={lp['enabled']} transition={lp['transition']} "
            f"refcnt={lp.get('refcnt')} owner={lp['owner']} functions: {fns}"
        )
    if h.data.get("taint"):
        t = h.data["taint"]
        lines.append(f"{h.host}: taint {t['value']} {' '.join(t['flags']) or '-'}; at boot: {boot_text(h.data)}")
    return lines


def boot_text(data: dict) -> str:
    """What loads at the next boot, from lifecycle.boot_summary's dict: 'kpatch: a, b; numaforge unit: c'."""
    boot = data.get("boot") or {}
    parts = []
    if boot.get("kpatch"):
        parts.append("kpatch: " + ", ".join(boot["kpatch"]))
    if boot.get("numaforge"):
        parts.append("numaforge unit: " + ", ".join(boot["numaforge"]))
    elif boot.get("numaforge_unit_enabled"):
        parts.append("numaforge unit enabled, no module for this kernel")
    return "; ".join(parts) or "no live patch"


# changes: one canary first, no failure allowed (validate's rules)
CHANGE = RolloutSpec(forks=FORKS_LIVEPATCH, canary=1, max_fail=0.0)


@task(hosts=True, rollout=RolloutSpec(forks=FORKS_SSH), help={})
def livepatch_status(c, select, rollout, accept_new_host_key=False, json=None):
    """Per host: loaded live patches (enabled, transition, patched functions, owner), taint, what loads at boot."""

    def run(hosts, report, fleet):
        out = lpfleet.status_hosts(hosts, **fleet)
        for h in out.results:
            for line in status_lines(h):
                common.console.print(esc(line))
        return out

    _run(c, "livepatch-status", run, select, rollout, accept_new_host_key, {}, json)


@task(
    hosts=True,
    write=True,
    rollout=RolloutSpec(forks=FORKS_LIVEPATCH, canary=1, max_fail=0.0, gate=True),
    checks=MODULE_CHECKS,
    help={
        "module": VALIDATE_HELP["module"],
        "target": VALIDATE_HELP["target"],
        "replace": VALIDATE_HELP["replace"],
        "gate": gateopts.GATE_HELP,
    },
)
def livepatch_install(
    c,
    select,
    rollout,
    module=None,
    target=None,
    replace=False,
    accept_new_host_key=False,
    json=None,
):
    """Load (validated) and persist a live patch across reboots: `kpatch install` where the host has kpatch,
    else /var/lib/numaforge/livepatch/<release>/ + the numaforge-livepatch.service unit."""

    def run(hosts, report, fleet):
        key = _run_key("livepatch-install", report, hosts, f"module={module or '-'} target={target or '-'}")
        slo_gate = gateopts.livepatch_slo_gate(
            report, rollout, hosts, module=module, target=target, accept_new_host_key=accept_new_host_key, log=_log
        )
        opts = livepatch.Options(replace=replace)
        out = lpfleet.install_hosts(
            hosts, module=module, target=target, opts=opts, run_key=key, log=_log, gate=slo_gate, **fleet
        )
        if slo_gate is not None:
            gateopts.print_gate(slo_gate.record)
        return out

    options = {"module": module, "target": target, "replace": replace, "gate": rollout.gate}
    _run(c, "livepatch-install", run, select, rollout, accept_new_host_key, options, json)


@task(
    hosts=True,
    write=True,
    rollout=CHANGE,
    # a name the host's sysfs paths are made of: kernel module names are at most 55 characters (MODULE_NAME_LEN)
    checks={"module": values.name("--module", "live-patch module name", max_chars=55)},
    help={
        "module": "live-patch module name (as in /sys/kernel/livepatch/); required",
        "force": "also unload a live patch numaforge did not load or install",
    },
)
def livepatch_unload(c, select, rollout, module=None, force=False, accept_new_host_key=False, json=None):
    """Disable, wait for the transition and the module refcount, rmmod, and remove the boot persistence."""
    if module is None:  # an option, not a positional: a positional one swallowed `-h` (issue 39)
        raise values.OptionValueError(
            "livepatch-unload needs the live-patch module to unload",
            "--module",
            "pass --module NAME (`livepatch-status` lists the loaded ones)",
        )

    def run(hosts, report, fleet):
        key = _run_key("livepatch-unload", report, hosts, f"module={module} force={force}")
        return lpfleet.unload_hosts(hosts, module=module, force=force, run_key=key, log=_log, **fleet)

    options = {"module": module, "force": force}
    _run(c, "livepatch-unload", run, select, rollout, accept_new_host_key, options, json)


TASKS = [livepatch_status, livepatch_install, livepatch_unload]
