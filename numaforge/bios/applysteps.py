"""The pure decisions of one host's bios-apply (numaforge.bios.hostapply runs them):

plan -> [resume] -> job-check -> patch (412: re-read, re-plan, once) -> job -> reboot -> verify -> result.
``next_state`` decides which state comes next from what the host's run knows so far (``Progress``);
``patch_action`` what a PATCH's answer means; ``outcome`` turns what happened into the host's status and message.
Like numaforge.livepatch: pure decisions here, guaranteed handling around them."""

from __future__ import annotations

from dataclasses import dataclass

from ..textsafe import printable
from .resources.jobs import FINAL_OK

STATES = ("plan", "job-check", "patch", "job", "reboot", "verify", "result")


@dataclass(frozen=True)
class Progress:
    """What decides the next state (pure data)."""

    changes: bool  # the plan has values to write
    pending: bool  # values the plan wants are already pending
    written: bool  # our PATCH landed
    jobs: bool  # the BMC applies BIOS values only through a config job (Dell iDRAC)
    reboot: bool  # --reboot
    needs_reset: bool  # something waits for a host reset


def next_state(state: str, p: Progress) -> str:
    """The state after ``state``. Pure: job-check only before a write on a job BMC; patch only with changes;
    job only when a job BMC has something to apply; reboot and verify only with --reboot and a reset needed."""
    for nxt in STATES[STATES.index(state) + 1 :]:
        if nxt == "job-check" and not (p.jobs and p.changes):
            continue
        if nxt == "patch" and not p.changes:
            continue
        if nxt == "job" and not (p.jobs and (p.written or p.pending)):
            continue
        if nxt in ("reboot", "verify") and not (p.reboot and p.needs_reset):
            continue
        return nxt
    return "result"


def patch_action(precondition_failed: bool, replanned: bool) -> str:
    """After a PATCH: 'done', 'replan' (the first 412 Precondition Failed: the settings object changed since it
    was read, so re-read and re-plan) or 'conflict' (412 again after a re-plan). Pure."""
    if not precondition_failed:
        return "done"
    return "conflict" if replanned else "replan"


def outcome(data: dict, *, reboot: bool, needs_reset: bool, plan_pending: int) -> tuple[str, str]:
    """(status, message) of a host from its result data. Pure."""
    mism = data.get("mismatches") or []
    if mism:
        message = "after reboot: " + "; ".join(
            f"{m['attribute']} is {m['current']!r}, wanted {m['desired']!r}"
            + (f" (the BMC: {printable(m['bmc_message'])})" if m.get("bmc_message") else "")
            for m in mism
        )
        job = data.get("job") or {}
        if job and job.get("state") not in FINAL_OK:
            message += f" (config job {job.get('id')} {job.get('state')}: {job.get('message', '')})"
        return "failed", message
    if data.get("resumed"):
        return "changed", (
            f"resumed an interrupted run: reset requested by the previous run at "
            f"{data.get('reset_requested_by_previous_run')}; waited for it, not reset again; "
            f"{len(data['verified'])} verified"
        )
    if data["changed"] or (reboot and needs_reset):
        parts = [f"{len(data['changed'])} written"]
        if reboot:
            parts.append(f"rebooted, {len(data['verified'])} verified")
        else:
            parts.append(f"{len(data['pending'])} pending until the host resets (use --reboot)")
        return "changed", ", ".join(parts)
    return "unchanged", "no change" + (
        f"; {plan_pending} already pending a reset (use --reboot)" if plan_pending else ""
    )
