"""Preflight for inventory-check: everything an inventory refers to outside itself is there and usable.

For each host: SSH key files, known_hosts and ssh_config files, BMC CA bundles and `file:` secrets must be
readable regular files; `env:` secrets must name a set variable. Secrets are resolved exactly as a run resolves them
(numaforge.secrets: a file: secret must also be private to its owner and small); the value is never put into a
message or the report, only into the redaction set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from .. import safeio
from ..errors import NumaforgeError, SecretError
from ..secrets import SecretRef
from .model import Host


@dataclass(frozen=True)
class Problem:
    host: str
    attribute: str  # e.g. ssh.key_file, bmc.password
    what: str
    fix: str
    where: str = ""  # file:line the attribute was set on

    def render(self) -> str:
        at = f"\n  set at: {self.where}" if self.where else ""
        return f"{self.host}: {self.attribute}: {self.what}{at}\n  fix: {self.fix}"


def check_hosts(hosts: list[Host]) -> list[Problem]:
    """Every problem of every host, in host order (nothing is raised: the caller lists them all)."""
    problems: list[Problem] = []
    for h in hosts:
        problems.extend(check_host(h))
    return problems


def check_host(h: Host) -> list[Problem]:
    found = _check_host(h)
    return [Problem(p.host, p.attribute, p.what, p.fix, h.sources.get(p.attribute, "")) for p in found]


def ca_bundle_problem(path: str | Path) -> str | None:
    """What is wrong with the content of a CA bundle (None: it holds at least one certificate, or it is no
    small regular file at all, which the caller's file check reports).
    An empty or non-PEM bundle verifies nothing; the TLS error it caused said "set bmc.ca_bundle" (issue 40)."""
    max_bytes, _private = _LIMITS["bmc.ca_bundle"]
    try:  # the checked reader: a FIFO never blocks, /dev/zero is never read
        data = safeio.read_input(
            Path(path).expanduser(), what="CA bundle", where="-", error=NumaforgeError, max_bytes=max_bytes
        )
    except NumaforgeError:
        return None  # not a small regular file: the caller's own file check says so, with its own fix
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        return f"CA bundle {path} holds no PEM certificate (no valid -----BEGIN CERTIFICATE----- block)"
    return None


CA_BUNDLE_FIX = (
    "put the PEM certificate of the CA that signed the BMC's certificate into that file "
    "(e.g. `openssl s_client -showcerts` shows the chain), or point bmc.ca_bundle at the right file"
)


def _check_host(h: Host) -> list[Problem]:
    out: list[Problem] = []
    if h.ssh is not None:
        _file(
            out,
            h.name,
            "ssh.key_file",
            h.ssh.key_file,
            "private key",
            "point ssh.key_file (Ansible: ansible_ssh_private_key_file) at the key, or remove it to use the agent",
        )
        _file(
            out,
            h.name,
            "ssh.known_hosts",
            h.ssh.known_hosts,
            "known_hosts file",
            "create it with the host's key checked out of band, or run once with --accept-new-host-key",
        )
        _file(out, h.name, "ssh.config_file", h.ssh.config_file, "ssh_config file", "fix or remove ssh.config_file")
        _secret(out, h.name, "ssh.password", h.ssh.password)
    if h.bmc is not None:
        _file(
            out,
            h.name,
            "bmc.ca_bundle",
            h.bmc.ca_bundle,
            "CA bundle",
            "point bmc.ca_bundle at the PEM file that signed the BMC's certificate",
        )
        if h.bmc.ca_bundle and not any(p.attribute == "bmc.ca_bundle" for p in out):
            problem = ca_bundle_problem(h.bmc.ca_bundle)
            if problem:
                out.append(Problem(h.name, "bmc.ca_bundle", problem, CA_BUNDLE_FIX))
        _secret(out, h.name, "bmc.password", h.bmc.password)
    return out


# the caps and permissions a run applies when it reads each file (numaforge.safeio.check_input, the one checked
# reader): inventory-check answers what the run would
_LIMITS = {
    "ssh.key_file": (64 * 1024, True),  # numaforge.remote.ssh.MAX_KEY_BYTES; private, as OpenSSH wants
    "ssh.known_hosts": (4 * 1024 * 1024, False),
    "ssh.config_file": (4 * 1024 * 1024, False),
    "bmc.ca_bundle": (16 * 1024 * 1024, False),  # numaforge.bios.redfish.MAX_CA_BUNDLE_BYTES
}


def _file(out: list[Problem], host: str, attr: str, path: str | None, kind: str, fix: str) -> None:
    if not path:
        return
    max_bytes, private = _LIMITS.get(attr, (4 * 1024 * 1024, False))
    problem = _unusable(Path(path).expanduser(), kind, max_bytes, private)
    if problem:
        what, own_fix = problem
        out.append(Problem(host, attr, what, own_fix or fix))


def _unusable(p: Path, kind: str, max_bytes: int, private: bool) -> tuple[str, str | None] | None:
    """(what is wrong, its own fix if it has one: chmod 600) or None when the run could read the file."""
    if not os.path.lexists(p):
        return f"{kind} {p} does not exist", None
    try:
        safeio.check_input(p, what=kind, where="-", error=NumaforgeError, max_bytes=max_bytes, private=private)
    except NumaforgeError as exc:
        return exc.what, (exc.fix if "readable by" in exc.what else None)
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:
        return f"{kind} {p} is not readable: {exc.strerror}", None
    return None


def _secret(out: list[Problem], host: str, attr: str, ref: SecretRef | None) -> None:
    """Resolve the reference as a run would (numaforge.secrets: set variable; private, small, regular file),
    keeping nothing but the verdict; the value only joins the redaction set."""
    if ref is None or ref.kind == "plain":
        return
    try:
        value = ref.resolve()
    except SecretError as exc:
        out.append(Problem(host, attr, exc.what, exc.fix or "fix the reference"))
        return
    if not value:
        what = (
            f"environment variable {ref.value} is empty"
            if ref.kind == "env"
            else f"secret file {Path(ref.value).expanduser()} is empty"
        )
        out.append(Problem(host, attr, what, "put the password there (its value is never printed)"))
