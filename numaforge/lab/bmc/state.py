"""The simulated machine: power state with timed transitions, BIOS current/pending values, Dell-like config
jobs and sessions. Thread-safe (one lock); time comes from an injectable clock so the core is tested
without sleeping. Timed transitions are evaluated lazily (``advance``) whenever the state is read.

BIOS semantics (the behaviours users trip over on real BMCs):
- a PATCH only stages values in ``pending``; they become ``current`` when the HOST boots (a system reset or
  power-on), never on a BMC (manager) reset;
- Dell-like: pending values apply only through a BIOS config job; without one they stay pending across
  reboots; while a config job is scheduled or running, new PATCHes and new jobs are refused (SYS011); a running
  job cannot be deleted; Bios.ResetBios defaults apply at the next boot without a job (iDRAC does the same);
- writing an attribute's current value back un-stages it (how BMCs without a clear-pending action clear one).
"""

from __future__ import annotations

import copy
import json
import os
import random
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from .flavours import Flavour
from .messages import message

RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart")
ACTIVE_JOB_STATES = ("Scheduled", "Running")


def _bios_config(job: dict) -> bool:
    return job.get("JobType", "BIOSConfiguration") == "BIOSConfiguration"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")


class BMCState:
    def __init__(self, flavour: Flavour, power_delay: float = 1.0, state_file: Path | None = None, clock=time.time):
        self.flavour = flavour
        self.power_delay = float(power_delay)
        self.state_file = state_file
        self.clock = clock
        self._at: float | None = None  # set while advance() runs a timed transition (_now)
        self.lock = threading.RLock()
        self.power = "On"
        self.events: list[tuple[float, str]] = []  # (due time, "off" | "boot")
        self.current = dict(flavour.defaults)
        self.pending: dict = {}
        self.apply_time: str | None = None  # ApplyTime requested with the pending values
        self.settings_time: float = clock()  # when the settings last changed / applied
        self.settings_messages: list[dict] = []  # @Redfish.Settings.Messages of the last apply
        self.jobs: dict[str, dict] = {}
        self.defaults_requested = False  # Bios.ResetBios: defaults apply at the next boot, job or not
        self.boot_count = 0
        self.manager_resets = 0
        self.graceful_ignored = False  # a hung OS ignores graceful shutdown requests
        self.force_ignored = False  # a faulty BMC answers a ForceRestart 204 and never carries it out
        # attributes POST refuses to apply: they stay as they were, and @Redfish.Settings.Messages names each one
        self.apply_refused: set[str] = set()
        self.lockdown = False  # Dell System Lockdown: every configuration change is refused
        # boot progress: a real warm restart keeps PowerState "On" while the host runs POST; POST may last minutes
        self.warm_restart = False  # GracefulRestart/ForceRestart of a running host keep PowerState "On"
        self.post_seconds = 0.0  # how long POST lasts (BootProgress between reset and OSRunning)
        self.boot_state = "OSRunning"  # BootProgress.LastState
        # the last state a booted host reports: "OSBootStarted" where no OS agent reports OSRunning (iDRAC
        # without iSM, for example)
        self.booted_state = "OSRunning"
        self.boot_state_time = clock()
        self.resets: dict[str, int] = {}  # ComputerSystem.Reset requests received, by ResetType
        self.new_job_state = "Scheduled"  # the state a new config job starts in ("New": it is never scheduled)
        self.stuck_jobs = False  # True: a running BIOS config job stays Running after POST (a stuck iDRAC job)
        if state_file is not None and state_file.exists():
            self._load()

    # ---------------------------------------------------------------- persistence
    def _snapshot(self) -> dict:
        return {
            "flavour": self.flavour.name,
            "power": self.power,
            "events": self.events,
            "current": self.current,
            "pending": self.pending,
            "apply_time": self.apply_time,
            "settings_time": self.settings_time,
            "settings_messages": self.settings_messages,
            "jobs": self.jobs,
            "defaults_requested": self.defaults_requested,
            "boot_count": self.boot_count,
            "manager_resets": self.manager_resets,
        }

    def _load(self) -> None:
        assert self.state_file is not None  # _load runs only for a state file
        data = json.loads(self.state_file.read_text())
        if data.get("flavour") != self.flavour.name:
            return
        self.power = data["power"]
        self.events = [tuple(e) for e in data["events"]]
        self.current = {
            **self.flavour.defaults,
            **{k: v for k, v in data["current"].items() if k in self.flavour.defaults},
        }
        self.pending = data["pending"]
        self.apply_time = data["apply_time"]
        self.settings_time = data["settings_time"]
        self.settings_messages = data["settings_messages"]
        self.jobs = data["jobs"]
        self.defaults_requested = bool(data.get("defaults_requested", False))
        self.boot_count = data["boot_count"]
        self.manager_resets = data["manager_resets"]

    def save(self) -> None:
        if self.state_file is None:
            return
        tmp = self.state_file.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self._snapshot(), indent=1, sort_keys=True))
            os.replace(tmp, self.state_file)
        except FileNotFoundError:  # the simulator was stopped and its temporary state dir removed
            pass

    # ---------------------------------------------------------------- time
    def advance(self) -> None:
        """Run every timed transition that is due."""
        with self.lock:
            now = self.clock()
            changed = False
            while self.events and self.events[0][0] <= now:
                due, what = self.events.pop(0)
                self._at = due  # a transition happens when it was due, not when someone asked (POST's length)
                changed = True
                if what == "off":
                    self.power = "Off"
                    self._progress("None")
                elif what == "boot":  # power on (or the warm reset itself): POST starts
                    self.power = "On"
                    self._progress("MemoryInitializationStarted")  # a DSP8010 POST state
                    if self.post_seconds > 0:
                        self._schedule(self.post_seconds, "os")
                    else:
                        self._boot()
                elif what == "os":
                    self._boot()
            self._at = None
            if changed:
                self.save()

    def _now(self) -> float:
        """The time of what happens now: a timed transition's due time while advance() runs it, else the clock."""
        return self._at if self._at is not None else self.clock()

    def _schedule(self, delay: float, what: str) -> None:
        self.events.append((self._now() + delay, what))
        self.events.sort()

    def _progress(self, state: str) -> None:
        self.boot_state, self.boot_state_time = state, self._now()

    def in_post(self) -> bool:
        return self.power == "On" and self.boot_state != self.booted_state

    def _boot(self) -> None:
        """POST ends (the host powered on and ran POST): this is where BIOS settings apply."""
        self.power = "On"
        self._progress(self.booted_state)
        self.boot_count += 1
        if self.flavour.jobs == "dell":
            job = self.active_job()
            if job is None and self.defaults_requested:
                self._apply_pending()  # iDRAC: a ResetBios applies at the next boot without a job
            if job is not None and not self.stuck_jobs:
                self._apply_pending()
                job.update(
                    JobState="Completed",
                    PercentComplete=100,
                    EndTime=iso(self._now()),
                    Message="Job completed successfully.",
                    MessageId="PR19",
                )
        elif self.pending:
            self._apply_pending()

    def _apply_pending(self) -> None:
        refused = {k: v for k, v in self.pending.items() if k in self.apply_refused}
        self.current.update({k: v for k, v in self.pending.items() if k not in refused})
        applied = sorted(k for k in self.pending if k not in refused)
        self.pending = {}
        self.apply_time = None
        self.defaults_requested = False
        self.settings_time = self._now()
        self.settings_messages = [
            {
                "MessageId": "Base.1.22.Success",
                "Message": "The request completed successfully.",
                "RelatedProperties": [f"#/Attributes/{a}" for a in applied],
            }
        ] + [message("PropertyValueIncorrect", k, v, related=[f"#/Attributes/{k}"]) for k, v in sorted(refused.items())]

    # ---------------------------------------------------------------- power
    def reset(self, reset_type: str) -> None:
        """Start a system reset; transitions complete power_delay seconds later."""
        with self.lock:
            self.advance()
            self.resets[reset_type] = self.resets.get(reset_type, 0) + 1
            d = self.power_delay
            if reset_type == "ForceOff":
                self.events = []
                self.power = "Off"
                self._progress("None")
            elif reset_type == "GracefulShutdown":
                if self.power == "On" and not self.graceful_ignored:
                    self.power = "PoweringOff"
                    self.events = []
                    self._schedule(d, "off")
            elif reset_type == "On":
                if self.power == "Off":
                    self.power = "PoweringOn"
                    self._begin_jobs()
                    self._schedule(d, "boot")
            elif reset_type in ("GracefulRestart", "ForceRestart"):
                if reset_type == "GracefulRestart" and self.power == "On" and self.graceful_ignored:
                    pass
                elif reset_type == "ForceRestart" and self.force_ignored:
                    pass
                else:
                    warm = self.warm_restart and self.power == "On"
                    self.events = []
                    if not warm:  # a warm restart keeps PowerState "On" (the OS shuts down, then POST runs)
                        self.power = "Off"
                        self._progress("None")
                    self._begin_jobs()
                    self._schedule(d, "boot")
            else:
                raise ValueError(reset_type)
            self.save()

    def _begin_jobs(self) -> None:
        for job in self.jobs.values():
            if job["JobState"] == "Scheduled" and _bios_config(job):
                job.update(JobState="Running", PercentComplete=50, Message="Task is running.", MessageId="PR20")

    def manager_reset(self) -> None:
        """A BMC reset: the manager restarts; BIOS pending values stay pending."""
        with self.lock:
            self.manager_resets += 1
            self.save()

    # ---------------------------------------------------------------- BIOS
    def effective(self) -> dict:
        with self.lock:
            return {**self.current, **self.pending}

    def stage(self, attributes: dict, apply_time: str | None) -> None:
        """Stage values; writing an attribute's current value back un-stages it (nothing left to apply)."""
        with self.lock:
            for k, v in attributes.items():
                if self.current.get(k) == v:
                    self.pending.pop(k, None)
                else:
                    self.pending[k] = v
            if apply_time:
                self.apply_time = apply_time
            self.settings_time = self.clock()  # Messages keep describing the last apply until the next one
            self.save()

    def clear_pending(self) -> None:
        with self.lock:
            self.pending = {}
            self.apply_time = None
            self.defaults_requested = False
            self.settings_time = self.clock()
            self.save()

    def reset_bios_defaults(self) -> None:
        """Bios.ResetBios: defaults become pending (applied on the next boot)."""
        with self.lock:
            self.pending = {
                k: v
                for k, v in self.flavour.defaults.items()
                if self.current.get(k) != v and not (self.flavour.attribute(k) or {})["ReadOnly"]
            }
            self.defaults_requested = True
            self.settings_time = self.clock()
            self.save()

    # ---------------------------------------------------------------- Dell-like jobs
    def active_job(self) -> dict | None:
        """The BIOS configuration job that is Scheduled or Running (other queued jobs never block BIOS writes)."""
        with self.lock:
            for job in self.jobs.values():
                if job["JobState"] in ACTIVE_JOB_STATES and _bios_config(job):
                    return job
            return None

    def queue_firmware_job(self, name: str = "Firmware Update: BIOS") -> dict:
        """Test setup: a Scheduled firmware-update job (DellJob JobType FirmwareUpdate), as an update package
        staged for the next reboot leaves in iDRAC's queue. The simulator never runs it."""
        with self.lock:
            job = self._new_job()
            job.update(Name=name, JobType="FirmwareUpdate", Message="Task successfully scheduled.", MessageId="JCP001")
            job["TargetSettingsURI"] = None
            self.jobs[job["Id"]] = job
            self.save()
            return copy.deepcopy(job)

    def _new_job(self) -> dict:
        while True:
            jid = f"JID_{random.randrange(10**11, 10**12)}"
            if jid not in self.jobs:
                break
        return {
            "Id": jid,
            "JobState": "Scheduled",
            "PercentComplete": 0,
            "StartTime": "TIME_NOW",
            "EndTime": "TIME_NA",
            "CreatedTime": iso(self.clock()),
        }

    def create_job(self, target: str) -> dict:
        with self.lock:
            jid = self._new_job()["Id"]
            job = {
                "Id": jid,
                "Name": "Configure: BIOS.Setup.1-1",
                "JobType": "BIOSConfiguration",
                "JobState": self.new_job_state,
                "PercentComplete": 0,
                "Message": "Task successfully scheduled." if self.new_job_state == "Scheduled" else "New",
                "MessageId": "JCP001",
                "StartTime": "TIME_NOW",
                "EndTime": "TIME_NA",
                "TargetSettingsURI": target,
                "CreatedTime": iso(self.clock()),
            }
            self.jobs[jid] = job
            self.save()
            return copy.deepcopy(job)

    def delete_job(self, jid: str) -> bool | None:
        """Delete a job; deleting a scheduled BIOS job also discards the pending values (iDRAC-like). A running
        job is not deleted (None); an unknown one: False."""
        with self.lock:
            job = self.jobs.get(jid)
            if job is None:
                return False
            if job["JobState"] == "Running":
                return None
            del self.jobs[jid]
            if job["JobState"] == "Scheduled" and _bios_config(job):
                self.pending = {}
                self.apply_time = None
            self.save()
            return True
