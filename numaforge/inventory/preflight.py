"""Preflight for inventory-check: everything an inventory refers to outside itself is there and usable.

For each host: SSH key files, known_hosts and ssh_config files, BMC CA bundles and `file:` secrets must be
readable regular files; `env:` secrets must name a set variable. Values are never read into a message: a
secret file is opened (to prove it is readable) but its content is not kept, and an environment variable is
only tested for presence and non-emptiness.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..secrets import SecretRef
from .model import Host


@dataclass(frozen=True)
class Problem:
    host: str
    attribute: str     # e.g. ssh.key_file, bmc.password
    what: str
    fix: str

    def render(self) -> str:
        return f"{self.host}: {self.attribute}: {self.what}\n  fix: {self.fix}"


def check_hosts(hosts: list[Host]) -> list[Problem]:
    """Every problem of every host, in host order (nothing is raised: the caller lists them all)."""
    problems: list[Problem] = []
    for h in hosts:
        problems.extend(check_host(h))
    return problems


def check_host(h: Host) -> list[Problem]:
    out: list[Problem] = []
    if h.ssh is not None:
        _file(out, h.name, "ssh.key_file", h.ssh.key_file, "private key",
              "point ssh.key_file (Ansible: ansible_ssh_private_key_file) at the key, or remove it to use the agent")
        _file(out, h.name, "ssh.known_hosts", h.ssh.known_hosts, "known_hosts file",
              "create it with the host's key checked out of band, or run once with --accept-new-host-key")
        _file(out, h.name, "ssh.config_file", h.ssh.config_file, "ssh_config file", "fix or remove ssh.config_file")
        _secret(out, h.name, "ssh.password", h.ssh.password)
    if h.bmc is not None:
        _file(out, h.name, "bmc.ca_bundle", h.bmc.ca_bundle, "CA bundle",
              "point bmc.ca_bundle at the PEM file that signed the BMC's certificate")
        _secret(out, h.name, "bmc.password", h.bmc.password)
    return out


def _file(out: list[Problem], host: str, attr: str, path: str | None, kind: str, fix: str) -> None:
    if not path:
        return
    what = _unusable(Path(path).expanduser(), kind)
    if what:
        out.append(Problem(host, attr, what, fix))


def _unusable(p: Path, kind: str) -> str | None:
    try:
        st = p.stat()
    except FileNotFoundError:
        return f"{kind} {p} does not exist"
    except OSError as exc:
        return f"{kind} {p} cannot be examined: {exc.strerror}"
    if stat.S_ISDIR(st.st_mode):
        return f"{kind} {p} is a directory"
    if not stat.S_ISREG(st.st_mode):
        return f"{kind} {p} is not a regular file"
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:
        return f"{kind} {p} is not readable: {exc.strerror}"
    return None


def _secret(out: list[Problem], host: str, attr: str, ref: SecretRef | None) -> None:
    if ref is None or ref.kind == "plain":
        return
    if ref.kind == "env":
        if ref.value not in os.environ:
            out.append(Problem(host, attr, f"environment variable {ref.value} is not set",
                               f"export {ref.value} before running (its value is never printed)"))
        elif not os.environ[ref.value]:
            out.append(Problem(host, attr, f"environment variable {ref.value} is empty",
                               f"set {ref.value} to the password"))
        return
    p = Path(ref.value).expanduser()
    what = _unusable(p, "secret file")
    if what is None and p.stat().st_size == 0:
        what = f"secret file {p} is empty"
    if what:
        out.append(Problem(host, attr, what, "create the file holding only the password (mode 0600), or fix the path"))
