"""The parts of an atomic verified upload (Remote.put) that need no connection: the checks of its arguments, the
temp file's name, the exec-channel script and what its exit codes mean, the host's sha256 against the local one,
and the UploadError a failed upload reports."""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import Path

import paramiko

from .errors import CommandTimeout, ConnectionLost, SSHError, SudoError, UploadError

UPLOAD_METHODS = ("exec", "sftp")  # put(method=...): see Remote.put
DEFAULT_UPLOAD = "exec"
TMP_MARK = ".numaforge-tmp."  # uploads go to <dir>/.<name>.numaforge-tmp.<random> first

# put(method="exec"): the whole upload in one exec channel, the file's bytes on stdin. POSIX sh (dash, bash,
# busybox ash). The EXIT trap removes the temp whatever happens (after the mv there is nothing left to remove);
# a dropped connection ends stdin early (the checksum then differs) or kills the script with SIGPIPE/SIGHUP.
PUT_WRITE, PUT_CHMOD, PUT_NO_SHA, PUT_MISMATCH, PUT_MV = 3, 4, 5, 6, 7
PUT_SCRIPT = """umask 077
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


def check_put_args(local: Path, remote_path: str, mode: int, method: str, sftp_sudo: bool, where: str) -> None:
    """UploadError for arguments no upload can use (``sftp_sudo``: sudo asked of an SFTP upload by a non-root
    login)."""
    if method not in UPLOAD_METHODS:
        raise UploadError(f"unknown upload method {method!r}", where, f"use one of {', '.join(UPLOAD_METHODS)}")
    if sftp_sudo and method == "sftp":
        raise UploadError(
            "an SFTP upload runs as the login user and cannot use sudo", where, "use method='exec' with sudo"
        )
    if not posixpath.split(remote_path)[1]:
        raise UploadError(f"'{remote_path}' names a directory, not a file", where, "give the full target file path")
    if not 0 <= mode <= 0o7777:
        raise UploadError(f"mode {mode:#o} is not a file mode", where, "give a mode like 0o600 or 0o755")
    if not local.is_file():
        raise UploadError(f"local file {local} does not exist", where, "build the artifact first or fix the path")


def temp_prefix(remote_path: str) -> str:
    """``<dir>/.<name>.numaforge-tmp.``: the temp files of uploads to ``remote_path`` start with it."""
    rdir, rname = posixpath.split(remote_path)
    rdir = rdir or "."
    if rdir.startswith("-"):
        rdir = "./" + rdir  # never an option to chmod/sha256sum
    return f"{rdir}/.{rname}{TMP_MARK}"


def put_script(tmp: str, prefix: str, mode: int, sha: str, remote_path: str) -> str:
    """PUT_SCRIPT for one upload: temp ``tmp``, stale temps ``prefix*``, the expected ``sha``."""
    return PUT_SCRIPT.format(
        tmp=shlex.quote(tmp),
        prefix=shlex.quote(prefix),
        mode=f"{mode:o}",
        sha=sha,
        dest=shlex.quote(remote_path),
        write=PUT_WRITE,
        chmod=PUT_CHMOD,
        no_sha=PUT_NO_SHA,
        mismatch=PUT_MISMATCH,
        mv=PUT_MV,
    )


def script_error(
    rc: int, stdout: str, stderr: str, *, name: str, tmp: str, remote_path: str, sha: str, where: str, writer: str
) -> UploadError:
    """What PUT_SCRIPT's non-zero exit ``rc`` means (``writer``: who had to write the directory)."""
    reason = (stderr.strip().splitlines() or [f"exited {rc}"])[-1]
    got = re.search(r"^sha256=(\S*)$", stdout, re.M)
    if rc == PUT_NO_SHA or (rc == PUT_MISMATCH and not (got and got.group(1))):
        check_sha(None, sha, where, reason)
    if rc == PUT_MISMATCH and got:
        check_sha(got.group(1), sha, where)
    doing = {PUT_WRITE: f"cannot write {tmp}", PUT_CHMOD: "cannot chmod the temp file", PUT_MV: "cannot rename"}
    return UploadError(
        f"upload of {name} failed: {doing.get(rc, 'the upload script failed')}: {reason}; "
        f"{remote_path} was not created or replaced",
        where,
        f"check that the directory exists, has free space and is writable by {writer}",
    )


def check_sha(got: str | None, sha: str, where: str, reason: str = "") -> None:
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


def upload_error(
    exc: BaseException, *, name: str, remote_path: str, where: str, timeout: float | None, connected: bool
) -> UploadError:
    """The UploadError an upload that raised ``exc`` reports (``connected``: the connection is still up)."""
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
    if (dropped or not connected) and not msg.startswith("connection lost"):
        msg = f"connection lost ({msg})"
    return UploadError(
        f"upload of {name} failed: {msg}; {remote_path} was not created or replaced",
        where,
        exc.fix
        if isinstance(exc, SudoError)
        else "check free space and permissions of the target directory on the host "
        "and that the connection is stable, then re-run",
    )
