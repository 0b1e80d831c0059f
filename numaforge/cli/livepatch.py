"""Tasks: livepatch-status, livepatch-install, livepatch-unload — the live-patch lifecycle over a fleet
(numaforge.livepatch.lifecycle, numaforge.livepatch.fleet), with validate's rolling rules (canary, batches,
max-fail), a resume journal for install/unload, and --json."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..defaults import FORKS_LIVEPATCH, FORKS_SSH
from ..display import esc
from ..fleet import host_timeout_seconds
from ..lazy import lazy_module
from ..report import Report
from . import common, gateopts, values
from .optionsets import task
from .validate import HELP as VALIDATE_HELP

if TYPE_CHECKING:
    from .. import livepatch
    from ..livepatch import fleet as lpfleet
else:  # imported by the task that uses them (numaforge.lazy)
    livepatch = lazy_module("numaforge.livepatch")
    lpfleet = lazy_module("numaforge.livepatch.fleet")


def _fleet(forks, canary, batch, max_fail, *, forks_default: int, canary_default: int, max_fail_default: float) -> dict:
    """The rolling options, validated (a clear error and exit 2 for a bad value, never a traceback)."""
    return dict(
        forks=values.positive_int(forks, "--forks", forks_default),
        canary=values.non_negative_int(canary, "--canary", canary_default),
        batch=values.non_negative_int(batch, "--batch", 0),
        max_fail=values.max_fail(max_fail, "--max-fail", max_fail_default),
    )


def _run(c, name, body_fn, options, inventory, host, group, limit, json, allow_plaintext_secrets, host_timeout):
    def body(report: Report):
        budget = host_timeout_seconds(host_timeout)
        _inv, hosts = common.load_selected(c, report, inventory, host, group, limit, allow_plaintext_secrets)
        report.expect_hosts(h.name for h in hosts)
        outcome = body_fn(hosts, report, budget)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        if getattr(outcome, "journal", None):
            report.data["journal"] = outcome.journal
        if outcome.reason:
            common.console.print(f"rollout: {esc(outcome.summary())}")

    common.execute(name, body, json=json, options=options)


def _run_key(name: str, report: Report, hosts, what: str) -> str:
    return f"{name} {what} inventory={Path(report.inventory).resolve()} hosts={','.join(h.name for h in hosts)}"


@task(hosts=True, help={})
def livepatch_status(
    c,
    inventory=None,
    host=None,
    group=None,
    limit=None,
    accept_new_host_key=False,
    forks=None,
    canary=None,
    batch=None,
    max_fail=None,
    host_timeout=None,
    json=None,
    allow_plaintext_secrets=False,
):
    """Per host: loaded live patches (enabled, transition, patched functions, owner), taint, what loads at boot."""

    def run(hosts, report, budget):
        out = lpfleet.status_hosts(
            hosts,
            accept_new_host_key=accept_new_host_key,
            progress=len(hosts) > 1,
            host_timeout=budget,
            **_fleet(forks, canary, batch, max_fail, forks_default=FORKS_SSH, canary_default=0, max_fail_default=100.0),
        )
        for h in out.results:
            for n, lp in sorted((h.data.get("livepatches") or {}).items()):
                fns = ", ".join(lp["functions"]) or "-"
                common.console.print(
                    esc(
                        f"{h.host}: {n} enabled={lp['enabled']} transition={lp['transition']} "
                        f"refcnt={lp.get('refcnt')} owner={lp['owner']} functions: {fns}"
                    )
                )
            if h.data.get("taint"):
                t = h.data["taint"]
                common.console.print(
                    esc(f"{h.host}: taint {t['value']} {' '.join(t['flags']) or '-'}; at boot: {h.data['boot']}")
                )
        return out

    _run(c, "livepatch-status", run, {}, inventory, host, group, limit, json, allow_plaintext_secrets, host_timeout)


@task(
    hosts=True,
    write=True,
    iterable=["slo"],
    help={
        "module": VALIDATE_HELP["module"],
        "target": VALIDATE_HELP["target"],
        "replace": VALIDATE_HELP["replace"],
        **gateopts.HELP,
        "gate": gateopts.GATE_HELP,
    },
)
def livepatch_install(
    c,
    module=None,
    target=None,
    inventory=None,
    host=None,
    group=None,
    limit=None,
    replace=False,
    gate=None,
    prometheus=None,
    slo=None,
    accept_new_host_key=False,
    forks=None,
    canary=None,
    batch=None,
    max_fail=None,
    host_timeout=None,
    json=None,
    allow_plaintext_secrets=False,
):
    """Load (validated) and persist a live patch across reboots: `kpatch install` where the host has kpatch,
    else /var/lib/numaforge/livepatch/<release>/ + the numaforge-livepatch.service unit."""

    def run(hosts, report, budget):
        key = _run_key("livepatch-install", report, hosts, f"module={module or '-'} target={target or '-'}")
        fleet = _fleet(
            forks, canary, batch, max_fail, forks_default=FORKS_LIVEPATCH, canary_default=1, max_fail_default=0.0
        )
        log = lambda m: common.console.print(esc(m))
        slo_gate = gateopts.livepatch_slo_gate(
            report,
            gate,
            hosts,
            fleet["canary"],
            prometheus,
            slo,
            module=module,
            target=target,
            accept_new_host_key=accept_new_host_key,
            log=log,
        )
        out = lpfleet.install_hosts(
            hosts,
            module=module,
            target=target,
            opts=livepatch.Options(replace=replace),
            run_key=key,
            log=log,
            accept_new_host_key=accept_new_host_key,
            progress=len(hosts) > 1,
            host_timeout=budget,
            gate=slo_gate,
            **fleet,
        )
        if slo_gate is not None:
            gateopts.print_gate(slo_gate.record)
        return out

    _run(
        c,
        "livepatch-install",
        run,
        {"module": module, "target": target, "replace": replace, "gate": gate},
        inventory,
        host,
        group,
        limit,
        json,
        allow_plaintext_secrets,
        host_timeout,
    )


@task(
    hosts=True,
    write=True,
    help={
        "module": "live-patch module name (as in /sys/kernel/livepatch/)",
        "force": "also unload a live patch numaforge did not load or install",
    },
)
def livepatch_unload(
    c,
    module,
    inventory=None,
    host=None,
    group=None,
    limit=None,
    force=False,
    accept_new_host_key=False,
    forks=None,
    canary=None,
    batch=None,
    max_fail=None,
    host_timeout=None,
    json=None,
    allow_plaintext_secrets=False,
):
    """Disable, wait for the transition and the module refcount, rmmod, and remove the boot persistence."""

    def run(hosts, report, budget):
        key = _run_key("livepatch-unload", report, hosts, f"module={module} force={force}")
        return lpfleet.unload_hosts(
            hosts,
            module=module,
            force=force,
            run_key=key,
            log=lambda m: common.console.print(esc(m)),
            accept_new_host_key=accept_new_host_key,
            progress=len(hosts) > 1,
            host_timeout=budget,
            **_fleet(
                forks, canary, batch, max_fail, forks_default=FORKS_LIVEPATCH, canary_default=1, max_fail_default=0.0
            ),
        )

    _run(
        c,
        "livepatch-unload",
        run,
        {"module": module, "force": force},
        inventory,
        host,
        group,
        limit,
        json,
        allow_plaintext_secrets,
        host_timeout,
    )


TASKS = [livepatch_status, livepatch_install, livepatch_unload]
