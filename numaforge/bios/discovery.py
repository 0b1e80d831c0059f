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
        self.fetches = 0            # registries fetched from a BMC in this run
        self.loaded = 0             # registries read from the disk cache in this run

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
                    self._shapes = {}        # no file or an unreadable one: discover (and rewrite it)
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
                return None               # discover in parallel rather than wait any longer
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
            pass                         # a read-only cache dir only costs the next run its discovery

    # -- registries
    def get(self, registry_id: str, fetch: Callable[[], Registry], attributes: Iterable[str] | None = None,
            confirm: Callable[[Registry], bool] | None = None) -> Registry:
        """The registry ``registry_id`` that covers ``attributes`` (a Bios's attribute names) and that
        ``confirm`` accepts (the caller's BMC serves it now): from this run, else from disk, else ``fetch()``
        (once per id at a time)."""
        attributes = None if attributes is None else list(attributes)
        ok = confirm or (lambda reg: True)
        with self._lock:
            id_lock = self._locks.setdefault(registry_id, threading.Lock())
        with id_lock:
            for reg in self._data.get(registry_id, []):
                if _covers(reg, attributes) and ok(reg):
                    return reg
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
                    pass                 # unconfirmable: confirm() refuses it and the BMC is asked
                return reg
        return None

    def _store(self, registry_id: str, reg: Registry) -> None:
        doc = getattr(reg, "doc", None)
        if self.persist is None or not doc:
            return
        base = self.persist / "registries" / _safe(registry_id) / _names_sha(reg)
        try:
            atomic_write_text(base.with_suffix(".json"), json.dumps(doc))
            atomic_write_text(base.with_suffix(".source"), json.dumps({"uri": getattr(reg, "source_uri", None),
                                                                        "etag": getattr(reg, "etag", None)}))
        except OSError:
            pass
