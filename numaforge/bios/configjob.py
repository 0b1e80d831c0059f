"""A host's BIOS configuration job: the one piece of bios-apply that differs by vendor in the flow itself.

Dell iDRAC applies pending BIOS values only through a config job the client schedules (POST
{"TargetSettingsURI": <settings object>} to its job queue: Dell's iDRAC Redfish API guide); other BMCs apply them
at the next reset by themselves. Which vendors need one is data (the vendor map's ``config_job: true``,
VendorMap.config_job); the rest reads the BMC:
a PATCH answered with a job's Location names the job the BMC made itself (any vendor), the job queue is found
through the System's managers or the JobService (numaforge.bios.resources.jobs), and a job someone else queued is
reported, never replaced or deleted. Reset waits (vendor map ``reboot:``), HPE's PostState and Supermicro's value
names are data read elsewhere (numaforge.bios.power, numaforge.bios.registry)."""

from __future__ import annotations

import time
from typing import Callable

from ..errors import NumaforgeError
from ..program import prog
from .errors import JobConflictError, RedfishError
from .exchange import Response, path_of
from .hoststate import BiosState, system_of
from .power import Timeouts
from .redfish import RedfishClient
from .resources import Job, JobCollection, ServiceRoot, find_jobs
from .resources.jobs import FINAL_BAD, FINAL_OK
from .unsure import watch_write


def job_queue(client: RedfishClient, state: BiosState) -> JobCollection | None:
    """The collection the BMC keeps BIOS jobs in (the System's manager's, else the JobService's), or None."""
    return find_jobs(client, ServiceRoot.load(client), system_of(client, state).manager_paths)


def jobs_text(client: RedfishClient, state: BiosState) -> str:
    """The BIOS jobs the BMC lists, for a report ("none", or "JID_1 (Scheduled), ..."); never raises."""
    try:
        jobs = job_queue(client, state)
        found = jobs.bios_jobs(state.settings_path) if jobs is not None else []
    except NumaforgeError as exc:
        return f"unknown ({exc.what})"
    return ", ".join(f"{j.identity} ({j.state})" for j in found) or "none"


def job_info(job: Job) -> dict:
    return {"id": job.identity, "state": job.state, "path": job.path}


class ConfigJob:
    """This host's config job across the apply states: the one our PATCH's answer named, an existing one (adopted,
    never replaced) or one created here; waited for until Scheduled before a reset and until final after it."""

    def __init__(self, client: RedfishClient, host_name: str, timeouts: Timeouts, data: dict | None = None):
        self.client, self.host_name, self.timeouts = client, host_name, timeouts
        self.data = data if data is not None else {}  # the host's result data: a job POST of unknown outcome
        self.where = f"{host_name} ({client.base_url})"
        self.queue: JobCollection | None = None
        self.path: str | None = None

    def _queue(self, state: BiosState) -> JobCollection | None:
        if self.queue is None:
            self.queue = job_queue(self.client, state)
        return self.queue

    def check_none_queued(self, state: BiosState) -> dict:
        """A queued BIOS job is reported, never clobbered: nothing is written while one exists."""
        jobs = self._queue(state)
        active = [j for j in jobs.bios_jobs(state.settings_path) if j.active] if jobs else []
        if jobs is not None and active:
            ids = ", ".join(f"{j.identity} ({j.state})" for j in active)
            raise JobConflictError(
                f"a BIOS configuration job is already queued: {ids}; nothing was written",
                f"{self.host_name} ({self.client.base_url}{jobs.path})",
                f"let it run: restart the host (`{prog()} bmc-power --host {self.host_name} graceful-restart`) and "
                f"the BMC applies it; or, if it is stale, remove it (`{prog()} bios-job-delete --host "
                f"{self.host_name}`). Once no BIOS job is queued, this apply can run",
            )
        return {"queue": jobs.path if jobs else None, "active": 0}

    def adopt(self, answer: Response | None) -> None:
        """A PATCH answered with a job's Location (a BMC that makes the job itself): that job is ours."""
        location = answer.headers.get("location") if answer is not None else None
        if location and "job" in location.lower():
            self.path = path_of(location)

    def schedule(self, state: BiosState) -> Job:
        """Make sure exactly one config job holds our values (ours, an existing one, or a new one) and wait for
        it to be Scheduled (or final) within the job timeout."""
        if not self.path:
            fresh = self.queue is None
            jobs = self._queue(state)
            if jobs is not None and not fresh:
                jobs.refresh()  # read before our PATCH: the BMC may have made a job for it since
            if jobs is None:
                raise RedfishError(
                    "no jobs collection found to create the BIOS config job",
                    self.where,
                    "without a config job the pending values never apply; check the iDRAC firmware",
                )
            existing = [j for j in jobs.bios_jobs(state.settings_path) if j.active]
            if existing:
                self.path = existing[0].path
            else:
                # cut or unanswered, the POST may have made the job: the job list is re-read (issue 40 item 3)
                with watch_write(
                    self.client,
                    self.data,
                    f"POST {jobs.path}",
                    lambda: {"shows": f"BIOS jobs: {jobs_text(self.client, state)}"},
                    f"`{prog()} bios-jobs --host {self.host_name}`",
                ):
                    self.path = jobs.create_config_job(state.settings_path)
        return self.wait({"Scheduled"}, self.timeouts.job)

    def refuse_failed(self, job: Job) -> None:
        if job.state in FINAL_BAD:
            raise RedfishError(
                f"BIOS config job {job.identity} {job.state}: {job.message}",
                self.where,
                "see the job's message on the iDRAC",
            )

    def wait(self, want: set[str], timeout: float) -> Job:
        """The job once its state is in ``want`` or final, or as it is when ``timeout`` runs out."""
        assert self.path is not None, "wait() follows schedule() or adopt()"
        deadline = time.monotonic() + timeout
        while True:
            job = Job.load(self.client, self.path)
            if job.state in want or job.state in FINAL_BAD or job.state in FINAL_OK:
                return job
            if time.monotonic() > deadline:
                return job
            time.sleep(self.timeouts.poll)

    def require_scheduled(self) -> None:
        """iDRAC runs the job only if it is Scheduled at the reset: otherwise the host is not reset."""
        job = Job.load(self.client, self.path) if self.path else None
        if job is not None and job.state != "Scheduled":
            raise JobConflictError(
                f"BIOS config job {job.identity} is {job.state}, not Scheduled, after {self.timeouts.job:g} s:"
                " the host was not rebooted (the values would not apply)",
                self.where,
                f"see the job on the iDRAC (`{prog()} bios-jobs`); once it is Scheduled, re-run with --reboot",
            )

    def state_probe(self) -> Callable[[], str] | None:
        """What numaforge.bios.power asks while the host boots (a running job: the host is in POST), or None."""
        path = self.path
        return (lambda: Job.load(self.client, path).state) if path else None

    def record_final(self, data: dict) -> None:
        """After the reset: wait for the job to end and record it (its message when it did not complete)."""
        if self.path:
            job = self.wait(FINAL_OK, self.timeouts.job)
            data["job"] = job_info(job)
            if job.state not in FINAL_OK:
                data["job"]["message"] = job.message
