"""SSH transport over paramiko: strict host keys, commands with timeouts, sudo, atomic verified uploads.

    remote = connect(host.ssh, host.name)              # refuses unknown or changed host keys
    with remote:
        r = remote.run("uname -r", timeout=30)         # CommandResult(rc, stdout, stderr, seconds)
        remote.put("build/x.ko", "/tmp/x.ko")          # one exec channel: cat > temp, sha256sum, mv
        remote.read_text("/sys/kernel/livepatch/x/enabled")

Where the connection goes: the inventory's SSHSpec, merged with the ssh_config file (SSHSpec.config_file, default
~/.ssh/config): ``HostName``, ``Port``, ``User``, ``IdentityFile``, ``UserKnownHostsFile`` and ``ProxyCommand`` of
the ``Host`` block matching SSHSpec.address. An inventory port/user that differs from the defaults (22/root) wins
over ssh_config, like a command-line option wins over ssh_config in OpenSSH. Host keys are always checked against
known_hosts (SSHSpec.known_hosts, else UserKnownHostsFile, else ~/.ssh/known_hosts plus /etc/ssh/ssh_known_hosts);
``StrictHostKeyChecking`` in ssh_config is ignored on purpose: only ``accept_new_host_key=True`` may add an
unknown key, and a changed key is always refused.

Every failure is an :class:`SSHError` (a NumaforgeError) whose ``where`` names the inventory host, user, address
and, for commands, the command; secrets resolved for the login are redacted from every message.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import posixpath
import re
import secrets as _random
import shlex
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable

import paramiko

from .. import budget, safeio
from ..digest import sha256_file
from ..errors import NumaforgeError
from ..inventory.model import SSHSpec
from ..secrets import redact

__all__ = [
    "connect",
    "Remote",
    "CommandResult",
    "Target",
    "resolve_target",
    "fingerprint",
    "load_known_hosts",
    "SSHError",
    "ConnectError",
    "AuthError",
    "HostKeyError",
    "CommandTimeout",
    "CommandFailed",
    "SudoError",
    "ConnectionLost",
    "UploadError",
]

UPLOAD_METHODS = ("exec", "sftp")  # put(method=...): see Remote.put
DEFAULT_UPLOAD = "exec"
TMP_MARK = ".numaforge-tmp."  # uploads go to <dir>/.<name>.numaforge-tmp.<random> first
_PID_MARK = b"__numaforge_pid="  # first stdout line of every command: the remote session leader's pid
_CHUNK = 32768
_FEED_BLOCK = 1 << 20  # stdin goes out in 1 MiB sendall() calls (paramiko splits them into SSH packets)
_EOF_GRACE = 2.0  # s to wait for EOF after the exit status (a background child may hold it)
CONNECT_PHASES = 3  # the handshake's total deadline: banner + key exchange + authentication, connect_timeout each
MAX_KEY_BYTES = 64 * 1024  # an SSH private key (RSA 16384 is ~12 KiB)
MAX_TEXT_BYTES = 4 * 1024 * 1024  # known_hosts, ssh_config


# --------------------------------------------------------------------------------------------- errors
class SSHError(NumaforgeError):
    """Any SSH transport failure."""


class ConnectError(SSHError):
    """The host cannot be reached (DNS, refused, timeout, no SSH banner) or the ssh settings are unusable."""


class AuthError(SSHError):
    """The host refused every offered credential."""


class HostKeyError(SSHError):
    """The host's key is unknown to known_hosts or does not match it."""


class ConnectionLost(SSHError):
    """The connection dropped while a command or upload was in flight."""


class CommandTimeout(SSHError):
    """A command ran past its timeout; the remote process group was signalled and the channel closed."""

    def __init__(self, what, where=None, fix=None, *, command="", timeout=0.0, stdout="", stderr=""):
        self.command, self.timeout, self.stdout, self.stderr = command, timeout, stdout, stderr
        super().__init__(what, where, fix)


class CommandFailed(SSHError):
    """A command exited non-zero (with check=True). Carries rc, stdout and stderr."""

    def __init__(self, what, where=None, fix=None, *, command="", rc=-1, stdout="", stderr=""):
        self.command, self.rc, self.stdout, self.stderr = command, rc, stdout, stderr
        super().__init__(what, where, fix)


class SudoError(SSHError):
    """A privileged command needs sudo and sudo cannot run it without a password (or is missing)."""


class UploadError(SSHError):
    """An upload failed; the final path was not created or replaced."""


# --------------------------------------------------------------------------------------------- data
@dataclass
class CommandResult:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    command: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass
class Target:
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


def resolve_target(spec: SSHSpec, host_name: str, base_dir: Path | None = None) -> Target:
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
    return Target(host_name, hostname, port, user, keys, known_hosts, system_kh, proxy, used_cfg)


# --------------------------------------------------------------------------------------------- host keys
class _StrictPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown host key: refuse, or (accept_new) append it to known_hosts. Changed keys never get here."""

    def __init__(self, target: Target, accept_new: bool, revoked: list | None = None):
        self.target = target
        self.accept_new = accept_new
        self.revoked = revoked or []
        self.added: tuple[str, str, str] | None = None

    def missing_host_key(self, client, hostname, key):
        t = self.target
        _refuse_revoked(key, self.revoked, t)
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


def _refuse_revoked(key: paramiko.PKey, revoked: list, t: Target) -> None:
    if any(key.get_name() == r.get_name() and key.asbytes() == r.asbytes() for r in revoked):
        raise HostKeyError(
            f"host key {key.get_name()} {fingerprint(key)} of {t.known_hosts_name} is marked @revoked in known_hosts",
            t.where,
            "the host must get a new host key; then add that key after checking it out of band",
        )


def _short(key: paramiko.PKey) -> str:
    name = key.get_name()
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(name, "ecdsa" if "ecdsa" in name else name)


# --------------------------------------------------------------------------------------------- connect
def connect(
    spec: SSHSpec,
    host_name: str,
    *,
    accept_new_host_key: bool = False,
    connect_timeout: float = 15.0,
    base_dir: Path | None = None,
) -> "Remote":
    """Open an authenticated SSH connection to one inventory host (strict host-key checking)."""
    if spec is None:
        raise ConnectError(
            "the host has no ssh section (in an Ansible inventory: its ansible_connection is "
            "local or another non-SSH connection)",
            f"host {host_name}",
            "add ssh: {address: ..., user: ...} to the host (Ansible: ansible_connection: ssh and "
            "ansible_host); for the machine you are on, run the task there with --local where offered",
        )
    target = resolve_target(spec, host_name, base_dir)
    budget.check(f"connecting to {target.where}")
    connect_timeout = budget.cap(connect_timeout) or connect_timeout
    password = spec.password.resolve() if spec.password is not None else None
    client = paramiko.SSHClient()
    revoked: list[paramiko.PKey] = []
    for path in (target.system_known_hosts, target.known_hosts):
        if path and os.path.exists(path):
            known, bad, skipped = load_known_hosts(path, target.where)
            for entry in known:
                for name in entry.hostnames:
                    client.get_host_keys().add(name, entry.key.get_name(), entry.key)
            revoked += bad
    policy = _StrictPolicy(target, accept_new_host_key, revoked)
    client.set_missing_host_key_policy(policy)
    sock: Any = None  # a socket, or paramiko.ProxyCommand (socket-like)
    watch = _HandshakeWatch(CONNECT_PHASES * connect_timeout)
    try:
        if target.proxy_command:
            sock = paramiko.ProxyCommand(target.proxy_command)
        else:
            sock = socket.create_connection((target.hostname, target.port), timeout=connect_timeout)
            _no_delay(sock)
            watch.sock = sock
        _handshake(client, target, spec, password, connect_timeout, sock, watch)
    except HostKeyError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        source = _file_listing(target) or target.known_hosts
        raise HostKeyError(
            f"HOST KEY MISMATCH: {target.known_hosts_name} offered {exc.key.get_name()} {fingerprint(exc.key)}, "
            f"but {source} has {exc.expected_key.get_name()} {fingerprint(exc.expected_key)} "
            f"(a reinstalled host, or someone intercepting the connection)",
            target.where,
            f"verify the new key out of band; if the host was really reinstalled, remove the old entry with "
            f"ssh-keygen -R '{target.known_hosts_name}' -f {source} and connect again "
            f"(--accept-new-host-key never replaces a changed key)",
        ) from None
    except paramiko.PasswordRequiredException:
        client.close()
        raise AuthError(
            f"private key {', '.join(target.key_files) or '(default)'} is encrypted",
            target.where,
            "load it into ssh-agent (ssh-add KEY) and keep ssh.use_agent true",
        ) from None
    except paramiko.AuthenticationException as exc:
        client.close()
        how = []
        if target.key_files:
            how.append("key " + ", ".join(target.key_files))
        if spec.use_agent:
            how.append("ssh-agent" + ("" if os.environ.get("SSH_AUTH_SOCK") else " (SSH_AUTH_SOCK not set)"))
        if password is not None:
            how.append(f"password {spec.password}")
        if not target.key_files:
            how.append("~/.ssh/id_* keys")
        raise AuthError(
            redact(f"authentication failed: {exc}; tried {', '.join(how)}"),
            target.where,
            f"install the public key in ~{target.user}/.ssh/authorized_keys on the host, or set "
            f"ssh.key_file / ssh.user / ssh.password (env:VAR or file:PATH) in the inventory",
        ) from None
    except paramiko.SSHException as exc:
        client.close()
        if watch.cut:
            raise watch.error(target, connect_timeout) from None
        if target.key_files and re.search(r"private key|key file|not a valid", str(exc), re.I):
            raise AuthError(
                f"cannot use private key {', '.join(target.key_files)}: {exc}",
                target.where,
                "point ssh.key_file (or IdentityFile) at the PRIVATE key, in OpenSSH or PEM format "
                "(ssh-keygen -y -f KEY checks it)",
            ) from None
        if "No authentication methods available" not in str(exc):
            raise _connect_error(exc, target, connect_timeout) from None
        raise AuthError(
            "no credentials to offer: no ssh.key_file or IdentityFile, ssh-agent "
            + ("disabled" if not spec.use_agent else "without keys")
            + ", no ~/.ssh/id_* key, no password",
            target.where,
            "set ssh.key_file (or IdentityFile in ssh_config), load a key into ssh-agent, "
            "or give ssh.password as env:VAR / file:PATH",
        ) from None
    except (OSError, EOFError) as exc:
        client.close()
        if isinstance(sock, socket.socket):
            sock.close()
        if watch.cut:
            raise watch.error(target, connect_timeout) from None
        raise _connect_error(exc, target, connect_timeout) from None
    transport = client.get_transport()
    assert transport is not None  # connect() succeeded
    try:
        _refuse_revoked(transport.get_remote_server_key(), revoked, target)
    except HostKeyError:
        client.close()
        raise
    transport.set_keepalive(15)
    return Remote(client, target, accepted_host_key=policy.added)


def _no_delay(sock) -> None:
    """Send each SSH message at once (TCP_NODELAY), as OpenSSH's ssh does. Without it, the handshake and every
    new channel wait ~40 ms: a small packet sits behind Nagle's algorithm until the host's delayed ACK of the
    previous one. That was 45 of the 50 ms of a short command (measured, docs/BENCHMARKS.md "SSH fleet")."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def _file_listing(target: Target) -> str | None:
    """Which known_hosts file holds an entry for the target (for the mismatch message)."""
    for path in (target.known_hosts, target.system_known_hosts):
        if path and os.path.exists(path):
            keys = paramiko.HostKeys()
            for entry in load_known_hosts(path, target.where)[0]:
                for name in entry.hostnames:
                    keys.add(name, entry.key.get_name(), entry.key)
            if keys.lookup(target.known_hosts_name) is not None:
                return path
    return None


def _handshake(client, target: Target, spec: SSHSpec, password, connect_timeout: float, sock, watch) -> None:
    """paramiko's banner, key exchange and authentication, under the handshake's total deadline (``watch``)."""
    with watch:
        client.connect(
            target.hostname,
            target.port,
            username=target.user,
            password=password,
            key_filename=target.key_files or None,
            allow_agent=spec.use_agent,
            look_for_keys=not target.key_files,
            timeout=connect_timeout,
            banner_timeout=connect_timeout,
            auth_timeout=connect_timeout,
            channel_timeout=connect_timeout,
            sock=sock,
        )


class _HandshakeWatch:
    """A total deadline for the SSH handshake: banner, key exchange and authentication each have
    ``connect_timeout``, but a host that drips bytes keeps every read alive; this watcher shuts the socket
    down when ``seconds`` pass or the run is stopped (Ctrl-C/SIGTERM), which ends paramiko's blocked read."""

    def __init__(self, seconds: float):
        self.seconds, self.sock, self.cut = seconds, None, ""
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_HandshakeWatch":
        deadline = time.monotonic() + self.seconds
        lifted = budget.is_lifted()

        def watch() -> None:
            while not self._done.wait(0.05):
                if time.monotonic() >= deadline or (budget.stop_requested() and not lifted):
                    self.cut = "stop" if budget.stop_requested() and not lifted else "deadline"
                    try:
                        if self.sock is not None:
                            self.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return

        if self.sock is not None:
            self._thread = threading.Thread(target=watch, name="ssh-handshake-deadline", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def error(self, target: Target, connect_timeout: float) -> NumaforgeError:
        budget.check(f"the SSH handshake with {target.where} finished (cut while the host was still answering)")
        return ConnectError(
            f"SSH handshake not finished within {self.seconds:g} s: the host kept answering, too slowly to finish "
            f"(banner, key exchange and authentication have {connect_timeout:g} s each)",
            target.where,
            "check the host's sshd and the network path to it (a tarpit or a broken middlebox drips bytes)",
        )


def _connect_error(exc: BaseException, target: Target, connect_timeout: float) -> ConnectError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else (str(exc) or type(exc).__name__)
    if isinstance(exc, socket.timeout):
        reason = f"no answer within {connect_timeout:g} s"
    return ConnectError(
        redact(f"cannot connect: {reason}"),
        target.where,
        "check that the host is up and sshd listens on that address and port "
        "(ssh.address/ssh.port in the inventory or HostName/Port in ssh_config)",
    )


# --------------------------------------------------------------------------------------------- remote
class Remote:
    """An open SSH connection to one host. Use as a context manager; not shared between threads."""

    def __init__(self, client: paramiko.SSHClient, target: Target, accepted_host_key=None):
        self._client = client
        self.target = target
        self.accepted_host_key = accepted_host_key  # (name, type, fingerprint) when accept-new added a key
        self._sftp: paramiko.SFTPClient | None = None

    # identity
    @property
    def host(self) -> str:
        return self.target.host

    @property
    def user(self) -> str:
        return self.target.user

    @property
    def is_root(self) -> bool:
        return self.target.user == "root"

    @property
    def where(self) -> str:
        return self.target.where

    def __enter__(self) -> "Remote":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._sftp is not None:
            try:
                self._sftp.close()
            except Exception:
                pass
            self._sftp = None
        self._client.close()

    @property
    def connected(self) -> bool:
        t = self._client.get_transport()
        return t is not None and t.is_active()

    def __repr__(self) -> str:
        return f"Remote({self.where})"

    # commands
    def _wrap(self, command: str, sudo: bool) -> str:
        inner = shlex.quote(command)
        run = f"exec sudo -n -- sh -c {inner}" if sudo and not self.is_root else f"exec sh -c {inner}"
        return f"printf '%s\\n' \"{_PID_MARK.decode()}$$\"; {run}"

    def _lost(self, doing: str) -> ConnectionLost:
        return ConnectionLost(
            f"connection lost while {doing}",
            self.where,
            "check the host (reboot? sshd restarted? network?) and re-run; finished hosts are kept",
        )

    def _channel(self, timeout: float | None) -> paramiko.Channel:
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise self._lost("opening a channel")
        try:
            return transport.open_session(timeout=timeout)
        except (paramiko.SSHException, OSError, EOFError):
            raise self._lost("opening a channel") from None

    def run(
        self,
        command: str,
        timeout: float | None = 30,
        sudo: bool = False,
        check: bool = True,
        stdin: str | bytes | BinaryIO | None = None,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> CommandResult:
        """Run a shell command; sudo=True runs it as root (through ``sudo -n`` unless we log in as root).

        ``stdin`` (text, bytes, or a binary file streamed in 1 MiB blocks) is fed to the command, then closed;
        ``progress(sent, total)`` is called after each block (total None for a file of unknown size). A command
        that exits before reading all of its input just ends the feeding: its result says why.
        Raises CommandTimeout after ``timeout`` seconds (the remote process group gets SIGTERM then SIGKILL),
        CommandFailed on a non-zero exit when ``check``, SudoError when sudo would need a password.
        """
        where = f"{self.where}: `{redact(command)}`"
        budget.check(f"`{redact(command)}`")
        t0 = time.monotonic()
        chan = self._channel(timeout)
        out, err = bytearray(), bytearray()
        pid: int | None = None
        header = True
        try:
            chan.exec_command(self._wrap(command, sudo))
            deadline = None if not timeout else t0 + timeout
            if stdin is not None:
                try:
                    _feed(chan, stdin, deadline, progress)
                except socket.timeout:
                    out += chan.recv(_CHUNK) if chan.recv_ready() else b""
                    self._kill(_pid_from(out), sudo)
                    raise CommandTimeout(
                        f"command did not read its input within {timeout:g} s; stopped it",
                        where,
                        "check that the command reads stdin, or raise the timeout",
                        command=command,
                        timeout=timeout,
                        stdout="",
                        stderr=_text(err),
                    ) from None
                chan.settimeout(None)
            if not chan.closed:
                chan.shutdown_write()
            idle, exited_at = 0.0, None
            while True:
                got = False
                while chan.recv_ready():
                    out += chan.recv(_CHUNK)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(_CHUNK)
                    got = True
                if header:
                    # the marker line comes first, unless the login shell's startup files (~/.bashrc,
                    # ~/.ssh/rc) printed something: that is not the command's output, so it is dropped
                    at = out.find(_PID_MARK)
                    end = out.find(b"\n", at) if at >= 0 else -1
                    if end >= 0:
                        pid = _pid_from(out[at:end])
                        del out[: end + 1]
                        header = False
                    elif chan.exit_status_ready() or len(out) > 65536:
                        header = False
                now = time.monotonic()
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    # the exit status can come before the last output: done at EOF (or close), or when a
                    # background child keeps the output open past a short grace
                    if chan.eof_received or chan.closed:
                        break
                    exited_at = exited_at or now
                    if now - exited_at >= _EOF_GRACE:
                        break
                if deadline is not None and now >= deadline:
                    self._kill(pid, sudo)
                    raise CommandTimeout(
                        f"command still running after {timeout:g} s; stopped it",
                        where,
                        "raise the timeout if the host is just slow, or find out why the command hangs",
                        command=command,
                        timeout=timeout,
                        stdout=_text(out),
                        stderr=_text(err),
                    )
                if got:
                    idle = 0.0
                else:
                    # poll, 1 ms doubling to 20 ms: select() on a channel makes paramiko open a pipe whose
                    # close races with its transport thread (EBADF killed whole connections, bench/ssh_fleet.py)
                    idle = min(idle * 2, 0.02) if idle else 0.001
                    time.sleep(idle if deadline is None else max(0.0, min(idle, deadline - now)))
            rc = chan.recv_exit_status()
        except (socket.error, EOFError, paramiko.SSHException):
            raise self._lost(f"running `{redact(command)}`") from None
        finally:
            chan.close()
        seconds = time.monotonic() - t0
        if rc == -1 and not self.connected:
            raise self._lost(f"running `{redact(command)}`")
        result = CommandResult(rc, _text(out), _text(err), seconds, command)
        if sudo and not self.is_root:
            _check_sudo(result, where, self.user)
        if check and rc != 0:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            tail = detail[-1] if detail else "no output"
            status = "was killed by a signal" if rc == -1 else f"exited {rc}"
            raise CommandFailed(
                redact(f"command {status}: {tail}"),
                where,
                "see the command's output in the report; fix the cause on the host and re-run",
                command=command,
                rc=rc,
                stdout=result.stdout,
                stderr=result.stderr,
            )
        return result

    def _kill(self, pid: int | None, sudo: bool) -> None:
        """Best effort: SIGTERM, then SIGKILL, the timed-out command and its descendants on the host."""
        if pid is None or not self.connected:
            return
        script = _KILL_TREE.replace("PID", str(int(pid)))
        try:
            chan = self._channel(10)
            try:
                chan.settimeout(10)
                cmd = f"sh -c {shlex.quote(script)}"
                chan.exec_command(f"sudo -n -- {cmd}" if sudo and not self.is_root else cmd)
                chan.recv_exit_status()
            finally:
                chan.close()
        except Exception:
            pass

    # files
    def _sftp_client(self, timeout: float | None) -> paramiko.SFTPClient:
        if self._sftp is None:
            transport = self._client.get_transport()
            if transport is None or not transport.is_active():
                raise self._lost("opening SFTP")
            try:
                self._sftp = paramiko.SFTPClient.from_transport(transport, window_size=None)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise UploadError(
                    f"cannot start SFTP: {exc or type(exc).__name__}",
                    self.where,
                    "enable the sftp subsystem in the host's sshd_config "
                    "(Subsystem sftp internal-sftp) or install sftp-server",
                ) from None
        sftp = self._sftp
        assert sftp is not None  # opened above
        channel = sftp.get_channel()
        if channel is not None:
            channel.settimeout(timeout)
        return sftp

    def put(
        self,
        local_path,
        remote_path: str,
        mode: int = 0o600,
        timeout: float | None = 120,
        progress: Callable[[int, int], None] | None = None,
        sudo: bool = False,
        method: str = DEFAULT_UPLOAD,
    ) -> str:
        """Upload atomically: write ``<dir>/.<name>.numaforge-tmp.<random>``, chmod it to ``mode``, check its
        sha256 on the host with sha256sum, then ``mv`` it over ``remote_path`` (a rename in the same directory).
        Returns the sha256 (hex). ``progress(sent, total)`` is called as bytes go out.

        ``method="exec"`` (the default): one exec channel runs a POSIX sh script (_PUT_SCRIPT) that removes
        stale temps of this target, writes the temp from its stdin with ``cat`` under umask 077, chmods and
        checksums it, and renames it only when the sha256 matches; the script removes its temp on every failure,
        including a dropped connection (stdin ends early: mismatch; SIGPIPE/SIGHUP: trap). ``sudo=True`` writes
        as root (``sudo -n``), for directories the login user cannot write.
        ``method="sftp"``: paramiko SFTP as the login user (needs the host's sftp subsystem), then sha256sum
        and mv commands (four channels): 1.2-1.4x the client CPU per MiB (docs/BENCHMARKS.md "SSH fleet");
        kept to compare.

        On any failure the temp is removed when the connection still allows it; a dropped connection leaves
        at most a hidden temp file (removed by the next put to the same path), never a partial file under
        ``remote_path``, which is then neither created nor replaced (UploadError).
        """
        local = Path(local_path)
        rdir, rname = posixpath.split(remote_path)
        where = f"{self.where}: {remote_path}"
        budget.check(f"uploading {remote_path}")
        if method not in UPLOAD_METHODS:
            raise UploadError(f"unknown upload method {method!r}", where, f"use one of {', '.join(UPLOAD_METHODS)}")
        if sudo and method == "sftp" and not self.is_root:
            raise UploadError(
                "an SFTP upload runs as the login user and cannot use sudo", where, "use method='exec' with sudo"
            )
        if not rname:
            raise UploadError(f"'{remote_path}' names a directory, not a file", where, "give the full target file path")
        if not 0 <= mode <= 0o7777:
            raise UploadError(f"mode {mode:#o} is not a file mode", where, "give a mode like 0o600 or 0o755")
        if not local.is_file():
            raise UploadError(f"local file {local} does not exist", where, "build the artifact first or fix the path")
        sha = sha256_file(local)
        size = local.stat().st_size
        rdir = rdir or "."
        if rdir.startswith("-"):
            rdir = "./" + rdir  # never an option to chmod/sha256sum
        prefix = f"{rdir}/.{rname}{TMP_MARK}"
        tmp = prefix + _random.token_hex(6)
        deadline = None if not timeout else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(1.0, deadline - time.monotonic())

        def tick(sent: int, total: int | None) -> None:
            if deadline is not None and time.monotonic() > deadline:
                raise socket.timeout(f"upload not finished after {timeout:g} s")
            if progress is not None:
                progress(sent, size if total is None else total)

        try:
            if method == "exec":
                self._put_exec(local, tmp, prefix, remote_path, mode, sha, where, left(), tick, sudo)
            else:
                self._put_sftp(local, tmp, prefix, remote_path, mode, sha, size, where, left, tick)
        except BaseException as exc:
            self._remove_quietly(tmp, sudo)
            if isinstance(exc, (UploadError, KeyboardInterrupt, SystemExit)):
                raise
            if isinstance(exc, SSHError):
                msg = exc.what
            elif isinstance(exc, IOError) and getattr(exc, "strerror", None):
                msg = f"{exc.strerror}"
            else:
                msg = str(exc) or type(exc).__name__
            if isinstance(exc, CommandTimeout):
                msg = f"not finished after {timeout:g} s"
            dropped = isinstance(exc, (EOFError, ConnectionError, ConnectionLost)) or (
                isinstance(exc, paramiko.SSHException) and re.search(r"dropped|closed|EOF", str(exc), re.I)
            )
            if (dropped or not self.connected) and not msg.startswith("connection lost"):
                msg = f"connection lost ({msg})"
            raise UploadError(
                f"upload of {local.name} failed: {msg}; {remote_path} was not created or replaced",
                where,
                exc.fix
                if isinstance(exc, SudoError)
                else "check free space and permissions of the target directory on the host "
                "and that the connection is stable, then re-run",
            ) from None
        return sha

    def _put_exec(self, local, tmp, prefix, remote_path, mode, sha, where, timeout, tick, sudo) -> None:
        script = _PUT_SCRIPT.format(
            tmp=shlex.quote(tmp),
            prefix=shlex.quote(prefix),
            mode=f"{mode:o}",
            sha=sha,
            dest=shlex.quote(remote_path),
            write=_PUT_WRITE,
            chmod=_PUT_CHMOD,
            no_sha=_PUT_NO_SHA,
            mismatch=_PUT_MISMATCH,
            mv=_PUT_MV,
        )
        try:
            with open(local, "rb") as fh:
                r = self.run(script, timeout=timeout, sudo=sudo, check=False, stdin=fh, progress=tick)
        except ConnectionLost:
            raise self._lost(f"sending {local.name}") from None
        if r.rc == 0:
            return
        reason = (r.stderr.strip().splitlines() or [f"exited {r.rc}"])[-1]
        got = re.search(r"^sha256=(\S*)$", r.stdout, re.M)
        if r.rc == _PUT_NO_SHA or (r.rc == _PUT_MISMATCH and not (got and got.group(1))):
            _check_sha(None, sha, where, reason)
        if r.rc == _PUT_MISMATCH and got:
            _check_sha(got.group(1), sha, where)
        doing = {_PUT_WRITE: f"cannot write {tmp}", _PUT_CHMOD: "cannot chmod the temp file", _PUT_MV: "cannot rename"}
        raise UploadError(
            f"upload of {local.name} failed: {doing.get(r.rc, 'the upload script failed')}: {reason}; "
            f"{remote_path} was not created or replaced",
            where,
            "check that the directory exists, has free space and is writable by "
            + ("root" if sudo or self.is_root else f"{self.user} (or upload with sudo=True)"),
        )

    def _put_sftp(self, local, tmp, prefix, remote_path, mode, sha, size, where, left, tick) -> None:
        # stale temps of this target from an earlier, dropped upload
        self.run(f"rm -f -- {shlex.quote(prefix)}*", timeout=left())
        sftp = self._sftp_client(left())
        with open(local, "rb") as fh:
            sftp.putfo(fh, tmp, file_size=size, callback=tick, confirm=True)
        sftp.chmod(tmp, mode)
        r = self.run(f"sha256sum < {shlex.quote(tmp)}", timeout=left(), check=False)
        got = r.stdout.split()[0] if r.rc == 0 and r.stdout.split() else None
        _check_sha(got, sha, where, r.stderr.strip() or "no output")
        dest = shlex.quote(remote_path)
        self.run(
            f"if [ -d {dest} ]; then echo the target is a directory >&2; exit 1; fi; mv -f -- {shlex.quote(tmp)} {dest}",
            timeout=left(),
        )

    def _remove_quietly(self, path: str, sudo: bool = False) -> None:
        if not self.connected:
            return
        try:
            channel = self._sftp.get_channel() if self._sftp is not None and not sudo else None
            if self._sftp is not None and channel is not None:
                channel.settimeout(10)
                self._sftp.remove(path)
            else:
                self.run(f"rm -f -- {shlex.quote(path)}", timeout=10, check=False, sudo=sudo)
        except Exception:
            try:
                self.run(f"rm -f -- {shlex.quote(path)}", timeout=10, check=False, sudo=sudo)
            except Exception:
                pass

    def read_text(self, path: str, timeout: float | None = 30, sudo: bool = False) -> str:
        """Contents of a small remote file (sysfs, /proc, configs). Raises CommandFailed if unreadable."""
        r = self.run(f"cat -- {shlex.quote(path)}", timeout=timeout, sudo=sudo, check=False)
        if r.rc != 0:
            reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"cat exited {r.rc}"
            raise CommandFailed(
                f"cannot read {path}: {reason}",
                self.where,
                "check the path exists on the host (module loaded? right kernel?) and permissions"
                + ("" if sudo else "; pass sudo=True for root-only files"),
                command=r.command,
                rc=r.rc,
                stdout=r.stdout,
                stderr=r.stderr,
            )
        return r.stdout

    def write_text(self, path: str, text: str, timeout: float | None = 30, sudo: bool = False) -> None:
        """Write a short value in one write(2) (sysfs files need that), e.g. write_text(".../enabled", "0")."""
        r = self.run(f"printf %s {shlex.quote(text)} > {shlex.quote(path)}", timeout=timeout, sudo=sudo, check=False)
        if r.rc != 0:
            reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exited {r.rc}"
            raise CommandFailed(
                f"cannot write {path}: {reason}",
                self.where,
                "check the path and that the value is accepted by it",
                command=r.command,
                rc=r.rc,
                stdout=r.stdout,
                stderr=r.stderr,
            )

    def exists(self, path: str, timeout: float | None = 30, sudo: bool = False) -> bool:
        return self.run(f"test -e {shlex.quote(path)}", timeout=timeout, sudo=sudo, check=False).rc == 0


# --------------------------------------------------------------------------------------------- helpers
# Stops a timed-out command on the host: its process group (OpenSSH's session child calls setsid, so the pid
# we got is a group leader) plus every descendant found through /proc (dropbear's shell is no group leader,
# and /proc/PID/task/*/children is not in every kernel). POSIX sh only; dash and busybox `kill` take no `--`.
_KILL_TREE = r"""all=PID; front=PID
while [ -n "$front" ]; do
  next=""
  for s in /proc/[0-9]*/stat; do
    { read -r l < "$s"; } 2>/dev/null || continue
    r=${l##*) }; set -- $r
    for f in $front; do if [ "$2" = "$f" ]; then p=${s#/proc/}; next="$next ${p%/stat}"; fi; done
  done
  all="$all $next"; front=$next
done
kill -TERM -PID 2>/dev/null; kill -TERM $all 2>/dev/null; sleep 1
kill -KILL -PID 2>/dev/null; kill -KILL $all 2>/dev/null; exit 0
"""

_SUDO_PASSWORD = re.compile(r"^sudo: (a password is required|a terminal is required|.*no tty present)", re.M)
_SUDO_DENIED = re.compile(r"^(sudo: )?.*(is not in the sudoers file|is not allowed to execute|may not run sudo)", re.M)
_SUDO_MISSING = re.compile(r"sudo: (not found|command not found)|sudo: No such file", re.M)


def _check_sudo(r: CommandResult, where: str, user: str) -> None:
    if r.rc == 0:
        return
    fix = (
        f"allow {user} to run commands without a password on the host, e.g. a file /etc/sudoers.d/numaforge "
        f"with '{user} ALL=(root) NOPASSWD: ALL', or connect as root (ssh.user: root)"
    )
    if _SUDO_PASSWORD.search(r.stderr):
        raise SudoError(
            f"sudo needs a password for {user}; numaforge only uses passwordless sudo (sudo -n)", where, fix
        )
    if _SUDO_DENIED.search(r.stderr):
        raise SudoError(f"{user} may not use sudo on this host", where, fix)
    if r.rc == 127 and _SUDO_MISSING.search(r.stderr):
        raise SudoError("sudo is not installed on the host", where, "install sudo on the host or connect as root")


def _feed(chan: paramiko.Channel, stdin, deadline: float | None, progress) -> None:
    """Send stdin (str, bytes or a binary file) to the command in _FEED_BLOCK blocks, each under the deadline
    (a command that never reads its stdin must not block us past its timeout: socket.timeout)."""
    if isinstance(stdin, str):
        stdin = stdin.encode()
    total = len(stdin) if isinstance(stdin, (bytes, bytearray, memoryview)) else None
    src = io.BytesIO(stdin) if total is not None else stdin
    sent = 0
    while block := src.read(_FEED_BLOCK):
        chan.settimeout(None if deadline is None else max(0.1, deadline - time.monotonic()))
        try:
            chan.sendall(block)
        except socket.timeout:
            raise
        except OSError:
            # the channel closed under us: with an exit status the command just stopped reading (its rc and
            # stderr say why); without one the connection dropped, which run() reports as ConnectionLost
            if chan.exit_status != -1:
                return
            raise
        sent += len(block)
        if progress is not None:
            progress(sent, total)


# put(method="exec"): the whole upload in one exec channel, the file's bytes on stdin. POSIX sh (dash, bash,
# busybox ash). The EXIT trap removes the temp whatever happens (after the mv there is nothing left to remove);
# a dropped connection ends stdin early (the checksum then differs) or kills the script with SIGPIPE/SIGHUP.
_PUT_WRITE, _PUT_CHMOD, _PUT_NO_SHA, _PUT_MISMATCH, _PUT_MV = 3, 4, 5, 6, 7
_PUT_SCRIPT = """umask 077
t={tmp}
trap 'rm -f -- "$t"' EXIT
trap 'exit 1' HUP INT TERM PIPE
rm -f -- {prefix}* 2>/dev/null
cat > "$t" || exit {write}
chmod {mode} "$t" || exit {chmod}
s=$(sha256sum < "$t") || exit {no_sha}
s=${{s%% *}}
echo "sha256=$s"
[ "$s" = {sha} ] || exit {mismatch}
if [ -d {dest} ]; then echo "the target is a directory" >&2; exit {mv}; fi
mv -f -- "$t" {dest} || exit {mv}
"""


def _check_sha(got: str | None, sha: str, where: str, reason: str = "") -> None:
    """The host's sha256 of the temp file against the local one (got None: the host could not compute it)."""
    if not got:
        raise UploadError(
            f"cannot checksum the upload on the host: {reason or 'no output'}",
            where,
            "install coreutils (sha256sum) on the host",
        )
    if got.lower() != sha:
        raise UploadError(
            f"sha256 mismatch after upload: local {sha}, host {got}",
            where,
            "the file changed in transit or on the host while uploading; re-run the upload",
        )


def _pid_from(out: bytes | bytearray) -> int | None:
    """The pid from a marker line at the start of out."""
    line = bytes(out).split(b"\n", 1)[0]
    if line.startswith(_PID_MARK):
        try:
            return int(line[len(_PID_MARK) :])
        except ValueError:
            return None
    return None


def _text(b: bytes | bytearray) -> str:
    return bytes(b).decode("utf-8", "replace")
