"""BIOS operations besides apply: list config jobs, delete a queued one, clear pending values, reset to defaults.

Each one runs per host as: ``read`` (service root, system, Bios, settings object, job queue) -> ``plan`` (what
would be done and why, recorded in ``result.data["operation"]``; refusals -- a running job, a job that would
apply the values being cleared -- fail here, before any write) -> ``act`` (skipped with ``dry_run``) ->
``check`` (re-read: the BMC's word that it happened). Fleet-wide through numaforge.fleet like bios-apply.

The BMC is spoken to only through the client-side resources (numaforge.bios.resources).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..errors import NumaforgeError
from ..fleet import Rollout, run_fleet
from ..program import prog
from ..report import HostResult
from . import power
from .discovery import RegistryCache, discovery_dir, fetch_registry
from .errors import RedfishConflictError, RedfishError, RedfishHTTPError, RedfishNotFoundError
from .hostsession import HostOptions, connect, fail, record_session
from .resources import Bios, JobCollection, ServiceRoot, SettingsObject, System, find_jobs
from .unsure import watch_write


@dataclass
class OpOptions:
    dry_run: bool = False  # plan only: read, decide, write nothing
    job_id: str | None = None  # bios-job-delete: only this BIOS config job (default: every queued one)
    all_jobs: bool = False  # bios-jobs: every job in the queue, not only BIOS configuration jobs
    power: str = "status"  # bmc-power: a key of numaforge.bios.power.POWER_ACTIONS


@dataclass
class View:
    """What an operation reads before deciding."""

    root: ServiceRoot
    system: System
    bios: Bios
    settings: SettingsObject
    jobs: JobCollection | None
    host: str = "H"  # the inventory name (the fixes name the command to run for it)

    def bios_jobs(self) -> list:
        return self.jobs.bios_jobs(self.settings.path) if self.jobs is not None else []

    def pending(self) -> dict[str, Any]:
        return self.settings.pending(self.bios.attributes)


def read_view(client, host) -> View:
    root = ServiceRoot.load(client)
    system = root.system(host.bmc.system_id)
    bios = system.bios()
    settings = bios.settings()
    return View(root, system, bios, settings, find_jobs(client, root, system.manager_paths), host.name)


def _blocking_jobs(view: View, what: str, let_run: bool) -> None:
    """Refuse an operation on the pending values while a BIOS config job would apply them. ``let_run``: letting
    the job run (a host reset) is a way on for this operation (not for clearing those very values)."""
    active = [j for j in view.bios_jobs() if j.active]
    if view.jobs is not None and active:
        ids = ", ".join(f"{j.identity} ({j.state})" for j in active)
        fix = f"delete the job first (`{prog()} bios-job-delete --host {view.host}`)"
        if any(j.running for j in active):
            fix = f"the host is applying it now: wait until the job has finished (`{prog()} bios-jobs`)"
        elif let_run:
            fix += (
                f", or let it run (a host reset applies it: `{prog()} bmc-power --host {view.host} graceful-restart`)"
            )
        raise RedfishConflictError(
            f"BIOS config job {ids} is queued to apply the pending values; {what} refused, nothing was changed",
            view.jobs.where,
            fix,
            status=409,
        )


# -- what a write of unknown outcome left (numaforge.bios.unsure): re-read, in words ---------------------------
def _pending_shows(view: View, before: dict[str, Any]) -> dict[str, Any]:
    """The pending values after a clear or a reset to defaults whose outcome is unknown, against ``before``."""
    view.bios.refresh()
    view.settings = view.bios.settings()
    now = view.pending()
    moved = sorted(k for k in set(now) | set(before) if now.get(k, object()) != before.get(k, object()))
    shows = f"{len(now)} values pending now ({len(before)} before)" + (
        f"; changed: {', '.join(moved)}" if moved else "; none changed: the BMC did not act on it (yet)"
    )
    return {"pending_after": sorted(now), "shows": shows}


def _job_shows(view: View, job_id: str) -> dict[str, Any]:
    """Whether the BMC still lists ``job_id`` after a DELETE whose outcome is unknown."""
    assert view.jobs is not None, "a job was deleted from this queue"
    view.jobs.refresh()
    job = view.jobs.job(job_id)
    if job is None:
        return {"job_gone": True, "shows": f"job {job_id} is gone: the BMC took the DELETE"}
    return {"job_gone": False, "shows": f"the BMC still lists job {job_id} ({job.state}): it was not deleted (yet)"}


# -- the operations: each returns (status, message) after filling result.data["operation"] --------------------
def op_jobs(client, host, view: View, oopts: OpOptions, cache, result: HostResult) -> tuple[str, str]:
    if view.jobs is None:
        result.data["operation"] = {"jobs": [], "queue": None}
        return "ok", "this BMC has no job queue (BIOS values apply at the next host reset, no config job)"
    jobs = view.jobs.jobs() if oopts.all_jobs else view.bios_jobs()
    result.data["operation"] = {"queue": view.jobs.path, "jobs": [j.summary() for j in jobs]}
    active = [j for j in jobs if j.active]
    kind = "jobs" if oopts.all_jobs else "BIOS config jobs"
    text = f"{len(jobs)} {kind}" + (": " + ", ".join(f"{j.identity} {j.state}" for j in jobs) if jobs else "")
    if active:
        text += f"; {len(active)} active (a queued BIOS job blocks bios-apply: `{prog()} bios-job-delete`)"
    return "ok", text


def op_job_delete(client, host, view: View, oopts: OpOptions, cache, result: HostResult) -> tuple[str, str]:
    op: dict[str, Any] = {"queue": view.jobs.path if view.jobs else None, "delete": [], "refused": []}
    result.data["operation"] = op
    if view.jobs is None:
        if oopts.job_id:
            raise RedfishNotFoundError(
                f"job {oopts.job_id} not found: this BMC has no job queue",
                f"{host.name} ({client.base_url})",
                f"check the job id (`{prog()} bios-jobs`)",
            )
        return "unchanged", "this BMC has no job queue: nothing to delete"
    if oopts.job_id:
        job = view.jobs.job(oopts.job_id)
        if job is None:
            ids = ", ".join(j.identity for j in view.jobs.jobs()) or "none"
            raise RedfishNotFoundError(
                f"job {oopts.job_id} not found",
                view.jobs.where,
                f"pick one of the BMC's jobs: {ids} (`{prog()} bios-jobs --all`)",
            )
        candidates = [job]
    else:
        candidates = [j for j in view.bios_jobs() if j.active]
    pending = view.pending()
    for j in candidates:
        entry = j.summary()
        entry["bios_config"] = j.is_bios_config(view.settings.path)
        if not entry["bios_config"]:
            entry["why"] = (
                f"a {j.job_type or 'non-BIOS-configuration'} job ({j.body.get('Name') or 'no name'}), not a BIOS "
                "configuration job: bios-job-delete never deletes it (delete it on the BMC itself if you mean to)"
            )
            op["refused"].append(entry)
        elif j.running:
            entry["why"] = (
                f"{j.state}: the host is applying it now; a running job is not deleted (wait for it to finish)"
            )
            op["refused"].append(entry)
        else:
            entry["why"] = (
                "queued: the values it would apply stay pending, or the BMC discards them "
                f"(iDRAC does; {len(pending)} pending now)"
                if j.queued
                else f"{j.state}: removed from the queue"
            )
            op["delete"].append(entry)
    with result.step("act") as s:
        if oopts.dry_run:
            s.detail = "dry run: nothing deleted"
        else:
            for entry in op["delete"]:
                job = view.jobs.job(entry["id"])
                if job is not None:
                    with watch_write(
                        client,
                        result.data,
                        f"DELETE {job.path}",
                        partial(_job_shows, view, entry["id"]),
                        f"`{prog()} bios-jobs --host {host.name}`",
                    ):
                        job.delete()  # refuses a job that started running since the plan
            s.detail = {"deleted": [e["id"] for e in op["delete"]]}
    if not oopts.dry_run and op["delete"]:
        with result.step("check"):
            view.jobs.refresh()
            left = [e["id"] for e in op["delete"] if view.jobs.job(e["id"]) is not None]
            view.settings.refresh()
            op["pending_after"] = sorted(view.pending())
        if left:
            return "failed", f"the BMC still lists job(s) {', '.join(left)} after DELETE"
    refused = "; ".join(
        f"job {e['id']} is not deleted: {e['why']}"
        if not e["bios_config"]
        else f"job {e['id']} is {e['state']}: not deleted (a running job is never deleted; wait for it "
        "to finish, then re-run)"
        for e in op["refused"]
    )
    if refused:
        done = f"{len(op['delete'])} deleted; " if op["delete"] and not oopts.dry_run else ""
        return "failed", done + refused
    if not op["delete"]:
        return "unchanged", "no queued BIOS config job: nothing to delete"
    ids = ", ".join(e["id"] for e in op["delete"])
    if oopts.dry_run:
        return "ok", f"would delete {ids} (dry run)"
    return "changed", f"deleted {ids}; {len(op.get('pending_after', []))} BIOS values still pending"


def op_clear_pending(client, host, view: View, oopts: OpOptions, cache, result: HostResult) -> tuple[str, str]:
    current = view.bios.attributes
    pending = view.pending()
    how = (
        f"POST {view.settings.clear_pending_action}"
        if view.settings.clear_pending_action
        else "one PATCH writing the current value back over each pending one (If-Match)"
    )
    result.data["operation"] = {
        "how": how,
        "clear": [{"attribute": k, "current": current.get(k), "pending": v} for k, v in sorted(pending.items())],
    }
    if not pending:
        return "unchanged", "nothing pending"
    _blocking_jobs(view, "clearing the pending values", let_run=False)
    with result.step("act") as s:
        if oopts.dry_run:
            s.detail = "dry run: nothing cleared"
        else:
            with watch_write(
                client,
                result.data,
                f"POST {view.settings.action_target(view.settings.clear_pending_action)}"
                if view.settings.clear_pending_action
                else f"PATCH {view.settings.path}",
                lambda: _pending_shows(view, pending),
                f"`{prog()} bios-plan --host {host.name}`",
            ):
                s.detail = view.settings.clear_pending(current)
    if oopts.dry_run:
        return "ok", f"would clear {len(pending)} pending values: {', '.join(sorted(pending))} (dry run)"
    with result.step("check"):
        view.bios.refresh()
        view.settings = view.bios.settings()
        left = view.pending()
        result.data["operation"]["pending_after"] = left
    if left:
        return "failed", f"still pending after clearing: {', '.join(f'{k}={v!r}' for k, v in sorted(left.items()))}"
    return "changed", f"cleared {len(pending)} pending values: {', '.join(sorted(pending))}"


def op_reset_defaults(client, host, view: View, oopts: OpOptions, cache, result: HostResult) -> tuple[str, str]:
    if not view.bios.can_reset_bios:
        raise RedfishNotFoundError(
            "the Bios resource offers no Bios.ResetBios action",
            view.bios.where,
            "reset the BIOS to defaults in BIOS setup or the BMC's own interface",
        )
    registry_id = view.bios.registry_id
    current = view.bios.attributes
    changes = []
    if registry_id:
        registry = cache.get(registry_id, lambda: fetch_registry(client, registry_id), attributes=current.keys())
        for name, attr in sorted(registry.attributes.items()):
            default = attr.raw.get("DefaultValue")
            if default is not None and not attr.read_only and name in current and current[name] != default:
                changes.append({"attribute": name, "current": current[name], "default": default})
    result.data["operation"] = {
        "action": view.bios.action_target("Bios.ResetBios"),
        "registry": registry_id,
        "to_default": changes,
        "pending_before": sorted(view.pending()),
    }
    _blocking_jobs(view, "resetting the BIOS to defaults", let_run=True)
    with result.step("act") as s:
        if oopts.dry_run:
            s.detail = "dry run: not reset"
        else:
            before = view.pending()
            with watch_write(
                client,
                result.data,
                f"POST {view.bios.action_target('Bios.ResetBios')}",
                lambda: _pending_shows(view, before),
                f"`{prog()} bios-plan --host {host.name}`",
            ):
                view.bios.reset_bios()
            s.detail = "POST Bios.ResetBios"
    if oopts.dry_run:
        return "ok", f"would reset the BIOS to defaults: {len(changes)} attributes differ from their default (dry run)"
    with result.step("check"):
        view.bios.refresh()
        view.settings = view.bios.settings()
        result.data["operation"]["pending_after"] = sorted(view.pending())
    return "changed", (
        f"reset to defaults requested ({len(changes)} attributes differ from their default); it applies at the "
        f"next host reset: restart the host with `{prog()} bmc-power --host {host.name} graceful-restart` (a "
        "profile apply before that reset would stage the profile's values over the defaults)"
    )


def op_power(client, host, view: View, oopts: OpOptions, cache, result: HostResult) -> tuple[str, str]:
    """bmc-power: status, or one ComputerSystem.Reset of the types the BMC allows, under bios-apply's POST
    safety (numaforge.bios.power.power_decision); after a request the system is read again."""
    action = oopts.power
    system = view.system.body
    running = next((j.state for j in view.bios_jobs() if j.running), "")
    before = power.boot_view(system, view.bios.body, running)
    op: dict[str, Any] = {"action": action, "phase": power.phase(before), "before": before.text()}
    result.data["operation"] = op
    target, allowed = "", list[str]()
    if action != "status":
        target, allowed, op["allowed_from"] = power.reset_types(client, system, view.system.path)
        op["allowed"] = allowed
    decision = power.power_decision(action, before, allowed, host.name)
    op["reset"] = decision.reset
    op["power"] = [{"action": action, "reset": decision.reset or "-", "before": before.text(), "after": "-"}]
    if decision.status == "failed":
        raise NumaforgeError(decision.why, f"{host.name} ({client.base_url}{view.system.path})", decision.fix)
    if not decision.reset:
        return decision.status, decision.why
    with result.step("act") as s:
        if oopts.dry_run:
            s.detail = f"dry run: {decision.reset} not sent"
            return "ok", f"would send {decision.reset} ({before.text()} now; dry run)"
        error = power.send_reset(
            client,
            target,
            decision.reset,
            result.data,
            (before, lambda: power.boot_view(System.load(client, view.system.path).body)),
        )
        s.detail = {"reset": decision.reset, "error": error} if error else {"reset": decision.reset}
    with result.step("check"):
        after = power.boot_view(System.load(client, view.system.path).body)
    op["after"] = op["power"][0]["after"] = after.text()
    acted = after.power in ("On", "PoweringOn") if decision.reset == "On" else power.restarted(before, after)
    if error and not acted:
        raise RedfishError(
            f"{error}; re-read: nothing changed ({after.text()}); it was not sent again",
            f"{host.name} ({client.base_url}{view.system.path})",
            "check the BMC's log: it may still carry the request out (status shows the host's power and boot)",
        )
    note = "; the BMC answered with an error but acted on it" if error else ""
    return "changed", f"{decision.reset} sent: {after.text()} now{note}"


# the commands whose run would undo what each operation did or was asked to do: no advice of an operation's
# outcome names one (nor, when it refused, the refused command itself); "task" is any run of it, "task action"
# one action (tests/bios/test_bios_hints_bmc.py walks every operation's outcomes)
UNDONE_BY: dict[str, tuple[str, ...]] = {
    "jobs": (),
    "job-delete": (),
    # a restart applies the pending values that were to be discarded; an apply stages the profile again
    "clear-pending": ("bios-apply", "bmc-power graceful-restart", "bmc-power force-restart", "bmc-power on"),
    # an apply before the reset stages the profile's values over the defaults; clearing drops the defaults
    "reset-defaults": ("bios-apply", "bios-clear-pending"),
    "power": (),
    "apply": ("bios-clear-pending", "bios-reset-defaults"),
}
TASK_OF = {
    "jobs": "bios-jobs",
    "job-delete": "bios-job-delete",
    "clear-pending": "bios-clear-pending",
    "reset-defaults": "bios-reset-defaults",
    "power": "bmc-power",
    "apply": "bios-apply",
}

OPERATIONS: dict[str, Callable] = {
    "jobs": op_jobs,
    "job-delete": op_job_delete,
    "clear-pending": op_clear_pending,
    "reset-defaults": op_reset_defaults,
    "power": op_power,
}


def operate_host(
    name: str, host, opts: HostOptions, oopts: OpOptions, cache: RegistryCache, result: HostResult
) -> None:
    """One operation on one host: connect, read, plan (refusals fail here), act unless dry_run, check."""
    fn = OPERATIONS[name]
    client = None
    try:
        with result.step("connect"):
            client = connect(host, opts)
        with client:
            with result.step("read"):
                view = read_view(client, host)
            try:
                result.status, result.message = fn(client, host, view, oopts, cache, result)
            except RedfishHTTPError as exc:  # a write refused by System Lockdown: said with its cause
                raise (view.system.refused_by_lockdown(exc) or exc) from None
    except NumaforgeError as exc:
        fail(result, exc)  # says what a cut write left (numaforge.bios.unsure)
    finally:
        record_session(result, client)


def run_operation(
    hosts,
    name: str,
    opts: HostOptions,
    oopts: OpOptions,
    rollout: Rollout | None = None,
    *,
    progress: bool = False,
):
    """``name`` (a key of OPERATIONS) on every host under the rolling rules of numaforge.fleet."""
    cache = RegistryCache(persist=discovery_dir() if opts.discovery_cache else None)

    def one(host) -> HostResult:
        result = HostResult(host.name)
        operate_host(name, host, opts, oopts, cache, result)
        return result

    return run_fleet(hosts, one, (rollout or Rollout()).rolling(), progress=progress)
