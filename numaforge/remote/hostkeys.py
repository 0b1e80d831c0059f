"""Host keys: known_hosts read strictly (revoked keys too), and the policy that refuses an unknown or changed key
unless the user asked to accept a new one."""

from __future__ import annotations

import os
from pathlib import Path

import paramiko

from .. import safeio
from .errors import HostKeyError
from .target import MAX_TEXT_BYTES, SSHTarget, fingerprint


class StrictPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown host key: refuse, or (accept_new) append it to known_hosts. Changed keys never get here."""

    def __init__(self, target: SSHTarget, accept_new: bool, revoked: list | None = None):
        self.target = target
        self.accept_new = accept_new
        self.revoked = revoked or []
        self.added: tuple[str, str, str] | None = None

    def missing_host_key(self, client, hostname, key):
        t = self.target
        refuse_revoked(key, self.revoked, t)
        fp = fingerprint(key)
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key: {t.known_hosts_name} offered {key.get_name()} {fp}, which is not in {t.known_hosts}",
                t.where,
                f"check the fingerprint out of band (on the host: ssh-keygen -lf /etc/ssh/ssh_host_{_short(key)}_key.pub), "
                f"then re-run with --accept-new-host-key, or add it yourself: "
                f"ssh-keyscan -p {t.port} -t {key.get_name()} {t.hostname} >> {t.known_hosts}",
            )
        path = Path(t.known_hosts)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as exc:
            raise HostKeyError(
                f"cannot add the new host key to {path}: {exc.strerror}",
                t.where,
                "make the known_hosts file writable or point ssh.known_hosts elsewhere",
            ) from None
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.added = (hostname, key.get_name(), fp)


def load_known_hosts(path: str, where: str = "") -> tuple[list, list, int]:
    """Parse a known_hosts file like OpenSSH does: tolerate what it tolerates.

    Returns (entries, revoked keys, skipped lines). Comments, blank lines, ``@cert-authority`` lines (host
    certificates are not supported: such hosts count as unknown), unsupported key types and unparsable lines
    are skipped; ``@revoked`` keys are returned so a connection presenting one is refused.
    """
    entries, revoked, skipped = [], [], 0
    text = safeio.read_input(
        path,
        what="known_hosts",
        where=where or None,
        error=HostKeyError,
        max_bytes=MAX_TEXT_BYTES,
        fix_missing="point ssh.known_hosts at an existing known_hosts file",
        fix_kind="point ssh.known_hosts at a known_hosts file",
    ).decode("utf-8", errors="replace")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        marker = None
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            if marker not in ("@revoked", "@cert-authority"):
                skipped += 1
                continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line.strip())
        except Exception:  # anything paramiko cannot parse is skipped, as OpenSSH skips it
            entry = None
        if entry is None or marker == "@cert-authority":
            skipped += 1
        elif marker == "@revoked":
            revoked.append(entry.key)
        else:
            entries.append(entry)
    return entries, revoked, skipped


def refuse_revoked(key: paramiko.PKey, revoked: list, t: SSHTarget) -> None:
    if any(key.get_name() == r.get_name() and key.asbytes() == r.asbytes() for r in revoked):
        raise HostKeyError(
            f"host key {key.get_name()} {fingerprint(key)} of {t.known_hosts_name} is marked @revoked in known_hosts",
            t.where,
            "the host must get a new host key; then add that key after checking it out of band",
        )


def _short(key: paramiko.PKey) -> str:
    name = key.get_name()
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(name, "ecdsa" if "ecdsa" in name else name)
