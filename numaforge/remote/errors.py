"""The SSH transport's typed errors: each names the inventory host, user, address and, for commands, the
command (what, where, fix)."""

from __future__ import annotations

from ..errors import NumaforgeError


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


class OutputTooLarge(SSHError):
    """A command printed more than its output cap (Remote.run's ``max_output``); it was stopped."""

    def __init__(self, what, where=None, fix=None, *, command="", cap=0):
        self.command, self.cap = command, cap
        super().__init__(what, where, fix)


class CommandFailed(SSHError):
    """A command exited non-zero (with check=True). Carries rc, stdout and stderr."""

    def __init__(self, what, where=None, fix=None, *, command="", rc=-1, stdout="", stderr=""):
        self.command, self.rc, self.stdout, self.stderr = command, rc, stdout, stderr
        super().__init__(what, where, fix)

    @classmethod
    def of(cls, result, what: str, where: str, fix: str) -> "CommandFailed":
        """The failure of a finished command (numaforge.remote.session.CommandResult), carrying its output."""
        return cls(what, where, fix, command=result.command, rc=result.rc, stdout=result.stdout, stderr=result.stderr)


class SudoError(SSHError):
    """A privileged command needs sudo and sudo cannot run it without a password (or is missing)."""


class UploadError(SSHError):
    """An upload failed; the final path was not created or replaced."""
