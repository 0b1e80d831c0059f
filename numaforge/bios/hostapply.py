"""One host's bios-apply as an explicit state object (``HostApply``), its states in the order
numaforge.bios.applysteps.next_state gives:

``plan`` (profile render, vendor map, registry validation, diff -- all before any write), ``resume`` (a --reboot
run's journal says a reset was already requested: wait for it, never send another), ``job-check`` (a BMC that
applies values through a config job: a queued BIOS job stops the host before any write), ``patch`` (one PATCH of
only the differing attributes, numaforge.bios.write; on 412 re-read once and re-plan), ``job`` (that config job,
numaforge.bios.configjob), ``reboot`` (numaforge.bios.power: GracefulRestart; ForceRestart only for an OS that
ignored it, never in POST; with a config job only once it is Scheduled), ``verify`` (current == desired).
``finish`` gives the result state. Every step records into the host's ``HostResult``; nothing here prints.
"""

from __future__ import annotations

import time

from .. import journal as numaforge_journal
from ..errors import NumaforgeError
from ..report import HostResult
from ..waits import Steps
from .applysteps import Progress, outcome, patch_action
from .configjob import ConfigJob, job_info
from .discovery import RegistryCache
from .errors import ConcurrentChangeError, RedfishError, RedfishPreconditionFailedError, RedfishRedirectError
from .hostplan import desired_values, gap_note, plan_for, record_plan, replan
from .hostsession import HostOptions
from .hoststate import BiosState, read_state, system_of
from .plan import Plan
from .power import reboot_steps, wait_back_steps
from .redfish import RedfishClient
from .resources import Bios
from .write import check_staged, outcome_unknown, patch_settings, reread_unsure


class HostApply:
    """One host's apply between its steps: what was read and planned, the config job, what was written. Made in
    the ``plan`` step: it plans (render, map, validate, diff) and records the plan."""

    def __init__(
        self, host, opts: HostOptions, cache: RegistryCache, result: HostResult, client: RedfishClient, state: BiosState
    ):
        self.host, self.opts, self.cache, self.result = host, opts, cache, result
        self.client, self.state = client, state
        self.journal = opts.journal if opts.reboot else None
        self.profile, self.desired, self.plan = plan_for(host, state, opts)
        self.job = ConfigJob(client, host.name, opts.timeouts, result.data)
        self.written = False
        self.replanned = False
        self.data = result.data
        record_plan(result, state, self.profile, self.plan)
        self.data.update({"changed": [], "pending": list(self.plan.pending), "verified": [], "mismatches": []})

    @property
    def where(self) -> str:
        return f"{self.host.name} ({self.client.base_url})"

    def progress(self) -> Progress:
        return Progress(
            changes=bool(self.plan.changes),
            pending=bool(self.plan.pending),
            written=self.written,
            jobs=self.opts.vendor_map(self.state.vendor).config_job,
            reboot=self.opts.reboot,
            needs_reset=self.plan.needs_reset,
        )

    def _reread(self) -> Plan:
        """Read the host again (the same way: the model's known shape first) and re-plan the same desired values."""
        self.state = read_state(self.client, self.host, self.cache, self.state.shape)
        self.plan = replan(self.state, self.desired, self.host)
        return self.plan

    # -- resume ------------------------------------------------------------------------------------------------
    def resuming(self) -> bool:
        # whatever the plan shows now: mid power-cycle a BMC may show the values neither pending nor current yet
        return self.journal is not None and self.journal.action(self.host.name) == "verify"

    def do_resume(self) -> Steps[dict]:
        """An interrupted run already asked this host to reset: wait for that reset, never send another; re-read,
        re-plan. If the host has not come back with the values within --power-timeout, fail (not reset)."""
        journal = self.journal
        assert journal is not None, "resuming() said the journal asks for it"
        accepted = journal.data(self.host.name, numaforge_journal.REBOOT_REQUESTED).get("time")
        requested = accepted or journal.data(self.host.name, numaforge_journal.RESET_SENDING).get("time") or 0
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(requested))
        note = (
            f"reset requested by the previous run at {when}"
            + ("" if accepted else " (it stopped before the BMC's answer: whether the BMC took it is unknown)")
            + "; waiting for it, not resetting again"
        )
        st, waits = self.state, self.opts.vendor_map(self.state.vendor).reboot
        want, paths = desired_values(self.plan), (st.system_path, st.bios_path)
        waited = yield from wait_back_steps(
            self.client, paths, want, self.opts.timeouts, waits, st.registry.value_names
        )
        detail = {
            "journal": str(journal.path),
            "phases": journal.phases(self.host.name),
            "note": note,
            "waited": waited,
        }
        plan = self._reread()
        self.data["resumed"] = True
        self.data["reset_requested_by_previous_run"] = when
        if plan.changes or plan.needs_reset:
            differ = sorted({i.attribute for i in plan.items if i.current != i.desired})
            raise RedfishError(
                f"{note}: after {waited['seconds']:g} s (--power-timeout) the host (power "
                f"{waited['power']}) does not show the new values yet "
                f"({', '.join(differ) or 'settings still pending'}); it was not reset again",
                self.where,
                "check the host (console, power state); once it is back on, re-run the same command: "
                f"it verifies and never resets; to start over instead, delete {journal.path}",
            )
        return detail

    # -- the states --------------------------------------------------------------------------------------------
    def do_job_check(self) -> dict:
        return self.job.check_none_queued(self.state)

    def _replan_before_write(self) -> dict:
        """Re-read and re-plan right before the PATCH; the plan's record and pending values follow."""
        plan = self._reread()
        record_plan(self.result, self.state, self.profile, plan)
        self.data["pending"] = list(plan.pending)
        return plan.changes

    def do_patch(self) -> str | None:
        use_at = "OnReset" in self.state.apply_times
        detail = None
        changes = self.plan.changes
        if not self.state.etag:
            # no ETag, no If-Match: re-read right before writing (the plan says so in its warnings)
            changes = self._replan_before_write()
            detail = "no ETag on the settings object: re-read and re-planned right before the PATCH"
        while changes:
            try:
                answer = patch_settings(self.client, self.state, changes, use_at)
                self._written(changes, answer)
            except RedfishPreconditionFailedError:
                if patch_action(True, self.replanned) == "conflict":
                    raise ConcurrentChangeError(
                        "the BIOS settings object changed again while writing (412 twice); nothing more was written",
                        f"{self.host.name} ({self.client.base_url}{self.state.settings_path})",
                        "someone else is changing this BIOS: coordinate, then re-run",
                    ) from None
                detail = "412 Precondition Failed: settings changed since read; re-read and re-planned"
                changes = self._replan_before_write()
                self.data["replanned_after_412"] = self.replanned = True
                continue
            except RedfishRedirectError:
                raise  # answered and not carried out: nothing was written
            except NumaforgeError as exc:
                if outcome_unknown(exc):
                    self._unsure(changes)
                raise
            break
        return detail

    def _unsure(self, changes: dict) -> None:
        """The PATCH of ``changes`` (or its read-back) failed or was cut: its outcome is unknown, so what the BMC
        holds now is re-read and goes into the result -- written, pending, the journal -- before the host's
        error is reported (issue 40 item 3)."""
        write = reread_unsure(self.client, self.state, changes)
        self.data["write"] = write
        held = sorted(write["bmc_holds"])
        self.data["changed"] = held
        self.data["pending"] = sorted(set(self.data["pending"]) | set(held))
        if held and self.journal is not None:
            self.journal.record(self.host.name, "patched", attributes=held, outcome="re-read after an unknown outcome")

    def _written(self, changes: dict, answer) -> None:
        try:
            held = set(check_staged(self.client, self.state, changes, self.where))
        except NumaforgeError as exc:
            if getattr(exc, "accepted_unread", False):
                # the BMC said yes: written, whatever the re-read could not tell -- never dropped from the report,
                # and no pending count claimed (issue 40 item 3: "7 written, 8 pending" with Attributes null)
                self.data["changed"], self.data["pending"] = sorted(changes), []
                self.data["write"] = {"sent": sorted(changes), "outcome": "accepted", "reread": f"failed: {exc.what}"}
                if self.journal is not None:
                    self.journal.record(self.host.name, "patched", attributes=sorted(changes))
            raise
        self.data.pop("write", None)
        self.written = True
        self.data["changed"] = sorted(changes)
        # what the settings object holds now, of the plan's and ours: not the plan's list plus what was sent
        self.data["pending"] = sorted((set(self.data["pending"]) | set(changes)) & held)
        self.job.adopt(answer)
        if self.journal is not None:
            self.journal.record(self.host.name, "patched", attributes=sorted(changes))

    def do_job(self) -> dict:
        """The values apply only through a config job: exactly one exists (ours, adopted, or new), Scheduled."""
        job = self.job.schedule(self.state)
        self.data["job"] = job_info(job)
        self.job.refuse_failed(job)
        return self.data["job"]

    def _reset_heard(self, outcome: str) -> None:
        """The journal of a reset request: "reset-sending" on disk before it leaves (a crash then: outcome
        unknown, a re-run waits rather than resets twice), "reboot-requested" only once the BMC accepted it (2xx,
        no redirect), "reset-sending" retracted when it refused (a re-run resets: issue 40 item 3)."""
        if self.journal is None:
            return
        if outcome == "sending":
            self.journal.record(self.host.name, numaforge_journal.RESET_SENDING)
        elif outcome == "accepted":
            self.journal.record(self.host.name, numaforge_journal.REBOOT_REQUESTED)
        elif outcome == "refused":
            self.journal.retract(self.host.name, numaforge_journal.RESET_SENDING)

    def do_reboot(self) -> Steps[dict]:
        """The reset and the wait for the host to come back: a generator of waits (numaforge.waits), so a fleet
        run gives this host's worker back while it runs POST."""
        self.job.require_scheduled()
        st = self.state
        detail = yield from reboot_steps(
            self.client,
            system_of(self.client, st).body,
            (st.system_path, st.bios_path),
            desired_values(self.plan),
            self.opts.timeouts,
            self.opts.vendor_map(st.vendor).reboot,
            self.result.data,
            self.job.state_probe(),
            st.registry.value_names,
            self._reset_heard,
            self.opts.post_clock,
        )
        if self.journal is not None:
            self.journal.record(self.host.name, "rebooted")
        return detail

    def do_verify(self) -> dict:
        self.job.record_final(self.data)
        verify_into(self.client, self.state, self.plan, self.result)
        return {"verified": len(self.data["verified"]), "mismatches": len(self.data["mismatches"])}

    def finish(self) -> None:
        """The result state: verified without a reset when nothing needs one; journal; status and message."""
        if not self.plan.needs_reset and not self.data["verified"]:
            self.data["verified"] = [i.attribute for i in self.plan.settable]
        if self.journal is not None and not self.data.get("mismatches"):
            self.journal.record(self.host.name, "verified")
        self.result.status, self.result.message = outcome(
            self.data, reboot=self.opts.reboot, needs_reset=self.plan.needs_reset, plan_pending=len(self.plan.pending)
        )
        if self.result.status != "failed":
            self.result.message += gap_note(self.plan)


def verify_into(client: RedfishClient, state: BiosState, plan: Plan, result: HostResult) -> None:
    """After the reset: the Bios's current values (by value name) against the plan's, per attribute. A value not
    applied carries the BMC's own word on it, where its @Redfish.Settings Messages name the attribute
    (``bmc_message``; issue 41 item 8)."""
    bios = Bios.load(client, state.bios_path)
    cur = state.registry.value_names(bios.attributes)
    said = bios.settings_messages()
    verified, mism = [], []
    for i in plan.settable:
        if cur.get(i.attribute) == i.desired:
            verified.append(i.attribute)
        else:
            row = {
                "attribute": i.attribute,
                "setting": i.setting,
                "desired": i.desired,
                "current": cur.get(i.attribute),
            }
            if said.get(i.attribute):
                row["bmc_message"] = said[i.attribute]
            mism.append(row)
    result.data["verified"] = verified
    result.data["mismatches"] = mism
    result.data["pending"] = [] if not mism else [m["attribute"] for m in mism]
