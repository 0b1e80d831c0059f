"""Per-host BIOS flow over Redfish: read -> render/map/validate/plan -> PATCH -> config job -> reboot -> verify.

Explicit states per host (like kpatch's script): ``read`` (system, Bios, settings object, registry),
``plan`` (profile render, vendor map, registry validation, diff -- all before any write), ``patch`` (one PATCH of
only the differing attributes to the settings object named by @Redfish.Settings, If-Match its ETag; on 412
re-read once and re-plan), ``job`` (Dell-like BMCs: a BIOS config job, never clobbering an existing one),
``reboot`` (GracefulRestart, ForceRestart after a timeout, wait for power-on), ``verify`` (current == desired).

Every step records into a ``HostResult`` (numaforge.report); nothing here prints.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .. import budget
from ..errors import NumaforgeError
from ..report import UNEXPECTED_ERROR, HostResult
from .errors import (ConcurrentChangeError, JobConflictError, ProfileError, RedfishAuthError, RedfishError,
                     RedfishRedirectError)
from .plan import Plan, make_plan, pending_values
from .profile import host_facts, render_profile
from .redfish import RedfishClient, RetryPolicy, _path
from .discovery import RegistryCache, Shape, discovery_dir, shape_key  # noqa: F401 (re-exported)
from .registry import Registry
from .vendors import detect_vendor, load_vendor_map, translate

ACTIVE_JOB_STATES = {"New", "Scheduled", "Scheduling", "Running", "Waiting", "Starting", "Pending",
                     "ReadyForExecution", "Downloading", "Downloaded", "PendingReboot", "Suspended"}
FINAL_JOB_OK = {"Completed", "CompletedWithWarnings"}
FINAL_JOB_BAD = {"Failed", "CompletedWithErrors", "Cancelled", "Killed", "Exception"}


@dataclass
class Timeouts:
    graceful: float = 300.0     # wait this long after GracefulRestart before ForceRestart
    power_on: float = 900.0     # wait this long for the host to come back on after a reset
    job: float = 120.0          # wait for a config job to reach Scheduled / Completed
    poll: float = 5.0           # seconds between polls
    settle: float = 120.0       # after power-on, wait this long for the BMC to report the new values


@dataclass
class BiosState:
    vendor: str
    system_path: str
    system: dict | None                 # None until needed (skipped for hosts of a model already seen)
    bios_path: str
    current: dict[str, Any]
    settings_path: str
    settings_attrs: dict[str, Any]
    etag: str | None
    apply_times: list[str]
    registry: Registry
    detected_by: str = ""


@dataclass
class HostOptions:
    profile: str | None = None          # overrides host.bios_profile
    insecure: bool = False
    reboot: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    profiles_dir: str | None = None
    vendors_dir: str | None = None
    journal: Any = None                 # numaforge.journal.Journal of a --reboot run (resume after a crash)
    host_timeout: float | None = None   # --host-timeout: budget per host (numaforge.budget), None = none
    discovery_cache: bool = True        # keep registries and per-model paths on disk (numaforge.bios.discovery)


# -- connection -------------------------------------------------------------------------------------------
def connect(host, opts: HostOptions, cache: "RegistryCache | None" = None) -> RedfishClient:
    bmc = host.bmc
    where = f"{host.name} ({host.location})"
    if bmc is None:
        raise NumaforgeError("host has no bmc section", where, "add bmc: {url: https://..., password: env:VAR}")
    if bmc.password is None:
        raise NumaforgeError("bmc.password is not set", where, "set bmc.password: env:VARIABLE or file:/path")
    insecure = opts.insecure or bmc.insecure
    if bmc.ca_bundle and not insecure and not os.path.isfile(os.path.expanduser(bmc.ca_bundle)):
        raise NumaforgeError(f"bmc.ca_bundle {bmc.ca_bundle} does not exist", where,
                             "point bmc.ca_bundle at the PEM file of the CA that signed the BMC certificate")
    if not bmc.url.startswith("https://") and not insecure:
        raise NumaforgeError(f"bmc.url {bmc.url} is not https", where,
                             "use https://; plain http only with --insecure on a lab network")
    password = bmc.password.resolve()
    client = RedfishClient(bmc.url, bmc.username, password, host=host.name,
                           ca_file=os.path.expanduser(bmc.ca_bundle) if bmc.ca_bundle else None,
                           insecure=insecure, policy=opts.policy)
    if cache is not None:
        key = shape_key(host)
        client.shape = cache.claim(key, wait=opts.policy.connect_timeout + opts.policy.read_timeout)
        if client.shape is not None:
            client.known_login_url = client.shape.login_url
        elif key:
            client.on_close.append(lambda: cache.release(key))
    return client


# -- read -----------------------------------------------------------------------------------------------------
def _link(doc: dict, *keys) -> str | None:
    cur: Any = doc
    for k in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    if isinstance(cur, dict):
        cur = cur.get("@odata.id")
    return _path(cur) if isinstance(cur, str) else None


def find_system(client: RedfishClient, host) -> tuple[str, dict]:
    coll = _link(client.ensure_root(), "Systems")
    where = f"{host.name} ({client.base_url})"
    if not coll:
        raise RedfishError("the service root has no Systems collection", where, "is this a Redfish BMC?")
    sid = host.bmc.system_id
    if sid:
        path = coll.rstrip("/") + "/" + sid
        r = client.request("GET", path)
        if r.status == 404:
            members = client.get(coll).body.get("Members") or []
            ids = [_path(m.get("@odata.id", "")).rstrip("/").rsplit("/", 1)[-1] for m in members]
            raise RedfishError(f"system '{sid}' not found", where,
                               f"set bmc.system_id to one of: {', '.join(ids) or 'none'}")
        if r.status >= 400:
            raise RedfishError(f"GET {path} answered {r.status}: {r.error_text()}", where, "check bmc.system_id")
        return path, r.body
    members = client.get(coll).body.get("Members") or []
    if len(members) != 1:
        ids = [_path(m.get("@odata.id", "")).rstrip("/").rsplit("/", 1)[-1] for m in members]
        raise RedfishError(f"the BMC manages {len(members)} systems", where,
                           f"set bmc.system_id in the inventory to one of: {', '.join(ids) or 'none'}")
    path = _path(members[0]["@odata.id"])
    return path, client.get(path).body


def fetch_registry(client: RedfishClient, registry_id: str, bios_path: str) -> Registry:
    """Registries/<id> -> Location[].Uri -> the AttributeRegistry JSON."""
    where = f"{client.host} ({client.base_url})"
    coll = _link(client.ensure_root(), "Registries")
    if not coll:
        raise RedfishError("the service root has no Registries collection", where,
                           "the BMC does not publish its BIOS attribute registry; nothing can be validated")
    r = client.request("GET", coll.rstrip("/") + "/" + registry_id)
    if r.status == 404:
        members = client.get(coll).body.get("Members") or []
        match = None
        for m in members:
            mid = _path(m.get("@odata.id", "")).rstrip("/").rsplit("/", 1)[-1]
            if mid == registry_id or registry_id.startswith(mid) or mid.startswith(registry_id.split(".")[0]):
                match = _path(m["@odata.id"])
                break
        if not match:
            raise RedfishError(f"registry {registry_id} is not in {coll}", where,
                               "the BMC's Bios names a registry it does not publish; update the BMC firmware")
        r = client.get(match)
    elif r.status >= 400:
        raise RedfishError(f"GET registry {registry_id} answered {r.status}: {r.error_text()}", where,
                           "check the BMC's registry service")
    locations = r.body.get("Location") or []
    uri = None
    for loc in sorted(locations, key=lambda l: 0 if str(l.get("Language", "en")).startswith("en") else 1):
        if loc.get("Uri"):
            uri = _path(loc["Uri"])
            break
    if uri is None:
        raise RedfishError(f"registry {registry_id} has no local Location[].Uri", where,
                           "the BMC only publishes the registry externally; numaforge reads it from the BMC only")
    got = client.get(uri)
    doc = got.body
    if "RegistryEntries" not in doc:
        raise RedfishError(f"{uri} is not an AttributeRegistry (no RegistryEntries)", where,
                           "the BMC's registry file is malformed")
    reg = Registry.from_json(doc)
    reg.source_uri, reg.etag = uri, got.headers.get("etag")   # what confirm_registry() compares later
    client.confirmed.add(id(reg))
    return reg


def confirm_registry(client: RedfishClient, reg: Registry) -> bool:
    """A cached registry (another host's, or a past run's) serves this host only if this BMC serves the same
    document now: a HEAD of its URI must answer the ETag recorded when it was fetched. Anything else (no ETag,
    HEAD refused, another ETag) means: fetch it from this BMC."""
    if id(reg) in client.confirmed:
        return True
    if not reg.source_uri or not reg.etag:
        return False
    r = client.request("HEAD", reg.source_uri)
    if r.status < 400 and r.headers.get("etag") == reg.etag:
        client.confirmed.add(id(reg))
        return True
    return False


def _shape_system_confirmed(client: RedfishClient, host, shape: Shape) -> bool:
    """The model's system path serves this host only if this BMC's Systems collection lists it -- and, when
    the inventory names no system_id, lists nothing else (a BMC that now manages two systems is refused by
    discovery, so it must not be let through by the cache)."""
    coll = shape.system_path.rstrip("/").rsplit("/", 1)[0]
    r = client.request("GET", coll)
    if r.status >= 400:
        return False
    members = [_path(m.get("@odata.id", "")).rstrip("/") for m in r.body.get("Members") or [] if isinstance(m, dict)]
    mine = shape.system_path.rstrip("/")
    return mine in members if host.bmc.system_id else members == [mine]


def read_state(client: RedfishClient, host, cache: RegistryCache) -> BiosState:
    where = f"{host.name} ({client.base_url})"
    key = shape_key(host)
    shape = getattr(client, "shape", None)
    bios = None
    stale = False
    if shape is not None:
        # same model as a host already read in this run: go straight to its Bios; anything unexpected
        # (moved, different registry) falls back to full discovery
        r = client.request("GET", shape.bios_path) if _shape_system_confirmed(client, host, shape) else None
        if r is not None and r.status < 400 and r.body.get("AttributeRegistry") == shape.registry_id:
            system_path, system, bios_path, bios = shape.system_path, None, shape.bios_path, r.body
        else:
            stale = True
        stale = stale or client.login_url != shape.login_url
    if bios is None:
        system_path, system = find_system(client, host)
        bios_path = _link(system, "Bios")
        if not bios_path:
            raise RedfishError("the system has no Bios resource", where,
                               "this BMC does not expose BIOS settings through Redfish")
        bios = client.get(bios_path).body
    settings = bios.get("@Redfish.Settings") or {}
    settings_path = _link(settings, "SettingsObject")
    if not settings_path:
        raise RedfishError("Bios has no @Redfish.Settings SettingsObject", where,
                           "this BMC does not accept BIOS changes through Redfish (read-only BIOS resource)")
    sr = client.get(settings_path)
    registry_id = bios.get("AttributeRegistry")
    if not registry_id:
        raise RedfishError("Bios names no AttributeRegistry", where, "values cannot be validated; refusing to write")
    registry = cache.get(registry_id, lambda: fetch_registry(client, registry_id, bios_path),
                         attributes=(bios.get("Attributes") or {}).keys(),
                         confirm=lambda reg: confirm_registry(client, reg))
    if not (sr.etag or settings.get("ETag")):
        note = ("the settings object has no ETag: it is re-read right before the PATCH, which is then sent "
                "without If-Match (a change made by someone else in between cannot be detected)")
        if note not in client.warnings:
            client.warnings.append(note)
    apply_times = list(settings.get("SupportedApplyTimes") or [])
    sat = sr.body.get("@Redfish.SettingsApplyTime") or {}
    for v in sat.get("ApplyTime@Redfish.AllowableValues") or []:
        if v not in apply_times:
            apply_times.append(v)
    cfg = host.bmc.vendor if host.bmc.vendor and host.bmc.vendor != "auto" else None
    vendor, how = (cfg, "inventory bmc.vendor") if cfg else \
        ((host.hardware.vendor, "inventory hardware.vendor") if host.hardware.vendor else
         (detect_vendor(client.ensure_root(), system), "detected from the service root"))
    if (shape is None or stale) and client.login_url:
        cache.learn(key, Shape(client.login_url, system_path, bios_path, registry_id), replace=stale)
    return BiosState(vendor=vendor, system_path=system_path, system=system, bios_path=bios_path,
                     current=dict(bios.get("Attributes") or {}), settings_path=settings_path,
                     settings_attrs=dict(sr.body.get("Attributes") or {}), etag=sr.etag or settings.get("ETag"),
                     apply_times=apply_times, registry=registry, detected_by=how)


def desired_for(host, state: BiosState, opts: HostOptions):
    name = opts.profile or host.bios_profile
    if not name:
        raise ProfileError("no BIOS profile for this host", f"{host.name} ({host.location})",
                           "set bios_profile in the inventory or pass --profile NAME")
    facts = host_facts(host)
    facts["vendor"] = state.vendor
    profile = render_profile(name, facts, opts.profiles_dir)
    vmap = load_vendor_map(state.vendor, opts.vendors_dir)
    return profile, translate(profile.settings, profile.raw_for(state.vendor), vmap, state.registry, host.name)


def replan(state: BiosState, desired, host) -> Plan:
    """The plan of ``desired`` against what ``state`` read (current, pending, registry). Pure."""
    return make_plan(desired, state.registry, state.current, state.settings_attrs, host.name)


def plan_for(host, state: BiosState, opts: HostOptions):
    """Render the host's profile for the vendor read, translate and validate it, plan it: (profile, desired, plan)."""
    profile, desired = desired_for(host, state, opts)
    return profile, desired, replan(state, desired, host)


def _record_plan(result: HostResult, state: BiosState, profile, plan: Plan) -> None:
    result.data.update({
        "vendor": state.vendor, "vendor_from": state.detected_by, "profile": profile.name,
        "profile_chain": profile.chain, "system": state.system_path, "settings_object": state.settings_path,
        "registry": state.registry.id, "plan": [i.as_dict() for i in plan.items],
        "by_display_name": [f"{i.setting} -> {i.attribute} ({i.resolved})" for i in plan.items
                            if i.resolved.startswith("by display name")],
    })


def _finish(result: HostResult, client: RedfishClient | None) -> None:
    if client is not None:
        result.data["requests"] = client.count()
        result.data["patches"] = client.count("PATCH")
        result.data["auth"] = client.auth_method
        if client.warnings:
            result.data["warnings"] = list(client.warnings)


def _fail(result: HostResult, exc: BaseException) -> None:
    """Mark the host failed; the message also says what this run had already done to it."""
    result.status = "failed"
    result.message = exc.render() if isinstance(exc, NumaforgeError) else f"{type(exc).__name__}: {exc}"
    done = []
    if result.data.get("changed"):
        done.append(f"written before it stopped: {', '.join(result.data['changed'])} (pending until a reset)")
    if result.data.get("reset_requested"):
        done.append(f"a reset was requested at {result.data['reset_requested']}")
    if done:
        result.message += "\n  " + "; ".join(done)


@contextmanager
def bmc_session(host, opts: HostOptions, cache: RegistryCache, result: HostResult):
    """connect -> read for one host, as steps of ``result``; yields (client, state). On the way out the session
    is logged out and the request counts and warnings go into ``result.data`` (also when the body failed)."""
    client = None
    try:
        with result.step("connect"):
            client = connect(host, opts, cache)
        with client:
            with result.step("read"):
                state = read_state(client, host, cache)
            yield client, state
    finally:
        _finish(result, client)


# -- plan ----------------------------------------------------------------------------------------------------
def plan_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> Plan | None:
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            with result.step("plan"):
                profile, desired, plan = plan_for(host, state, opts)
        _record_plan(result, state, profile, plan)
        result.data.update({"would_change": sorted(plan.changes), "pending": list(plan.pending),
                            "verified": [i.attribute for i in plan.items if i.action == "ok"]})
        n, p = len(plan.changes), len(plan.pending)
        result.status = "unchanged" if not n and not p else "ok"
        result.message = (f"{n} to change" if n else "no change") + (f", {p} pending a reset" if p else "") + \
                         f" ({state.vendor}, profile {profile.name})"
        return plan
    except NumaforgeError as exc:
        _fail(result, exc)
        return None


# -- apply ---------------------------------------------------------------------------------------------------
def system_of(client: RedfishClient, state: BiosState) -> dict:
    """The ComputerSystem document, read on first use."""
    if state.system is None:
        state.system = client.get(state.system_path).body
    return state.system


def _jobs_collection(client: RedfishClient, state: BiosState) -> str | None:
    """Dell-like config jobs: Manager Links/Oem/Dell/Jobs, Manager Jobs, or the standard JobService."""
    mgr = None
    managed = (system_of(client, state).get("Links") or {}).get("ManagedBy") or []
    if managed:
        mgr_path = _path(managed[0].get("@odata.id", ""))
        r = client.request("GET", mgr_path)
        if r.status < 400:
            mgr = r.body
            for keys in (("Links", "Oem", "Dell", "Jobs"), ("Oem", "Dell", "Jobs"), ("Jobs",)):
                link = _link(mgr, *keys)
                if link:
                    return link
            r2 = client.request("GET", mgr_path.rstrip("/") + "/Jobs")
            if r2.status < 400 and "Members" in r2.body:
                return mgr_path.rstrip("/") + "/Jobs"
    js = _link(client.ensure_root(), "JobService")
    if js:
        r = client.request("GET", js)
        if r.status < 400:
            return _link(r.body, "Jobs")
    return None


def _job_targets_bios(job: dict, state: BiosState) -> bool:
    text = " ".join(str(job.get(k, "")) for k in ("JobType", "Name", "Message", "TargetSettingsURI", "Description"))
    low = text.lower()
    return "bios" in low or state.settings_path.lower().rstrip("/") in low


def _job_state(job: dict) -> str:
    return str(job.get("JobState") or job.get("TaskState") or (job.get("Oem") or {}).get("Dell", {}).get("JobState")
               or "Unknown")


def active_bios_jobs(client: RedfishClient, jobs_path: str, state: BiosState) -> list[dict]:
    out = []
    for m in client.get(jobs_path).body.get("Members") or []:
        job = m if "JobState" in m else client.get(_path(m["@odata.id"])).body
        if _job_state(job) in ACTIVE_JOB_STATES and _job_targets_bios(job, state):
            out.append(job)
    return out


def _ensure_job(client: RedfishClient, state: BiosState, host, job_path: str | None, jobs_path: str | None,
                opts: HostOptions) -> str:
    """The config job that will apply the pending values: the one our PATCH created, an existing one (adopted,
    never replaced), or a new one (POST {"TargetSettingsURI": <settings object>} to the jobs collection)."""
    if job_path:
        return job_path
    jobs_path = jobs_path or _jobs_collection(client, state)
    if not jobs_path:
        raise RedfishError("no jobs collection found to create the BIOS config job",
                           f"{host.name} ({client.base_url})",
                           "without a config job the pending values never apply; check the iDRAC firmware")
    existing = active_bios_jobs(client, jobs_path, state)
    if existing:
        return _path(existing[0].get("@odata.id"))
    jr = client.post(jobs_path, {"TargetSettingsURI": state.settings_path})
    if jr.status >= 400:
        raise RedfishError(f"creating the BIOS config job answered {jr.status}: {jr.error_text()}",
                           f"{host.name} ({client.base_url})",
                           "the values are pending without a job; re-run, or create the job on the iDRAC")
    link = jr.headers.get("location") or jr.body.get("@odata.id")
    if not link:
        raise RedfishError("the BMC created a config job but did not say where (no Location)",
                           f"{host.name} ({client.base_url})", "check the iDRAC job queue")
    return _path(link)


def _wait_job(client: RedfishClient, job_path: str, want: set[str], timeout: float, poll: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(job_path).body
        st = _job_state(job)
        if st in want or st in FINAL_JOB_BAD or st in FINAL_JOB_OK:
            return job
        if time.monotonic() > deadline:
            return job
        time.sleep(poll)


def _patch_once(client: RedfishClient, state: BiosState, changes: dict, use_apply_time: bool):
    body: dict[str, Any] = {"Attributes": changes}
    if use_apply_time:
        body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
    return client.patch(state.settings_path, body, state.etag)


def apply_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> None:
    """Plan, then (only if something differs) PATCH, job, optional reboot and verify."""
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            with result.step("plan"):
                profile, desired, plan = plan_for(host, state, opts)
            _record_plan(result, state, profile, plan)
            result.data.update({"changed": [], "pending": list(plan.pending), "verified": [], "mismatches": []})
            journal = opts.journal if opts.reboot else None
            if journal is not None and journal.action(host.name) == "verify":
                # an interrupted run already asked this host to reset: wait for that reset, never send another
                # (whatever the plan says now: mid power-cycle a BMC may show the values neither pending nor
                # current yet)
                when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(
                    journal.data(host.name, "reboot-requested").get("time") or 0))
                note = f"reset requested by the previous run at {when}; waiting for it, not resetting again"
                with result.step("resume") as s:
                    s.detail = {"journal": str(journal.path), "phases": journal.phases(host.name), "note": note,
                                "waited": wait_back(client, state, desired_values(plan), opts.timeouts)}
                state = read_state(client, host, cache)
                plan = replan(state, desired, host)
                result.data["resumed"] = True
                result.data["reset_requested_by_previous_run"] = when
                if plan.changes or plan.needs_reset:
                    differ = sorted({i.attribute for i in plan.items if i.current != i.desired})
                    raise RedfishError(
                        f"{note}: after {s.detail['waited']['seconds']:g} s (--power-timeout) the host "
                        f"(power {s.detail['waited']['power']}) does not show the new values yet "
                        f"({', '.join(differ) or 'settings still pending'}); it was not reset again",
                        f"{host.name} ({client.base_url})",
                        "check the host (console, power state); once it is back on, re-run the same command: it "
                        f"verifies and never resets; to start over instead, delete {journal.path}")
            is_dell_jobs = state.vendor == "dell"
            jobs_path = None
            job_path = None
            if plan.changes:
                if is_dell_jobs:
                    with result.step("job-check") as s:
                        jobs_path = _jobs_collection(client, state)
                        if jobs_path:
                            active = active_bios_jobs(client, jobs_path, state)
                            if active:
                                ids = ", ".join(f"{j.get('Id')} ({_job_state(j)})" for j in active)
                                s.detail = {"conflicting_jobs": ids}
                                raise JobConflictError(
                                    f"a BIOS configuration job is already queued: {ids}; nothing was written",
                                    f"{host.name} ({client.base_url}{jobs_path})",
                                    "let it run (reboot the host, e.g. `invoke bios-apply --reboot` after it "
                                    "completes) or delete it on the BMC if it is stale, then re-run")
                with result.step("patch") as s:
                    use_at = "OnReset" in state.apply_times
                    if not state.etag:
                        # no ETag, no If-Match: re-read right before writing (the plan says so in its warnings)
                        state = read_state(client, host, cache)
                        plan = replan(state, desired, host)
                        _record_plan(result, state, profile, plan)
                        result.data["pending"] = list(plan.pending)
                        s.detail = "no ETag on the settings object: re-read and re-planned right before the PATCH"
                    changes = plan.changes
                    r = _patch_checked(client, state, changes, use_at, result) if changes else None
                    if r is not None and r.status == 412:
                        s.detail = "412 Precondition Failed: settings changed since read; re-read and re-planned"
                        state = read_state(client, host, cache)
                        plan = replan(state, desired, host)
                        _record_plan(result, state, profile, plan)
                        result.data["pending"] = list(plan.pending)
                        result.data["replanned_after_412"] = True
                        changes = plan.changes
                        if changes:
                            r = _patch_checked(client, state, changes, use_at, result)
                            if r.status == 412:
                                raise ConcurrentChangeError(
                                    "the BIOS settings object changed again while writing (412 twice); nothing "
                                    "more was written", f"{host.name} ({client.base_url}{state.settings_path})",
                                    "someone else is changing this BIOS: coordinate, then re-run")
                    if changes:
                        result.data["changed"] = sorted(changes)
                        result.data["pending"] = sorted(set(result.data["pending"]) | set(changes))
                        loc = r.headers.get("location")
                        if loc and "job" in loc.lower():
                            job_path = _path(loc)
                        if journal is not None:
                            journal.record(host.name, "patched", attributes=sorted(changes))
            if is_dell_jobs and (result.data["changed"] or plan.pending):
                # iDRAC applies pending BIOS values only through a config job: make sure exactly one exists
                with result.step("job") as s:
                    job_path = _ensure_job(client, state, host, job_path, jobs_path, opts)
                    job = _wait_job(client, job_path, {"Scheduled"}, opts.timeouts.job, opts.timeouts.poll)
                    result.data["job"] = {"id": job.get("Id"), "state": _job_state(job), "path": job_path}
                    s.detail = result.data["job"]
                    if _job_state(job) in FINAL_JOB_BAD:
                        raise RedfishError(f"BIOS config job {job.get('Id')} {_job_state(job)}: "
                                           f"{job.get('Message', '')}", f"{host.name} ({client.base_url})",
                                           "see the job's message on the iDRAC")
            if opts.reboot and plan.needs_reset:
                with result.step("reboot") as s:
                    if journal is not None:   # on disk before the reset is requested
                        journal.record(host.name, "reboot-requested")
                    s.detail = reboot(client, state, desired_values(plan), opts.timeouts, result)
                    if journal is not None:
                        journal.record(host.name, "rebooted")
                if job_path:
                    job = _wait_job(client, job_path, FINAL_JOB_OK, opts.timeouts.job, opts.timeouts.poll)
                    result.data["job"] = {"id": job.get("Id"), "state": _job_state(job), "path": job_path}
                    if _job_state(job) not in FINAL_JOB_OK:
                        result.data["job"]["message"] = str(job.get("Message", ""))
                with result.step("verify") as s:
                    verify_into(client, state, plan, result)
                    s.detail = {"verified": len(result.data["verified"]),
                                "mismatches": len(result.data["mismatches"])}
            elif not plan.needs_reset:
                result.data["verified"] = [i.attribute for i in plan.items]
        mism = result.data.get("mismatches") or []
        if journal is not None and not mism:
            journal.record(host.name, "verified")
        if mism:
            result.status = "failed"
            result.message = "after reboot: " + "; ".join(
                f"{m['attribute']} is {m['current']!r}, wanted {m['desired']!r}" for m in mism)
            job = result.data.get("job") or {}
            if job and job.get("state") not in FINAL_JOB_OK:
                result.message += f" (config job {job.get('id')} {job.get('state')}: {job.get('message', '')})"
        elif result.data.get("resumed"):
            result.status = "changed"
            result.message = (f"resumed an interrupted run: reset requested by the previous run at "
                              f"{result.data['reset_requested_by_previous_run']}; waited for it, not reset again; "
                              f"{len(result.data['verified'])} verified")
        elif result.data["changed"] or (opts.reboot and plan.needs_reset):
            result.status = "changed"
            parts = [f"{len(result.data['changed'])} written"]
            if opts.reboot:
                parts.append(f"rebooted, {len(result.data['verified'])} verified")
            else:
                parts.append(f"{len(result.data['pending'])} pending until the host resets (use --reboot)")
            result.message = ", ".join(parts)
        else:
            result.status = "unchanged"
            result.message = "no change" + (f"; {len(plan.pending)} already pending a reset (use --reboot)"
                                            if plan.pending else "")
    except NumaforgeError as exc:
        _fail(result, exc)


def _patch_checked(client: RedfishClient, state: BiosState, changes: dict, use_apply_time: bool,
                   result: HostResult):
    """PATCH once (the adapter retries only a 503). If the answer is an error or is lost, re-read the settings
    object -- never re-send blindly: when it holds every value we sent, the BMC did act; otherwise report what it
    holds (nothing is half-written by us: the PATCH is one request) and stop."""
    try:
        r = _patch_once(client, state, changes, use_apply_time)
    except RedfishRedirectError:
        raise   # answered, and not carried out: nothing to re-read
    except RedfishError as exc:
        r, lost = None, exc
    if r is not None and (r.status < 400 or r.status == 412):
        return r
    if r is not None and r.status in (401, 403):
        # refused before the BMC looked at the attributes: an authentication/authorisation problem, not a value
        kind = RedfishAuthError if r.status == 401 else RedfishError
        raise kind(f"PATCH {state.settings_path} answered {r.status} "
                   f"({'authentication refused: the session is no longer valid' if r.status == 401 else 'forbidden'}"
                   f"): {r.error_text()}; the BMC refused the request, nothing was written",
                   f"{client.host} ({client.base_url})",
                   "check bmc.username / the password reference and the BMC's session timeout, then re-run"
                   if r.status == 401 else
                   "the BMC account needs the ConfigureComponents privilege (Administrator/Operator role)")
    what = f"PATCH {state.settings_path} " + (f"answered {r.status}: {r.error_text()}" if r is not None
                                              else f"got no answer ({lost.what})")
    try:
        attrs = client.get(state.settings_path).body.get("Attributes") or {}
    except NumaforgeError:
        raise RedfishError(what + "; the settings object could not be re-read, so the outcome is unknown",
                           f"{client.host} ({client.base_url})",
                           "re-run `invoke bios-plan` to see what is pending, then `bios-apply` again") from None
    now = pending_values(state.current, attrs)
    if all(now.get(k) == v for k, v in changes.items()):
        client.warnings.append(what + "; re-read: the settings object holds every value sent, continuing")
        from .redfish import Response
        return Response(200, {}, {}, state.settings_path)
    before = pending_values(state.current, state.settings_attrs)
    extra = sorted(k for k in now if before.get(k) != now.get(k))
    held = (f"the settings object now holds new values for: {', '.join(extra)}" if extra
            else "the settings object is unchanged: nothing was written")
    fix = ("fix the attribute the BMC names, then re-run" if r is not None and 400 <= r.status < 500
           else "re-run when the BMC is healthy (the plan writes only what still differs)")
    raise RedfishError(f"{what}; {held}", f"{client.host} ({client.base_url})", fix)


def desired_values(plan: Plan) -> dict[str, Any]:
    return {i.attribute: i.desired for i in plan.items}


# -- reboot + verify -------------------------------------------------------------------------------------------
def _reset_target(client: RedfishClient, state: BiosState) -> tuple[str, list[str]]:
    action = (system_of(client, state).get("Actions") or {}).get("#ComputerSystem.Reset") or {}
    target = action.get("target")
    if not target:
        raise RedfishError("the system has no ComputerSystem.Reset action", state.system_path,
                           "reboot the host another way; the values stay pending until it resets")
    return _path(target), list(action.get("ResetType@Redfish.AllowableValues") or [])


def _power(client: RedfishClient, state: BiosState) -> str:
    return str(client.get(state.system_path).body.get("PowerState") or "Unknown")


def _applied(client: RedfishClient, state: BiosState, want: dict[str, Any]) -> bool:
    cur = client.get(state.bios_path).body.get("Attributes") or {}
    return all(cur.get(k) == v for k, v in want.items())


def reboot(client: RedfishClient, state: BiosState, want: dict[str, Any], t: Timeouts,
           result: HostResult | None = None) -> dict:
    """Graceful restart, force after ``t.graceful``; wait until On and the new values are current. Each reset
    request is noted in ``result.data["resets"]`` before it is sent (the report says so even if the run stops)."""
    target, allowed = _reset_target(client, state)
    log: dict[str, Any] = {"resets": []}

    def post(kind: str) -> None:
        if allowed and kind not in allowed:
            return
        budget.check(f"the {kind} reset request")   # an interrupted run stops here, before anything is noted
        if result is not None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result.data.setdefault("resets", []).append({"type": kind, "requested": stamp})
            result.data.setdefault("reset_requested", stamp)
        r = client.post(target, {"ResetType": kind})
        log["resets"].append({"type": kind, "status": r.status})
        if r.status >= 400:
            raise RedfishError(f"ComputerSystem.Reset {kind} answered {r.status}: {r.error_text()}",
                               f"{client.host} ({client.base_url})", "reset the host another way")

    first = "On" if _power(client, state) == "Off" else "GracefulRestart"
    if allowed and first not in allowed:
        first = next((k for k in ("GracefulRestart", "ForceRestart", "PowerCycle") if k in allowed), first)
    post(first)
    start = time.monotonic()
    forced = first != "GracefulRestart"
    seen_off = False
    while True:
        time.sleep(t.poll)
        power = _power(client, state)
        if power != "On":
            seen_off = True
        elif seen_off or _applied(client, state, want):
            break
        elapsed = time.monotonic() - start
        if not forced and not seen_off and elapsed > t.graceful:
            post("ForceRestart")
            forced = True
            log["forced_after_s"] = round(elapsed, 1)
        if elapsed > t.power_on + (t.graceful if forced else 0):
            raise RedfishError(f"host did not restart and come back on within {elapsed:.0f} s (PowerState {power})",
                               f"{client.host} ({client.base_url})",
                               "check the host console; the BIOS values may still be pending")
    # the BMC reports the new values once POST has finished: give it up to t.settle seconds
    settle_until = time.monotonic() + t.settle
    while not _applied(client, state, want) and time.monotonic() < settle_until:
        time.sleep(t.poll)
    log["seconds"] = round(time.monotonic() - start, 1)
    return log


def wait_back(client: RedfishClient, state: BiosState, want: dict[str, Any], t: Timeouts) -> dict:
    """Resume after a crash mid-reboot: no reset request, only wait until the host is On with the new values
    current (or the power-on timeout passes; verification then reports what is still pending)."""
    start = time.monotonic()
    while time.monotonic() - start < t.power_on:
        if _power(client, state) == "On" and _applied(client, state, want):
            break
        time.sleep(t.poll)
    return {"seconds": round(time.monotonic() - start, 1), "power": _power(client, state)}


def verify_into(client: RedfishClient, state: BiosState, plan: Plan, result: HostResult) -> None:
    cur = client.get(state.bios_path).body.get("Attributes") or {}
    verified, mism = [], []
    for i in plan.items:
        if cur.get(i.attribute) == i.desired:
            verified.append(i.attribute)
        else:
            mism.append({"attribute": i.attribute, "setting": i.setting, "desired": i.desired,
                         "current": cur.get(i.attribute)})
    result.data["verified"] = verified
    result.data["mismatches"] = mism
    result.data["pending"] = [] if not mism else [m["attribute"] for m in mism]


def verify_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> None:
    """BMC-side verification: current BIOS values equal the profile's desired values, per attribute."""
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            with result.step("verify"):
                profile, desired, plan = plan_for(host, state, opts)
                _record_plan(result, state, profile, plan)
                verified = [i.attribute for i in plan.items if i.current == i.desired]
                mism = [{"attribute": i.attribute, "setting": i.setting, "desired": i.desired,
                         "current": i.current, "pending": i.pending} for i in plan.items if i.current != i.desired]
                result.data.update({"verified": verified, "mismatches": mism,
                                    "pending": [m["attribute"] for m in mism if m["pending"] == m["desired"]]})
        if mism:
            result.status = "failed"
            result.message = "; ".join(
                f"{m['attribute']} ({m['setting']}) is {m['current']!r}, wanted {m['desired']!r}"
                + (" (pending a reset)" if m["pending"] == m["desired"] else "") for m in mism)
        else:
            result.status = "ok"
            result.message = f"{len(verified)} attributes verified ({state.vendor}, profile {profile.name})"
    except NumaforgeError as exc:
        _fail(result, exc)


# -- many hosts -------------------------------------------------------------------------------------------------
def run_hosts(hosts, action: str, opts: HostOptions, *, forks: int = 8, canary: int = 0, batch: int = 0,
              max_fail_pct: float = 100.0, progress: bool = False):
    """Run plan/apply/verify on every host with bounded concurrency (numaforge.fleet); one registry cache per run.

    A failing host never stops the others (unless canary/max-fail say so). Returns the FleetOutcome.
    """
    from ..fleet import run_fleet

    fn = {"plan": plan_host, "apply": apply_host, "verify": verify_host}[action]
    cache = RegistryCache(persist=discovery_dir() if opts.discovery_cache else None)

    def one(host) -> HostResult:
        result = HostResult(host.name)
        try:
            fn(host, opts, cache, result)
        except Exception as exc:   # a bug: keep what the host recorded (written, reset) and let the runner stop
            _fail(result, exc)
            result.data[UNEXPECTED_ERROR] = f"{type(exc).__name__}: {exc}"
        return result

    outcome = run_fleet(hosts, one, forks=forks, canary=canary, batch=batch, max_fail_pct=max_fail_pct,
                        progress=progress, host_timeout=opts.host_timeout)
    outcome.registry_fetches = cache.fetches
    outcome.registry_loaded = cache.loaded
    return outcome
