"""Inventory model: hosts, groups and the typed sections every pipeline reads.

Loaders (native YAML and Ansible YAML) build these objects; nothing else constructs them from files.
Each object remembers where it was defined (``Location``) so later errors can point at file:line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SelectionError
from ..program import prog
from ..secrets import SecretRef
from .graph import members
from .patterns import did_you_mean, limit_hosts, suggest_for


@dataclass(frozen=True)
class Location:
    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class SSHSpec:
    address: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None  # private key path; None = agent / ~/.ssh/config
    use_agent: bool = True
    known_hosts: str | None = None  # None = ~/.ssh/known_hosts; host keys are always checked strictly
    sudo: bool = False  # run privileged commands through sudo -n
    password: SecretRef | None = None  # only by reference
    config_file: str | None = None  # ssh_config to honour (default ~/.ssh/config)


@dataclass
class BMCSpec:
    url: str  # https://bmc.example:443 (scheme + host[:port])
    username: str = "root"
    password: SecretRef | None = None  # only by reference
    ca_bundle: str | None = None  # PEM file used to verify the BMC's TLS certificate
    vendor: str = "auto"  # dell | hpe | supermicro | lenovo | generic | auto
    system_id: str | None = None  # /redfish/v1/Systems/<id>; None = the only system
    insecure: bool = False  # skip TLS verification (explicit, loud)
    auth: str = "auto"  # auto (HTTP Basic over verified TLS, else a session) | session | basic


@dataclass
class KernelSpec:
    release: str | None = None  # `uname -r` on the host, e.g. 5.10.0-46-amd64
    target: str | None = None  # kpatch target name (kpatch/targets/<name>.yaml)


@dataclass
class HardwareSpec:
    platform: str | None = None  # model, e.g. "PowerEdge R7525"
    vendor: str | None = None  # dell | hpe | supermicro | lenovo | generic
    sockets: int | None = None
    cpu_model: str | None = None
    gpus: list[str] = field(default_factory=list)  # PCI addresses 0000:41:00.0
    nics: list[str] = field(default_factory=list)


@dataclass
class Host:
    name: str
    location: Location
    groups: list[str] = field(default_factory=list)  # every group the host is in, nested included
    vars: dict[str, Any] = field(default_factory=dict)  # resolved: all -> outer group -> inner -> host
    ssh: SSHSpec | None = None
    bmc: BMCSpec | None = None
    kernel: KernelSpec = field(default_factory=KernelSpec)
    hardware: HardwareSpec = field(default_factory=HardwareSpec)
    bios_profile: str | None = None
    connection: str = "ssh"  # ssh | local | another ansible_connection (no SSH side)
    sources: dict[str, str] = field(default_factory=dict)  # "bmc.ca_bundle" -> file:line it was set on


@dataclass
class Group:
    name: str
    location: Location
    hosts: list[str] = field(default_factory=list)  # direct members
    children: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass
class Inventory:
    path: str
    hosts: dict[str, Host] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    format: str = "native"  # native | ansible

    def group_members(self, name: str) -> list[str]:
        """All hosts of a group, children included: its own hosts first, then its children's (breadth first)."""
        return members(
            {g.name: g.children for g in self.groups.values()}, {g.name: g.hosts for g in self.groups.values()}, name
        )

    def pattern_groups(self) -> dict[str, list[str]]:
        """Group name -> hosts (nested included) for host patterns, with Ansible's implicit `all` and `ungrouped`."""
        out = {g: self.group_members(g) for g in self.groups}
        grouped = {h for hs in out.values() for h in hs}
        out.setdefault("all", list(self.hosts))
        out.setdefault("ungrouped", [h for h in self.hosts if h not in grouped])
        return out

    def select(
        self, hosts: list[str] | None = None, groups: list[str] | None = None, limit: str | None = None
    ) -> list[Host]:
        """Hosts named by --host (repeatable), --group (repeatable) and --limit PATTERN.

        --host and --group add up; with neither, every host. --limit then keeps the hosts its Ansible host
        pattern selects (numaforge/inventory/patterns.py: globs, ~regex, &, !, @file, group[0]).
        """
        names: list[str] = []
        for h in hosts or []:
            if h not in self.hosts and any(ch in h for ch in "[*?,"):  # a pattern given as one name
                raise SelectionError(
                    f"unknown host '{h}': --host takes one exact host name, and no host is called that",
                    self.path,
                    "for the hosts you meant, " + suggest_for(h, list(self.hosts)),
                )
            if h not in self.hosts:
                raise SelectionError(
                    f"unknown host '{h}'",
                    self.path,
                    did_you_mean(h, self.hosts, f"pick one of the hosts listed by `{prog()} inventory-check`"),
                )
            names.append(h)
        for g in groups or []:
            if g not in self.groups:
                raise SelectionError(
                    f"unknown group '{g}'",
                    self.path,
                    did_you_mean(g, self.groups, f"pick one of the groups listed by `{prog()} inventory-check`"),
                )
            names.extend(self.group_members(g))
        if not hosts and not groups:
            names = list(self.hosts)
        if limit:
            base = Path(self.path).resolve().parent
            kept = set(limit_hosts(list(self.hosts), self.pattern_groups(), limit, base=base))
            names = [n for n in names if n in kept]
        ordered = list(dict.fromkeys(names))
        if not ordered:
            raise SelectionError(
                "the host selection matched no host",
                self.path,
                f"check --host/--group/--limit against `{prog()} inventory-check`",
            )
        return [self.hosts[n] for n in ordered]
