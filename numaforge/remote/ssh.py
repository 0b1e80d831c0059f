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

The parts: target.py (where a connection goes), hostkeys.py (known_hosts, the strict policy), connect.py (the
handshake under one deadline), session.py (Remote: commands, sudo, uploads), upload.py (an upload's argument
checks, exec-channel script and errors), errors.py. This module is their public face: callers import from
numaforge.remote.ssh.

Every failure is an :class:`SSHError` (a NumaforgeError) whose ``where`` names the inventory host, user, address
and, for commands, the command; secrets resolved for the login are redacted from every message.
"""

from __future__ import annotations

from ..inventory.model import SSHSpec
from .connect import CONNECT_PHASES, connect
from .errors import (
    AuthError,
    CommandFailed,
    CommandTimeout,
    ConnectError,
    ConnectionLost,
    HostKeyError,
    OutputTooLarge,
    SSHError,
    SudoError,
    UploadError,
)
from .hostkeys import load_known_hosts
from .session import MAX_OUTPUT_BYTES, CommandResult, Remote, check_sudo
from .target import MAX_KEY_BYTES, MAX_TEXT_BYTES, SSHTarget, fingerprint, resolve_target
from .upload import (
    DEFAULT_UPLOAD,
    PUT_CHMOD,
    PUT_MISMATCH,
    PUT_MV,
    PUT_NO_SHA,
    PUT_SCRIPT,
    PUT_WRITE,
    TMP_MARK,
    UPLOAD_METHODS,
)

__all__ = [
    "connect",
    "Remote",
    "CommandResult",
    "SSHTarget",
    "SSHSpec",
    "resolve_target",
    "fingerprint",
    "load_known_hosts",
    "check_sudo",
    "SSHError",
    "ConnectError",
    "AuthError",
    "HostKeyError",
    "CommandTimeout",
    "CommandFailed",
    "SudoError",
    "ConnectionLost",
    "OutputTooLarge",
    "MAX_OUTPUT_BYTES",
    "UploadError",
    "CONNECT_PHASES",
    "DEFAULT_UPLOAD",
    "MAX_KEY_BYTES",
    "MAX_TEXT_BYTES",
    "PUT_CHMOD",
    "PUT_MISMATCH",
    "PUT_MV",
    "PUT_NO_SHA",
    "PUT_SCRIPT",
    "PUT_WRITE",
    "TMP_MARK",
    "UPLOAD_METHODS",
]
