"""What the BMCs of a fleet have in common, learnt once and reused: attribute registries and per-model paths.

    cache = RegistryCache(persist=discovery_dir())     # run_hosts / run_verify: one per run, kept on disk
    shape = cache.claim(shape_key(host), wait=30)      # None: this host discovers (then learn() or release())
    registry = cache.get(registry_id, fetch, attributes=bios["Attributes"])

**Registries** are keyed by registry id *and* checked against the host's Bios: a registry serves a host only if
it describes every attribute that host's Bios has (some vendors keep one registry id across platforms whose
attribute sets differ) *and* the host's BMC confirms it serves that very document now: ``confirm(registry)``
(apply.py: a HEAD of the registry file's URI, whose ETag must equal the one recorded when it was fetched). A
registry that cannot be confirmed (no ETag, another URI, HEAD refused) is fetched again from that BMC: a cached
registry must never allow a value the BMC no longer allows. A miss fetches from the BMC; hosts needing the same
id wait for one fetch.

**Shapes** (sessions URL, system path, Bios path, registry id) are kept per BMC model -- hosts whose inventory
states the same vendor, platform and system id. A later host of the model goes straight to its Bios after
confirming the path against its own BMC (apply.read_state: its Systems collection must list exactly that
system, or the inventory's system_id); if anything differs (moved, another registry, a second system) it
discovers afresh -- refusing what discovery would refuse -- and the shape is replaced.

**On disk** (``persist``; default ``$NUMAFORGE_REDFISH_CACHE`` or ``<cache_dir>/redfish``) both outlive the run,
so a re-run (the usual "is the fleet still compliant?") costs every host 6 requests: login, Systems (confirms
the path), Bios, settings object, HEAD of the registry file (confirms the registry), logout. Files:
``shapes.json``, ``registries/<id>/<names-sha>.json`` (the registry as the BMC served it) and
``<names-sha>.source`` (its URI and ETag). Nothing secret is stored. Delete the directory to forget everything.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..paths import atomic_write_text, cache_dir
from .errors import RedfishError
from .redfish import _path
from .registry import Registry


@dataclass(frozen=True)
class Shape:
    """Where one BMC model keeps things, learnt from the first host of that model."""

    login_url: str
    system_path: str
    bios_path: str
    registry_id: str


def shape_key(host) -> tuple | None:
    """Hosts that share this key are the same BMC model. Only hosts whose vendor the inventory states take
    part: with `auto` the service root must be read anyway to detect the vendor."""
    bmc, hw = host.bmc, host.hardware
    vendor = bmc.vendor if bmc.vendor and bmc.vendor != "auto" else hw.vendor
    if not vendor:
        return None
    return (vendor, hw.platform or "", bmc.system_id or "")


def discovery_dir() -> Path:
    env = os.environ.get("NUMAFORGE_REDFISH_CACHE")
    return Path(env).expanduser() if env else cache_dir() / "redfish"


def _covers(registry: Registry, attributes: Iterable[str] | None) -> bool:
    return attributes is None or set(attributes) <= set(registry.attributes)


def _names_sha(registry: Registry) -> str:
    return hashlib.sha256("\n".join(sorted(registry.attributes)).encode()).hexdigest()[:16]


def _safe(registry_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", registry_id)[:120] or "_"


class RegistryCache:
    """Per-run knowledge shared by every host (thread-safe), optionally persisted (module docstring)."""

    def __init__(self, persist: Path | None = None):
        self.persist = Path(persist) if persist else None
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._data: dict[str, list[Registry]] = {}
        self._shapes: dict[tuple, Shape] | None = None
        self._discovering: dict[tuple, threading.Event] = {}
        self.fetches = 0  # registries fetched from a BMC in this run
        self.loaded = 0  # registries read from the disk cache in this run

    # -- shapes
    def _shape_table(self) -> dict[tuple, Shape]:
        if self._shapes is None:
            self._shapes = {}
            if self.persist is not None:
                try:
                    doc = json.loads((self.persist / "shapes.json").read_text())
                    for entry in doc.get("shapes", []):
                        self._shapes[tuple(entry["key"])] = Shape(**entry["shape"])
                except (OSError, ValueError, TypeError, KeyError, AttributeError):
                    self._shapes = {}  # no file or an unreadable one: discover (and rewrite it)
        return self._shapes

    def claim(self, key: tuple | None, wait: float) -> Shape | None:
        """The model's shape; or None when the caller must discover it (then learn() or release()). Hosts of
        a model whose first host is still discovering wait up to ``wait`` seconds for it."""
        if not key:
            return None
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                shapes = self._shape_table()
                if key in shapes:
                    return shapes[key]
                event = self._discovering.get(key)
                if event is None:
                    self._discovering[key] = threading.Event()
                    return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None  # discover in parallel rather than wait any longer
            event.wait(remaining)

    def learn(self, key: tuple | None, shape: Shape, replace: bool = False) -> None:
        """Record what a host discovered; ``replace`` when the model's known shape turned out stale."""
        if not key:
            return
        with self._lock:
            shapes = self._shape_table()
            changed = replace or key not in shapes
            if changed:
                shapes[key] = shape
                self._save_shapes(shapes)
            event = self._discovering.pop(key, None)
        if event:
            event.set()

    def release(self, key: tuple | None) -> None:
        """The discovering host ended without learning (failed): let a waiting host discover instead."""
        with self._lock:
            event = self._discovering.pop(key, None) if key not in self._shape_table() else None
        if event:
            event.set()

    def _save_shapes(self, shapes: dict[tuple, Shape]) -> None:
        if self.persist is None:
            return
        doc = {"shapes": [{"key": list(k), "shape": asdict(v)} for k, v in sorted(shapes.items())]}
        try:
            atomic_write_text(self.persist / "shapes.json", json.dumps(doc, indent=1) + "\n")
        except OSError:
            pass  # a read-only cache dir only costs the next run its discovery

    # -- registries
    def get(
        self,
        registry_id: str,
        fetch: Callable[[], Registry],
        attributes: Iterable[str] | None = None,
        confirm: Callable[[Registry], bool] | None = None,
    ) -> Registry:
        """The registry ``registry_id`` that covers ``attributes`` (a Bios's attribute names) and that
        ``confirm`` accepts (the caller's BMC serves it now): from this run, else from disk, else ``fetch()``
        (once per id at a time)."""
        attributes = None if attributes is None else list(attributes)
        ok = confirm or (lambda reg: True)
        with self._lock:
            id_lock = self._locks.setdefault(registry_id, threading.Lock())
        tried: set[int] = set()
        while True:
            # registries this run already has are confirmed (a request to the caller's BMC) without holding the
            # id lock: hosts of one model confirm in parallel instead of one after the other
            with self._lock:
                known = [r for r in self._data.get(registry_id, []) if id(r) not in tried]
            for reg in known:
                tried.add(id(reg))
                if _covers(reg, attributes) and ok(reg):
                    return reg
            with id_lock:
                with self._lock:
                    if any(id(r) not in tried for r in self._data.get(registry_id, [])):
                        continue  # another host added one while this one waited: confirm it outside the lock
                reg = self._load(registry_id, attributes)
                if reg is not None and not ok(reg):
                    reg = None
                if reg is None:
                    reg = fetch()
                    with self._lock:
                        self.fetches += 1
                    self._store(registry_id, reg)
                else:
                    with self._lock:
                        self.loaded += 1
                with self._lock:
                    self._data.setdefault(registry_id, []).append(reg)
                return reg

    def _load(self, registry_id: str, attributes: list[str] | None) -> Registry | None:
        if self.persist is None:
            return None
        for path in sorted((self.persist / "registries" / _safe(registry_id)).glob("*.json")):
            try:
                reg = Registry.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, TypeError, AttributeError):
                continue
            if reg.attributes and _covers(reg, attributes):
                try:
                    source = json.loads(path.with_suffix(".source").read_text())
                    reg.source_uri, reg.etag = str(source["uri"]), source.get("etag")
                except (OSError, ValueError, TypeError, KeyError):
                    pass  # unconfirmable: confirm() refuses it and the BMC is asked
                return reg
        return None

    def _store(self, registry_id: str, reg: Registry) -> None:
        doc = getattr(reg, "doc", None)
        if self.persist is None or not doc:
            return
        base = self.persist / "registries" / _safe(registry_id) / _names_sha(reg)
        try:
            atomic_write_text(base.with_suffix(".json"), json.dumps(doc))
            atomic_write_text(
                base.with_suffix(".source"),
                json.dumps({"uri": getattr(reg, "source_uri", None), "etag": getattr(reg, "etag", None)}),
            )
        except OSError:
            pass


# -- registry lookup (DSP0266: Registries collection -> MessageRegistryFile -> Location[].Uri) -----------------
def _odata(link) -> str | None:
    if isinstance(link, dict):
        link = link.get("@odata.id")
    return _path(link) if isinstance(link, str) and link else None


def _same_registry(file: dict, registry_id: str) -> bool:
    """A MessageRegistryFile describes ``registry_id`` when its Id or Registry names it (case-insensitively:
    the Bios's AttributeRegistry and the file's Id are both "<name>.<version>")."""
    want = registry_id.lower()
    return any(str(file.get(k) or "").lower() == want for k in ("Id", "Registry"))


def fetch_registry(client, registry_id: str) -> Registry:
    """The AttributeRegistry the Bios names, found as DSP0266 says: read the Registries collection's members
    (MessageRegistryFile), take the one whose Id or Registry is ``registry_id``, and GET its Location[].Uri
    (English first). A member is recognised by what it says (Id/Registry), never by its URI: vendors spell
    those differently (HPE lists the file at a lower-case, dotted URI). The usual URI is tried first only to
    save the collection read when it does hold that registry."""
    where = f"{client.host} ({client.base_url})"
    coll = _odata((client.ensure_root() or {}).get("Registries"))
    if not coll:
        raise RedfishError(
            "the service root has no Registries collection",
            where,
            "the BMC does not publish its BIOS attribute registry; nothing can be validated",
        )
    # fast path (one request on most BMCs): the member named after the id -- accepted only if the file itself
    # says it is that registry; otherwise (404, another file) the collection decides
    file, seen = None, []
    guess = coll.rstrip("/") + "/" + registry_id
    r = client.request("GET", guess)
    if r.status < 400 and isinstance(r.body, dict) and _same_registry(r.body, registry_id):
        file = r.body
    members = [] if file else [m for m in (_odata(m) for m in client.get(coll).body.get("Members") or []) if m]
    for uri in members:
        if uri.rstrip("/") == guess:
            continue
        r = client.request("GET", uri)
        if r.status >= 400 or not isinstance(r.body, dict):
            seen.append(f"{uri} (HTTP {r.status})")
            continue
        if _same_registry(r.body, registry_id):
            file = r.body
            break
        seen.append(str(r.body.get("Id") or uri))
    if file is None:
        raise RedfishError(
            f"registry {registry_id} is not among the {len(members)} members of {coll} "
            f"(their Id: {', '.join(seen) or 'none'})",
            where,
            "the Bios names a registry file the BMC does not list; ask the vendor, or write the "
            "settings under raw: after checking them in the BMC's web UI",
        )
    locations = [loc for loc in file.get("Location") or [] if isinstance(loc, dict)]
    locations.sort(key=lambda loc: 0 if str(loc.get("Language", "en")).startswith("en") else 1)
    uri = next((_path(loc["Uri"]) for loc in locations if loc.get("Uri")), None)
    if uri is None:
        pubs = [str(loc["PublicationUri"]) for loc in locations if loc.get("PublicationUri")]
        what = (
            f"registry {registry_id} is only published outside the BMC (PublicationUri {', '.join(pubs)})"
            if pubs
            else f"registry {registry_id} has no Location[].Uri"
        )
        raise RedfishError(
            what,
            where,
            "numaforge reads the registry from the BMC only (it must match the BIOS "
            "exactly); enable the BMC's local registry store, or validate by hand and use raw:",
        )
    r = client.request("GET", uri)
    if r.status >= 400:
        raise RedfishError(
            f"GET {uri} (the Location of registry {registry_id}) answered {r.status}: {r.error_text()}",
            where,
            "check the BMC's registry store",
        )
    if "RegistryEntries" not in (r.body or {}):
        raise RedfishError(
            f"{uri} is not an AttributeRegistry (no RegistryEntries)", where, "the BMC's registry file is malformed"
        )
    reg = Registry.from_json(r.body)
    reg.source_uri, reg.etag = uri, r.headers.get("etag")  # what apply.confirm_registry() compares later
    client.confirmed.add(id(reg))
    return reg
