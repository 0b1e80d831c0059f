"""Where user-named output files (--json reports, --junit) go, safely.

* ``-`` means standard output;
* the path must be a regular file or not exist yet: a directory, a device, a FIFO, anything under /proc,
  /sys or /dev is refused -- and so is any path that resolves to one (``/dev/stdout`` is a symlink to
  ``/proc/self/fd/1``: replacing it with a regular file broke the machine's /dev/stdout once);
* the parent directory must exist (no silent ``mkdir -p`` of a mistyped path);
* the file is written atomically: a temporary file in the same directory, fsync'd, then renamed over the
  target (a symlink to a regular file keeps pointing at it: the target is replaced, not the link).

``check_output(path, option)`` runs the same checks without writing, so a task refuses a bad path before it
does any work.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import NumaforgeError

STDOUT = "-"
_SPECIAL_TREES = ("/proc", "/sys", "/dev")


class OutputPathError(NumaforgeError):
    """An output path (--json, --junit) that cannot or must not be written."""

    exit_code = 2


def _target(path: str | os.PathLike, option: str) -> Path:
    """The file that would be replaced, after the checks (symlinks followed)."""
    raw = str(path)
    if not raw:
        raise OutputPathError("empty output path", option, f"pass {option} FILE, or {option} - for standard output")
    p = Path(raw)
    try:
        resolved = p.resolve(strict=False)
    except (OSError, RuntimeError) as exc:
        raise OutputPathError(f"cannot resolve {raw}: {exc}", option, "pass a plain file path") from None
    fix = f"pass a regular file path (or {option} - for standard output)"
    for candidate in (Path(os.path.abspath(raw)), resolved):  # as named, and after following links
        for tree in _SPECIAL_TREES:
            if candidate == Path(tree) or str(candidate).startswith(tree + "/"):
                raise OutputPathError(
                    f"{raw} is in {tree}, a special file system"
                    + (f" (it resolves to {resolved})" if str(resolved) != raw else ""),
                    option,
                    fix,
                )
    try:
        st = os.stat(resolved)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise OutputPathError(f"{raw}: a parent of this path is a file, not a directory", option, fix) from None
    except OSError as exc:
        raise OutputPathError(f"cannot inspect {raw}: {exc.strerror}", option, fix) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputPathError(f"{raw} is a directory", option, f"name a file inside it, e.g. {p / 'report.json'}")
        if not stat.S_ISREG(st.st_mode):
            raise OutputPathError(
                f"{raw} is not a regular file (a device, FIFO or socket); it is never replaced", option, fix
            )
    parent = resolved.parent
    if not parent.exists():
        raise OutputPathError(
            f"the directory {parent} does not exist",
            option,
            f"create it first (mkdir -p {parent}) or choose another path",
        )
    if not parent.is_dir():
        raise OutputPathError(f"{parent} is not a directory", option, fix)
    if not os.access(parent, os.W_OK):
        raise OutputPathError(f"the directory {parent} is not writable", option, "choose a writable directory")
    return resolved


def check_output(path: str | os.PathLike | None, option: str = "--json") -> None:
    """Refuse a bad output path before any work is done (None and ``-`` are always fine)."""
    if path is None or str(path) == STDOUT:
        return
    _target(path, option)


def write_output(path: str | os.PathLike, text: str, option: str = "--json") -> str:
    """Write ``text`` to ``path`` (``-``: standard output) atomically; returns where it went."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return "standard output"
    target = _target(path, option)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise OutputPathError(
            f"cannot create a file in {target.parent}: {exc.strerror}", option, "choose a writable directory"
        ) from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return str(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_stamp(path: str | os.PathLike | None) -> tuple | None:
    """(inode, size, mtime in ns) of a file, None if it cannot be stat'ed: what per-process caches of parsed
    files compare to reuse an entry only while the file is unchanged."""
    try:
        st = os.stat(path or "")
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# ------------------------------------------------------------------------------------------------ input files
ALLOW_READABLE_ENV = "NUMAFORGE_ALLOW_READABLE_SECRET_FILES"


def check_input(
    path: str | os.PathLike,
    *,
    what: str = "file",
    where: str | None = None,
    error: type[NumaforgeError] = NumaforgeError,
    max_bytes: int = 4 * 1024 * 1024,
    private: bool = False,
    fix_missing: str = "check the path",
    fix_kind: str = "pass a regular file",
    fix_dir: str | None = None,
    fix_size: str = "check the path",
) -> os.stat_result:
    """The one check of every file numaforge reads, before it is opened (a FIFO never blocks, /dev/zero is
    never read): it exists, is a regular file of at most ``max_bytes`` and, when ``private`` (secrets, SSH
    private keys), is readable by its owner only (unless NUMAFORGE_ALLOW_READABLE_SECRET_FILES=1). Returns
    its stat; anything else is ``error(what, where, fix)`` -- with ``where`` None the path is the where,
    else the message names the path."""
    label = what if where is None else f"{what} {path}"
    where = str(path) if where is None else where
    try:
        st = os.stat(path)
    except FileNotFoundError:
        missing = f"{label} not found" if label == what else f"cannot read {label}: No such file or directory"
        raise error(missing, where, fix_missing) from None
    except OSError as exc:
        raise error(f"cannot read {label}: {exc.strerror}", where, "check the path and permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{label} path is a directory", where, fix_dir or fix_kind)
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{label} is not a regular file (a device, FIFO or socket)", where, fix_kind)
    if st.st_size > max_bytes:
        raise error(f"{label} is {st.st_size} bytes, more than the {max_bytes}-byte limit", where, fix_size)
    if private and st.st_mode & 0o077 and os.environ.get(ALLOW_READABLE_ENV) != "1":
        who = "others" if st.st_mode & 0o007 else "its group"
        raise error(
            f"{label} is readable by {who} (mode {stat.S_IMODE(st.st_mode):04o})",
            where,
            f"chmod 600 {path} (or set {ALLOW_READABLE_ENV}=1 to accept it)",
        )
    return st


def read_input(path: str | os.PathLike, **checks) -> bytes:
    """The bytes of a file that passed :func:`check_input` (same keywords), read up to the size cap: a file
    that grows while it is read is refused, not read on."""
    check_input(path, **checks)
    error = checks.get("error", NumaforgeError)
    where = checks.get("where")
    label = checks.get("what", "file") if where is None else f"{checks.get('what', 'file')} {path}"
    where = str(path) if where is None else where
    max_bytes = checks.get("max_bytes", 4 * 1024 * 1024)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"cannot read {label}: {exc.strerror}", where, "check the path and permissions") from None
    if len(data) > max_bytes:
        raise error(
            f"{label} grew past the {max_bytes}-byte limit while reading",
            where,
            checks.get("fix_size", "check the path"),
        )
    return data
