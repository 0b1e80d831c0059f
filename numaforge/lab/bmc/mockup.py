"""Mockup mode: serve a captured Redfish tree as it is (DMTF's mockup layout, one ``index.json`` per URI, as
Redfish-Mockup-Creator and ``bios-capture`` write it), adding only what a capture cannot hold (issue 41).

Every GET answers the captured document (paths compared case-insensitively, trailing ``/`` aside); a URI the tree
lacks is 404. The behaviour added is driven by the tree's own data, never invented:

- BIOS: a PATCH of ``Attributes`` to the settings object the Bios names (``@Redfish.Settings.SettingsObject``)
  stages values: each name must be in the Bios's captured ``Attributes`` (else 400 PropertyUnknown), and, where
  the attribute registry the Bios names is in the tree, pass its type, ReadOnly, allowed values and bounds --
  values compared in the form the Bios shows them (ValueName, or ValueDisplayName where the Bios holds display
  strings). A captured ReadOnly flag that one of the registry's own ReadOnly Map dependencies explains on the
  current values is lifted when no such dependency holds on the values the BIOS would have after the PATCH (the
  R750's PcieAspmL1 is ReadOnly while SysProfile is not Custom: a PATCH setting SysProfile=Custom with it is taken;
  a flag no dependency explains stays). A Bios without ``@Redfish.Settings`` takes the PATCH itself; a PATCH anywhere else is 405. Values the
  settings object captured that differ from the Bios's are pending at start (the capture's own pending values).
- The settings object shows all values (current + pending) when it was captured with every attribute, else the
  pending ones only; the Bios shows current values.
- A system reset (the tree's ``#ComputerSystem.Reset`` target) accepts only the ResetTypes the tree allows (the
  action's ``ResetType@Redfish.AllowableValues``, else its ``@Redfish.ActionInfo``'s ResetType parameter):
  anything else is 400 ActionParameterValueNotInList, as a real BMC answers. Restarts take ``power_delay``
  seconds; pending values become current when the host boots. ``PowerState`` and ``BootProgress`` change only
  if the captured system has them (BootProgress: ``None`` while off, the captured ``LastState`` once booted).
- ETags: a document captured with ``@odata.etag`` keeps it until it changes, then gets a new one in the same form;
  one captured without has none (no ETag header). ``If-Match`` on the settings object is checked only where it
  has an ETag (412 Base.PreconditionFailed otherwise).
- Jobs: where the tree has Dell's job queue (``Links.Oem.Dell.Jobs`` of a manager, or ``Oem.Dell.Jobs`` of the
  settings object), pending values apply only through a BIOS config job (iDRAC): a PATCH with
  ``@Redfish.SettingsApplyTime`` answers 202 + the new job's Location, POST {"TargetSettingsURI"} to the queue
  makes one; Scheduled -> Running at the reset -> Completed at boot. Captured jobs are listed as captured.
- Sessions: where the tree has a SessionService, POST to its Sessions collection logs in (X-Auth-Token); HTTP
  Basic works always. Credentials, TLS and CA are the simulator's (the daemon's password file and ca.pem).

``MockupSimulator(directory, ...)`` has BMCSimulator's API (url, ca_file, requests, count, inject, errors, ...) plus
``bios_current()``, ``bios_pending()``, ``power_state()``, ``jobs()`` and ``resets`` for the first system with a
Bios (or ``system=`` path).
"""

from __future__ import annotations

import copy
import hashlib
import json
import secrets
import tempfile
import threading
import time
from pathlib import Path

from .errors import BMCSimulatorError
from .faults import FaultPlan
from .http import Request, Router, SimResponse, error, lit, normalise
from .messages import message
from .server import BMCSimulator
from .state import iso
from .validation import check_value

# DSP8010 ResetType: used only when a captured Reset action names no allowed values at all
DMTF_RESET_TYPES = (
    "On",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "Nmi",
    "ForceOn",
    "PushPowerButton",
    "PowerCycle",
    "Suspend",
    "Pause",
    "Resume",
)
BOOTS = ("GracefulRestart", "ForceRestart", "PowerCycle")


def _key(path: str) -> str:
    return normalise(path).strip("/").lower()


def _link(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("@odata.id")
    return value.split("#", 1)[0] if isinstance(value, str) and value.startswith("/") else None


def load_tree(directory: str | Path) -> dict[str, dict]:
    """{lower-case path: document} of a mockup directory; a clear error when it is not one."""
    root = Path(directory)
    if not (root / "redfish" / "v1" / "index.json").is_file():
        raise BMCSimulatorError(
            "not a Redfish mockup: redfish/v1/index.json is missing",
            str(root),
            "pass the directory that holds redfish/v1/ (DMTF mockup layout, as bios-capture writes it)",
        )
    docs: dict[str, dict] = {}
    for f in sorted(root.rglob("index.json")):
        rel = f.parent.relative_to(root).as_posix()
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            raise BMCSimulatorError(
                f"unreadable mockup document: {exc}", str(f), "re-capture it or remove the directory"
            ) from None
        if isinstance(doc, dict):
            docs[rel.lower()] = doc
    return docs


def _new_etag(old: str, body: dict) -> str:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    bare = old[2:] if old.startswith("W/") else old
    n = max(8, len(bare.strip('"')))
    tag = digest[:n].upper() if bare.strip('"').isupper() else digest[:n]
    return ("W/" if old.startswith("W/") else "") + (f'"{tag}"' if bare.startswith('"') else tag)


def _etag_matches(header: str, etag: str) -> bool:
    def bare(t: str) -> str:
        t = t.strip()
        t = t[2:] if t.startswith("W/") else t
        return t.strip('"')

    return any(part.strip() == "*" or bare(part) == bare(etag) for part in header.split(","))


class _System:
    """One captured system with a Bios: its current/pending values, power, boot progress and reset rules."""

    def __init__(self, tree: dict[str, dict], path: str):
        self.path = path
        doc = tree[_key(path)]
        self.bios_path = _link(doc.get("Bios")) or ""
        bios = tree.get(_key(self.bios_path)) or {}
        self.current: dict = dict(bios.get("Attributes") or {})
        self.settings_path = _link((bios.get("@Redfish.Settings") or {}).get("SettingsObject"))
        settings = tree.get(_key(self.settings_path)) if self.settings_path else None
        captured = dict((settings or {}).get("Attributes") or {})
        # captured with every attribute: it shows all values; else the pending ones only
        self.settings_all = bool(captured) and set(captured) >= set(self.current)
        self.pending = {k: v for k, v in captured.items() if k in self.current and self.current[k] != v}
        self.power = doc.get("PowerState") if isinstance(doc.get("PowerState"), str) else None
        progress = doc.get("BootProgress") if isinstance(doc.get("BootProgress"), dict) else None
        self.has_progress = progress is not None and "LastState" in progress
        self.booted_state = (progress or {}).get("LastState") or "OSRunning"
        self.boot_state = self.booted_state
        self.boot_state_time = time.time()
        action = (doc.get("Actions") or {}).get("#ComputerSystem.Reset") or {}
        self.reset_target = action.get("target") if isinstance(action.get("target"), str) else None
        allowed = action.get("ResetType@Redfish.AllowableValues")
        if not isinstance(allowed, list):
            info = tree.get(_key(action["@Redfish.ActionInfo"])) if action.get("@Redfish.ActionInfo") else None
            for p in (info or {}).get("Parameters") or []:
                if isinstance(p, dict) and p.get("Name") == "ResetType" and isinstance(p.get("AllowableValues"), list):
                    allowed = p["AllowableValues"]
        self.reset_types = list(allowed) if isinstance(allowed, list) else list(DMTF_RESET_TYPES)
        # Bios.ResetBios: its target and parameters (name -> (required, allowed values or None)), from the
        # action's @Redfish.AllowableValues annotations and its @Redfish.ActionInfo where the tree has one
        reset_bios = (bios.get("Actions") or {}).get("#Bios.ResetBios") or {}
        self.reset_bios_target = reset_bios.get("target") if isinstance(reset_bios.get("target"), str) else None
        self.reset_bios_params: dict[str, tuple[bool, list | None]] = {}
        for k, v in reset_bios.items():
            if k.endswith("@Redfish.AllowableValues") and isinstance(v, list):
                self.reset_bios_params[k.split("@", 1)[0]] = (False, v)
        info = tree.get(_key(reset_bios["@Redfish.ActionInfo"])) if reset_bios.get("@Redfish.ActionInfo") else None
        for p in (info or {}).get("Parameters") or []:
            if isinstance(p, dict) and isinstance(p.get("Name"), str):
                allowed = p.get("AllowableValues") if isinstance(p.get("AllowableValues"), list) else None
                self.reset_bios_params[p["Name"]] = (bool(p.get("Required")), allowed)
        self.bios_resets: list[dict] = []  # the bodies of the Bios.ResetBios requests it carried out
        self.events: list[tuple[float, str]] = []
        self.resets: dict[str, int] = {}
        self.registry: dict[str, dict] = {}
        self.read_only_deps: dict[str, list[list[dict]]] = {}  # name -> the MapFrom lists that make it ReadOnly
        self.settings_time = time.time()


class MockupSimulator(BMCSimulator):
    """A captured tree served over HTTPS with the simulator's credentials (module docstring)."""

    def __init__(
        self,
        directory: str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = True,
        username: str = "admin",
        password: str | None = None,
        power_delay: float = 1.0,
        state_dir: str | Path | None = None,
        verbose: bool = False,
        latency: float = 0.0,
    ):
        self.directory = Path(directory)
        self.tree = load_tree(self.directory)
        self.label = f"mockup {self.directory.name}"
        if not (isinstance(power_delay, (int, float)) and 0 <= power_delay <= 3600):
            raise BMCSimulatorError(
                f"power_delay must be 0..3600 seconds, got {power_delay!r}", "power_delay", "pass a number such as 1.0"
            )
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise BMCSimulatorError(f"port must be 0..65535, got {port!r}", "port", "pass 0 for any free port")
        self.host, self.port, self.tls = host, port, tls
        self.username = username
        self.password = password if password is not None else secrets.token_urlsafe(18)
        self.power_delay, self.latency, self.verbose = float(power_delay), latency, verbose
        self._own_state_dir = state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="bmc-mockup-")) if state_dir is None else Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.faults = FaultPlan()
        self._stopping = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self.patches: list[tuple[str, dict]] = []  # (path, Attributes) of every PATCH the BMC accepted
        self.timeline: list[tuple[str, str, float, float]] = []
        self.connections = self.tls_resumed = 0
        self.errors: list[str] = []
        self.sessions: dict[str, dict] = {}
        self.issued_tokens: list[str] = []
        self.password_change_required = False
        self.basic_auth = True
        self._session_seq = 0
        self._gather_cv = threading.Condition()  # BMCSimulator.gather()
        self._lock = threading.Lock()
        self.lock = threading.RLock()  # the machine's state
        self._unavailable_until = 0.0
        self.ca_file: Path | None = None
        self._server = None
        self._hub = None  # BMCSimulator.start(hub=...), or a hub of its own
        self._own_hub = False
        self.etags: dict[str, str] = {}  # path key -> the ETag of the document as last served
        self.served: dict[str, dict] = {}  # path key -> the body that ETag belongs to
        self.jobs_added: dict[str, dict] = {}  # job id -> job made here
        self._index()
        self._load_state()
        self.router = Router(case_insensitive=True)
        if self.sessions_path:
            self.router.add(lit(self.sessions_path), get=self._get, post=self._login, _login=True)
            self.router.add(
                lit(self.sessions_path) + "/(?P<sid>[^/]+)", get=self._get_session, delete=self._delete_session
            )
        self.router.add("(?P<path>/.*)", get=self._get, patch=self._patch, post=self._post, delete=self._delete)

    # ------------------------------------------------------------------ the tree's own data
    def _index(self) -> None:
        tree = self.tree
        root = tree["redfish/v1"]
        self.systems: dict[str, _System] = {}
        for m in (tree.get(_key(_link(root.get("Systems")) or "")) or {}).get("Members") or []:
            path = _link(m)
            doc = tree.get(_key(path or ""))
            if path and doc is not None and _link(doc.get("Bios")) and _key(_link(doc["Bios"]) or "") in tree:
                self.systems[_key(path)] = _System(tree, path)
        if not self.systems:
            raise BMCSimulatorError(
                "the mockup has no system with a Bios", str(self.directory), "capture a BMC whose system has a Bios"
            )
        self.first = next(iter(self.systems.values()))
        for s in self.systems.values():
            s.registry = self._registry_of(tree.get(_key(s.bios_path)) or {})
            s.read_only_deps = self._read_only_deps(s.registry)
        session_service = tree.get(_key(_link(root.get("SessionService")) or "")) or {}
        self.sessions_path = _link(session_service.get("Sessions"))
        # Dell's job queue, if the tree has one
        self.job_queue: str | None = None
        for m in (tree.get(_key(_link(root.get("Managers")) or "")) or {}).get("Members") or []:
            mgr = tree.get(_key(_link(m) or "")) or {}
            q = _link((((mgr.get("Links") or {}).get("Oem") or {}).get("Dell") or {}).get("Jobs"))
            if q and _key(q) in tree:
                self.job_queue = q
        for s in self.systems.values():
            sd = tree.get(_key(s.settings_path or "")) or {}
            q = _link(((sd.get("Oem") or {}).get("Dell") or {}).get("Jobs"))
            if q and _key(q) in tree:
                self.job_queue = q

    def _registry_of(self, bios: dict) -> dict[str, dict]:
        """The attribute registry the Bios names, if the tree holds it: {AttributeName: entry}."""
        want = str(bios.get("AttributeRegistry") or "").split(".", 1)[0].lower()
        found = []
        for doc in self.tree.values():
            entries = (doc.get("RegistryEntries") or {}).get("Attributes")
            if isinstance(entries, list):
                rid = str(doc.get("Id") or doc.get("RegistryVersion") or "").split(".", 1)[0].lower()
                found.append((rid != want, [e for e in entries if isinstance(e, dict) and "AttributeName" in e]))
        found.sort(key=lambda f: f[0])  # the one named like the Bios's AttributeRegistry first
        return {e["AttributeName"]: e for e in found[0][1]} if found else {}

    def _read_only_deps(self, registry: dict[str, dict]) -> dict[str, list[list[dict]]]:
        """The registry's Map dependencies that make an attribute ReadOnly: {AttributeName: [MapFrom, ...]}."""
        out: dict[str, list[list[dict]]] = {}
        for doc in self.tree.values():
            entries = doc.get("RegistryEntries") or {}
            attrs = entries.get("Attributes")
            if not isinstance(attrs, list) or not any(
                isinstance(e, dict) and e is registry.get(str(e.get("AttributeName"))) for e in attrs
            ):
                continue  # not the registry document the Bios names
            for d in entries.get("Dependencies") or []:
                dep = (d or {}).get("Dependency") or {}
                if (
                    d.get("Type") == "Map"
                    and dep.get("MapToProperty") == "ReadOnly"
                    and dep.get("MapToValue") is True
                    and isinstance(dep.get("MapFrom"), list)
                ):
                    out.setdefault(str(dep.get("MapToAttribute")), []).append(dep["MapFrom"])
        return out

    @staticmethod
    def _holds(conditions: list[dict], values: dict) -> bool:
        """One MapFrom list on ``values``: EQU/NEQ per condition, joined by each later condition's MapTerms (OR
        unless it says AND: the R750's dependencies carry no MapTerms and repeat one attribute with several values,
        docs/bios-profiles.md). Only what those need; any other condition is taken as not holding."""
        result: bool | None = None
        for c in conditions:
            have, want, op = values.get(c.get("MapFromAttribute")), c.get("MapFromValue"), c.get("MapFromCondition")
            ok = have == want if op == "EQU" else have != want if op == "NEQ" else False
            if result is None:
                result = ok
            else:
                result = (result and ok) if str(c.get("MapTerms")).upper() == "AND" else (result or ok)
        return bool(result)

    def _read_only_now(self, s: _System, name: str, after: dict) -> bool:
        """Whether ``name`` is ReadOnly once ``after`` (current + pending + this PATCH) holds."""
        deps = s.read_only_deps.get(name) or []
        if any(self._holds(c, after) for c in deps):
            return True
        if not (s.registry.get(name) or {}).get("ReadOnly"):
            return False
        explained = any(self._holds(c, s.current) for c in deps)
        return not explained

    # ------------------------------------------------------------------ persistence (the daemon's restarts)
    def _state_file(self) -> Path:
        return self.state_dir / "mockup-state.json"

    def _load_state(self) -> None:
        f = self._state_file()
        if not f.exists():
            return
        try:
            data = json.loads(f.read_text())
        except ValueError:
            return
        if data.get("directory") != str(self.directory.resolve()):
            return
        for k, saved in data.get("systems", {}).items():
            s = self.systems.get(k)
            if s is not None:
                s.current.update({a: v for a, v in saved["current"].items() if a in s.current})
                s.pending, s.power = saved["pending"], saved["power"]
        self.jobs_added = data.get("jobs", {})

    def _save(self) -> None:
        data = {
            "directory": str(self.directory.resolve()),
            "systems": {
                k: {"current": s.current, "pending": s.pending, "power": s.power} for k, s in self.systems.items()
            },
            "jobs": self.jobs_added,
        }
        tmp = self._state_file().with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            tmp.replace(self._state_file())
        except FileNotFoundError:  # stopped, temporary state dir removed
            pass

    def _display_name(self) -> str:
        return self.label

    # ------------------------------------------------------------------ time
    def advance(self) -> None:
        with self.lock:
            now = time.time()
            changed = False
            for s in self.systems.values():
                while s.events and s.events[0][0] <= now:
                    _, what = s.events.pop(0)
                    changed = True
                    if what == "off":
                        self._off(s)
                    elif what == "boot":
                        self._boot(s)
            if changed:
                self._save()

    def _off(self, s: _System) -> None:
        s.power = "Off" if s.power is not None else None
        s.boot_state, s.boot_state_time = "None", time.time()

    def _boot(self, s: _System) -> None:
        """POST ends: pending values apply (through the job where the tree has a job queue)."""
        s.power = "On" if s.power is not None else None
        s.boot_state, s.boot_state_time = s.booted_state, time.time()
        job = self._active_job()
        if self.job_queue is None:
            self._apply(s)
        elif job is not None and job["JobState"] == "Running":
            self._apply(s)
            job.update(
                JobState="Completed",
                PercentComplete=100,
                EndTime=iso(time.time()),
                Message="Job completed successfully.",
                MessageId="PR19",
            )

    def _apply(self, s: _System) -> None:
        if s.pending:
            s.current.update(s.pending)
            s.pending = {}
            s.settings_time = time.time()

    def _schedule(self, s: _System, delay: float, what: str) -> None:
        s.events.append((time.time() + delay, what))
        s.events.sort()

    # ------------------------------------------------------------------ test API
    @property
    def system_path(self) -> str:
        return self.first.path

    @property
    def bios_path(self) -> str:
        return self.first.bios_path

    @property
    def settings_path(self) -> str:
        return self.first.settings_path or self.first.bios_path

    @property
    def manager_path(self) -> str:
        mgrs = (self.tree.get(_key(_link(self.tree["redfish/v1"].get("Managers")) or "")) or {}).get("Members") or []
        return _link(mgrs[0]) or "" if mgrs else ""

    @property
    def resets(self) -> dict[str, int]:
        return dict(self.first.resets)

    def bios_current(self) -> dict:
        self.advance()
        with self.lock:
            return dict(self.first.current)

    def bios_pending(self) -> dict:
        self.advance()
        with self.lock:
            return dict(self.first.pending)

    def power_state(self) -> str:
        """The first system's PowerState ("" where the tree has none)."""
        self.advance()
        return self.first.power or ""

    def jobs(self) -> list[dict]:
        self.advance()
        with self.lock:
            return [dict(j) for j in self.jobs_added.values()]

    def log(self, text: str) -> None:
        if self.verbose:
            print(f"bmc-sim[{self.label}]: {text}", flush=True)

    def link(self, path: str) -> str:
        return path

    # ------------------------------------------------------------------ serving
    def _view(self, key: str) -> dict | None:
        """The document at ``key`` as it is now: the captured one with the machine's state laid over it."""
        doc = self.tree.get(key)
        if doc is None:
            job = self._job_at(key)
            return copy.deepcopy(job) if job is not None else None
        doc = copy.deepcopy(doc)
        for s in self.systems.values():
            if key == _key(s.path):
                if s.power is not None and "PowerState" in doc:
                    doc["PowerState"] = s.power
                if s.has_progress:
                    doc["BootProgress"]["LastState"] = s.boot_state
                    if "LastStateTime" in doc["BootProgress"]:
                        doc["BootProgress"]["LastStateTime"] = iso(s.boot_state_time)
            elif key == _key(s.bios_path):
                doc["Attributes"] = dict(s.current)
            elif s.settings_path and key == _key(s.settings_path):
                if s.settings_all:
                    doc["Attributes"] = {**s.current, **s.pending}
                elif s.pending or "Attributes" in doc:
                    doc["Attributes"] = dict(s.pending)
        if self.job_queue and key == _key(self.job_queue):
            members = list(doc.get("Members") or [])
            members += [{"@odata.id": f"{self.job_queue.rstrip('/')}/{jid}"} for jid in self.jobs_added]
            doc["Members"] = members
            if "Members@odata.count" in doc:
                doc["Members@odata.count"] = len(members)
        if self.sessions_path and key == _key(self.sessions_path):
            with self._lock:
                ids = sorted(s["Id"] for s in self.sessions.values())
            doc["Members"] = [{"@odata.id": f"{self.sessions_path.rstrip('/')}/{i}"} for i in ids]
            if "Members@odata.count" in doc:
                doc["Members@odata.count"] = len(ids)
        return doc

    def _job_at(self, key: str) -> dict | None:
        if not self.job_queue or not key.startswith(_key(self.job_queue) + "/"):
            return None
        return self.jobs_added.get(key.rsplit("/", 1)[-1].upper()) or next(
            (j for jid, j in self.jobs_added.items() if jid.lower() == key.rsplit("/", 1)[-1]), None
        )

    def _etag(self, key: str, body: dict) -> str | None:
        """The captured ETag while the document is as captured; a new one in its form once it changed; none if
        the tree has none."""
        captured = self.tree.get(key, {}).get("@odata.etag") if key in self.tree else None
        if not isinstance(captured, str):
            return None
        bare = {k: v for k, v in body.items() if k != "@odata.etag"}
        orig = {k: v for k, v in self.tree[key].items() if k != "@odata.etag"}
        return captured if bare == orig else _new_etag(captured, bare)

    def _answer(self, key: str, allow: str = "GET, HEAD") -> SimResponse:
        body = self._view(key)
        if body is None:
            return error(404, message("ResourceNotFound", "Resource", key))
        headers = {"Allow": allow}
        tag = self._etag(key, body)
        if tag is not None:
            body["@odata.etag"] = tag
            headers["ETag"] = tag
        return SimResponse(200, body, headers)

    def _get(self, req: Request, path: str | None = None) -> SimResponse:
        self.advance()
        key = _key(req.path)
        allow = "GET, HEAD"
        for s in self.systems.values():
            if key == _key(s.settings_path or s.bios_path):
                allow = "GET, HEAD, PATCH"
        with self.lock:
            return self._answer(key, allow)

    # ------------------------------------------------------------------ sessions
    def _login(self, req: Request, **_) -> SimResponse:
        body = req.body if isinstance(req.body, dict) else {}
        for prop in ("UserName", "Password"):
            if not isinstance(body.get(prop), str):
                return error(400, message("CreateFailedMissingReqProperties", prop, related=[f"#/{prop}"]))
        if not (
            secrets.compare_digest(body["UserName"], self.username)
            and secrets.compare_digest(body["Password"], self.password)
        ):
            return error(401, message("ResourceAtUriUnauthorized", req.path, "Unauthorized"))
        token, sess = self.new_session()
        assert self.sessions_path is not None
        uri = f"{self.sessions_path.rstrip('/')}/{sess['Id']}"
        out = {
            "@odata.id": uri,
            "@odata.type": "#Session.v1_0_0.Session",
            "Id": sess["Id"],
            "Name": "User Session",
            "UserName": sess["UserName"],
        }
        return SimResponse(201, out, {"X-Auth-Token": token, "Location": uri})

    def _find_session(self, sid: str):
        with self._lock:
            for token, sess in self.sessions.items():
                if sess["Id"] == sid:
                    return token, sess
        return None, None

    def _get_session(self, req: Request, sid: str) -> SimResponse:
        _, sess = self._find_session(sid)
        if sess is None:
            return error(404, message("ResourceNotFound", "Session", req.path))
        assert self.sessions_path is not None
        body = {
            "@odata.id": f"{self.sessions_path.rstrip('/')}/{sid}",
            "@odata.type": "#Session.v1_0_0.Session",
            "Id": sid,
            "Name": "User Session",
            "UserName": sess["UserName"],
        }
        return SimResponse(200, body, {"Allow": "GET, HEAD, DELETE"})

    def _delete_session(self, req: Request, sid: str) -> SimResponse:
        token, sess = self._find_session(sid)
        if sess is None:
            return error(404, message("ResourceNotFound", "Session", req.path))
        with self._lock:
            self.sessions.pop(token, None)
        return SimResponse(204)

    # ------------------------------------------------------------------ BIOS writes
    def _system_of_settings(self, key: str) -> _System | None:
        for s in self.systems.values():
            if key == _key(s.settings_path or s.bios_path):
                return s
        return None

    def _check(self, s: _System, name: str, value, after: dict | None = None) -> list[dict]:
        rel = [f"#/Attributes/{name}"]
        if name not in s.current:
            return [message("PropertyUnknown", name, related=rel)]
        entry = s.registry.get(name)
        if entry is None:
            return []
        if entry.get("ReadOnly") and after is not None and not self._read_only_now(s, name, after):
            entry = dict(entry, ReadOnly=False)
        if entry.get("Type") == "Enumeration":
            values = [v for v in entry.get("Value") or [] if isinstance(v, dict)]
            names = {v.get("ValueName") for v in values}
            shown = {v.get("ValueDisplayName") for v in values}
            if s.current.get(name) not in names and s.current.get(name) in shown:  # the Bios speaks display strings
                entry = dict(entry, Value=[{"ValueName": v.get("ValueDisplayName")} for v in values])
        return check_value(entry, value)

    def _patch(self, req: Request, path: str | None = None) -> SimResponse:
        self.advance()
        key = _key(req.path)
        s = self._system_of_settings(key)
        if s is None:
            if key in self.tree or self._job_at(key) is not None:
                return error(405, message("OperationNotAllowed"), headers={"Allow": "GET, HEAD"})
            return error(404, message("ResourceNotFound", "Resource", req.path))
        body = req.body if isinstance(req.body, dict) else None
        attrs = (body or {}).get("Attributes")
        if not isinstance(attrs, dict):
            return error(
                400, message("PropertyValueTypeError", json.dumps(attrs), "Attributes", related=["#/Attributes"])
            )
        with self.lock:
            current = self._view(key) or {}
            tag = self._etag(key, current)
            if_match = req.headers.get("if-match")
            if if_match and tag is not None and not _etag_matches(if_match, tag):
                return error(412, message("PreconditionFailed"), headers={"ETag": tag})
            after = {**s.current, **s.pending, **attrs}
            problems = [m for name, value in attrs.items() for m in self._check(s, name, value, after)]
            if problems:
                return error(400, *problems)
            if self._active_job() is not None:
                return error(400, message("ResourceInUse"))
            self.patches.append((req.path, dict(attrs)))
            for k, v in attrs.items():
                if s.current.get(k) == v:
                    s.pending.pop(k, None)
                else:
                    s.pending[k] = v
            s.settings_time = time.time()
            apply_time = (body or {}).get("@Redfish.SettingsApplyTime")
            headers = {}
            status = 200
            if self.job_queue and isinstance(apply_time, dict) and apply_time.get("ApplyTime") and s.pending:
                job = self._new_job(s.settings_path or s.bios_path)
                headers["Location"] = f"{self.job_queue.rstrip('/')}/{job['Id']}"
                status = 202
            self._save()
            tag = self._etag(key, self._view(key) or {})
            if tag is not None:
                headers["ETag"] = tag
        restart = next((t for t in ("GracefulRestart", *BOOTS, "On") if t in s.reset_types), s.reset_types[0])
        messages = [message("Success"), message("ResetRequired", s.reset_target or s.path, restart)]
        return SimResponse(status, {"@Message.ExtendedInfo": messages}, headers)

    # ------------------------------------------------------------------ jobs (a tree with Dell's job queue)
    def _active_job(self) -> dict | None:
        for job in self.jobs_added.values():
            if job["JobState"] in ("Scheduled", "Running"):
                return job
        return None

    def _new_job(self, target: str) -> dict:
        jid = f"JID_{secrets.randbelow(9 * 10**11) + 10**11}"
        job = {
            "@odata.id": f"{(self.job_queue or '').rstrip('/')}/{jid}",
            "@odata.type": "#DellJob.v1_0_0.DellJob",
            "Id": jid,
            "Name": "Configure: BIOS.Setup.1-1",
            "JobType": "BIOSConfiguration",
            "JobState": "Scheduled",
            "PercentComplete": 0,
            "Message": "Task successfully scheduled.",
            "MessageId": "JCP001",
            "StartTime": "TIME_NOW",
            "EndTime": "TIME_NA",
            "TargetSettingsURI": target,
            "CreatedTime": iso(time.time()),
        }
        self.jobs_added[jid] = job
        return job

    # ------------------------------------------------------------------ actions
    def _post(self, req: Request, path: str | None = None) -> SimResponse:
        self.advance()
        key = _key(req.path)
        body = req.body if isinstance(req.body, dict) else {}
        for s in self.systems.values():
            if s.reset_target and key == _key(s.reset_target):
                return self._reset(s, body)
            if s.reset_bios_target and key == _key(s.reset_bios_target):
                return self._reset_bios(s, body)
        if self.job_queue and key == _key(self.job_queue):
            target = body.get("TargetSettingsURI")
            owner = self._system_of_settings(_key(target)) if isinstance(target, str) else None
            if owner is None:
                return error(400, message("ActionParameterValueNotInList", str(target), "TargetSettingsURI", "Jobs"))
            with self.lock:
                if self._active_job() is not None:
                    return error(400, message("ResourceInUse"))
                if not owner.pending:
                    return error(400, message("NoOperation"))
                job = self._new_job(owner.settings_path or owner.bios_path)
                self._save()
            return SimResponse(
                200,
                {"@Message.ExtendedInfo": [message("Success")]},
                {"Location": f"{self.job_queue.rstrip('/')}/{job['Id']}"},
            )
        if key in self.tree:
            return error(405, message("OperationNotAllowed"), headers={"Allow": "GET, HEAD"})
        # an action the tree names but the mockup does not act on: refused, never faked
        return error(400, message("ActionParameterUnknown", req.path.rsplit("/", 1)[-1], "target"))

    def _reset(self, s: _System, body: dict) -> SimResponse:
        kind = body.get("ResetType")
        if not isinstance(kind, str):
            return error(400, message("ActionParameterMissing", "ComputerSystem.Reset", "ResetType"))
        if kind not in s.reset_types:
            return error(400, message("ActionParameterValueNotInList", kind, "ResetType", "ComputerSystem.Reset"))
        with self.lock:
            s.resets[kind] = s.resets.get(kind, 0) + 1
            on = s.power in (None, "On", "PoweringOn")
            d = self.power_delay
            if kind in ("On", "ForceOn") or (kind == "PushPowerButton" and not on):
                if not on:
                    s.power = "PoweringOn" if s.power is not None else None
                    self._begin_jobs()
                    s.events = []
                    self._schedule(s, d, "boot")
            elif kind == "ForceOff":
                s.events = []
                self._off(s)
            elif kind in ("GracefulShutdown", "PushPowerButton"):
                if on:
                    s.events = []
                    self._schedule(s, d, "off")
            elif kind in BOOTS:
                s.events = []
                self._off(s)
                self._begin_jobs()
                self._schedule(s, d, "boot")
            self._save()
        return SimResponse(204)

    def _reset_bios(self, s: _System, body: dict) -> SimResponse:
        """Bios.ResetBios with the parameters the tree's action states (a required one missing, a value not
        allowed, a parameter it does not name: 400, as a real BMC answers); the registry's defaults then become
        pending (applied at the next boot)."""
        for name, (required, allowed) in s.reset_bios_params.items():
            if name not in body:
                if required:
                    return error(400, message("ActionParameterMissing", "Bios.ResetBios", name))
            elif allowed is not None and body[name] not in allowed:
                return error(400, message("ActionParameterValueNotInList", str(body[name]), name, "Bios.ResetBios"))
        for name in body:
            if name not in s.reset_bios_params:
                return error(400, message("ActionParameterUnknown", "Bios.ResetBios", name))
        with self.lock:
            s.bios_resets.append(dict(body))
            for name, value in s.current.items():
                default = (s.registry.get(name) or {}).get("DefaultValue")
                if default is not None and default != value:
                    s.pending[name] = default
            self._save()
        return SimResponse(200, {"@Message.ExtendedInfo": [message("Success")]})

    def _begin_jobs(self) -> None:
        for job in self.jobs_added.values():
            if job["JobState"] == "Scheduled":
                job.update(JobState="Running", PercentComplete=50, Message="Task is running.", MessageId="PR20")

    def _delete(self, req: Request, path: str | None = None) -> SimResponse:
        key = _key(req.path)
        job = self._job_at(key)
        if job is not None:
            with self.lock:
                if job["JobState"] == "Running":
                    return error(400, message("ResourceInUse"))
                self.jobs_added.pop(job["Id"], None)
                if job["JobState"] == "Scheduled":
                    for s in self.systems.values():
                        s.pending = {}
                self._save()
            return SimResponse(200, {"@Message.ExtendedInfo": [message("Success")]})
        if key in self.tree:
            return error(405, message("OperationNotAllowed"), headers={"Allow": "GET, HEAD"})
        return error(404, message("ResourceNotFound", "Resource", req.path))
