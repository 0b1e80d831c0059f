"""Per-host BIOS flow over Redfish: read -> render/map/validate/plan -> PATCH -> config job -> reboot -> verify.

Explicit states per host (``HostApply``, in the order the pure ``next_state`` gives, like numaforge.livepatch):
``read`` (system, Bios, settings object, registry), ``plan`` (profile render, vendor map, registry validation,
diff -- all before any write), ``job-check`` (job BMCs: a queued BIOS job stops the host before any write),
``patch`` (one PATCH of only the differing attributes to the settings object named by @Redfish.Settings,
If-Match its ETag; on 412 re-read once and re-plan; a lost answer is re-read, never re-sent), ``job``
(Dell-like BMCs: a BIOS config job, never clobbering an existing one), ``reboot`` (numaforge.bios.power:
GracefulRestart; ForceRestart only for an OS that ignored it, never in POST; a Dell host only once its job is
Scheduled), ``verify`` (current == desired), ``result``. The BMC is read
and written through the client-side resources (numaforge.bios.resources) where they fit.

Every step records into a ``HostResult`` (numaforge.report); nothing here prints.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import NumaforgeError
from ..fleet import Rollout, run_fleet
from ..report import UNEXPECTED_ERROR, HostResult
from . import discovery
from .discovery import RegistryCache, Shape, discovery_dir, shape_key
from .errors import (
    ConcurrentChangeError,
    JobConflictError,
    ProfileError,
    RedfishAuthError,
    RedfishError,
    RedfishHTTPError,
    RedfishPreconditionFailedError,
    RedfishRedirectError,
)
from .exchange import Response, RetryPolicy, path_of
from .plan import Plan, make_plan, pending_values, staged_mismatches
from .power import Timeouts, reboot, wait_back
from .profile import host_facts, render_profile
from .redfish import RedfishClient
from .registry import Registry
from .resources import Job, JobCollection, ServiceRoot, SettingsObject, System, find_jobs, link_path
from .resources.jobs import FINAL_BAD, FINAL_OK
from .vendors import detect_vendor, load_vendor_map, translate

FINAL_JOB_OK = FINAL_OK
FINAL_JOB_BAD = FINAL_BAD


@dataclass
class BiosState:
    vendor: str
    system_path: str
    system: dict | None  # None until needed (skipped for hosts of a model already seen)
    bios_path: str
    current: dict[str, Any]
    settings_path: str
    settings_attrs: dict[str, Any]
    etag: str | None
    apply_times: list[str]
    registry: Registry
    detected_by: str = ""
    model: str = ""  # the System's Model (the vendor map's generation may need it: Supermicro)


@dataclass
class HostOptions:
    profile: str | None = None  # overrides host.bios_profile
    insecure: bool = False
    reboot: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    profiles_dir: str | None = None
    vendors_dir: str | None = None
    journal: Any = None  # numaforge.journal.Journal of a --reboot run (resume after a crash)
    discovery_cache: bool = True  # keep registries and per-model paths on disk (numaforge.bios.discovery)


# -- connection -------------------------------------------------------------------------------------------
def connect(host, opts: HostOptions, cache: "RegistryCache | None" = None) -> RedfishClient:
    bmc = host.bmc
    where = f"{host.name} ({host.location})"
    if bmc is None:
        raise NumaforgeError("host has no bmc section", where, "add bmc: {url: https://..., password: env:VAR}")
    if bmc.password is None:
        raise NumaforgeError("bmc.password is not set", where, "set bmc.password: env:VARIABLE or file:/path")
    insecure = opts.insecure or bmc.insecure
    if bmc.ca_bundle and not insecure and not os.path.lexists(os.path.expanduser(bmc.ca_bundle)):
        raise NumaforgeError(
            f"bmc.ca_bundle {bmc.ca_bundle} does not exist",
            where,
            "point bmc.ca_bundle at the PEM file of the CA that signed the BMC certificate",
        )
    if not bmc.url.startswith("https://") and not insecure:
        raise NumaforgeError(
            f"bmc.url {bmc.url} is not https", where, "use https://; plain http only with --insecure on a lab network"
        )
    password = bmc.password.resolve()
    client = RedfishClient(
        bmc.url,
        bmc.username,
        password,
        host=host.name,
        ca_file=os.path.expanduser(bmc.ca_bundle) if bmc.ca_bundle else None,
        insecure=insecure,
        policy=opts.policy,
        auth=bmc.auth,
    )
    if cache is not None:
        key = shape_key(host)
        client.shape = cache.claim(key, wait=opts.policy.connect_timeout + opts.policy.read_timeout)
        if client.shape is not None:
            client.known_login_url = client.shape.login_url
        elif key:
            client.on_close.append(lambda: cache.release(key))
    return client


# -- read -----------------------------------------------------------------------------------------------------
_link = link_path  # (doc, *keys) -> the path of doc[k1][k2]...["@odata.id"], or None


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
            ids = [path_of(m.get("@odata.id", "")).rstrip("/").rsplit("/", 1)[-1] for m in members]
            raise RedfishError(
                f"system '{sid}' not found", where, f"set bmc.system_id to one of: {', '.join(ids) or 'none'}"
            )
        if r.status >= 400:
            raise RedfishError(f"GET {path} answered {r.status}: {r.error_text()}", where, "check bmc.system_id")
        return path, r.body
    members = client.get(coll).body.get("Members") or []
    if len(members) != 1:
        ids = [path_of(m.get("@odata.id", "")).rstrip("/").rsplit("/", 1)[-1] for m in members]
        raise RedfishError(
            f"the BMC manages {len(members)} systems",
            where,
            f"set bmc.system_id in the inventory to one of: {', '.join(ids) or 'none'}",
        )
    path = path_of(members[0]["@odata.id"])
    return path, client.get(path).body


def fetch_registry(client: RedfishClient, registry_id: str, bios_path: str) -> Registry:
    """The Bios's AttributeRegistry, looked up per DSP0266 (numaforge.bios.discovery.fetch_registry)."""
    return discovery.fetch_registry(client, registry_id)


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
    members = [path_of(m.get("@odata.id", "")).rstrip("/") for m in r.body.get("Members") or [] if isinstance(m, dict)]
    mine = shape.system_path.rstrip("/")
    return mine in members if host.bmc.system_id else members == [mine]


def read_state(client: RedfishClient, host, cache: RegistryCache) -> BiosState:
    where = f"{host.name} ({client.base_url})"
    key = shape_key(host)
    shape = getattr(client, "shape", None)
    bios = None
    stale = False
    if shape is not None:
        # same model as a host already read in this run: go straight to its Bios, every read in one round trip
        # (discovery.cached_reads); anything unexpected (moved, different registry) falls back to full discovery
        client.prefetch(discovery.cached_reads(shape, cache))
        r = client.request("GET", shape.bios_path) if _shape_system_confirmed(client, host, shape) else None
        if r is not None and r.status < 400 and r.body.get("AttributeRegistry") == shape.registry_id:
            system_path, system, bios_path, bios, model = shape.system_path, None, shape.bios_path, r.body, shape.model
        else:
            stale = True
        stale = stale or client.login_url != shape.login_url
    if bios is None:
        client.prefetch(discovery.discovery_reads(client, host))  # the service root and Systems at once
        system_path, system = find_system(client, host)
        bios_path, model = _link(system, "Bios"), str(system.get("Model") or "")
        if not bios_path:
            raise RedfishError(
                "the system has no Bios resource", where, "this BMC does not expose BIOS settings through Redfish"
            )
        bios = client.get(bios_path).body
        client.prefetch(discovery.bios_reads(client, bios, cache, key is not None))  # settings + registry at once
    settings = bios.get("@Redfish.Settings") or {}
    settings_path = _link(settings, "SettingsObject")
    if not settings_path:
        raise RedfishError(
            "Bios has no @Redfish.Settings SettingsObject",
            where,
            "this BMC does not accept BIOS changes through Redfish (read-only BIOS resource)",
        )
    sr = client.get(settings_path)
    registry_id = bios.get("AttributeRegistry")
    if not registry_id:
        raise RedfishError("Bios names no AttributeRegistry", where, "values cannot be validated; refusing to write")
    learnt = Shape(client.login_url, system_path, bios_path, registry_id, model=model, settings_path=settings_path)
    if learnt != shape and client.login_url:
        # the model's paths are known now: hosts waiting for them go on (their registry comes from the cache
        # below, which fetches it once per id while they read their own Bios and settings)
        cache.learn(key, learnt, replace=shape is not None)
    registry = cache.get(
        registry_id,
        lambda: fetch_registry(client, registry_id, bios_path),
        attributes=(bios.get("Attributes") or {}).keys(),
        confirm=lambda reg: confirm_registry(client, reg),
    )
    if not (sr.etag or settings.get("ETag")):
        note = (
            "the settings object has no ETag: it is re-read right before the PATCH, which is then sent "
            "without If-Match (a change made by someone else in between cannot be detected)"
        )
        if note not in client.warnings:
            client.warnings.append(note)
    client.prefetched.clear()  # an early answer nobody used must not stand in for a later read
    vendor, how = _vendor_of(client, host, system)
    return BiosState(
        vendor=vendor,
        system_path=system_path,
        system=system,
        bios_path=bios_path,
        current=dict(bios.get("Attributes") or {}),
        settings_path=settings_path,
        settings_attrs=dict(sr.body.get("Attributes") or {}),
        etag=sr.etag or settings.get("ETag"),
        apply_times=_apply_times(settings, sr.body),
        registry=registry,
        detected_by=how,
        model=model,
    )


def _apply_times(settings: dict, settings_object: dict) -> list[str]:
    """The apply times the Bios's @Redfish.Settings and the settings object's SettingsApplyTime allow."""
    apply_times = list(settings.get("SupportedApplyTimes") or [])
    sat = settings_object.get("@Redfish.SettingsApplyTime") or {}
    for v in sat.get("ApplyTime@Redfish.AllowableValues") or []:
        if v not in apply_times:
            apply_times.append(v)
    return apply_times


def _vendor_of(client: RedfishClient, host, system: dict | None) -> tuple[str, str]:
    """(vendor, how it is known): the inventory's bmc.vendor, its hardware.vendor, else the service root's."""
    cfg = host.bmc.vendor if host.bmc.vendor and host.bmc.vendor != "auto" else None
    if cfg:
        return cfg, "inventory bmc.vendor"
    if host.hardware.vendor:
        return host.hardware.vendor, "inventory hardware.vendor"
    return detect_vendor(client.ensure_root(), system), "detected from the service root"


def desired_for(host, state: BiosState, opts: HostOptions):
    name = opts.profile or host.bios_profile
    if not name:
        raise ProfileError(
            "no BIOS profile for this host",
            f"{host.name} ({host.location})",
            "set bios_profile in the inventory or pass --profile NAME",
        )
    facts = host_facts(host)
    facts["vendor"] = state.vendor
    profile = render_profile(name, facts, opts.profiles_dir)
    vmap = load_vendor_map(state.vendor, opts.vendors_dir)
    raw = profile.raw_for(state.vendor)
    return profile, translate(profile.settings, raw, vmap, state.registry, host.name, profile.optional, state.model)


def replan(state: BiosState, desired, host) -> Plan:
    """The plan of ``desired`` against what ``state`` read (current, pending, registry). Pure."""
    return make_plan(desired, state.registry, state.current, state.settings_attrs, host.name)


def plan_for(host, state: BiosState, opts: HostOptions):
    """Render the host's profile for the vendor read, translate and validate it, plan it: (profile, desired, plan)."""
    profile, desired = desired_for(host, state, opts)
    return profile, desired, replan(state, desired, host)


def _record_plan(result: HostResult, state: BiosState, profile, plan: Plan) -> None:
    result.data.update(
        {
            "vendor": state.vendor,
            "vendor_from": state.detected_by,
            "profile": profile.name,
            "profile_chain": profile.chain,
            "system": state.system_path,
            "settings_object": state.settings_path,
            "registry": state.registry.id,
            "plan": [i.as_dict() for i in plan.items],
            "by_display_name": [
                f"{i.setting} -> {i.attribute} ({i.resolved})" for i in plan.items if "by display name" in i.resolved
            ],
            "unverified": [f"{i.setting} -> {i.attribute}" for i in plan.items if "UNVERIFIED: " in i.resolved],
        }
    )


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
        result.data.update(
            {
                "would_change": sorted(plan.changes),
                "pending": list(plan.pending),
                "verified": [i.attribute for i in plan.items if i.action == "ok"],
            }
        )
        n, p = len(plan.changes), len(plan.pending)
        result.status = "unchanged" if not n and not p else "ok"
        result.message = (
            (f"{n} to change" if n else "no change")
            + (f", {p} pending a reset" if p else "")
            + f" ({state.vendor}, profile {profile.name})"
        )
        return plan
    except NumaforgeError as exc:
        _fail(result, exc)
        return None


# -- apply: one host as an explicit state object --------------------------------------------------------------
#
# plan -> [resume] -> job-check -> patch (412: re-read, re-plan, once) -> job -> reboot -> verify -> result.
# ``next_state`` (pure) decides which state comes next from what the host's run knows so far (``Progress``);
# ``HostApply`` carries the state between the steps and does each one; ``apply_host`` runs them, each as a step
# of the HostResult, inside one BMC session that is always logged out; ``outcome`` (pure) turns what happened
# into the host's status and message. Like numaforge.livepatch: pure decisions, guaranteed handling.

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


def patch_action(status: int, replanned: bool) -> str:
    """After a PATCH answered ``status``: 'done', 'replan' (first 412: re-read and re-plan) or 'conflict'
    (412 again after a re-plan). Pure."""
    if status != 412:
        return "done"
    return "conflict" if replanned else "replan"


def outcome(data: dict, *, reboot: bool, needs_reset: bool, plan_pending: int) -> tuple[str, str]:
    """(status, message) of a host from its result data. Pure."""
    mism = data.get("mismatches") or []
    if mism:
        message = "after reboot: " + "; ".join(
            f"{m['attribute']} is {m['current']!r}, wanted {m['desired']!r}" for m in mism
        )
        job = data.get("job") or {}
        if job and job.get("state") not in FINAL_JOB_OK:
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


def system_of(client: RedfishClient, state: BiosState) -> dict:
    """The ComputerSystem document, read on first use."""
    if state.system is None:
        state.system = client.get(state.system_path).body
    return state.system


def _job_info(job: Job) -> dict:
    return {"id": job.identity, "state": job.state, "path": job.path}


class HostApply:
    """One host's apply between its steps: what was read and planned, the job, what was written."""

    def __init__(
        self, host, opts: HostOptions, cache: RegistryCache, result: HostResult, client: RedfishClient, state: BiosState
    ):
        self.host, self.opts, self.cache, self.result = host, opts, cache, result
        self.client, self.state = client, state
        self.journal = opts.journal if opts.reboot else None
        self.profile = self.desired = self.plan = None
        self.jobs: JobCollection | None = None
        self.job_path: str | None = None
        self.written = False
        self.replanned = False
        self.data = result.data

    @property
    def where(self) -> str:
        return f"{self.host.name} ({self.client.base_url})"

    def progress(self) -> Progress:
        return Progress(
            changes=bool(self.plan.changes),
            pending=bool(self.plan.pending),
            written=self.written,
            jobs=self.state.vendor == "dell",
            reboot=self.opts.reboot,
            needs_reset=self.plan.needs_reset,
        )

    # -- plan / resume -----------------------------------------------------------------------------------------
    def do_plan(self) -> None:
        self.profile, self.desired, self.plan = plan_for(self.host, self.state, self.opts)
        _record_plan(self.result, self.state, self.profile, self.plan)
        self.data.update({"changed": [], "pending": list(self.plan.pending), "verified": [], "mismatches": []})

    def resuming(self) -> bool:
        # whatever the plan shows now: mid power-cycle a BMC may show the values neither pending nor current yet
        return self.journal is not None and self.journal.action(self.host.name) == "verify"

    def do_resume(self) -> dict:
        """An interrupted run already asked this host to reset: wait for that reset, never send another; re-read,
        re-plan. If the host has not come back with the values within --power-timeout, fail (not reset)."""
        when = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.journal.data(self.host.name, "reboot-requested").get("time") or 0)
        )
        note = f"reset requested by the previous run at {when}; waiting for it, not resetting again"
        st, vmap = self.state, load_vendor_map(self.state.vendor, self.opts.vendors_dir)
        want, paths = desired_values(self.plan), (st.system_path, st.bios_path)
        waited = wait_back(self.client, paths, want, self.opts.timeouts, vmap.reboot, st.registry.value_names)
        detail = {
            "journal": str(self.journal.path),
            "phases": self.journal.phases(self.host.name),
            "note": note,
            "waited": waited,
        }
        self.state = read_state(self.client, self.host, self.cache)
        self.plan = replan(self.state, self.desired, self.host)
        self.data["resumed"] = True
        self.data["reset_requested_by_previous_run"] = when
        if self.plan.changes or self.plan.needs_reset:
            differ = sorted({i.attribute for i in self.plan.items if i.current != i.desired})
            raise RedfishError(
                f"{note}: after {waited['seconds']:g} s (--power-timeout) the host (power "
                f"{waited['power']}) does not show the new values yet "
                f"({', '.join(differ) or 'settings still pending'}); it was not reset again",
                self.where,
                "check the host (console, power state); once it is back on, re-run the same command: "
                f"it verifies and never resets; to start over instead, delete {self.journal.path}",
            )
        return detail

    # -- the states --------------------------------------------------------------------------------------------
    def _job_queue(self) -> JobCollection | None:
        if self.jobs is None:
            managers = System(self.client, self.state.system_path, system_of(self.client, self.state)).manager_paths
            self.jobs = find_jobs(self.client, ServiceRoot.load(self.client), managers)
        return self.jobs

    def do_job_check(self):
        """A queued BIOS job is reported, never clobbered: nothing is written while one exists."""
        jobs = self._job_queue()
        active = [j for j in jobs.bios_jobs(self.state.settings_path) if j.active] if jobs else []
        if active:
            ids = ", ".join(f"{j.identity} ({j.state})" for j in active)
            raise JobConflictError(
                f"a BIOS configuration job is already queued: {ids}; nothing was written",
                f"{self.host.name} ({self.client.base_url}{jobs.path})",
                "let it run (reboot the host, e.g. `invoke bios-apply --reboot` after it "
                "completes) or remove it with `invoke bios-job-delete` if it is stale, then "
                "re-run",
            )
        return {"queue": jobs.path if jobs else None, "active": 0}

    def do_patch(self):
        use_at = "OnReset" in self.state.apply_times
        detail = None
        if not self.state.etag:
            # no ETag, no If-Match: re-read right before writing (the plan says so in its warnings)
            self.state = read_state(self.client, self.host, self.cache)
            self.plan = replan(self.state, self.desired, self.host)
            _record_plan(self.result, self.state, self.profile, self.plan)
            self.data["pending"] = list(self.plan.pending)
            detail = "no ETag on the settings object: re-read and re-planned right before the PATCH"
        changes = self.plan.changes
        if not changes:
            return detail
        while True:
            r = _patch_checked(self.client, self.state, changes, use_at, self.result)
            action = patch_action(r.status, self.replanned)
            if action == "done":
                break
            if action == "conflict":
                raise ConcurrentChangeError(
                    "the BIOS settings object changed again while writing (412 twice); nothing more was written",
                    f"{self.host.name} ({self.client.base_url}{self.state.settings_path})",
                    "someone else is changing this BIOS: coordinate, then re-run",
                )
            detail = "412 Precondition Failed: settings changed since read; re-read and re-planned"
            self.state = read_state(self.client, self.host, self.cache)
            self.plan = replan(self.state, self.desired, self.host)
            _record_plan(self.result, self.state, self.profile, self.plan)
            self.data["pending"] = list(self.plan.pending)
            self.data["replanned_after_412"] = self.replanned = True
            changes = self.plan.changes
            if not changes:
                return detail
        self.check_staged(changes)
        self.written = True
        self.data["changed"] = sorted(changes)
        self.data["pending"] = sorted(set(self.data["pending"]) | set(changes))
        loc = r.headers.get("location")
        if loc and "job" in loc.lower():
            self.job_path = path_of(loc)
        if self.journal is not None:
            self.journal.record(self.host.name, "patched", attributes=sorted(changes))
        return detail

    def check_staged(self, changes: dict) -> None:
        """The BMC accepted the PATCH: its settings object must now hold every value sent (issue 25 item 5)."""
        reg = self.state.registry
        held = reg.value_names(self.client.get(self.state.settings_path).body.get("Attributes") or {})
        wrong = staged_mismatches(changes, reg.value_names(self.state.current), held)
        if wrong:
            raise RedfishError(
                f"the BMC accepted the PATCH but its settings object ({self.state.settings_path}) does not hold "
                f"what was sent: {'; '.join(wrong)}",
                self.where,
                "the BMC said yes and staged something else: check its firmware and log; `invoke bios-plan` shows "
                "what is pending, `invoke bios-clear-pending` (Dell) or a new bios-apply replaces it",
            )

    def do_job(self):
        """iDRAC applies pending BIOS values only through a config job: make sure exactly one exists (the one
        our PATCH created, an existing one -- adopted, never replaced -- or a new one), and that it is Scheduled."""
        if not self.job_path:
            fresh = self.jobs is None
            jobs = self._job_queue()
            if jobs is not None and not fresh:
                jobs.refresh()  # read before our PATCH: the BMC may have made a job for it since
            if jobs is None:
                raise RedfishError(
                    "no jobs collection found to create the BIOS config job",
                    self.where,
                    "without a config job the pending values never apply; check the iDRAC firmware",
                )
            existing = [j for j in jobs.bios_jobs(self.state.settings_path) if j.active]
            self.job_path = existing[0].path if existing else jobs.create_config_job(self.state.settings_path)
        job = self._wait_job({"Scheduled"}, self.opts.timeouts.job)
        self.data["job"] = _job_info(job)
        if job.state in FINAL_JOB_BAD:
            raise RedfishError(
                f"BIOS config job {job.identity} {job.state}: {job.message}",
                self.where,
                "see the job's message on the iDRAC",
            )
        return self.data["job"]

    def _wait_job(self, want: set[str], timeout: float) -> Job:
        deadline = time.monotonic() + timeout
        while True:
            job = Job.load(self.client, self.job_path)
            if job.state in want or job.state in FINAL_JOB_BAD or job.state in FINAL_JOB_OK:
                return job
            if time.monotonic() > deadline:
                return job
            time.sleep(self.opts.timeouts.poll)

    def do_reboot(self):
        job = Job.load(self.client, self.job_path) if self.job_path else None
        if job is not None and job.state != "Scheduled":  # iDRAC runs the job only if it is Scheduled at the reset
            raise JobConflictError(
                f"BIOS config job {job.identity} is {job.state}, not Scheduled, after {self.opts.timeouts.job:g} s:"
                " the host was not rebooted (the values would not apply)",
                self.where,
                "see the job on the iDRAC (`invoke bios-jobs`); once it is Scheduled, re-run with --reboot",
            )
        if self.journal is not None:  # on disk before the reset is requested
            self.journal.record(self.host.name, "reboot-requested")
        st, vmap = self.state, load_vendor_map(self.state.vendor, self.opts.vendors_dir)
        job_state = (lambda: Job.load(self.client, self.job_path).state) if self.job_path else None
        detail = reboot(
            self.client,
            system_of(self.client, st),
            (st.system_path, st.bios_path),
            desired_values(self.plan),
            self.opts.timeouts,
            vmap.reboot,
            self.result.data,
            job_state,
            st.registry.value_names,
        )
        if self.journal is not None:
            self.journal.record(self.host.name, "rebooted")
        return detail

    def do_verify(self):
        if self.job_path:
            job = self._wait_job(FINAL_JOB_OK, self.opts.timeouts.job)
            self.data["job"] = _job_info(job)
            if job.state not in FINAL_JOB_OK:
                self.data["job"]["message"] = job.message
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


def apply_host(host, opts: HostOptions, cache: RegistryCache, result: HostResult) -> None:
    """Plan, then (only if something differs) PATCH, job, optional reboot and verify: the states of HostApply
    in the order next_state gives, each a step of ``result``. Raises nothing for host failures."""
    try:
        with bmc_session(host, opts, cache, result) as (client, state):
            h = HostApply(host, opts, cache, result, client, state)
            with result.step("plan"):
                h.do_plan()
            if h.resuming():
                with result.step("resume") as s:
                    s.detail = h.do_resume()
            current = "plan"
            while True:
                current = next_state(current, h.progress())
                if current == "result":
                    break
                with result.step(current) as s:
                    s.detail = getattr(h, "do_" + current.replace("-", "_"))()
            h.finish()
    except NumaforgeError as exc:
        _fail(result, exc)


def _patch_once(client: RedfishClient, state: BiosState, changes: dict, use_apply_time: bool) -> Response:
    """One PATCH of ``changes`` through the SettingsObject resource (If-Match: the ETag read with the state)."""
    obj = SettingsObject(client, state.settings_path, {"Attributes": state.settings_attrs}, state.etag)
    return obj.commit(changes, "OnReset" if use_apply_time else None)


def _patch_checked(client: RedfishClient, state: BiosState, changes: dict, use_apply_time: bool, result: HostResult):
    """PATCH once (the adapter retries only a 503). If the answer is an error or is lost, re-read the settings
    object -- never re-send blindly: when it holds every value we sent, the BMC did act; otherwise report what it
    holds (nothing is half-written by us: the PATCH is one request) and stop. A lost answer (timeout, reset) is
    not a "no": the settings object is re-read for up to the read timeout (the BMC may still be working on the
    request), and the report names what the BMC holds then, pending values and BIOS jobs."""
    try:
        return _patch_once(client, state, changes, use_apply_time)
    except RedfishRedirectError:
        raise  # answered, and not carried out: nothing to re-read
    except RedfishPreconditionFailedError:
        return Response(412, {}, {}, state.settings_path)
    except RedfishHTTPError as exc:
        if exc.status in (401, 403):
            # refused before the BMC looked at the attributes: authentication/authorisation, not a value
            kind = RedfishAuthError if exc.status == 401 else RedfishError
            raise kind(
                f"PATCH {state.settings_path} answered {exc.status} ("
                + ("authentication refused: the session is no longer valid" if exc.status == 401 else "forbidden")
                + f"): {exc.what}; the BMC refused the request, nothing was written",
                f"{client.host} ({client.base_url})",
                "check bmc.username / the password reference and the BMC's session timeout, then re-run"
                if exc.status == 401
                else "the BMC account needs the ConfigureComponents privilege (Administrator/Operator role)",
            ) from None
        answered, what = exc, exc.what
    except RedfishError as exc:
        answered, what = None, f"PATCH {state.settings_path} got no answer ({exc.what})"
    deadline = time.monotonic() + (client.policy.read_timeout if answered is None else 0.0)
    while True:
        try:
            attrs = client.get(state.settings_path).body.get("Attributes") or {}
        except NumaforgeError:
            raise RedfishError(
                what + "; the settings object could not be re-read, so the outcome is unknown",
                f"{client.host} ({client.base_url})",
                "re-run `invoke bios-plan` and `invoke bios-jobs` to see what the BMC holds, then `bios-apply` again",
            ) from None
        now = pending_values(state.current, attrs)
        if all(now.get(k) == v for k, v in changes.items()):
            client.warnings.append(what + "; re-read: the settings object holds every value sent, continuing")
            return Response(200, {}, {}, state.settings_path)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    before = pending_values(state.current, state.settings_attrs)
    extra = sorted(k for k in now if before.get(k) != now.get(k))
    if answered is None:
        held = (
            "the BMC now holds "
            + (", ".join(f"{k}={now[k]!r}" for k in extra) if extra else "no new pending value")
            + f"; BIOS jobs: {_jobs_text(client, state)}; "
            "it may still act on the request"
        )
        raise RedfishError(
            f"{what}; {held}",
            f"{client.host} ({client.base_url})",
            "in a minute, `invoke bios-plan` and `invoke bios-jobs` show what the BMC holds; "
            "re-running bios-apply writes only what still differs",
        )
    held = (
        f"the settings object now holds new values for: {', '.join(extra)}"
        if extra
        else "the settings object is unchanged: nothing was written"
    )
    fix = (
        "fix the attribute the BMC names, then re-run"
        if 400 <= answered.status < 500
        else "re-run when the BMC is healthy (the plan writes only what still differs)"
    )
    raise RedfishError(f"{what}; {held}", f"{client.host} ({client.base_url})", fix)


def _jobs_text(client: RedfishClient, state: BiosState) -> str:
    """The BIOS jobs the BMC lists, for a report ("none", or "JID_1 (Scheduled), ..."); never raises."""
    try:
        managers = System(client, state.system_path, system_of(client, state)).manager_paths
        jobs = find_jobs(client, ServiceRoot.load(client), managers)
        found = jobs.bios_jobs(state.settings_path) if jobs is not None else []
    except NumaforgeError as exc:
        return f"unknown ({exc.what})"
    return ", ".join(f"{j.identity} ({j.state})" for j in found) or "none"


def desired_values(plan: Plan) -> dict[str, Any]:
    return {i.attribute: i.desired for i in plan.settable}


# -- verify ------------------------------------------------------------------------------------------------------
def verify_into(client: RedfishClient, state: BiosState, plan: Plan, result: HostResult) -> None:
    cur = state.registry.value_names(client.get(state.bios_path).body.get("Attributes") or {})
    verified, mism = [], []
    for i in plan.settable:
        if cur.get(i.attribute) == i.desired:
            verified.append(i.attribute)
        else:
            mism.append(
                {"attribute": i.attribute, "setting": i.setting, "desired": i.desired, "current": cur.get(i.attribute)}
            )
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
                verified = [i.attribute for i in plan.settable if i.current == i.desired]
                mism = [
                    {
                        "attribute": i.attribute,
                        "setting": i.setting,
                        "desired": i.desired,
                        "current": i.current,
                        "pending": i.pending,
                    }
                    for i in plan.settable
                    if i.current != i.desired
                ]
                # a value staged on the BMC that differs from the profile: it takes effect at the next reset
                conflicts = [
                    {
                        "attribute": i.attribute,
                        "setting": i.setting,
                        "desired": i.desired,
                        "current": i.current,
                        "pending": i.pending,
                    }
                    for i in plan.settable
                    if i.pending is not None and i.pending != i.desired
                ]
                verified = [a for a in verified if a not in {c["attribute"] for c in conflicts}]
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
                    "(clear it with `invoke bios-clear-pending` or re-run bios-apply)"
                    for c in conflicts
                ]
            )
        else:
            result.status = "ok"
            result.message = f"{len(verified)} attributes verified ({state.vendor}, profile {profile.name})"
    except NumaforgeError as exc:
        _fail(result, exc)


# -- many hosts -------------------------------------------------------------------------------------------------
def run_hosts(hosts, action: str, opts: HostOptions, rollout: Rollout | None = None, *, progress: bool = False):
    """Run plan/apply/verify on every host with bounded concurrency (numaforge.fleet); one registry cache per run.

    A failing host never stops the others (unless canary/max-fail say so; with --max-fail below 100 and no
    --batch, hosts run in waves of ``forks``, numaforge.fleet.Rollout.rolling). Returns the FleetOutcome.
    """

    fn = {"plan": plan_host, "apply": apply_host, "verify": verify_host}[action]
    cache = RegistryCache(persist=discovery_dir() if opts.discovery_cache else None)

    def one(host) -> HostResult:
        result = HostResult(host.name)
        try:
            fn(host, opts, cache, result)
        except Exception as exc:  # a bug: keep what the host recorded (written, reset) and let the runner stop
            _fail(result, exc)
            result.data[UNEXPECTED_ERROR] = f"{type(exc).__name__}: {exc}"
        return result

    outcome = run_fleet(hosts, one, (rollout or Rollout()).rolling(), progress=progress)
    outcome.registry_fetches = cache.fetches
    outcome.registry_loaded = cache.loaded
    return outcome
