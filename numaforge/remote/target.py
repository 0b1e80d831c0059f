"""Where an SSH connection goes: the inventory's SSHSpec merged with the user's ssh_config (HostName, Port, User,
IdentityFile, UserKnownHostsFile, ProxyCommand), and host-key fingerprints."""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from .. import safeio
from ..inventory.model import SSHSpec
from .errors import ConnectError

MAX_KEY_BYTES = 64 * 1024  # an SSH private key (RSA 16384 is ~12 KiB)
MAX_TEXT_BYTES = 4 * 1024 * 1024  # known_hosts, ssh_config


@dataclass
@dataclass
class SSHTarget:
    """Where and how to connect, after merging the SSHSpec with ssh_config. Pure data."""

    host: str  # inventory host name
    hostname: str  # address actually dialled
    port: int
    user: str
    key_files: list[str] = field(default_factory=list)
    known_hosts: str = ""
    system_known_hosts: str | None = None
    proxy_command: str | None = None
    config_file: str | None = None

    @property
    def where(self) -> str:
        return f"host {self.host} ({self.user}@{self.hostname}:{self.port})"

    @property
    def known_hosts_name(self) -> str:
        """The name this host's keys are filed under in known_hosts ("addr" or "[addr]:port")."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style SHA256 fingerprint, e.g. ``SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU``."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _resolve_path(p: str, base_dir: Path | None) -> str:
    path = Path(os.path.expanduser(p))
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    return str(path)


def resolve_target(spec: SSHSpec, host_name: str, base_dir: Path | None = None) -> SSHTarget:
    """Merge an inventory SSHSpec with ssh_config (pure apart from reading the config file)."""
    cfg_path = _resolve_path(spec.config_file, base_dir) if spec.config_file else os.path.expanduser("~/.ssh/config")
    opts: dict = {}
    used_cfg = None
    if os.path.exists(cfg_path):
        safeio.check_input(
            cfg_path,
            what="ssh_config file",
            where=f"host {host_name}",
            error=ConnectError,
            max_bytes=MAX_TEXT_BYTES,
            fix_kind="point ssh.config_file at an ssh_config file",
        )
        try:
            opts = paramiko.SSHConfig.from_path(cfg_path).lookup(spec.address)
        except (OSError, ValueError, paramiko.ssh_exception.ConfigParseError) as exc:
            raise ConnectError(
                f"cannot read ssh_config {cfg_path}: {exc}",
                f"host {host_name}",
                "fix the file (see `man ssh_config`) or point ssh.config_file at another one",
            ) from None
        used_cfg = cfg_path
    elif spec.config_file:
        raise ConnectError(
            f"ssh_config file {cfg_path} does not exist",
            f"host {host_name}",
            "fix ssh.config_file in the inventory (relative paths are relative to the inventory file)",
        )
    hostname = opts.get("hostname", spec.address)
    port = spec.port if spec.port != 22 else int(opts.get("port", 22))
    user = spec.user if spec.user != "root" else opts.get("user", "root")
    if spec.key_file:
        keys = [_resolve_path(spec.key_file, base_dir)]
        if not os.path.exists(keys[0]):
            raise ConnectError(
                f"private key {keys[0]} does not exist",
                f"host {host_name}",
                "fix ssh.key_file in the inventory, or remove it to use ssh-agent / ~/.ssh/config",
            )
    else:
        keys = [os.path.expanduser(k) for k in opts.get("identityfile", []) if os.path.exists(os.path.expanduser(k))]
    for key in keys:  # paramiko reads them by path: checked first (a device, a FIFO, a huge file never read)
        safeio.check_input(
            key,
            what="SSH private key",
            where=f"host {host_name} (ssh.key_file / IdentityFile)",
            error=ConnectError,
            max_bytes=MAX_KEY_BYTES,
            private=True,
            fix_kind="point ssh.key_file (or IdentityFile) at a private key file such as ~/.ssh/id_ed25519",
            fix_size="point ssh.key_file at a private key file (a few KiB), not another file",
        )
    system_kh = None
    if spec.known_hosts:
        known_hosts = _resolve_path(spec.known_hosts, base_dir)
    elif opts.get("userknownhostsfile"):
        known_hosts = os.path.expanduser(opts["userknownhostsfile"].split()[0])
    else:
        known_hosts = os.path.expanduser("~/.ssh/known_hosts")
        system_kh = "/etc/ssh/ssh_known_hosts"
    if opts.get("proxyjump") and opts["proxyjump"].lower() != "none":
        raise ConnectError(
            f"ProxyJump {opts['proxyjump']} in {cfg_path} is not supported",
            f"host {host_name}",
            f"write it as a ProxyCommand instead: ProxyCommand ssh -W %h:%p {opts['proxyjump']}",
        )
    proxy = opts.get("proxycommand")
    if proxy and proxy.lower() == "none":
        proxy = None
    return SSHTarget(host_name, hostname, port, user, keys, known_hosts, system_kh, proxy, used_cfg)
