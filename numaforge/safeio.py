"""Where user-named output files (--json reports, --junit) go, safely.

* ``-`` means standard output;
* the path must be a regular file or not exist yet: a directory, a device, a FIFO, anything under /proc,
  /sys or /dev is refused -- and so is any path that resolves to one (``/dev/stdout`` is a symlink to
  ``/proc/self/fd/1``: replacing it with a regular file broke the machine's /dev/stdout once);
* the parent directory must exist (no silent ``mkdir -p`` of a mistyped path);
* the file itself must not be a symbolic link, dangling or not (issue 40 item 4: a link planted at a report
  path made numaforge overwrite the link's target); a linked parent directory is followed;
* the file is written atomically: a temporary file in the same directory, fsync'd, then renamed over the
  target.

Files numaforge creates for itself (locks, journals, state) go through :func:`open_nofollow` (O_NOFOLLOW: a
link planted at the path is refused, never followed), :func:`ensure_dir` (a directory that is a dangling link or
a file is a clear error) and :func:`atomic_write` (temp file + rename, which replaces a link, never writes
through it). tests/hostile/test_links_and_caps.py lists every other raw writer in numaforge/ and why it may
bypass these.

``check_output(path, option)`` runs the same checks without writing, so a task refuses a bad path before it
does any work.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import NumaforgeError
from .textsafe import printable

STDOUT = "-"
_SPECIAL_TREES = ("/proc", "/sys", "/dev")


class OutputPathError(NumaforgeError):
    """An output path (--json, --junit) that cannot or must not be written."""

    exit_code = 2


def _target(path: str | os.PathLike, option: str) -> Path:
    """The file that would be replaced, after the checks (the file itself is never a link; parents followed)."""
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
    _refuse_link(raw, option)  # after the special trees: /dev/stdout is a link too, and is never to be removed
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


def _refuse_link(raw: str, option: str) -> None:
    """The named file itself must not be a symbolic link (dangling or not): a report is never written through
    one to a file the link's owner chose (issue 40 item 4). A linked parent directory is fine."""
    if os.path.islink(raw):
        try:
            points = os.readlink(raw)
        except OSError:
            points = "?"
        raise OutputPathError(
            f"{printable(raw)} is a symbolic link (to {printable(points)}); a report is never written through a link",
            option,
            f"name the file itself ({option} {printable(os.path.realpath(raw))}), or remove the link (rm {printable(raw)})",
        )


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


# ------------------------------------------------------------------------------------------------ own files
def open_nofollow(
    path: str | os.PathLike,
    flags: int,
    mode: int = 0o600,
    *,
    what: str = "file",
    error: type[NumaforgeError] = NumaforgeError,
) -> int:
    """``os.open`` of a file numaforge creates or writes for itself, never through a symbolic link (O_NOFOLLOW)
    and never blocking on a FIFO: a link planted at ``path`` (or a FIFO, a device, a directory) is
    ``error(what, path, fix)``, the file it points to is left alone. Returns the descriptor (close-on-exec)."""
    shown = printable(str(path))
    fix = f"remove it (rm {shown}); numaforge creates the file itself"
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"the {what} is a symbolic link; numaforge never writes through a link", shown, fix) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise error(f"the {what} is not a regular file", shown, fix) from None
        raise error(f"cannot open the {what}: {exc.strerror}", shown, "check the path and its permissions") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"the {what} is not a regular file (a FIFO, device or socket)", shown, fix)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def ensure_dir(
    path: str | os.PathLike,
    *,
    what: str = "directory",
    error: type[NumaforgeError] = NumaforgeError,
    mode: int = 0o700,
) -> Path:
    """``mkdir -p`` of a directory numaforge keeps its own files in; one that exists as a file, or as a link to
    nowhere or to a file, is ``error`` naming it (not a raw FileExistsError / NotADirectoryError)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True, mode=mode)
        if p.is_dir():
            return p
    except (FileExistsError, NotADirectoryError):
        pass
    except OSError as exc:
        raise error(
            f"cannot create the {what}: {exc.strerror}", printable(str(p)), "check the path and its permissions"
        ) from None
    # something in the way: say what it is
    shown = printable(str(p))
    bad = p
    for parent in [p, *p.parents]:
        if os.path.lexists(parent) and not parent.is_dir():
            bad = parent
            break
    bshown = printable(str(bad))
    if bad.is_symlink():
        target = printable(os.readlink(bad))
        kind = (
            f"{bshown} is a symbolic link to {target}, which does not exist"
            if not bad.exists()
            else f"{bshown} is a symbolic link to {target}, which is not a directory"
        )
    else:
        kind = f"{bshown} is a file, not a directory"
    raise error(
        f"cannot use the {what}: {kind}",
        shown,
        f"remove it (rm {bshown}) and numaforge creates the directory, or point NUMAFORGE_STATE at another directory",
    )


def atomic_write(
    path: str | os.PathLike,
    data: str | bytes,
    *,
    mode: int = 0o644,
    what: str = "file",
    error: type[NumaforgeError] = NumaforgeError,
) -> Path:
    """Write a file numaforge keeps for itself so readers see the old or the new content: a temporary file in
    the same directory (O_EXCL), fsync'd, renamed over ``path`` -- a link at ``path`` is replaced, never
    written through. The parent must exist (:func:`ensure_dir`)."""
    p = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise error(
            f"cannot write the {what}: {exc.strerror}", printable(str(p)), "check the directory and its permissions"
        ) from None
    try:
        try:
            os.fchmod(fd, mode & ~_umask())
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise error(
                f"cannot write the {what}: {exc.strerror}", printable(str(p)), "free disk space or fix permissions"
            ) from None
        raise
    return p


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
