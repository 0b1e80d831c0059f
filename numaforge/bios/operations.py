"""BIOS operations besides apply: list config jobs, delete a queued one, clear pending values, reset to defaults.

Each one runs per host as: ``read`` (service root, system, Bios, settings object, job queue) -> ``plan`` (what
would be done and why, recorded in ``result.data["operation"]``; refusals -- a running job, a job that would
apply the values being cleared -- fail here, before any write) -> ``act`` (skipped with ``dry_run``) ->
``check`` (re-read: the BMC's word that it happened). Fleet-wide through numaforge.fleet like bios-apply.

The BMC is spoken to only through the client-side resources (numaforge.bios.resources).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import NumaforgeError
from ..fleet import Rollout, run_fleet
from ..program import prog
from ..report import HostResult
from .discovery import RegistryCache, discovery_dir, fetch_registry
from .errors import RedfishConflictError, RedfishNotFoundError
from .hostsession import HostOptions, connect, record_session
from .resources import Bios, JobCollection, ServiceRoot, SettingsObject, System, find_jobs


@dataclass
class OpOptions:
    dry_run: bool = False  # plan only: read, decide, write nothing
    job_id: str | None = None  # bios-job-delete: only this BIOS config job (default: every queued one)
    all_jobs: bool = False  # bios-jobs: every job in the queue, not only BIOS configuration jobs


@dataclass
class View:
    """What an operation reads before deciding."""

    root: ServiceRoot
    system: System
    bios: Bios
    settings: SettingsObject
    jobs: JobCollection | None

    def bios_jobs(self) -> list:
        return self.jobs.bios_jobs(self.settings.path) if self.jobs is not None else []

    def pending(self) -> dict[str, Any]:
        return self.settings.pending(self.bios.attributes)


def read_view(client, host) -> View:
    root = ServiceRoot.load(client)
    system = root.system(host.bmc.system_id)
    bios = system.bios()
    settings = bios.settings()
    return View(root, system, bios, settings, find_jobs(client, root, system.manager_paths))


def _blocking_jobs(view: View, what: str) -> None:
    """Refuse an operation on the pending values while a BIOS config job would apply them."""
    active = [j for j in view.bios_jobs() if j.active]
    if view.jobs is not None and active:
        ids = ", ".join(f"{j.identity} ({j.state})" for j in active)
        raise RedfishConflictError(
            f"BIOS config job {ids} is queued to apply the pending values; {what} refused, nothing was changed",
            view.jobs.where,
            f"delete the job first (`{prog()} bios-job-delete`), or let it run",
            status=409,
        )


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
    _blocking_jobs(view, "clearing the pending values")
    with result.step("act") as s:
        if oopts.dry_run:
            s.detail = "dry run: nothing cleared"
        else:
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
    _blocking_jobs(view, "resetting the BIOS to defaults")
    with result.step("act") as s:
        if oopts.dry_run:
            s.detail = "dry run: not reset"
        else:
            view.bios.reset_bios()
            s.detail = "POST Bios.ResetBios"
    if oopts.dry_run:
        return "ok", f"would reset the BIOS to defaults: {len(changes)} attributes differ from their default (dry run)"
    with result.step("check"):
        view.bios.refresh()
        view.settings = view.bios.settings()
        result.data["operation"]["pending_after"] = sorted(view.pending())
    return "changed", (
        f"reset to defaults requested ({len(changes)} attributes differ from their default); it "
        f"applies at the next host reset (reboot the host, e.g. `{prog()} bios-apply --reboot` later)"
    )


OPERATIONS: dict[str, Callable] = {
    "jobs": op_jobs,
    "job-delete": op_job_delete,
    "clear-pending": op_clear_pending,
    "reset-defaults": op_reset_defaults,
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
            result.status, result.message = fn(client, host, view, oopts, cache, result)
    except NumaforgeError as exc:
        result.status = "failed"
        result.message = exc.render()
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
