"""Per-host time budgets for fleet runs (``--host-timeout``).

    with host_deadline(600, "gpu-17"):     # numaforge.fleet does this around each host's function
        ...                                # every SSH command, upload and Redfish request calls check()

The budget is checked where a host's work crosses to the host: before an SSH connect, command or upload and
before a Redfish request starts. An over-budget host stops there with :class:`HostTimeout` (its result says
how far it got); an SSH operation already on the wire keeps its own timeout, so a budget never cuts it in half.
A Redfish request ends with the budget (numaforge.bios.deadline): a write cut that way has an unknown outcome,
which bios-apply re-reads from the BMC before reporting (numaforge.bios.write.reread_unsure). Clean-up after a failure (live-patch rollback, Redfish logout) runs inside :func:`lifted`: a host that
ran out of time is still put back.

Thread-local: each fleet worker thread has its own host and deadline. Pure (no I/O).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .errors import NumaforgeError

_local = threading.local()
_stop = threading.Event()  # set on Ctrl-C/SIGTERM: every host stops at its next step boundary
_stop_reason = ["interrupted"]


class HostTimeout(NumaforgeError):
    """The host used up its --host-timeout budget; it stopped at a step boundary."""

    exit_code = 1


@contextmanager
def host_deadline(seconds: float | None, host: str) -> Iterator[None]:
    """Give the code inside ``seconds`` of wall time (None or 0: no budget)."""
    saved = getattr(_local, "state", None)
    _local.state = (time.monotonic() + seconds, float(seconds), host) if seconds else None
    try:
        yield
    finally:
        _local.state = saved


@contextmanager
def lifted() -> Iterator[None]:
    """No budget inside (clean-up that must run even for a host that ran out of time)."""
    saved = getattr(_local, "state", None), getattr(_local, "lifted", False)
    _local.state, _local.lifted = None, True
    try:
        yield
    finally:
        _local.state, _local.lifted = saved


def snapshot() -> tuple:
    """This thread's budget, for a worker thread doing part of the same host's work (:func:`adopted`)."""
    return getattr(_local, "state", None), getattr(_local, "lifted", False)


@contextmanager
def adopted(snap: tuple) -> Iterator[None]:
    """Run inside with the budget of the thread that took ``snap`` (the same deadline, not a new one)."""
    saved = getattr(_local, "state", None), getattr(_local, "lifted", False)
    _local.state, _local.lifted = snap
    try:
        yield
    finally:
        _local.state, _local.lifted = saved


def is_lifted() -> bool:
    """True inside :func:`lifted` (clean-up that runs whatever the budget or a stop request says)."""
    return bool(getattr(_local, "lifted", False))


def remaining() -> float | None:
    """Seconds left in this thread's budget (None: no budget)."""
    state = getattr(_local, "state", None)
    return None if state is None else state[0] - time.monotonic()


class Stopped(NumaforgeError):
    """The run was interrupted (Ctrl-C / SIGTERM); this host stopped before its next step."""

    exit_code = 130


def request_stop(reason: str) -> None:
    """Every host (all threads) stops before its next SSH command or Redfish request; clean-up inside
    :func:`lifted` still runs. Writes already on the wire finish and are recorded."""
    _stop_reason[0] = reason
    _stop.set()


def clear_stop() -> None:
    _stop.clear()


def stop_requested() -> bool:
    return _stop.is_set()


def check(doing: str) -> None:
    """Raise HostTimeout when this thread's budget is used up (Stopped when the run was interrupted);
    ``doing`` names the step about to start."""
    state = getattr(_local, "state", None)
    if _stop.is_set() and not getattr(_local, "lifted", False):
        raise Stopped(
            f"{_stop_reason[0]}: stopped before {doing}",
            None,
            "re-run the same command: finished hosts are kept, a --reboot run resumes from its journal",
        )
    if state is None or time.monotonic() < state[0]:
        return
    _, seconds, host = state
    raise HostTimeout(
        f"host used up its --host-timeout of {seconds:g} s; stopped before {doing}",
        f"host {host}",
        "raise --host-timeout, or see the report's steps for what took the time "
        "(hosts already done are kept; re-run this host)",
    )


def cap(timeout: float | None) -> float | None:
    """A wait of ``timeout`` s shortened to what is left of the budget (at least 0.1 s): for waits that
    only watch (polling sleeps, connects), never for an operation that writes."""
    left = remaining()
    if left is None:
        return timeout
    left = max(0.1, left)
    return left if timeout is None else min(timeout, left)
