"""An open SSH session to one host (Remote): commands with total deadlines, sudo, the session leader's pid for
killing what a timed-out command left, and atomic verified uploads (exec channel or SFTP)."""

from __future__ import annotations

import io
import re
import secrets as _random
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

import paramiko

from .. import budget
from ..digest import sha256_file
from ..secrets import redact
from .errors import (
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    OutputTooLarge,
    SudoError,
    UploadError,
)
from .target import SSHTarget
from .upload import DEFAULT_UPLOAD, check_put_args, check_sha, put_script, script_error, temp_prefix, upload_error

_PID_MARK = b"__numaforge_pid="  # first stdout line of every command: the remote session leader's pid
_CHUNK = 32768
_DRAIN_BLOCK = 1 << 20  # the most _drain takes from one stream per call
_FEED_BLOCK = 1 << 20  # stdin goes out in 1 MiB sendall() calls (paramiko splits them into SSH packets)
_EOF_GRACE = 2.0  # s to wait for EOF after the exit status (a background child may hold it)
# The most one command may print on stdout (and, separately, on stderr) before it is stopped: a host is a peer,
# and issue 40 found a 300 MB /proc/interrupts read whole into memory. 64 MiB is ~20x the largest snapshot of a
# 384-CPU host with a few thousand IRQs (its /proc/interrupts is ~8 MiB); pass max_output to change it.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
MAX_READ_BYTES = 4 * 1024 * 1024  # Remote.read_text: one small remote file


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
class _Running:
    """One command being run, as its errors name it."""

    command: str
    timeout: float | None
    where: str
    sudo: bool
    max_output: int | None = MAX_OUTPUT_BYTES
    stop_grace: float | None = None
    lifted: bool = False  # clean-up (budget.lifted): a stop request does not cut it

    def timed_out(
        self, what: str, fix: str, out: bytes | bytearray = b"", err: bytes | bytearray = b""
    ) -> CommandTimeout:
        return CommandTimeout(
            what, self.where, fix, command=self.command, timeout=self.timeout, stdout=_text(out), stderr=_text(err)
        )


# --------------------------------------------------------------------------------------------- remote
class Remote:
    """An open SSH connection to one host. Use as a context manager; not shared between threads."""

    def __init__(self, client: paramiko.SSHClient, target: SSHTarget, accepted_host_key=None):
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
        max_output: int | None = MAX_OUTPUT_BYTES,
        stop_grace: float | None = None,
    ) -> CommandResult:
        """Run a shell command; sudo=True runs it as root (through ``sudo -n`` unless we log in as root).

        ``stdin`` (text, bytes, or a binary file streamed in 1 MiB blocks) is fed to the command, then closed;
        ``progress(sent, total)`` is called after each block (total None for a file of unknown size). A command
        that exits before reading all of its input just ends the feeding: its result says why.
        Raises CommandTimeout after ``timeout`` seconds (the remote process group gets SIGTERM then SIGKILL),
        CommandFailed on a non-zero exit when ``check``, SudoError when sudo would need a password,
        OutputTooLarge (the command stopped) when stdout or stderr passes ``max_output`` bytes (None: no cap),
        budget.Stopped (the command stopped on the host) ``stop_grace`` seconds after the run was stopped
        (Ctrl-C/SIGTERM/SIGHUP; not inside budget.lifted clean-up). None (the default): a stop waits for the
        command's end, bounded by ``timeout`` -- a write is never cut half-way; a read passes 0.
        """
        where = f"{self.where}: `{redact(command)}`"
        budget.check(f"`{redact(command)}`")
        cmd = _Running(command, timeout, where, sudo, max_output, stop_grace, budget.is_lifted())
        t0 = time.monotonic()
        chan = self._channel(timeout)
        try:
            chan.exec_command(self._wrap(command, sudo))
            deadline = None if not timeout else t0 + timeout
            if stdin is not None:
                self._send_input(chan, stdin, deadline, progress, cmd)
                chan.settimeout(None)
            if not chan.closed:
                chan.shutdown_write()
            out, err = self._collect(chan, deadline, cmd)
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
            check_sudo(result, where, self.user)
        if check and rc != 0:
            raise _failed(result, where)
        return result

    def _send_input(self, chan: paramiko.Channel, stdin, deadline: float | None, progress, cmd: _Running) -> None:
        """Feed ``stdin`` to the command; one that does not read it before the deadline is stopped."""
        try:
            _feed(chan, stdin, deadline, progress)
        except socket.timeout:
            head = chan.recv(_CHUNK) if chan.recv_ready() else b""
            self._kill(_pid_from(head), cmd.sudo)
            raise cmd.timed_out(
                f"command did not read its input within {cmd.timeout:g} s; stopped it",
                "check that the command reads stdin, or raise the timeout",
            ) from None

    def _collect(self, chan: paramiko.Channel, deadline: float | None, cmd: _Running) -> tuple[bytearray, bytearray]:
        """The command's stdout (without the pid marker line) and stderr once it has exited; past the deadline
        it is stopped (its process group and descendants on the host) and CommandTimeout raised."""
        out, err = bytearray(), bytearray()
        pid: int | None = None
        header = True
        idle, exited_at, stop_seen = 0.0, None, None
        while True:
            got = _drain(chan, out, err)
            if header:
                header, pid = _strip_marker(out, give_up=chan.exit_status_ready() or len(out) > 65536)
            if cmd.max_output is not None and max(len(out), len(err)) > cmd.max_output:
                self._kill(pid, cmd.sudo)
                stream, size = ("stdout", len(out)) if len(out) > cmd.max_output else ("stderr", len(err))
                raise OutputTooLarge(
                    f"the command printed more than {cmd.max_output} bytes on {stream} (the cap for one command's "
                    f"output; {size} bytes read); stopped it",
                    cmd.where,
                    "the host sent far more than this command prints on a sane host: check what it reads there "
                    "(a huge or endless file, a runaway tool)",
                    command=cmd.command,
                    cap=cmd.max_output,
                )
            now = time.monotonic()
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                # the exit status can come before the last output: done at EOF (or close), or when a
                # background child keeps the output open past a short grace
                if chan.eof_received or chan.closed:
                    return out, err
                exited_at = exited_at or now
                if now - exited_at >= _EOF_GRACE:
                    return out, err
            if deadline is not None and now >= deadline:
                self._kill(pid, cmd.sudo)
                raise cmd.timed_out(
                    f"command still running after {cmd.timeout:g} s; stopped it",
                    "raise the timeout if the host is just slow, or find out why the command hangs",
                    out,
                    err,
                )
            if cmd.stop_grace is not None and budget.stop_requested() and not cmd.lifted:
                stop_seen = stop_seen or now
                if now - stop_seen >= cmd.stop_grace:
                    self._kill(pid, cmd.sudo)
                    raise budget.Stopped(
                        f"the run was stopped while `{redact(cmd.command)}` ran; stopped it on the host",
                        cmd.where,
                        "re-run the same command: finished hosts are kept",
                    )
            if got:
                idle = 0.0
            else:
                # poll, 1 ms doubling to 20 ms: select() on a channel makes paramiko open a pipe whose
                # close races with its transport thread (EBADF killed whole connections, bench/ssh_fleet.py)
                idle = min(idle * 2, 0.02) if idle else 0.001
                time.sleep(idle if deadline is None else max(0.0, min(idle, deadline - now)))

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

        ``method="exec"`` (the default): one exec channel runs a POSIX sh script (PUT_SCRIPT) that removes
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
        where = f"{self.where}: {remote_path}"
        budget.check(f"uploading {remote_path}")
        check_put_args(local, remote_path, mode, method, sudo and not self.is_root, where)
        sha = sha256_file(local)
        size = local.stat().st_size
        prefix = temp_prefix(remote_path)
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
            raise upload_error(
                exc, name=local.name, remote_path=remote_path, where=where, timeout=timeout, connected=self.connected
            ) from None
        return sha

    def _put_exec(self, local, tmp, prefix, remote_path, mode, sha, where, timeout, tick, sudo) -> None:
        script = put_script(tmp, prefix, mode, sha, remote_path)
        try:
            with open(local, "rb") as fh:
                r = self.run(script, timeout=timeout, sudo=sudo, check=False, stdin=fh, progress=tick)
        except ConnectionLost:
            raise self._lost(f"sending {local.name}") from None
        if r.rc != 0:
            writer = "root" if sudo or self.is_root else f"{self.user} (or upload with sudo=True)"
            raise script_error(
                r.rc,
                r.stdout,
                r.stderr,
                name=local.name,
                tmp=tmp,
                remote_path=remote_path,
                sha=sha,
                where=where,
                writer=writer,
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
        check_sha(got, sha, where, r.stderr.strip() or "no output")
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

    def read_text(
        self, path: str, timeout: float | None = 30, sudo: bool = False, max_bytes: int = MAX_READ_BYTES
    ) -> str:
        """Contents of a small remote file (sysfs, /proc, configs). Raises CommandFailed if unreadable,
        OutputTooLarge (naming the file and the cap) past ``max_bytes``."""
        try:
            r = self.run(f"cat -- {shlex.quote(path)}", timeout=timeout, sudo=sudo, check=False, max_output=max_bytes)
        except OutputTooLarge as exc:
            raise OutputTooLarge(
                f"{path} on the host is more than {max_bytes} bytes (the cap for a file read with read_text); "
                "it was not read",
                self.where,
                "check the file on the host (a small sysfs/proc/config file is expected here)",
                command=exc.command,
                cap=max_bytes,
            ) from None
        if r.rc != 0:
            reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"cat exited {r.rc}"
            raise CommandFailed.of(
                r,
                f"cannot read {path}: {reason}",
                self.where,
                "check the path exists on the host (module loaded? right kernel?) and permissions"
                + ("" if sudo else "; pass sudo=True for root-only files"),
            )
        return r.stdout

    def write_text(self, path: str, text: str, timeout: float | None = 30, sudo: bool = False) -> None:
        """Write a short value in one write(2) (sysfs files need that), e.g. write_text(".../enabled", "0")."""
        r = self.run(f"printf %s {shlex.quote(text)} > {shlex.quote(path)}", timeout=timeout, sudo=sudo, check=False)
        if r.rc != 0:
            reason = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exited {r.rc}"
            raise CommandFailed.of(
                r, f"cannot write {path}: {reason}", self.where, "check the path and that the value is accepted by it"
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


def check_sudo(r: CommandResult, where: str, user: str) -> None:
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


def _failed(result: CommandResult, where: str) -> CommandFailed:
    """A non-zero exit (check=True): the last line of its output says why."""
    detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
    tail = detail[-1] if detail else "no output"
    status = "was killed by a signal" if result.rc == -1 else f"exited {result.rc}"
    return CommandFailed.of(
        result,
        redact(f"command {status}: {tail}"),
        where,
        "see the command's output in the report; fix the cause on the host and re-run",
    )


def _drain(chan: paramiko.Channel, out: bytearray, err: bytearray) -> bool:
    """Append what the channel holds now to ``out`` and ``err`` (at most _DRAIN_BLOCK of each per call, so a
    host that sends as fast as we read still returns to the deadline and size checks); whether there was any."""
    got = False
    limit = len(out) + _DRAIN_BLOCK
    while chan.recv_ready() and len(out) < limit:
        out += chan.recv(_CHUNK)
        got = True
    limit = len(err) + _DRAIN_BLOCK
    while chan.recv_stderr_ready() and len(err) < limit:
        err += chan.recv_stderr(_CHUNK)
        got = True
    return got


def _strip_marker(out: bytearray, give_up: bool) -> tuple[bool, int | None]:
    """Remove the pid marker line and what precedes it from ``out``: (still waiting for it, the pid). The marker
    comes first, unless the login shell's startup files (~/.bashrc, ~/.ssh/rc) printed something: that is not
    the command's output, so it is dropped. ``give_up``: the command exited, or printed 64 KiB without one."""
    at = out.find(_PID_MARK)
    end = out.find(b"\n", at) if at >= 0 else -1
    if end >= 0:
        pid = _pid_from(out[at:end])
        del out[: end + 1]
        return False, pid
    return not give_up, None


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
