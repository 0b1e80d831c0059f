"""The firmware pipeline's entry points: bios-plan, bios-apply and bios-verify's BMC side, per host and over the
fleet (``run_hosts``). One pass down for a host:

    apply_host -> bmc_session (hostsession: connect, read_state in hoststate)
               -> HostApply (hostapply: plan in hostplan, the states applysteps.next_state gives: job-check and job
                  in configjob, patch in write, reboot in power, verify)
               -> client-side resources (numaforge.bios.resources: typed errors by HTTP status)
               -> the Redfish client (numaforge.bios.redfish)

Every step records into a ``HostResult`` (numaforge.report); nothing here prints.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..errors import NumaforgeError
from ..fleet import FleetOutcome, Rollout, run_fleet
from ..program import prog
from ..report import UNEXPECTED_ERROR, HostResult
from ..waits import Steps, is_steps, run_steps
from .applysteps import next_state
from .discovery import RegistryCache, discovery_dir
from .exchange import RetryPolicy
from .hostapply import HostApply
from .hostplan import enforce_unverified, gap_note, plan_for, record_plan, unverified_check
from .hostsession import HostOptions, bmc_session, fail
from .plan import Plan, PlanItem
from .power import PostClock, Timeouts

__all__ = [
    "HostOptions",
    "RegistryCache",
    "RetryPolicy",
    "Timeouts",
    "plan_host",
    "apply_host",
    "apply_steps",
    "verify_host",
    "run_hosts",
]


def plan_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> Plan | None:
    """bios-plan: what bios-apply would change on this host (current vs pending vs desired). Writes nothing."""
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            with result.step("plan"):
                profile, desired, plan = plan_for(host, state, opts)
        record_plan(result, state, profile, plan)
        enforce_unverified(unverified_check(host, opts, profile, plan, "plan"), host, result, "plan")
        result.data.update(
            {
                "would_change": sorted(plan.changes),
                "pending": list(plan.pending),
                "verified": [i.attribute for i in plan.items if i.action == "ok"],
            }
        )
        n, p = len(plan.changes), len(plan.pending)
        result.status = "unchanged" if not n and not p else "ok"
        # a gap is not a failure of the run: the host is ok/unchanged, its message and data["gaps"] name each one
        result.message = (
            (f"{n} to change" if n else "no change")
            + (f", {p} pending a reset" if p else "")
            + f" ({state.vendor}, profile {profile.name})"
            + gap_note(plan)
        )
        return plan
    except NumaforgeError as exc:
        fail(result, exc)
        return None


def apply_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> None:
    """Plan, then (only if something differs) PATCH, job, optional reboot and verify: the states of HostApply
    in the order next_state gives, each a step of ``result``. Raises nothing for host failures. The waits (the
    reboot's) are slept here: ``apply_steps`` run to its end."""
    run_steps(apply_steps(host, opts, cache, result))


def apply_steps(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> Steps[None]:
    """``apply_host`` as a generator of waits (numaforge.waits): it yields while the host reboots (the reset's
    POST, or a resumed run's wait), so run_hosts' fleet runner gives the host's worker back meanwhile."""
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            with result.step("plan"):
                h = HostApply(host, opts, cache, result, client, state)
                enforce_unverified(unverified_check(host, opts, h.profile, h.plan, "apply"), host, result, "apply")
            if h.resuming():
                with result.step("resume") as s:
                    s.detail = yield from h.do_resume()
            current = "plan"
            while True:
                current = next_state(current, h.progress())
                if current == "result":
                    break
                with result.step(current) as s:
                    detail = getattr(h, "do_" + current.replace("-", "_"))()
                    s.detail = (yield from detail) if is_steps(detail) else detail
            h.finish()
    except NumaforgeError as exc:
        fail(result, exc)


def _row(i: PlanItem) -> dict:
    return {
        "attribute": i.attribute,
        "setting": i.setting,
        "desired": i.desired,
        "current": i.current,
        "pending": i.pending,
    }


def verify_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> None:
    """BMC-side verification: current BIOS values equal the profile's desired values, per attribute."""
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            with result.step("verify"):
                profile, desired, plan = plan_for(host, state, opts)
                record_plan(result, state, profile, plan)
                mism = [_row(i) for i in plan.settable if i.current != i.desired]
                # a value staged on the BMC that differs from the profile: it takes effect at the next reset
                conflicts = [_row(i) for i in plan.settable if i.pending is not None and i.pending != i.desired]
                conflicting = {c["attribute"] for c in conflicts}
                verified = [
                    i.attribute for i in plan.settable if i.current == i.desired and i.attribute not in conflicting
                ]
                result.data.update(
                    {
                        "verified": verified,
                        "mismatches": mism,
                        "conflicts": conflicts,
                        "pending": [m["attribute"] for m in mism if m["pending"] == m["desired"]],
                    }
                )
        if mism or conflicts:
            result.status = "failed"
            result.message = "; ".join(
                [
                    f"{m['attribute']} ({m['setting']}) is {m['current']!r}, wanted {m['desired']!r}"
                    + (" (pending a reset)" if m["pending"] == m["desired"] else "")
                    for m in mism
                    if m not in conflicts
                ]
                + [
                    f"{host.name}/{c['attribute']} ({c['setting']}): a pending value {c['pending']!r} conflicts with "
                    f"the profile's {c['desired']!r} (current {c['current']!r}); it will flip at the next reboot "
                    f"(clear it with `{prog()} bios-clear-pending` or re-run bios-apply)"
                    for c in conflicts
                ]
            )
        else:
            result.status = "ok"
            result.message = f"{len(verified)} attributes verified ({state.vendor}, profile {profile.name})" + gap_note(
                plan
            )
    except NumaforgeError as exc:
        fail(result, exc)


def run_hosts(
    hosts, action: str, opts: HostOptions, rollout: Rollout | None = None, *, progress: bool = False
) -> FleetOutcome:
    """Run plan/apply/verify on every host with bounded concurrency (numaforge.fleet); one registry cache per run.

    A failing host never stops the others (unless canary/max-fail say so; with --max-fail below 100 and no
    --batch, hosts run in waves of ``forks``, numaforge.fleet.Rollout.rolling). Returns the FleetOutcome.
    """

    fn: Callable[..., Any] = {"plan": plan_host, "apply": apply_steps, "verify": verify_host}[action]
    opts = replace(opts, post_clock=PostClock())  # the reboot waits learn this run's POST times (power.PostClock)
    cache = RegistryCache(persist=discovery_dir() if opts.discovery_cache else None)

    def one(host) -> Steps[HostResult]:
        """The host's work as a generator of waits: a host waiting for its reboot holds no worker (fleet)."""
        result = HostResult(host.name)
        try:
            out = fn(host, opts, cache, result)
            if is_steps(out):
                yield from out
        except Exception as exc:  # a bug: keep what the host recorded (written, reset) and let the runner stop
            fail(result, exc)
            result.data[UNEXPECTED_ERROR] = f"{type(exc).__name__}: {exc}"
        return result

    outcome = run_fleet(hosts, one, (rollout or Rollout()).rolling(), progress=progress)
    outcome.registry_fetches = cache.fetches
    outcome.registry_loaded = cache.loaded
    return outcome
