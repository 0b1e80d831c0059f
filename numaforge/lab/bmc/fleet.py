"""A fleet of simulated BMCs in one process, for trying numaforge on many hosts (issue 39 item 11):

    python -m numaforge.lab.bmc --fleet 30 --flavours dell-16g,hpe-gen11,smc-h13 --state-dir ~/bmc-fleet

N simulators (one process, each its own server socket and BIOS state; one thread accepts for them all,
numaforge.lab.bmc.server.Hub, so an idle BMC costs no thread), the flavours taken in turn,
with one CA and one server certificate (STATE_DIR/tls/, every member serves the same certificate: they all listen
on one address), one password file (STATE_DIR/password, mode 0600, kept across restarts) and one native inventory
(STATE_DIR/inventory.yaml) that numaforge tasks use as it is (``numaforge bios-plan --all -i STATE_DIR/inventory.yaml``):
a host per BMC with its URL, the shared CA and password by reference, its flavour's vendor map, a group per vendor
and the group ``fleet`` with every host. Ports come from a range (``--ports 9000-9099``: the first free ones, in
order) or are any free ports.
"""

from __future__ import annotations

import os
import resource
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

import yaml

from ...paths import atomic_write_text
from .errors import BMCSimulatorError
from .flavours import ALL_FLAVOURS, vendor_of
from .server import BMCSimulator, Hub
from .tls import ensure_certificates

MAX_FLEET = 10_000  # an idle member costs a listening socket and ~65 KiB, no thread (server.Hub)
SPARE_FILES = 128  # open files a fleet needs beyond one listening socket per member: connections, state files
TLS_FILES = ("ca.pem", "server.pem", "server.key")
BIOS_PROFILE = "epyc-gpudirect"


def parse_flavours(text: str | None) -> list[str]:
    """``--flavours a,b,...`` (default: every flavour), each one of ALL_FLAVOURS."""
    if text is None:
        return list(ALL_FLAVOURS)
    names = [n.strip() for n in text.split(",")]
    if not text.strip() or any(not n for n in names):
        raise BMCSimulatorError(
            f"--flavours {text!r} has an empty name", "--flavours", "give flavour names separated by commas"
        )
    bad = [n for n in names if n not in ALL_FLAVOURS]
    if bad:
        raise BMCSimulatorError(
            f"unknown BMC flavour {bad[0]!r}", "--flavours", f"use names from: {', '.join(ALL_FLAVOURS)}"
        )
    return names


def parse_ports(text: str | None) -> range | None:
    """``--ports LO-HI`` (inclusive); None: any free ports."""
    if text is None:
        return None
    try:
        lo_s, hi_s = text.split("-", 1)
        lo, hi = int(lo_s), int(hi_s)
    except ValueError:
        raise BMCSimulatorError(f"--ports {text!r} is not a range", "--ports", "give LO-HI, e.g. 9000-9099") from None
    if not 1 <= lo <= hi <= 65535:
        raise BMCSimulatorError(
            f"--ports {text!r} is outside 1-65535 or empty", "--ports", "give LO-HI with 1 <= LO <= HI <= 65535"
        )
    return range(lo, hi + 1)


def state_password(state_dir: Path) -> str:
    """The password of the BMCs of STATE_DIR (STATE_DIR/password, mode 0600, kept across restarts): a fleet's
    one password, and a single daemon's (python -m numaforge.lab.bmc)."""
    path = state_dir / "password"
    if path.exists():
        pw = path.read_text().strip()
        if pw:
            return pw
    pw = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(pw + "\n")
    return pw


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class Member:
    name: str  # the inventory host name
    flavour: str
    sim: BMCSimulator


class Fleet:
    """N simulated BMCs with one CA, one password and their inventory. start() / stop(), or a context manager."""

    def __init__(
        self,
        count: int,
        flavours: list[str],
        state_dir: Path,
        host: str = "127.0.0.1",
        ports: range | None = None,
        username: str = "admin",
        power_delay: float = 5.0,
    ):
        if not (isinstance(count, int) and 1 <= count <= MAX_FLEET):
            raise BMCSimulatorError(
                f"--fleet {count!r} is not a fleet size", "--fleet", f"give a number of BMCs from 1 to {MAX_FLEET}"
            )
        if not flavours:
            raise BMCSimulatorError("no flavours for the fleet", "--flavours", "name at least one flavour")
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit != resource.RLIM_INFINITY and limit < count + SPARE_FILES:
            raise BMCSimulatorError(
                f"--fleet {count} needs about {count + SPARE_FILES} open files (a listening socket per BMC and "
                f"their connections); this process may open {limit}",
                "--fleet",
                f"raise the limit first (ulimit -n {count + SPARE_FILES}), or start fewer BMCs per process",
            )
        if ports is not None and len(ports) < count:
            raise BMCSimulatorError(
                f"--ports {ports.start}-{ports.stop - 1} has {len(ports)} ports for {count} BMCs",
                "--ports",
                "give a range with at least as many ports as --fleet",
            )
        self.count = count
        self.flavours = list(flavours)
        self.state_dir = Path(state_dir)
        self.host = host
        self.ports = ports
        self.username = username
        self.power_delay = power_delay
        self.members: list[Member] = []
        self.hub: Hub | None = None
        self.inventory = self.state_dir / "inventory.yaml"
        self.ca_file = self.state_dir / "tls" / "ca.pem"
        self.password_file = self.state_dir / "password"

    def names(self) -> list[tuple[str, str]]:
        """(host name, flavour) of each member: the flavours in turn, numbered from 01."""
        width = max(2, len(str(self.count)))
        out = []
        for i in range(self.count):
            flavour = self.flavours[i % len(self.flavours)]
            out.append((f"bmc{i + 1:0{width}d}-{flavour}", flavour))
        return out

    def start(self) -> "Fleet":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        password = state_password(self.state_dir)
        tls_dir = (self.state_dir / "tls").resolve()  # members link to it: an absolute target
        ensure_certificates(tls_dir, self.host)  # one CA and certificate, made once for every member
        candidates = iter(self.ports) if self.ports is not None else None
        self.hub = Hub()
        try:
            for name, flavour in self.names():
                member_dir = self.state_dir / "bmcs" / name
                member_dir.mkdir(parents=True, exist_ok=True)
                for f in TLS_FILES:  # the simulator reuses valid certificates it finds in its state dir
                    link = member_dir / f
                    if link.is_symlink() or link.exists():
                        link.unlink()
                    link.symlink_to(tls_dir / f)
                sim = BMCSimulator(
                    flavour=flavour,
                    host=self.host,
                    port=self._next_port(candidates),
                    username=self.username,
                    password=password,
                    power_delay=self.power_delay,
                    state_dir=member_dir,
                )
                sim.start(hub=self.hub)
                self.members.append(Member(name, flavour, sim))
        except BaseException:
            self.stop()
            raise
        self.write_inventory()
        return self

    def _next_port(self, candidates) -> int:
        if candidates is None:
            return 0
        for port in candidates:
            if _port_free(self.host, port):
                return port
        assert self.ports is not None
        raise BMCSimulatorError(
            f"no free port left in {self.ports.start}-{self.ports.stop - 1} for the fleet",
            "--ports",
            "give a wider range, or stop what listens there",
        )

    def inventory_doc(self) -> dict:
        """The fleet as a native inventory (docs/inventory.md): what numaforge tasks read as it is."""
        hosts: dict = {}
        groups: dict = {"fleet": {"hosts": []}}
        for m in self.members:
            vendor = vendor_of(m.flavour)
            hosts[m.name] = {
                "bmc": {
                    "url": m.sim.url,
                    "username": self.username,
                    "password": f"file:{self.password_file.resolve()}",
                    "ca_bundle": str(self.ca_file.resolve()),
                    "vendor": vendor,
                },
                "hardware": {"vendor": vendor, "platform": m.sim.flavour.model, "sockets": 2, "gpus": ["0000:41:00.0"]},
                "bios_profile": BIOS_PROFILE,
                "vars": {"bmc_flavour": m.flavour},
            }
            groups["fleet"]["hosts"].append(m.name)
            groups.setdefault(vendor, {"hosts": []})["hosts"].append(m.name)
        return {"version": 1, "hosts": hosts, "groups": groups}

    def write_inventory(self) -> Path:
        header = (
            f"# Written by python -m numaforge.lab.bmc --fleet {self.count}: {len(self.members)} simulated BMCs, one CA\n"
            "# and one password file. Rewritten on every start.\n"
        )
        atomic_write_text(self.inventory, header + yaml.safe_dump(self.inventory_doc(), sort_keys=False))
        return self.inventory

    def stop(self) -> None:
        for m in self.members:
            m.sim.stop()
        self.members = []
        if self.hub is not None:
            self.hub.close()
            self.hub = None

    def __enter__(self) -> "Fleet":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
