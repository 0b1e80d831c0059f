"""One host's BIOS as read over Redfish (``BiosState``) and the read that fills it (``read_state``).

A host of a model already seen this run (or a past one: numaforge.bios.discovery) goes straight to its Bios, all
its reads in one round trip; anything unexpected (moved, another registry, a second system) sends it through
discovery: service root -> System -> Bios -> settings object and registry, each through the client-side resources
(numaforge.bios.resources), which raise the typed error of an HTTP status. Nothing here plans or writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import discovery
from .discovery import RegistryCache, Shape, shape_key
from .errors import VendorMismatchError
from .redfish import RedfishClient
from .registry import Registry
from .resources import Bios, Collection, ServiceRoot, SettingsObject, System, etag_of
from .vendors import detect_vendor, vendor_evidence


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
    processor: str = ""  # the System's ProcessorSummary.Model: which map entries are on this host (vendormap)
    shape: Shape | None = None  # the model's known shape this host was read through (a re-read goes the same way)

    def settings_object(self, client: RedfishClient) -> SettingsObject:
        """The settings object as read, with the ETag a PATCH sends as If-Match: its own, never the Bios's
        @Redfish.Settings ETag (that one is the current Bios resource's: DSP8010 Settings; issue 41 item 8)."""
        return SettingsObject(client, self.settings_path, {"Attributes": self.settings_attrs}, self.etag)


def confirm_registry(client: RedfishClient, reg: Registry) -> bool:
    """A cached registry (another host's, or a past run's) serves this host only if this BMC serves the same
    document now: a HEAD of its URI must answer the ETag recorded when it was fetched. Anything else (no ETag,
    HEAD refused, another ETag) means: fetch it from this BMC."""
    if id(reg) in client.confirmed:
        return True
    if not reg.source_uri or not reg.etag:
        return False
    if etag_of(client, reg.source_uri) == reg.etag:
        client.confirmed.add(id(reg))
        return True
    return False


def _shape_system_confirmed(client: RedfishClient, host, shape: Shape) -> bool:
    """The model's system path serves this host only if this BMC's Systems collection lists it -- and, when
    the inventory names no system_id, lists nothing else (a BMC that now manages two systems is refused by
    discovery, so it must not be let through by the cache)."""
    systems = Collection.load_or_none(client, shape.system_path.rstrip("/").rsplit("/", 1)[0])
    if systems is None:
        return False
    members = [p.rstrip("/") for p in systems.member_paths]
    mine = shape.system_path.rstrip("/")
    return mine in members if host.bmc.system_id else members == [mine]


def _bios_of_known_model(client: RedfishClient, host, shape: Shape, cache: RegistryCache) -> Bios | None:
    """Same model as a host already read: every read in one round trip (discovery.cached_reads), then the model's
    Bios if this BMC confirms its system path and the Bios names the model's registry; else None (discover)."""
    client.prefetch(discovery.cached_reads(shape, cache, wait=client.policy.read_timeout))
    if not _shape_system_confirmed(client, host, shape):
        return None
    bios = Bios.load_or_none(client, shape.bios_path)
    return bios if bios is not None and bios.registry_id == shape.registry_id else None


def _discover(client: RedfishClient, host, cache: RegistryCache) -> tuple[System, Bios]:
    """Service root -> System (bmc.system_id, or the only one) -> Bios, reads sent at once where the next path
    is known before the answer (discovery.discovery_reads, system_reads, bios_reads)."""
    client.prefetch(discovery.discovery_reads(client, host))  # the service root and Systems at once
    root = ServiceRoot.load(client)
    if host.bmc.system_id:
        system = root.system(host.bmc.system_id)
    else:
        path = root.only_system_path()
        client.prefetch(discovery.system_reads(path))  # the system and its Bios at once
        system = System.load(client, path)
    bios = system.bios()
    client.prefetch(discovery.bios_reads(client, bios.body, cache, shape_key(host) is not None))
    return system, bios


def read_state(client: RedfishClient, host, cache: RegistryCache, shape: Shape | None = None) -> BiosState:
    """The host's BIOS now: current values, the settings object (pending values, ETag, apply times), the
    registry (validated against, from the run's cache when this BMC confirms it) and the vendor. ``shape``: the
    model's known shape (numaforge.bios.discovery.RegistryCache.claim), tried before discovery."""
    bios = _bios_of_known_model(client, host, shape, cache) if shape is not None else None
    system: System | None = None
    if bios is None:
        system, bios = _discover(client, host, cache)
    settings = bios.settings()
    registry_id = bios.registry_id or discovery.listed_bios_registry(client)  # a Bios naming none: the one listed
    system_path = system.path if system is not None else (shape.system_path if shape else "")
    model = str(system.body.get("Model") or "") if system is not None else (shape.model if shape else "")
    processor = processor_model(system.body) if system is not None else (shape.processor if shape else "")
    learnt = Shape(
        client.login_url,
        system_path,
        bios.path,
        registry_id,
        model=model,
        settings_path=settings.path,
        processor=processor,
    )
    if learnt != shape and client.login_url:
        # the model's paths are known now: hosts waiting for them go on (their registry comes from the cache
        # below, which fetches it once per id while they read their own Bios and settings)
        cache.learn(shape_key(host), learnt, replace=shape is not None)
    registry = cache.get(
        registry_id,
        lambda: discovery.fetch_registry(client, registry_id, announce=lambda uri: cache.announce(registry_id, uri)),
        attributes=bios.attributes.keys(),
        confirm=lambda reg: confirm_registry(client, reg),
    )
    if not settings.etag:
        note = (
            "the settings object has no ETag: it is re-read right before the PATCH, which is then sent "
            "without If-Match (a change made by someone else in between cannot be detected)"
        )
        if note not in client.warnings:
            client.warnings.append(note)
    client.prefetched.clear()  # an early answer nobody used must not stand in for a later read
    vendor, how = _vendor_of(client, host, system.body if system is not None else None)
    return BiosState(
        vendor=vendor,
        system_path=system_path,
        system=system.body if system is not None else None,
        bios_path=bios.path,
        current=bios.attributes,
        settings_path=settings.path,
        settings_attrs=settings.attributes,
        etag=settings.etag,  # its own, never the Bios's @Redfish.Settings ETag (issue 41 item 8)
        apply_times=settings.apply_times,
        registry=registry,
        detected_by=how,
        model=model,
        processor=processor,
        shape=shape,
    )


def processor_model(system: dict | None) -> str:
    """The processor model a System's ProcessorSummary names, whitespace folded ("" when it names none): the
    captures of Intel and ARM boards (tests/data/captures: Dell R750, Lenovo SR670 V2, Supermicro X13; NVIDIA
    GH200/GB200) name theirs there."""
    summary = (system or {}).get("ProcessorSummary")
    model = summary.get("Model") if isinstance(summary, dict) else None
    return " ".join(str(model).split()) if isinstance(model, str) else ""


def _vendor_of(client: RedfishClient, host, system: dict | None) -> tuple[str, str]:
    """(vendor, how it is known): the inventory's bmc.vendor, its hardware.vendor, else the service root's. An
    inventory vendor the BMC contradicts (its service root or system, where this run read them, names another
    maker) is an error naming both, before anything is planned."""
    cfg = host.bmc.vendor if host.bmc.vendor and host.bmc.vendor != "auto" else None
    if cfg:
        how = "inventory bmc.vendor"
    elif host.hardware.vendor:
        cfg, how = host.hardware.vendor, "inventory hardware.vendor"
    else:
        return detect_vendor(client.ensure_root(), system), "detected from the service root"
    if (client.root or system) and cfg != "generic":
        seen = detect_vendor(client.root or {}, system)
        if seen not in ("generic", cfg):
            key = "bmc.vendor" if how.endswith("bmc.vendor") else "hardware.vendor"
            raise VendorMismatchError(
                f"inventory says {cfg} ({key}), BMC says {seen} ({vendor_evidence(client.root or {}, system)})",
                f"{host.name} ({host.location}; {client.base_url})",
                f"set {key}: {seen} (or leave the vendor out: the BMC's own word is then used), or check that "
                "bmc.url is this host's BMC",
            )
    return cfg, how


def system_of(client: RedfishClient, state: BiosState) -> System:
    """The ComputerSystem, its document read on first use (a host of a known model skipped it)."""
    if state.system is None:
        state.system = System.load(client, state.system_path).body
    return System(client, state.system_path, state.system)
