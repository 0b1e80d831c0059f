"""Tasks: livepatch-status, livepatch-install, livepatch-unload — the live-patch lifecycle over a fleet
(numaforge.livepatch.lifecycle, numaforge.livepatch.fleet), with validate's rolling rules (canary, batches,
max-fail), a resume journal for install/unload, and --json."""

from __future__ import annotations

from pathlib import Path

from invoke import task

from ..fleet import host_timeout_seconds
from ..livepatch import Options
from ..livepatch import fleet as lpfleet
from ..report import Report
from . import common
from .validate import HELP as VALIDATE_HELP

FLEET = {k: VALIDATE_HELP[k] for k in ("accept_new_host_key", "canary", "batch", "max_fail", "forks",
                                         "host_timeout")}
SELECT = {k: common.SELECT_HELP[k] for k in ("inventory", "host", "group", "limit", "json",
                                            "allow_plaintext_secrets")}


def _run(c, name, body_fn, options, inventory, host, group, limit, json, allow_plaintext_secrets, host_timeout):
    def body(report: Report):
        budget = host_timeout_seconds(host_timeout)
        _inv, hosts = common.load_selected(c, report, inventory, host, group, limit, allow_plaintext_secrets)
        outcome = body_fn(hosts, report, budget)
        report.hosts.extend(outcome.results)
        report.data["fleet"] = outcome.as_dict()
        if getattr(outcome, "journal", None):
            report.data["journal"] = outcome.journal
        if outcome.reason:
            common.console.print(f"rollout: {outcome.summary()}")

    common.execute(name, body, json=json, options=options)


def _run_key(name: str, report: Report, hosts, what: str) -> str:
    return (f"{name} {what} inventory={Path(report.inventory).resolve()} "
            f"hosts={','.join(h.name for h in hosts)}")


@task(iterable=["host", "group"], help={**SELECT, **FLEET}, auto_shortflags=False)
def livepatch_status(c, inventory=None, host=None, group=None, limit=None, accept_new_host_key=False, forks=8,
                     canary=0, batch=0, max_fail=100.0, host_timeout=None, json=None, allow_plaintext_secrets=False):
    """Per host: loaded live patches (enabled, transition, patched functions, owner), taint, what loads at boot."""
    def run(hosts, report, budget):
        out = lpfleet.status_hosts(hosts, accept_new_host_key=accept_new_host_key, forks=forks, canary=canary,
                                   batch=batch, max_fail=max_fail, progress=len(hosts) > 1, host_timeout=budget)
        for h in out.results:
            for n, lp in sorted((h.data.get("livepatches") or {}).items()):
                fns = ", ".join(lp["functions"]) or "-"
                common.console.print(f"{h.host}: {n} enabled={lp['enabled']} transition={lp['transition']} "
                                     f"refcnt={lp.get('refcnt')} owner={lp['owner']} functions: {fns}")
            if h.data.get("taint"):
                t = h.data["taint"]
                common.console.print(f"{h.host}: taint {t['value']} {' '.join(t['flags']) or '-'}; at boot: "
                                     f"{h.data['boot']}")
        return out

    _run(c, "livepatch-status", run, {}, inventory, host, group, limit, json, allow_plaintext_secrets,
         host_timeout)


@task(iterable=["host", "group"], help={**SELECT, **FLEET, "module": VALIDATE_HELP["module"],
                                        "target": VALIDATE_HELP["target"], "replace": VALIDATE_HELP["replace"]},
      auto_shortflags=False)
def livepatch_install(c, module=None, target=None, inventory=None, host=None, group=None, limit=None,
                      replace=False, accept_new_host_key=False, forks=4, canary=1, batch=0, max_fail=0.0,
                      host_timeout=None, json=None, allow_plaintext_secrets=False):
    """Load (validated) and persist a live patch across reboots: `kpatch install` where the host has kpatch,
    else /var/lib/numaforge/livepatch/<release>/ + the numaforge-livepatch.service unit."""
    def run(hosts, report, budget):
        key = _run_key("livepatch-install", report, hosts, f"module={module or '-'} target={target or '-'}")
        return lpfleet.install_hosts(hosts, module=module, target=target, opts=Options(replace=replace),
                                     run_key=key, log=common.console.print,
                                     accept_new_host_key=accept_new_host_key, forks=forks, canary=canary,
                                     batch=batch, max_fail=max_fail, progress=len(hosts) > 1,
                                     host_timeout=budget)

    _run(c, "livepatch-install", run, {"module": module, "target": target, "replace": replace}, inventory, host,
         group, limit, json, allow_plaintext_secrets, host_timeout)


@task(iterable=["host", "group"], help={**SELECT, **FLEET,
                                        "module": "live-patch module name (as in /sys/kernel/livepatch/)",
                                        "force": "also unload a live patch numaforge did not load or install"},
      auto_shortflags=False)
def livepatch_unload(c, module, inventory=None, host=None, group=None, limit=None, force=False,
                     accept_new_host_key=False, forks=4, canary=1, batch=0, max_fail=0.0, host_timeout=None,
                     json=None, allow_plaintext_secrets=False):
    """Disable, wait for the transition and the module refcount, rmmod, and remove the boot persistence."""
    def run(hosts, report, budget):
        key = _run_key("livepatch-unload", report, hosts, f"module={module} force={force}")
        return lpfleet.unload_hosts(hosts, module=module, force=force, run_key=key, log=common.console.print,
                                    accept_new_host_key=accept_new_host_key, forks=forks, canary=canary,
                                    batch=batch, max_fail=max_fail, progress=len(hosts) > 1,
                                    host_timeout=budget)

    _run(c, "livepatch-unload", run, {"module": module, "force": force}, inventory, host, group, limit, json,
         allow_plaintext_secrets, host_timeout)


TASKS = [livepatch_status, livepatch_install, livepatch_unload]
