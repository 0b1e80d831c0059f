"""An exclusive ``flock`` on a lock file for the duration of a with-block: what serialises one thing (a kernel
build per content key, a tarball import, an apt suite set's package lists) across concurrent runs on one machine.

    with locked(cache / ".build.lock"):
        ...

The kernel drops a flock when its process dies, so a killed holder leaves nothing stale. (Per-host write locks,
which also say who holds them, are numaforge.hostlock.)
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created with its directory) until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
