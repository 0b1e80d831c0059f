"""What the BMCs of a fleet have in common, learnt once and reused: attribute registries and per-model paths.

    cache = RegistryCache(persist=discovery_dir())     # run_hosts / run_verify: one per run, kept on disk
    shape = cache.claim(shape_key(host), wait=30)      # None: this host discovers (then learn() or release())
    registry = cache.get(registry_id, fetch, attributes=bios["Attributes"])

**Registries** are keyed by registry id *and* checked against the host's Bios: a registry serves a host only if
it describes every attribute that host's Bios has (some vendors keep one registry id across platforms whose
attribute sets differ) *and* the host's BMC confirms it serves that very document now: ``confirm(registry)``
(hoststate.confirm_registry: a HEAD of the registry file's URI, whose ETag must equal the one recorded when it was fetched). A
registry that cannot be confirmed (no ETag, another URI, HEAD refused) is fetched again from that BMC: a cached
registry must never allow a value the BMC no longer allows. A miss fetches from the BMC; hosts needing the same
id wait for one fetch.

**Shapes** (sessions URL, system path, Bios path, registry id) are kept per BMC model -- hosts whose inventory
states the same vendor, platform and system id. A later host of the model goes straight to its Bios after
confirming the path against its own BMC (hoststate.read_state: its Systems collection must list exactly that
system, or the inventory's system_id); if anything differs (moved, another registry, a second system) it
discovers afresh -- refusing what discovery would refuse -- and the shape is replaced.

**On disk** (``persist``; default ``$NUMAFORGE_REDFISH_CACHE`` or ``<cache_dir>/redfish``) both outlive the run,
so a re-run (the usual "is the fleet still compliant?") costs every host 4 reads, all sent at once in one round
trip (``cached_reads``): Systems (confirms the path), Bios, settings object, HEAD of the registry file
(confirms the registry); plus login and logout with ``bmc.auth: session``. Files:
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
from .errors import RedfishError, RedfishHTTPError
from .exchange import Response, path_of
from .redfish import RedfishClient
from .registry import Registry
from .resources import Collection, link_path
from .resources.base import check


@dataclass(frozen=True)
class Shape:
    """Where one BMC model keeps things, learnt from the first host of that model."""

    login_url: str
    system_path: str
    bios_path: str
    registry_id: str
    model: str = ""  # the System's Model
    settings_path: str = ""  # the Bios's @Redfish.Settings SettingsObject ("" in caches from before issue 29)
    processor: str = ""  # the System's ProcessorSummary.Model ("" when it names none, or in older caches)


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
        self._wanted: set[str] = set()  # registry ids a host already went to read early (first_to_want)
        self._locating: dict[str, threading.Event] = {}  # ids whose file a host is locating or fetching now
        self._located: dict[str, str] = {}  # the file URI that fetch names (announce), until it ends
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
        if not key:
            return
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

    def peek(self, registry_id: str) -> Registry | None:
        """The registry ``registry_id`` this run (else the disk cache, read once per run) already has,
        unconfirmed: what a host can ask its BMC to confirm in the same round trip as its other reads
        (cached_reads); get() still confirms it before it serves. Waits while another host fetches that id."""
        with self._lock:
            id_lock = self._locks.setdefault(registry_id, threading.Lock())
        with id_lock:
            with self._lock:
                known = self._data.get(registry_id)
                if known:
                    return known[0]
            reg = self._load(registry_id, None)
            if reg is not None:
                with self._lock:
                    self._data.setdefault(registry_id, []).append(reg)
                    self.loaded += 1
            return reg

    def first_to_want(self, registry_id: str) -> bool:
        """True for the first host of this run to ask for ``registry_id``: the one that reads its registry entry
        early (bios_reads); hosts after it wait for that fetch instead of reading the entry too."""
        with self._lock:
            first = registry_id not in self._wanted
            self._wanted.add(registry_id)
            if first:
                self._locating[registry_id] = threading.Event()
            return first

    def announce(self, registry_id: str, uri: str) -> None:
        """The file the host fetching ``registry_id`` reads it from (fetch_registry, before the GET): hosts of
        the model HEAD that URI with their other reads (cached_reads) instead of waiting for the fetch to end."""
        with self._lock:
            event = self._locating.get(registry_id)
            if event is not None and registry_id not in self._located:
                self._located[registry_id] = uri
                event.set()

    def pending_location(self, registry_id: str, wait: float) -> str | None:
        """The file URI a host of this run is fetching ``registry_id`` from now (waiting up to ``wait`` s for the
        fetch to name it), else None (no fetch under way, or it ended: peek() has its result). The ETag the fetch
        records is compared later with what the HEAD answered (hoststate.confirm_registry)."""
        with self._lock:
            event = self._locating.get(registry_id)
        if event is None:
            return None
        event.wait(wait)
        with self._lock:
            return self._located.get(registry_id)  # settle() dropped it when the fetch ended

    def settle(self, registry_id: str) -> None:
        """The fetch of ``registry_id`` ended (or its host's session did, whatever happened): nobody waits for its
        location any more."""
        with self._lock:
            event = self._locating.pop(registry_id, None)
            self._located.pop(registry_id, None)
        if event is not None:
            event.set()

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
                try:
                    found = self._load(registry_id, attributes)
                    if found is not None and not ok(found):
                        found = None
                    if found is None:
                        found = fetch()
                        with self._lock:
                            self.fetches += 1
                        self._store(registry_id, found)
                    else:
                        with self._lock:
                            self.loaded += 1
                    with self._lock:
                        self._data.setdefault(registry_id, []).append(found)
                    return found
                finally:
                    self.settle(registry_id)  # hosts waiting for a location go on (peek has the result)

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


def cached_reads(shape: Shape, cache: RegistryCache, wait: float = 0.0) -> list[tuple[str, str]]:
    """Every read a host of a known model needs, all known before the first answer, so they go in one round
    trip (RedfishClient.prefetch): its Systems collection (confirms the model's system path), its Bios, its
    settings object, and a HEAD of the cached registry's file (confirms the registry; hoststate.confirm_registry).
    While another host of this run fetches that registry, the HEAD goes to the file it is fetching (named as soon
    as it is known; ``wait``: at most this long for that) and its ETag is compared once the fetch ends.
    Each answer is still checked where it is used; one that does not fit sends the host through discovery."""
    calls = [("GET", shape.system_path.rstrip("/").rsplit("/", 1)[0]), ("GET", shape.bios_path)]
    if shape.settings_path:
        calls.append(("GET", shape.settings_path))
    fetching = cache.pending_location(shape.registry_id, wait)
    if fetching:
        return [*calls, ("HEAD", fetching)]
    reg = cache.peek(shape.registry_id)
    if reg is not None and reg.source_uri and reg.etag:
        calls.append(("HEAD", reg.source_uri))
    return calls


SYSTEMS = "/redfish/v1/Systems"  # DSP0266's URI of the Systems collection (the schema's Redfish.Uris)


def discovery_reads(client, host) -> list[tuple[str, str]]:
    """A host of no known model starts at the service root; its Systems collection (or the inventory's system
    and that system's Bios) is at the URI DSP0266 fixes (/redfish/v1/Systems, system_reads), so they go in one
    round trip. A root whose Systems link is elsewhere only costs that read: its answer is used for nothing
    else. Nothing when the root was read (login)."""
    if client.root:
        return []
    if host.bmc.system_id:
        return [("GET", "/redfish/v1/"), *system_reads(f"{SYSTEMS}/{host.bmc.system_id}")]
    return [("GET", "/redfish/v1/"), ("GET", SYSTEMS)]


def system_reads(system_path: str) -> list[tuple[str, str]]:
    """A system and its Bios in one round trip: the Bios schema's Redfish.Uris put it at
    /redfish/v1/Systems/{ComputerSystemId}/Bios. Only for a system at DSP0266's own URI (HPE's lower-case
    /redfish/v1/systems/1/ keeps its Bios at .../bios/: no guess there); the System's Bios link still decides,
    so a Bios elsewhere costs only the guessed read, whose answer is used for nothing."""
    path = path_of(system_path).rstrip("/")
    if not path.startswith(SYSTEMS + "/"):
        return []
    return [("GET", path), ("GET", path + "/Bios")]


def bios_reads(client, bios: dict, cache: RegistryCache, model: bool) -> list[tuple[str, str]]:
    """Once a Bios is read, its settings object and its registry are known: the settings object and either a
    HEAD of the registry this run already has (the confirmation) or the registry's usual entry in the
    Registries collection (fetch_registry's first read) go in one round trip. The entry only for the first
    host of a stated model (``model``), the one host that discovers while the others of its model wait: hosts
    that all discover at once (vendor auto) would race for the fetch and read the entry in vain."""
    settings = link_path(bios, "@Redfish.Settings", "SettingsObject")
    registry_id = bios.get("AttributeRegistry")
    calls = [("GET", settings)] if settings else []
    reg = cache.peek(registry_id) if registry_id else None
    registries = link_path(client.root or {}, "Registries")
    if reg is not None and reg.source_uri and reg.etag:
        calls.append(("HEAD", reg.source_uri))
    elif model and registry_id and registries and cache.first_to_want(registry_id):
        calls.append(("GET", registries.rstrip("/") + "/" + registry_id))
        client.on_close.append(lambda: cache.settle(registry_id))  # a host that fails before its fetch
    return [(m, p) for m, p in calls if (m, path_of(p).rstrip("/") or "/") not in client.prefetched]


# -- registry lookup (DSP0266: Registries collection -> MessageRegistryFile -> Location[].Uri) -----------------
#
# Found the way sushy finds one (sushy/resources/base.py _get_registry: the id asked for is compared with both the
# file's key and the loaded document's own Id), with the version drift real BMCs show: an iDRAC9 (NVIDIA/libredfish
# tests/mockups/dell, PowerEdge R750) has its Bios name BiosAttributeRegistry.v1_0_3 and lists the file as
# BiosAttributeRegistry.v1_0_0 (Registry "BiosAttributeRegistry1.0"), the document's Id being v1_0_3; a Supermicro
# (tests/mockups/supermicro) names it BiosAttributeRegistry.v1_0_0 in the Bios, BiosAttributeRegistry.1.0.0 in the
# file's Registry and BiosAttributeRegistry.1_0_0 in the document. A registry id is "<name>.<major>.<minor>.<errata>"
# whatever the separators ("." or "_", an optional "v"); candidates are the files whose Id or Registry names the
# same registry (exactly first, then the same name and major version), and the document decides: its Id (or
# RegistryPrefix + RegistryVersion) must name the same registry, of the same major version.

_ID_RX = re.compile(r"^(?P<name>[^.]+?)(?:\.v?(?P<v>\d+(?:[._]\d+){1,2}))?$", re.IGNORECASE)
# A language tag between the name and the version ("BiosAttributeRegistry113.en-US.1.1.3", the document Id of an
# AMI MegaRAC's registry file, NVIDIA/libredfish tests/mockups/nvidia_viking): no part of the registry's name
_LANG_RX = re.compile(r"\.[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*(?=\.v?\d)")
_GLUED_RX = re.compile(r"^(?P<name>.*?[A-Za-z])v?(?P<v>\d+\.\d+)$")  # "BiosAttributeRegistry1.0" (iDRAC's Registry)


def registry_identity(text: str | None) -> tuple[str, tuple[int, ...]] | None:
    """("biosattributeregistry", (1, 0, 3)) for "BiosAttributeRegistry.v1_0_3", "…1.0.3", "…1_0_3"; the version
    is () when the text has none ("BiosAttributeRegistry"); None for an empty text. Pure."""
    text = _LANG_RX.sub("", str(text or "").strip(), count=1)
    if not text:
        return None
    m = _ID_RX.match(text) or _GLUED_RX.match(text)
    if not m:
        return (text.lower(), ())
    v = m.group("v")
    return (m.group("name").lower(), tuple(int(x) for x in re.split(r"[._]", v)) if v else ())


def _doc_identity(doc: dict) -> tuple[str, tuple[int, ...]] | None:
    """What a registry document says it is: its Id, else RegistryPrefix + RegistryVersion."""
    ident = registry_identity(doc.get("Id"))
    if ident and ident[1]:
        return ident
    prefix = doc.get("RegistryPrefix") or (ident[0] if ident else None)
    version = registry_identity(f"x.{doc.get('RegistryVersion')}") if doc.get("RegistryVersion") else None
    if prefix:
        return (str(prefix).lower(), version[1] if version else ())
    return ident


def registry_fit(want: str, have: tuple[str, tuple[int, ...]] | None) -> str | None:
    """How a registry identity fits the id the Bios names: "exact" (same name, the versions agree as far as
    both go), "drift" (same name and major version), None. Pure."""
    w = registry_identity(want)
    if not w or not have or w[0] != have[0]:
        return None
    wv, hv = w[1], have[1]
    n = min(len(wv), len(hv))
    if wv[:n] == hv[:n]:
        return "exact"
    return "drift" if wv[0] == hv[0] else None


def _file_fit(file: dict, registry_id: str) -> str | None:
    """How well a MessageRegistryFile's Id or Registry names ``registry_id``: "same" (either is it, ignoring
    case), "exact"/"drift" (registry_fit of either), None."""
    want = registry_id.lower()
    if any(str(file.get(k) or "").lower() == want for k in ("Id", "Registry")):
        return "same"
    fits = {registry_fit(registry_id, registry_identity(file.get(k))) for k in ("Id", "Registry")}
    return "exact" if "exact" in fits else "drift" if "drift" in fits else None


def _location(file: dict) -> tuple[str | None, list[str]]:
    """The file's local Location[].Uri (English first) and, when it has none, its PublicationUris."""
    locations = [loc for loc in file.get("Location") or [] if isinstance(loc, dict)]
    locations.sort(key=lambda loc: 0 if str(loc.get("Language", "en")).startswith("en") else 1)
    uri = next((path_of(loc["Uri"]) for loc in locations if loc.get("Uri")), None)
    return uri, [str(loc["PublicationUri"]) for loc in locations if loc.get("PublicationUri")]


def fetch_registry(client: RedfishClient, registry_id: str, announce: Callable[[str], None] | None = None) -> Registry:
    """The AttributeRegistry the Bios names (``registry_id``), found as DSP0266 says and checked as sushy does:
    read the Registries collection's members (MessageRegistryFile); the files whose Id or Registry names that
    registry (the same text first, then the same name in another spelling or version) are candidates; GET each
    candidate's Location[].Uri (English first) until a document says it is that registry (its own Id, or
    RegistryPrefix/RegistryVersion) -- of the same major version at least, an exact version preferred. A member
    is recognised by what it says, never by its URI: vendors spell those differently (HPE lists the file at a
    lower-case, dotted URI). The usual URI (<collection>/<registry_id>) is tried first only to save the collection
    read when it does hold that registry. Version drift within a major version is used and said in the client's
    warnings; when nothing fits, the error lists every candidate tried and what its document said. ``announce``
    hears the first file URI read (RegistryCache.announce), before its GET is sent."""
    coll = link_path(client.ensure_root() or {}, "Registries")
    if not coll:
        raise RedfishError(
            "the service root has no Registries collection",
            f"{client.host} ({client.base_url})",
            "the BMC does not publish its BIOS attribute registry; nothing can be validated",
        )
    lookup = _RegistryLookup(client, registry_id, coll, announce)
    reg = lookup.usual_entry() or lookup.scan() or lookup.drifted()
    if reg is None:
        raise lookup.not_found()
    client.confirmed.add(id(reg))
    return reg


def listed_bios_registry(client: RedfishClient) -> str:
    """The registry id of the one BIOS attribute registry the Registries collection lists, for a Bios that names
    none (NVIDIA's Grace and BlueField BMCs: Registries/BiosAttributeRegistry, Registry
    "BiosAttributeRegistry.1.0.0"; NVIDIA/libredfish tests/mockups/nvidia_gh200). A member is one when its Id
    or Registry is named BiosAttributeRegistry (any suffix, as AMI's BiosAttributeRegistry113). The caller says
    in the warnings which one was used. None or several: a RedfishError naming what was listed."""
    where = f"{client.host} ({client.base_url})"
    coll = link_path(client.ensure_root() or {}, "Registries")
    if not coll:
        raise RedfishError(
            "the Bios names no AttributeRegistry and the service root has no Registries collection",
            where,
            "the BMC publishes no BIOS attribute registry: values cannot be validated; nothing is written",
        )
    r = client.request("GET", coll)
    check(client, r, "GET")
    found: dict[str, str] = {}  # registry id -> member URI
    for uri in Collection(client, coll, r.body, r.etag).member_paths:
        file, _ = _read(client, uri)
        if file is None:
            continue
        names = [str(file.get(k) or "") for k in ("Registry", "Id")]
        if any(n.lower().startswith("biosattributeregistry") for n in names):
            found.setdefault(next(n for n in names if n), uri)
    if len(found) != 1:
        raise RedfishError(
            "the Bios names no AttributeRegistry and the Registries collection "
            + (
                f"lists {len(found)} BIOS attribute registries ({', '.join(sorted(found))})"
                if found
                else "lists no BIOS attribute registry (no member named BiosAttributeRegistry...)"
            ),
            where,
            "values cannot be validated, so nothing is written; a BMC firmware that names the registry in the "
            "Bios (AttributeRegistry) is needed",
        )
    ((registry_id, uri),) = found.items()
    client.warnings.append(
        f"the Bios names no AttributeRegistry; validated against the only BIOS attribute registry the BMC lists: "
        f"{registry_id} ({uri})"
    )
    return registry_id


def _read(client: RedfishClient, uri: str) -> tuple[dict | None, Response]:
    """GET ``uri``: (its document, the answer), the document None when the BMC answered an error status."""
    r = client.request("GET", uri)
    try:
        check(client, r, "GET")
    except RedfishHTTPError:
        return None, r
    return r.body, r


class _RegistryLookup:
    """One fetch_registry: the candidates tried and what each said (for the error), and the near misses."""

    def __init__(
        self, client: RedfishClient, registry_id: str, coll: str, announce: Callable[[str], None] | None = None
    ):
        self.client, self.registry_id, self.coll = client, registry_id, coll
        self.announce = announce
        self.guess = coll.rstrip("/") + "/" + registry_id
        self.tried: list[str] = []  # "<file URI> -> <what its document said>", for the error
        self.drift: list[tuple[Registry, str]] = []  # documents of the same major version, another minor/errata
        self.published: list[tuple[str, list[str]]] = []  # candidates with only a PublicationUri
        self.members: list[str] = []
        self.others: list[str] = []  # members that name another registry

    def consider(self, file_uri: str, file: dict) -> Registry | None:
        """The registry a MessageRegistryFile's document is, if it is the one wanted (an exact version);
        anything else is noted in ``tried`` (a same-major document also in ``drift``)."""
        uri, pubs = _location(file)
        label = f"{file_uri} (Id {file.get('Id')!r}, Registry {file.get('Registry')!r})"
        if uri is None:
            self.published.append((label, pubs))
            self.tried.append(
                f"{label}: " + (f"PublicationUri {', '.join(pubs)} only" if pubs else "no Location[].Uri")
            )
            return None
        if self.announce is not None:
            self.announce(uri)
        doc, r = _read(self.client, uri)
        if doc is None:
            self.tried.append(f"{label} -> GET {uri} answered {r.status}: {r.error_text()}")
            return None
        if "RegistryEntries" not in doc:
            self.tried.append(f"{label} -> {uri} is not an AttributeRegistry (no RegistryEntries)")
            return None
        fit = registry_fit(self.registry_id, _doc_identity(doc))
        said = doc.get("Id") or (f"{doc.get('RegistryPrefix')} {doc.get('RegistryVersion')}")
        if fit is None:
            self.tried.append(f"{label} -> {uri} is registry {said!r}")
            return None
        reg = Registry.from_json(doc)
        reg.source_uri, reg.etag = uri, r.headers.get("etag")  # what hoststate.confirm_registry() compares later
        if fit == "exact":
            return reg
        self.tried.append(f"{label} -> {uri} is registry {said!r} (same major version)")
        self.drift.append((reg, str(said)))
        return None

    def usual_entry(self) -> Registry | None:
        """The fast path (two requests on most BMCs): the member named after the id, if it says it is that one."""
        file, _ = _read(self.client, self.guess)
        if file is not None and _file_fit(file, self.registry_id) == "same":
            return self.consider(self.guess, file)
        return None

    def scan(self) -> Registry | None:
        """Every other member: a file naming exactly the registry is read at once, the others ranked after."""
        r = self.client.request("GET", self.coll)
        if r.status >= 400:
            raise RedfishError(
                f"the Registries collection {self.coll} the service root names answered {r.status} "
                f"({r.error_text()}), and {self.guess} does not serve registry {self.registry_id}: the BMC does "
                "not publish the BIOS attribute registry its Bios names, so no value can be validated",
                f"{self.client.host} ({self.client.base_url})",
                "check the BMC (a firmware update or a reset of its Redfish service restores the registry store); "
                "nothing is written without the registry",
            )
        self.members = Collection(self.client, self.coll, r.body, r.etag).member_paths
        ranked: list[tuple[int, str, dict]] = []  # files naming the registry in another spelling or version
        for uri in self.members:
            if uri.rstrip("/") == self.guess.rstrip("/"):
                continue
            file, r = _read(self.client, uri)
            if file is None:
                self.others.append(f"{uri} (HTTP {r.status})")
                continue
            fit = _file_fit(file, self.registry_id)
            if fit is None:
                self.others.append(str(file.get("Id") or uri))
            elif fit == "same":
                reg = self.consider(uri, file)
                if reg is not None:
                    return reg
            else:
                ranked.append((0 if fit == "exact" else 1, uri, file))
        for _, uri, file in sorted(ranked, key=lambda t: t[0]):
            reg = self.consider(uri, file)
            if reg is not None:
                return reg
        return None

    def drifted(self) -> Registry | None:
        """Nothing of the exact version: the first of the same major version, said in the warnings."""
        if not self.drift:
            return None
        reg, said = self.drift[0]
        self.client.warnings.append(
            f"the Bios names registry {self.registry_id}; the BMC serves {said} (same major version, so the same "
            f"attributes and values are expected): validated against it ({reg.source_uri})"
        )
        return reg

    def not_found(self) -> RedfishError:
        where = f"{self.client.host} ({self.client.base_url})"
        if self.published and len(self.published) == len(self.tried):
            label, pubs = self.published[0]
            return RedfishError(
                f"registry {self.registry_id} is only published outside the BMC (PublicationUri {', '.join(pubs)})"
                if pubs
                else f"registry {self.registry_id} has no Location[].Uri ({label})",
                where,
                "numaforge reads the registry from the BMC only (it must match the BIOS "
                "exactly); enable the BMC's local registry store, or validate by hand and use raw:",
            )
        if self.tried:
            return RedfishError(
                f"no registry file of {self.coll} serves registry {self.registry_id}; candidates tried: "
                + "; ".join(self.tried),
                where,
                "the BMC serves another registry than its Bios names (a firmware update half done?): update or "
                "reset the BMC; or write the settings under raw: after checking them in the BMC's web UI",
            )
        return RedfishError(
            f"registry {self.registry_id} is not among the {len(self.members)} members of {self.coll} "
            f"(their Id: {', '.join(self.others) or 'none'})",
            where,
            "the Bios names a registry file the BMC does not list; ask the vendor, or write the "
            "settings under raw: after checking them in the BMC's web UI",
        )
