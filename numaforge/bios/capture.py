"""Record the part of a BMC's Redfish tree the BIOS flow reads, in DMTF's mockup layout (one ``index.json`` per
URI, as DMTF's Redfish-Mockup-Creator writes it), with secrets and serial numbers scrubbed (issue 41).

``crawl(get)`` follows links from the service root and returns {path: document} for: the service root; the
Systems collection, every system and its Reset action's ActionInfo; each system's Bios, the Bios's settings
object (``@Redfish.Settings.SettingsObject``) and its actions' ActionInfo; the Managers collection, every
manager, its actions' ActionInfo and Dell's job queue (``Links.Oem.Dell.Jobs``) with its jobs; the JobService
and its jobs; the TaskService and its Tasks collection; the SessionService and its Sessions collection (no
session); the AccountService; the Registries collection, every member (MessageRegistryFile), and the BIOS
attribute registry file(s) a member names in ``Location[].Uri`` (English or the first language) for the
registry each Bios names (where a Bios names none: the members named BiosAttributeRegistry...). Nothing else (Chassis, logs, firmware, schemas) is read.

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
from ..fleet import Rollout, run_fleet
from ..report import HostResult
from .errors import RedfishMethodNotAllowedError, RedfishNotFoundError
from .exchange import path_of
from .hostsession import HostOptions, connect


class CaptureError(NumaforgeError):
    """A capture cannot be made or written (no service root, a non-empty target directory)."""

    exit_code = 2


Getter = Callable[[str], "tuple[str, dict] | None"]

# what a scrubbed value becomes (documented in docs/bios-profiles.md): numbered in the order first met within one
# capture, so values that differed stay different (a registry may list boot options by MAC address) and the same
# value reads the same everywhere (the Bios's value and the registry's ValueName still match); nothing of the
# original is kept, not even a hash
PLACEHOLDERS = {
    "serial": "SCRUBBED-SERIAL-{n}",
    "uuid": "00000000-0000-4000-8000-{n:012x}",
    "mac": "00:00:5E:00:53:{n:02X}",  # RFC 7042's documentation range (then 02:00:00:..., locally administered)
    "ipv4": "192.0.2.{n}",  # RFC 5737 TEST-NET-1 (then 198.51.100.x, 203.0.113.x)
    "ipv6": "2001:db8::{n:x}",  # RFC 3849
    "host": "host-{n}.example",
    "secret": "SCRUBBED-SECRET",
}
# a placeholder, whatever its number (tests, and what a capture may contain)
PLACEHOLDER_RE = re.compile(
    r"SCRUBBED-SERIAL-\d+|00000000-0000-4000-8000-[0-9a-f]{12}|00:00:5E:00:53:[0-9A-F]{2}|02:00:00(?::[0-9A-F]{2}){3}"
    r"|192\.0\.2\.\d+|198\.51\.100\.\d+|203\.0\.113\.\d+|2001:db8::[0-9a-f]+|host-\d+\.example|SCRUBBED-SECRET"
)

# keys whose (string) values are scrubbed, by what they hold; a BIOS attribute's key matches too (HPE's Bios has
# SerialNumber), so names are anchored and address kinds need a value of that form (Ipv4Pxe: "Enabled" stays)
_KEY_RULES = [
    (re.compile(r"(?i)(password|passphrase|passwd|token|secret|community|privatekey|psk)$"), "secret"),
    (re.compile(r"(?i)(serialnumber|serialno|servicetag|assettag)$"), "serial"),
    (re.compile(r"(?i)(uuid|guid)$"), "uuid"),
    (re.compile(r"(?i)mac(address(es)?)?$"), "mac"),
    (re.compile(r"(?i)(ipv4|ipaddress|gateway|nameservers?|dnsservers?|subnetmask|^address|addresses)$"), "ipv4"),
    (re.compile(r"(?i)ipv6"), "ipv6"),
    (re.compile(r"(?i)^(hostname|fqdn|domainname|certcommonname|commonname)$"), "host"),
]
_FORM = {
    "uuid": re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "mac": re.compile(r"(?i)^([0-9a-f]{2}[:-]?){5}[0-9a-f]{2}$"),
    "ipv4": re.compile(r"^(?:\d{1,3}\.){3}\d{1,3}$|^[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*$"),
    "ipv6": re.compile(r"^[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*$"),
}
_MAC = re.compile(r"\b[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}\b")
_UUID = re.compile(r"\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b")
_URL_IP = re.compile(r"(?i)\b(https?://)((?:\d{1,3}\.){3}\d{1,3}|\[[0-9a-f:.]+\])")
_IPV4 = re.compile(r"^(?:\d{1,3}\.){3}\d{1,3}$")
# keys whose values describe the firmware, not this machine: scrubbed only where a string holds an address
_KEEP = re.compile(r"(?i)^(attributename|displayname|helptext|menupath|valuename|valuedisplayname|warningtext)$")


def _kind_of_key(key: str) -> str | None:
    if _KEEP.match(key):
        return None
    for pattern, kind in _KEY_RULES:
        if pattern.search(key):
            return kind
    return None


class Scrubber:
    """Replaces what identifies a machine or grants access with PLACEHOLDERS, the same original always by the
    same placeholder within this Scrubber (one per capture)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}

    def placeholder(self, kind: str, original: str) -> str:
        if PLACEHOLDER_RE.fullmatch(original):
            return original  # already scrubbed
        key = (kind, original.lower() if kind in ("mac", "uuid", "ipv6") else original)
        if key not in self.seen:
            n = self.counts[kind] = self.counts.get(kind, 0) + 1
            if kind == "mac" and n > 255:
                self.seen[key] = "02:00:00:{:02X}:{:02X}:{:02X}".format(*(n >> s & 255 for s in (16, 8, 0)))
            elif kind == "ipv4" and n > 254:
                net = ("198.51.100", "203.0.113")[min((n - 255) // 254, 1)]
                self.seen[key] = f"{net}.{(n - 255) % 254 + 1}"
            else:
                self.seen[key] = PLACEHOLDERS[kind].format(n=n)
        return self.seen[key]

    def text(self, text: str) -> str:
        """MAC addresses, UUIDs and IP-literal URL hosts anywhere in a string."""
        text = _MAC.sub(lambda m: self.placeholder("mac", m.group(0)), text)
        text = _UUID.sub(lambda m: self.placeholder("uuid", m.group(0)), text)
        return _URL_IP.sub(
            lambda m: (
                m.group(1)
                + (
                    f"[{self.placeholder('ipv6', m.group(2)[1:-1])}]"
                    if m.group(2).startswith("[")
                    else self.placeholder("ipv4", m.group(2))
                )
            ),
            text,
        )

    def value(self, value, kind: str | None):
        if kind in _FORM and isinstance(value, str) and not _FORM[kind].match(value):
            kind = None  # not an address of that kind: a word such as "Enabled"
        if kind is not None and isinstance(value, str) and value:
            if kind == "ipv4" and ":" in value and not _IPV4.match(value):
                kind = "ipv6"
            return self.placeholder(kind, value)
        if kind is not None and isinstance(value, list):
            return [self.value(v, kind) for v in value]
        return self.doc(value)

    def doc(self, doc):
        """A scrubbed copy: by key name (SerialNumber, UUID, MACAddress, Password, ...; also BIOS attributes so
        named) and, in any string, MAC addresses, UUIDs and IP-literal URL hosts. Links (@odata.*) are kept."""
        if isinstance(doc, dict):
            return {k: (v if k.startswith("@odata.") else self.value(v, _kind_of_key(k))) for k, v in doc.items()}
        if isinstance(doc, list):
            return [self.doc(v) for v in doc]
        if isinstance(doc, str):
            return self.text(doc)
        return doc

    def residue(self, doc):
        """A second pass: an original met under its key (a serial, a host name, ...) replaced wherever else it
        appears inside a string (iLO's default host name is "ILO" + the serial number)."""
        known = sorted(((o, p) for (_k, o), p in self.seen.items() if len(o) >= 6), key=lambda t: -len(t[0]))
        if not known:
            return doc
        pattern = re.compile("|".join(re.escape(o) for o, _ in known), re.IGNORECASE)
        by_lower = {o.lower(): p for o, p in known}

        def walk(d):
            if isinstance(d, dict):
                return {k: (v if k.startswith("@odata.") else walk(v)) for k, v in d.items()}
            if isinstance(d, list):
                return [walk(v) for v in d]
            if isinstance(d, str):
                return pattern.sub(lambda m: by_lower[m.group(0).lower()], d)
            return d

        return walk(doc)


def scrub_all(docs: dict[str, dict]) -> tuple[dict[str, dict], list[str]]:
    """Every document of one capture scrubbed with one Scrubber (two passes: keys and forms, then residues);
    and the kinds of placeholder used."""
    scrubber = Scrubber()
    first = {path: scrubber.doc(doc) for path, doc in docs.items()}
    return {path: scrubber.residue(doc) for path, doc in first.items()}, sorted(scrubber.counts)


def scrub(doc):
    """``doc`` scrubbed on its own (scrub_all of one document)."""
    return scrub_all({"": doc})[0][""]


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
        if registries_wanted:
            if not any(_same_registry(n, w) for n in names for w in registries_wanted):
                continue
        elif not any("biosattributeregistry" in n.lower() for n in names):
            continue  # a Bios that names no AttributeRegistry (NVIDIA's Grace BMCs): the BIOS registry by its name
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


def capture_host(host, opts: HostOptions, out_dir: str | Path, result: HostResult) -> None:
    """``bios-capture``: read the host's BMC (GETs only), scrub, write the mockup tree to ``out_dir``.
    result.data: directory, documents (paths written), scrubbed (placeholders used)."""
    out = Path(out_dir)
    try:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):  # before any request: nothing to undo
            raise CaptureError(
                "the capture directory exists and is not empty", str(out), "name a new directory (never overwritten)"
            )
        _capture(host, opts, out, result)
    except NumaforgeError as exc:
        result.status, result.message = "failed", exc.render()


def _capture(host, opts: HostOptions, out: Path, result: HostResult) -> None:
    with result.step("connect"):
        client = connect(host, opts)
    with client:

        def get(uri: str) -> tuple[str, dict] | None:
            path = path_of(uri).split("?", 1)[0]
            try:
                answer = client.get(path)
            except (RedfishNotFoundError, RedfishMethodNotAllowedError):
                return None
            return "/" + path.strip("/"), answer.body

        with result.step("read"):
            docs = crawl(get)
    with result.step("write"):
        scrubbed, used = scrub_all(docs)
        write_tree(scrubbed, out)
    result.status = "ok"
    result.message = f"captured {len(docs)} documents into {out} (scrubbed: {', '.join(used) or 'nothing'})"
    result.data.update(directory=str(out), documents=sorted(docs), scrubbed=used)


def run_capture(hosts, opts: HostOptions, out_dir: str | Path, rollout: Rollout | None = None, *, progress=False):
    """bios-capture on every selected host: one host writes ``out_dir``; several write ``out_dir/<host name>``."""
    base = Path(out_dir)

    def one(host) -> HostResult:
        result = HostResult(host.name)
        capture_host(host, opts, base if len(hosts) == 1 else base / host.name, result)
        return result

    return run_fleet(hosts, one, (rollout or Rollout()).rolling(), progress=progress)
