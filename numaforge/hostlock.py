"""Per-host write locks on this build server: one numaforge run at a time writes a host.

    with hostlock.held("gpu-17", task="bios-apply", wait=0):   # numaforge.fleet does this around a host's work
        ...                                                  # PATCH, config job, reset, verify

A lock is an exclusive ``flock`` on ``<state dir>/locks/<host>.lock`` (numaforge.paths.state_dir: per user and
project), taken before the host's first write and held until its last check. The kernel releases a flock when
its process dies, so the lock of a killed run is free at once: there is nothing stale to clean up. The holder
writes who it is into the file (pid, task, start time, user) so a second run can say who holds the host.

A second run against a held host fails that host at once with :class:`HostLocked` naming the holder, or waits
up to ``wait`` seconds (``--wait-lock``); Ctrl-C while waiting stops the wait (numaforge.budget.check).
A fleet host is locked by the machine it reaches, not by its inventory name (:func:`machine_keys`): its BMC's
origin and its SSH address:port. Two inventories that name one machine differently share its lock (and
bios-apply and os-apply on one machine exclude each other: a reboot under a host OS change is a second writer);
two machines that happen to share a name in different inventories do not. Locks are per user and project (the
BMC-visible side, a pending config job, is numaforge.bios's).
"""

from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import os
import re
import time
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

from . import budget, safeio
from .errors import NumaforgeError
from .paths import state_dir
from .textsafe import printable

# A holder record is ~150 bytes of JSON; more is not a numaforge holder's (issue 40: a 100 MB record was read
# and printed whole). Read at most this much, show at most MAX_SHOWN characters of each field, escaped.
MAX_RECORD_BYTES = 4096
MAX_SHOWN = 120
UNREADABLE = "unreadable"
POLL = 0.2  # seconds between tries while waiting for a held lock
# A holder writes its name right after its flock succeeds; a run refused in that window reads an empty file.
# It looks again for up to this long, so its error can name the holder (the holder's pid, task, start).
NAME_GRACE = 2.0


class HostLocked(NumaforgeError):
    """Another numaforge run holds this host's write lock."""

    exit_code = 1


class LockFileError(NumaforgeError):
    """The lock directory or a lock file cannot be used (a file or dangling link where the directory belongs, a
    symbolic link planted at a lock file): a setup problem to fix, not a bug."""

    exit_code = 2


def lock_dir() -> Path:
    try:
        state = state_dir()
    except OSError:  # NUMAFORGE_STATE (or a parent) is a file or a dangling link: ensure_dir says which
        state = Path(os.environ.get("NUMAFORGE_STATE") or "")
        safeio.ensure_dir(state, what="numaforge state directory", error=LockFileError)
    return safeio.ensure_dir(state / "locks", what="lock directory", error=LockFileError)


def lock_path(host: str) -> Path:
    """The lock file of a host name: readable part + hash (any inventory name is a safe file name)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:64]
    return lock_dir() / f"{safe}-{hashlib.sha256(host.encode()).hexdigest()[:8]}.lock"


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry and no LOGNAME: the uid says who
        return str(os.getuid())


def read_record(path: Path) -> bytes:
    """The first MAX_RECORD_BYTES (+1, to tell a longer one) of a lock file, read without following a link or
    blocking on a FIFO; b"" if it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.pread(fd, MAX_RECORD_BYTES + 1, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


def holder(path: Path) -> dict:
    """What the holder wrote into the lock file: {} while it is still writing it (or if unreadable); a record
    that is not a numaforge holder's (too long, not JSON) is ``{UNREADABLE: <escaped excerpt>}``."""
    raw = read_record(path)
    if not raw.strip():
        return {}
    if len(raw) > MAX_RECORD_BYTES:
        return {UNREADABLE: f"over {MAX_RECORD_BYTES} bytes, begins {_excerpt(raw)}"}
    try:
        doc = json.loads(raw)
    except ValueError:
        return {UNREADABLE: f"not a numaforge holder record: {_excerpt(raw)}"}
    return doc if isinstance(doc, dict) else {UNREADABLE: f"not a numaforge holder record: {_excerpt(raw)}"}


def _excerpt(value: Any) -> str:
    """At most MAX_SHOWN characters of a holder's field, escaped for the terminal."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    cut = text[:MAX_SHOWN]
    return printable(cut).replace("\n", "\\n") + ("..." if len(text) > MAX_SHOWN else "")


def describe(who: dict) -> str:
    if not who:
        return "another numaforge run (it has not written its name yet)"
    if UNREADABLE in who:
        return f"another process (its lock record is {who[UNREADABLE]})"
    f = {k: _excerpt(who.get(k, "?")) for k in ("task", "pid", "user", "started")}
    return f"{f['task']} (pid {f['pid']}, user {f['user']}, started {f['started']})"


def _locked(host: str, path: Path, waited: float, doing: str) -> HostLocked:
    who = holder(path)
    end = time.monotonic() + NAME_GRACE
    while not who and time.monotonic() < end:
        time.sleep(0.02)
        who = holder(path)
    return HostLocked(
        f"another run is {doing}: {describe(who)}" + (f"; waited {waited:g} s for it" if waited else ""),
        f"host {host} (lock {path})" if doing == WRITING else f"{host} (lock {path})",
        "wait for that run to finish (or stop it), or pass --wait-lock SECONDS to wait for it",
    )


WRITING = "writing this host"


@contextmanager
def held(host: str, task: str, wait: float = 0.0, doing: str = WRITING, label: str | None = None) -> Iterator[dict]:
    """Hold ``host``'s write lock inside the block (module docstring); yields what was written as the holder.
    ``host`` may name another resource (a run's resume journal); ``doing`` says what its holder does; ``label``
    names it in messages (default: ``host``)."""
    path = lock_path(host)
    fd = safeio.open_nofollow(path, os.O_RDWR | os.O_CREAT, 0o600, what="lock file", error=LockFileError)
    try:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _locked(label or host, path, wait, doing) from None
                budget.check("waiting for the host's write lock")
                time.sleep(min(POLL, left))
        me = {
            "pid": os.getpid(),
            "task": task,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "user": _user(),
            "host": host,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        try:
            yield me
        finally:
            os.ftruncate(fd, 0)  # no holder any more; the flock goes with the close below
    finally:
        os.close(fd)


def machine_keys(host: Any) -> list[str]:
    """The lock keys of a fleet host: ``bmc:<host>:<port>`` of its BMC URL and ``ssh:<address>:<port>``; a host
    with neither (or a plain name) is locked by its name."""
    keys = []
    bmc = getattr(host, "bmc", None)
    if bmc is not None and getattr(bmc, "url", None):
        try:
            u = urlsplit(bmc.url)
            port = u.port or (443 if u.scheme == "https" else 80)
            keys.append(f"bmc:{(u.hostname or '').lower()}:{port}")
        except ValueError:  # the inventory refuses such a URL; never a reason to run unlocked
            keys.append(f"bmc:{bmc.url}")
    ssh = getattr(host, "ssh", None)
    if ssh is not None and getattr(ssh, "address", None):
        keys.append(f"ssh:{str(ssh.address).lower()}:{getattr(ssh, 'port', 22)}")
    if not keys:
        keys.append(host if isinstance(host, str) else str(getattr(host, "name", host)))
    return sorted(set(keys))


@contextmanager
def held_host(host: Any, name: str, task: str, wait: float = 0.0) -> Iterator[dict]:
    """Hold every lock of ``host``'s machine (:func:`machine_keys`, in sorted order so two runs never wait on
    each other crosswise); errors name the host ``name``. Yields what was written as the holder."""
    with ExitStack() as stack:
        me: dict = {}
        for key in machine_keys(host):
            me = stack.enter_context(held(key, task, wait, label=name))
        yield me
