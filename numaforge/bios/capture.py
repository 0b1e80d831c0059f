"""Record the part of a BMC's Redfish tree the BIOS flow reads, in DMTF's mockup layout (one ``index.json`` per
URI, as DMTF's Redfish-Mockup-Creator writes it), with secrets and serial numbers scrubbed (issue 41).

``crawl(get)`` follows links from the service root and returns {path: document} for: the service root; the
Systems collection, every system and its Reset action's ActionInfo; each system's Bios, the Bios's settings
object (``@Redfish.Settings.SettingsObject``) and its actions' ActionInfo; the Managers collection, every
manager, its actions' ActionInfo and Dell's job queue (``Links.Oem.Dell.Jobs``) with its jobs; the JobService
and its jobs; the TaskService and its Tasks collection; the SessionService and its Sessions collection (no
session); the AccountService; the Registries collection, every member (MessageRegistryFile), and the BIOS
attribute registry file(s) a member names in ``Location[].Uri`` (English or the first language) for the
registry each Bios names. Nothing else (Chassis, logs, firmware, schemas) is read.

``get(uri)`` answers ``(path, document)`` or None (not there); the path is where the document lives (the
tree's own spelling: a mockup on disk keeps its directory names, a live BMC its URIs). ``scrub`` replaces
serial numbers, UUIDs, MAC and IP addresses, passwords and tokens with the placeholders in ``PLACEHOLDERS``
(docs/bios-profiles.md, "Capturing a BMC"). ``write_tree`` writes the layout, refusing to write into a
non-empty directory; nothing is half-written (a temporary directory renamed into place).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from ..errors import NumaforgeError


class CaptureError(NumaforgeError):
    """A capture cannot be made or written (no service root, a non-empty target directory)."""

    exit_code = 2


Getter = Callable[[str], "tuple[str, dict] | None"]

# what a scrubbed value becomes (documented in docs/bios-profiles.md)
PLACEHOLDERS = {
    "serial": "SCRUBBED-SERIAL",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "mac": "00:00:5E:00:53:00",  # RFC 7042's documentation MAC range
    "ipv4": "192.0.2.1",  # RFC 5737 TEST-NET-1
    "ipv6": "2001:db8::1",  # RFC 3849
    "secret": "SCRUBBED-SECRET",
    "host": "bmc.example",
}

# keys whose (string) values are scrubbed, by what they hold
_KEY_RULES = [
    (re.compile(r"(?i)(passw|passphrase|token|secret|community|privatekey|psk)"), "secret"),
    (re.compile(r"(?i)(serial|servicetag|assettag|chassistag|boardsn|systemsn)"), "serial"),
    (re.compile(r"(?i)(uuid|guid)"), "uuid"),
    (re.compile(r"(?i)(mac(address)?s?$|macaddr|permanentmac|^mac)"), "mac"),
    (re.compile(r"(?i)(ipv4|ipaddress|gateway|nameserver|dnsserver|subnet|^address$|addresses$)"), "ipv4"),
    (re.compile(r"(?i)(ipv6)"), "ipv6"),
    (re.compile(r"(?i)^(hostname|fqdn|domainname)$"), "host"),
]
_MAC = re.compile(r"\b[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}\b")
_UUID = re.compile(r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b")
_URL_HOST = re.compile(r"(?i)\b(https?://)(\[[0-9a-f:.]+\]|[^/\s:]+)")
_IPV4 = re.compile(r"^(?:\d{1,3}\.){3}\d{1,3}$")
# keys never scrubbed: registry definitions and links describe the firmware, not this machine
_KEEP = re.compile(r"(?i)^(@odata\.|attributename$|displayname$|helptext$|menupath$|valuename$|valuedisplayname$)")


def _kind_of_key(key: str) -> str | None:
    if _KEEP.match(key):
        return None
    for pattern, kind in _KEY_RULES:
        if pattern.search(key):
            return kind
    return None


def _scrub_text(text: str) -> str:
    text = _MAC.sub(PLACEHOLDERS["mac"], text)
    text = _UUID.sub(PLACEHOLDERS["uuid"], text)

    def host(m: re.Match) -> str:
        h = m.group(2)
        if _IPV4.match(h):
            return m.group(1) + PLACEHOLDERS["ipv4"]
        if h.startswith("["):
            return m.group(1) + f"[{PLACEHOLDERS['ipv6']}]"
        return m.group(1) + (h if h.endswith((".dmtf.org", ".example")) or h == "localhost" else PLACEHOLDERS["host"])

    return _URL_HOST.sub(host, text)


def _scrub_value(value, kind: str | None):
    if kind is not None and isinstance(value, str) and value:
        if kind == "ipv4" and ":" in value and not _IPV4.match(value):
            return PLACEHOLDERS["ipv6"]
        return PLACEHOLDERS[kind]
    if kind is not None and isinstance(value, list):
        return [_scrub_value(v, kind) for v in value]
    return scrub(value)


def scrub(doc):
    """A copy of ``doc`` with serials, UUIDs, MAC/IP addresses, host names, passwords and tokens replaced by
    PLACEHOLDERS: by key name (SerialNumber, UUID, MACAddress, Password, ...; also BIOS attributes so named)
    and, in any string, MAC addresses, UUIDs and URL hosts. Links (@odata.*) keep their paths."""
    if isinstance(doc, dict):
        return {k: (v if k.startswith("@odata.") else _scrub_value(v, _kind_of_key(k))) for k, v in doc.items()}
    if isinstance(doc, list):
        return [scrub(v) for v in doc]
    if isinstance(doc, str):
        return _scrub_text(doc)
    return doc


def link(value) -> str | None:
    """The path a Redfish link names ({"@odata.id": p} or a plain string), or None."""
    if isinstance(value, dict):
        value = value.get("@odata.id")
    if isinstance(value, str) and value.startswith("/"):
        return value.split("#", 1)[0]
    return None


def _members(doc: dict | None) -> list[str]:
    out = []
    for m in (doc or {}).get("Members") or []:
        p = link(m)
        if p:
            out.append(p)
    return out


def _action_infos(doc: dict | None) -> list[str]:
    out = []
    for action in ((doc or {}).get("Actions") or {}).values():
        if isinstance(action, dict) and isinstance(action.get("@Redfish.ActionInfo"), str):
            out.append(action["@Redfish.ActionInfo"])
    return out


def _key(path: str) -> str:
    return path.strip("/").lower()


def crawl(get: Getter) -> dict[str, dict]:
    """{path: document} of everything the BIOS flow reads (module docstring), following links from the root."""
    out: dict[str, dict] = {}
    seen: dict[str, dict | None] = {}

    def take(uri: str | None) -> dict | None:
        if not uri:
            return None
        k = _key(uri)
        if k in seen:
            return seen[k]
        found = get(uri)
        doc = None
        if found is not None and isinstance(found[1], dict):
            path, doc = found
            out[path] = doc
        seen[k] = doc
        return doc

    root = take("/redfish/v1/")
    if root is None:
        raise CaptureError("no service root at /redfish/v1/", "/redfish/v1/", "is this a Redfish service?")
    registries_wanted: set[str] = set()
    managers: list[str] = []
    for sys_path in _members(take(link(root.get("Systems")))):
        system = take(sys_path) or {}
        for info in _action_infos(system):
            take(info)
        managers += [p for p in (link(m) for m in (system.get("Links") or {}).get("ManagedBy") or []) if p]
        bios = take(link(system.get("Bios")))
        if bios is None:
            continue
        if isinstance(bios.get("AttributeRegistry"), str):
            registries_wanted.add(bios["AttributeRegistry"])
        take(link((bios.get("@Redfish.Settings") or {}).get("SettingsObject")))
        for info in _action_infos(bios):
            take(info)
    for mgr_path in _members(take(link(root.get("Managers")))) + managers:
        manager = take(mgr_path) or {}
        for info in _action_infos(manager):
            take(info)
        dell_jobs = link((((manager.get("Links") or {}).get("Oem") or {}).get("Dell") or {}).get("Jobs"))
        for job in _members(take(dell_jobs)):
            take(job)
    job_service = take(link(root.get("JobService"))) or {}
    for job in _members(take(link(job_service.get("Jobs")))):
        take(job)
    task_service = take(link(root.get("Tasks") or root.get("TaskService"))) or {}
    take(link(task_service.get("Tasks")))
    session_service = take(link(root.get("SessionService"))) or {}
    take(link(session_service.get("Sessions")))
    take(link(root.get("AccountService")))
    for member in _members(take(link(root.get("Registries")))):
        entry = take(member) or {}
        names = {str(entry.get("Id", "")), str(entry.get("Registry", "")), member.rstrip("/").rsplit("/", 1)[-1]}
        if not any(_same_registry(n, w) for n in names for w in registries_wanted):
            continue
        locations = [loc for loc in entry.get("Location") or [] if isinstance(loc, dict)]
        english = [loc for loc in locations if str(loc.get("Language", "")).lower().startswith("en")]
        for loc in english or locations[:1]:
            take(loc.get("Uri") if isinstance(loc.get("Uri"), str) else None)
    return out


def _same_registry(name: str, wanted: str) -> bool:
    """A Registries member that may hold the Bios's AttributeRegistry: the same name, or the same name before
    the version (BiosAttributeRegistry113.1.1.3 / BiosAttributeRegistry113.en-US.1.1.3), case aside."""
    if not name or not wanted:
        return False
    a, b = name.lower(), wanted.lower()
    return a == b or a.split(".", 1)[0] == b.split(".", 1)[0]


def write_tree(docs: dict[str, dict], out_dir: str | Path) -> list[Path]:
    """Write {path: document} as ``<out_dir>/<path>/index.json``. ``out_dir`` must not exist or be empty; the tree
    is built beside it and renamed into place, so a failure leaves nothing half-written."""
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CaptureError(
            "the capture directory exists and is not empty",
            str(out),
            "name a new directory (the capture never overwrites one)",
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    written = []
    try:
        for path, doc in sorted(docs.items()):
            rel = Path(*[p for p in path.strip("/").split("/") if p not in ("", ".", "..")])
            target = tmp / rel / "index.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(doc, indent=4, sort_keys=False) + "\n")
            written.append(out / rel / "index.json")
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written
