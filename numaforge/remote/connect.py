"""Opening an SSH session: the target resolved from the inventory and ssh_config, known_hosts loaded strictly,
the handshake (banner, key exchange, authentication) under one total deadline cut by Ctrl-C/SIGTERM."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import paramiko

from .. import budget
from ..errors import NumaforgeError
from ..inventory.model import SSHSpec
from ..secrets import redact
from .errors import (
    AuthError,
    ConnectError,
    HostKeyError,
)
from .hostkeys import StrictPolicy, load_known_hosts, refuse_revoked
from .session import Remote
from .target import SSHTarget, fingerprint, resolve_target

CONNECT_PHASES = 3  # the handshake's total deadline: banner + key exchange + authentication, connect_timeout each

# paramiko logs a failed transport thread ("Exception (client): Error reading SSH protocol banner" and two
# tracebacks) at ERROR; with no handler configured Python's last-resort handler printed them on the terminal
# under numaforge's own message (issue 40). numaforge reports every failure itself (an SSHError naming the host):
# paramiko's log goes nowhere unless the application configures logging for it.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def connect(
    spec: SSHSpec | None,
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
    client, revoked = _strict_client(target)
    policy = StrictPolicy(target, accept_new_host_key, revoked)
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
    except (paramiko.SSHException, OSError, EOFError) as exc:
        cause = _transport_exception(client)  # what ended the transport thread (e.g. no banner), before close
        client.close()
        if not isinstance(exc, paramiko.SSHException) and isinstance(sock, socket.socket):
            sock.close()
        raise _handshake_error(exc, target, spec, password, connect_timeout, watch, cause) from None
    transport = client.get_transport()
    assert transport is not None  # connect() succeeded
    try:
        refuse_revoked(transport.get_remote_server_key(), revoked, target)
    except HostKeyError:
        client.close()
        raise
    transport.set_keepalive(15)
    return Remote(client, target, accepted_host_key=policy.added)


def _strict_client(target: SSHTarget) -> tuple[paramiko.SSHClient, list[paramiko.PKey]]:
    """An SSH client that knows the target's known_hosts keys (system file, then the user's), and the keys
    those files mark @revoked."""
    client = paramiko.SSHClient()
    revoked: list[paramiko.PKey] = []
    for path in (target.system_known_hosts, target.known_hosts):
        if path and os.path.exists(path):
            known, bad, _skipped = load_known_hosts(path, target.where)
            for entry in known:
                for name in entry.hostnames:
                    client.get_host_keys().add(name, entry.key.get_name(), entry.key)
            revoked += bad
    return client, revoked


def _handshake_error(
    exc: Exception,
    target: SSHTarget,
    spec: SSHSpec,
    password: str | None,
    connect_timeout: float,
    watch: _HandshakeWatch,
    cause: Exception | None = None,
) -> NumaforgeError:
    """What a failed handshake reports: ``exc`` is what paramiko or the socket raised, ``cause`` what ended
    paramiko's transport thread (paramiko then raises a vaguer "No existing session" from the next step)."""
    if isinstance(exc, paramiko.BadHostKeyException):
        return _mismatch_error(exc, target)
    if isinstance(exc, paramiko.PasswordRequiredException):
        agent = (
            "ssh.agent is false in the inventory: set it to true"
            if not spec.use_agent
            else "SSH_AUTH_SOCK is not set: start ssh-agent"
            if not os.environ.get("SSH_AUTH_SOCK")
            else "ssh-agent holds no key that the host accepts"
        )
        return AuthError(
            f"private key {', '.join(target.key_files) or '(default)'} is encrypted (has a passphrase), and "
            f"numaforge never asks for one; {agent}",
            target.where,
            "load the key into ssh-agent (ssh-add KEY) and keep ssh.agent true in the inventory "
            "(the default), or use a key without a passphrase",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return _auth_error(exc, target, spec, password)
    if watch.cut:
        return watch.error(target, connect_timeout)
    if _no_banner(exc, cause):
        return ConnectError(
            f"no SSH banner from {target.hostname}:{target.port} within {connect_timeout:g} s: something accepted "
            "the connection but did not speak SSH",
            target.where,
            "check that sshd (not another service) listens on that port and is not overloaded "
            "(ssh.port in the inventory or Port in ssh_config; sshd's MaxStartups)",
        )
    if isinstance(exc, paramiko.SSHException):
        return _ssh_error(exc, target, spec, connect_timeout)
    return _connect_error(exc, target, connect_timeout)


def _transport_exception(client: paramiko.SSHClient) -> Exception | None:
    """What ended the transport thread -- or, when the peer never sent its identification line (the thread
    may still be waiting for it: start_client's timeout can end first), an SSHException saying so."""
    transport = client.get_transport()
    if transport is None:
        return None
    saved = transport.get_exception()
    if saved is None and not transport.remote_version:
        return paramiko.SSHException("Error reading SSH protocol banner (none received)")
    return saved


def _no_banner(exc: Exception, cause: Exception | None) -> bool:
    """paramiko's transport gave up reading the peer's SSH-2.0 identification line (``exc`` says so, or is
    paramiko's plain follow-up error -- "No existing session" -- while ``cause`` says so)."""
    if isinstance(exc, paramiko.SSHException) and "protocol banner" in str(exc):
        return True
    return type(exc) is paramiko.SSHException and cause is not None and "protocol banner" in str(cause)


def _mismatch_error(exc: paramiko.BadHostKeyException, target: SSHTarget) -> HostKeyError:
    source = _file_listing(target) or target.known_hosts
    return HostKeyError(
        f"HOST KEY MISMATCH: {target.known_hosts_name} offered {exc.key.get_name()} {fingerprint(exc.key)}, "
        f"but {source} has {exc.expected_key.get_name()} {fingerprint(exc.expected_key)} "
        f"(a reinstalled host, or someone intercepting the connection)",
        target.where,
        f"verify the new key out of band; if the host was really reinstalled, remove the old entry with "
        f"ssh-keygen -R '{target.known_hosts_name}' -f {source} and connect again "
        f"(--accept-new-host-key never replaces a changed key)",
    )


def _auth_error(
    exc: paramiko.AuthenticationException, target: SSHTarget, spec: SSHSpec, password: str | None
) -> AuthError:
    """Authentication refused: the message names every credential that was offered."""
    how = []
    if target.key_files:
        how.append("key " + ", ".join(target.key_files))
    if spec.use_agent:
        how.append("ssh-agent" + ("" if os.environ.get("SSH_AUTH_SOCK") else " (SSH_AUTH_SOCK not set)"))
    else:
        how.append("no ssh-agent (ssh.agent is false)")
    if password is not None:
        how.append(f"password {spec.password}")
    if not target.key_files:
        how.append("~/.ssh/id_* keys")
    return AuthError(
        redact(f"authentication failed: {exc}; tried {', '.join(how)}"),
        target.where,
        f"install the public key in ~{target.user}/.ssh/authorized_keys on the host, or set "
        f"ssh.key_file / ssh.user / ssh.password (env:VAR or file:PATH) in the inventory",
    )


def _ssh_error(exc: paramiko.SSHException, target: SSHTarget, spec: SSHSpec, connect_timeout: float) -> NumaforgeError:
    """Another SSH-level failure: an unusable key file, nothing to authenticate with, or a broken exchange."""
    if target.key_files and re.search(r"private key|key file|not a valid", str(exc), re.I):
        return AuthError(
            f"cannot use private key {', '.join(target.key_files)}: {exc}",
            target.where,
            "point ssh.key_file (or IdentityFile) at the PRIVATE key, in OpenSSH or PEM format "
            "(ssh-keygen -y -f KEY checks it)",
        )
    if "No authentication methods available" not in str(exc):
        return _connect_error(exc, target, connect_timeout)
    return AuthError(
        "no credentials to offer: no ssh.key_file or IdentityFile, ssh-agent "
        + ("disabled" if not spec.use_agent else "without keys")
        + ", no ~/.ssh/id_* key, no password",
        target.where,
        "set ssh.key_file (or IdentityFile in ssh_config), load a key into ssh-agent, "
        "or give ssh.password as env:VAR / file:PATH",
    )


def _no_delay(sock) -> None:
    """Send each SSH message at once (TCP_NODELAY), as OpenSSH's ssh does. Without it, the handshake and every
    new channel wait ~40 ms: a small packet sits behind Nagle's algorithm until the host's delayed ACK of the
    previous one. That was 45 of the 50 ms of a short command (measured, docs/BENCHMARKS.md "SSH fleet")."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def _file_listing(target: SSHTarget) -> str | None:
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


def _handshake(client, target: SSHTarget, spec: SSHSpec, password, connect_timeout: float, sock, watch) -> None:
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

    def error(self, target: SSHTarget, connect_timeout: float) -> NumaforgeError:
        budget.check(f"the SSH handshake with {target.where} finished (cut while the host was still answering)")
        return ConnectError(
            f"SSH handshake not finished within {self.seconds:g} s: the host kept answering, too slowly to finish "
            f"(banner, key exchange and authentication have {connect_timeout:g} s each)",
            target.where,
            "check the host's sshd and the network path to it (a tarpit or a broken middlebox drips bytes)",
        )


def _connect_error(exc: BaseException, target: SSHTarget, connect_timeout: float) -> ConnectError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else (str(exc) or type(exc).__name__)
    if isinstance(exc, socket.timeout):
        reason = f"no answer within {connect_timeout:g} s"
    return ConnectError(
        redact(f"cannot connect: {reason}"),
        target.where,
        "check that the host is up and sshd listens on that address and port "
        "(ssh.address/ssh.port in the inventory or HostName/Port in ssh_config)",
    )
