"""Jobs: a BIOS configuration job and the collection that holds it.

Where a BMC keeps them: Dell iDRAC publishes its job queue under the manager (Links.Oem.Dell.Jobs, i.e.
/redfish/v1/Managers/iDRAC.Embedded.1/Jobs, DellJob members with JobState); DSP0268's JobService has a Jobs
collection (Job members with JobState); Task-like members carry TaskState. ``Job.state`` reads any of them.

Which jobs are BIOS *configuration* jobs (``Job.is_bios_config``) -- the only ones bios-apply waits for and
bios-job-delete deletes: Dell says so in JobType ("BIOSConfiguration", "InbandBIOSConfiguration"; every other
DellJob type, e.g. "FirmwareUpdate" of a BIOS update package, is not one -- DellJob.v1_2_0 schema's JobType enum);
a job without a JobType is one when it targets the settings object (TargetSettingsURI, or DSP0268 Job
Payload.TargetUri) or carries Dell's name for one ("Configure: BIOS.Setup.1-1" in the Dell job queue,
"ConfigBIOS:BIOS.Setup.1-1" in JobService/Jobs -- both seen on an iDRAC9 capture, NVIDIA/libredfish
tests/mockups/dell). The word "bios" in a name or message proves nothing: "Firmware Update: BIOS" is not one.
"""

from __future__ import annotations

import re

from ...program import prog
from ..errors import RedfishConflictError, RedfishError
from ..exchange import Response, path_of
from ..redfish import RedfishClient
from .base import Resource, check, link_path

QUEUED_STATES = {
    "New",
    "Scheduled",
    "Scheduling",
    "Pending",
    "ReadyForExecution",
    "Waiting",
    "PendingReboot",
    "Suspended",
    "UserIntervention",
    # iDRAC's DellJob JobState: a paused job, or one whose settings wait to be activated, is still the host's
    # job (adopted or waited for, never duplicated) (issue 41 item 8)
    "Paused",
    "PendingActivation",
}
RUNNING_STATES = {"Running", "Starting", "Downloading", "Downloaded", "Stopping", "Cancelling", "Interrupted"}
ACTIVE_STATES = QUEUED_STATES | RUNNING_STATES
FINAL_OK = {"Completed", "CompletedWithWarnings"}
FINAL_BAD = {"Failed", "CompletedWithErrors", "Cancelled", "Killed", "Exception", "Service"}
BIOS_CONFIG_JOB_TYPES = {"biosconfiguration", "inbandbiosconfiguration"}  # DellJob JobType values, lower case
_DELL_BIOS_CONFIG_NAME = re.compile(r"^\s*(configure:\s*|configbios:\s*)bios\.setup\.", re.IGNORECASE)


class Job(Resource):
    @property
    def state(self) -> str:
        b = self.body
        return str(
            b.get("JobState")
            or b.get("TaskState")
            or ((b.get("Oem") or {}).get("Dell") or {}).get("JobState")
            or "Unknown"
        )

    @property
    def message(self) -> str:
        return str(self.body.get("Message") or "")

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def queued(self) -> bool:
        return self.state in QUEUED_STATES

    @property
    def job_type(self) -> str:
        b = self.body
        return str(b.get("JobType") or ((b.get("Oem") or {}).get("Dell") or {}).get("JobType") or "")

    def is_bios_config(self, settings_path: str | None = None) -> bool:
        """A BIOS configuration job (module docstring): by JobType when the BMC gives one, else by the settings
        object it targets or Dell's name for such a job. Never by the word "bios" alone."""
        if self.job_type:
            return self.job_type.lower() in BIOS_CONFIG_JOB_TYPES
        b = self.body
        target = b.get("TargetSettingsURI") or (b.get("Payload") or {}).get("TargetUri")
        if isinstance(target, str) and target and settings_path:
            return path_of(target).lower().rstrip("/") == settings_path.lower().rstrip("/")
        return bool(_DELL_BIOS_CONFIG_NAME.match(str(b.get("Name") or "")))

    def summary(self) -> dict:
        b = self.body
        return {
            "id": self.identity,
            "state": self.state,
            "type": self.job_type,
            "bios_config": self.is_bios_config(),
            "name": b.get("Name") or "",
            "percent": b.get("PercentComplete"),
            "message": self.message,
            "path": self.path,
            "target": b.get("TargetSettingsURI") or "",
        }

    def delete(self) -> Response:
        """DELETE the job. A running job is refused here, before any request: deleting it mid-run can leave the
        BIOS half-configured, and BMCs refuse it anyway."""
        if self.running:
            raise RedfishConflictError(
                f"BIOS job {self.identity} is {self.state}: a running job is not deleted",
                self.where,
                f"wait for it to finish (the host is applying BIOS settings); list it again with `{prog()} bios-jobs`",
                status=409,
            )
        return check(
            self.client,
            self.client.request("DELETE", self.path),
            "DELETE",
            "the BMC refused to delete the job; see its message",
        )


class JobCollection(Resource):
    def jobs(self) -> list[Job]:
        """Every member, expanded (a member that is only a link is read)."""
        out = []
        for m in self.body.get("Members") or []:
            if not isinstance(m, dict):
                continue
            path = link_path(m)
            if ("JobState" in m or "TaskState" in m) and path:
                out.append(Job(self.client, path, m))
            elif path:
                out.append(Job.load(self.client, path))
        return out

    def bios_jobs(self, settings_path: str | None = None) -> list[Job]:
        """The BIOS configuration jobs (Job.is_bios_config), never a firmware update that mentions the BIOS."""
        return [j for j in self.jobs() if j.is_bios_config(settings_path)]

    def job(self, job_id: str) -> Job | None:
        for j in self.jobs():
            if j.identity == job_id:
                return j
        return None

    def create_config_job(self, settings_path: str) -> str:
        """POST {"TargetSettingsURI": <settings object>} (iDRAC's way to schedule pending BIOS values); the
        new job's path (Location)."""
        r = self.client.post(self.path, {"TargetSettingsURI": settings_path})
        check(self.client, r, "POST", "the values are pending without a job; re-run, or create the job on the BMC")
        link = r.headers.get("location") or r.body.get("@odata.id")
        if not link:
            raise RedfishError(
                "the BMC created a config job but did not say where (no Location)",
                self.where,
                "check the BMC's job queue",
            )
        return path_of(link)


def find_jobs(client: RedfishClient, root: Resource, manager_paths: list[str]) -> JobCollection | None:
    """The collection holding BIOS config jobs: the manager's Links.Oem.Dell.Jobs / Oem.Dell.Jobs / Jobs, a
    <manager>/Jobs collection, or the service root's JobService Jobs. None when the BMC has no job queue."""
    for mgr_path in manager_paths[:1]:
        manager = Resource.load_or_none(client, mgr_path)
        if manager is None:
            continue
        for keys in (("Links", "Oem", "Dell", "Jobs"), ("Oem", "Dell", "Jobs"), ("Jobs",)):
            link = manager.link(*keys)
            if link:
                return JobCollection.load(client, link)
        jobs = JobCollection.load_or_none(client, mgr_path.rstrip("/") + "/Jobs")
        if jobs is not None and "Members" in jobs.body:
            return jobs
    service_path = link_path(root.body, "JobService")
    service = Resource.load_or_none(client, service_path) if service_path else None
    jobs_path = service.link("Jobs") if service is not None else None
    if jobs_path:
        return JobCollection.load(client, jobs_path)
    return None


__all__ = [
    "Job",
    "JobCollection",
    "find_jobs",
    "ACTIVE_STATES",
    "QUEUED_STATES",
    "RUNNING_STATES",
    "FINAL_OK",
    "FINAL_BAD",
]
