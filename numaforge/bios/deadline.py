"""Total deadlines for Redfish requests, and the `redfish` library's logging kept behind the masking.

A read timeout bounds one ``recv``: a BMC that sends one byte every few seconds never trips it and held a run
forever (issue 25 item 3). :class:`DeadlineAdapter` (requests' transport adapter, handed to the library as its
``https_adapter``) watches every request from a small thread -- connect, headers AND body: the body is read
inside the adapter, under the same watch (requests reads it only after the adapter returned, where a BMC that
sent its headers and then dripped the body was watched by nobody: issue 40 item 2) -- and cuts its socket
(``shutdown``, which wakes the blocked read at once; the mechanism is :mod:`numaforge.watchedhttp`, shared with
the Prometheus client) when

* the request's total deadline passes (``RetryPolicy.total_timeout``, and what is left of the host's
  ``--host-timeout``: a host ends within its budget, a write included -- a write cut that way has an unknown
  outcome, and bios-apply re-reads what the BMC holds before the host's result is made, issue 40 item 3), or
* the run is stopped (first Ctrl-C / SIGTERM, :func:`numaforge.budget.request_stop`): a read at once, a write
  after :data:`WRITE_GRACE` seconds (its answer says whether the BMC took it).

The connect and read timeouts passed to the transport are shortened to the request's deadline too, so a BMC
that never completes the TCP handshake ends with the host's budget, not ``connect_timeout`` later.

Each answer is bounded in size as well (:func:`answer_cap`, by the kind of resource asked for): a Content-Length
above the cap is refused before the body is read, a body that grows past it while read is cut there;
:class:`AnswerTooLarge` names the cap.

:func:`cut_reason` tells the caller afterwards why its request failed ("deadline", "stop" or None), so the error
names the deadline instead of calling the BMC unreachable.

The library logs whole response bodies (``Service responded with invalid JSON at URI ...`` + the body) at ERROR
through the ``redfish`` logger, which Python's last-resort handler printed to stderr: a BMC echoing the
request headers put the session token or the basic-auth header in the terminal (issue 25 item 1).
:func:`quiet_library_logging` masks every record of that logger (secrets redacted, control characters escaped)
and sends it nowhere unless ``NUMAFORGE_REDFISH_LOG=1`` (then to stderr, masked).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from requests import PreparedRequest, Response
from requests.exceptions import RequestException

from .. import budget
from ..secrets import redact
from ..textsafe import printable
from ..watchedhttp import POLL, WatchedAdapter, watched

WRITE_GRACE = 10.0  # seconds a write on the wire may still take after Ctrl-C/SIGTERM
MiB = 1024 * 1024
# (kind of answer, cap in bytes), by the resource asked for: the first whose test matches the path (answer_cap)
REGISTRY_CAP = ("attribute registry", 64 * MiB)  # the largest real ones are a few MB (Dell iDRAC9: ~1.5 MB)
BIOS_CAP = ("BIOS resource", 8 * MiB)  # a Bios/settings document: ~50-300 KB on real BMCs
OTHER_CAP = ("Redfish resource", 8 * MiB)  # service root, systems, jobs, sessions, errors: a few KB
READ_CHUNK = 65536
LOG_ENV = "NUMAFORGE_REDFISH_LOG"

_local = threading.local()  # per requesting thread: its cap (capped) and its last request's cut reason


@contextmanager
def capped(seconds: float) -> Iterator[None]:
    """Requests of this thread inside get at most ``seconds`` each (clean-up such as a logout after Ctrl-C:
    it runs even though the run was stopped, but never for long)."""
    saved = getattr(_local, "cap", None)
    _local.cap = seconds
    try:
        yield
    finally:
        _local.cap = saved


class AnswerTooLarge(RequestException):
    """The BMC's answer is larger than the cap for its kind (nothing of it is used)."""

    def __init__(self, kind: str, cap: int, got: int, declared: bool):
        self.kind, self.cap, self.got, self.declared = kind, cap, got, declared
        super().__init__(f"answer larger than the {cap // MiB} MiB cap for a {kind}")


def answer_cap(path: str) -> tuple[str, int]:
    """(kind, cap in bytes) of the answer to a request of ``path``: an attribute registry (any path naming a
    registry: vendors spell them differently), a BIOS resource (…/Bios, its settings object), anything else."""
    low = path.split("?", 1)[0].lower().rstrip("/")
    if "registr" in low:
        return REGISTRY_CAP
    if "/bios" in low:
        return BIOS_CAP
    return OTHER_CAP


def cut_reason() -> str | None:
    """Why this thread's last request was cut ("deadline" or "stop"), None if it was not."""
    return getattr(_local, "cut", None)


class DeadlineAdapter(WatchedAdapter):
    """An HTTPAdapter whose requests each have a total deadline and end on a stop request."""

    def __init__(self, total_timeout: float = 180.0, **kw):
        self.total_timeout = total_timeout
        super().__init__(**kw)

    def send(self, request: PreparedRequest, *args: Any, **kwargs: Any) -> Response:
        method = (request.method or "GET").upper()
        login = method == "POST" and "/SessionService/Sessions" in (request.path_url or "")
        write = method not in ("GET", "HEAD", "DELETE") and not login
        total = self.total_timeout
        left = budget.remaining()
        if left is not None:
            total = min(total, max(left, 0.1))
        cap = getattr(_local, "cap", None)
        if cap is not None:
            total = min(total, cap)
        _local.cut = None
        grace = None if budget.is_lifted() else WRITE_GRACE if write else 0.0
        box: dict = {}
        try:
            with watched(total, stop_grace=grace, name="redfish-deadline") as box:
                # a hair longer than the deadline: the watcher ends the request there and says why (deadline,
                # budget, stop); the socket's own timeout ends what the watcher cannot reach (a connect not yet made)
                kwargs["timeout"] = _within(kwargs.get("timeout"), total + 2 * POLL)
                response = super().send(request, *args, **kwargs)
                _read_body(response, request.path_url or "/")
                return response
        finally:
            _local.cut = box.get("cut")  # after the watcher ended: its last word


def _within(timeout: Any, total: float) -> Any:
    """requests' timeout (a number or (connect, read)) with neither part longer than the request's deadline."""
    if isinstance(timeout, tuple):
        return tuple(total if t is None else min(float(t), total) for t in timeout)
    return total if timeout is None else min(float(timeout), total)


def _read_body(response: Response, path: str) -> None:
    """Read the whole body now, under the request's watch, refusing more than the cap for its kind; requests then
    serves ``response.content`` from here (it reads a body only after the adapter returned)."""
    kind, cap = answer_cap(path)
    declared = response.headers.get("content-length")
    if declared and declared.strip().isdigit() and int(declared) > cap:
        response.close()
        raise AnswerTooLarge(kind, cap, int(declared), True)
    chunks, got = [], 0
    try:
        for chunk in response.iter_content(READ_CHUNK):
            got += len(chunk)
            if got > cap:
                raise AnswerTooLarge(kind, cap, got, False)
            chunks.append(chunk)
    except BaseException:
        response.close()
        raise
    response._content = b"".join(chunks)
    response._content_consumed = True  # type: ignore[attr-defined]


class _Masked(logging.Filter):
    """Every record of the library's logger: message rendered, secrets masked, control characters escaped."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed library log call must not break a request
            text = str(record.msg)
        record.msg, record.args = printable(redact(text)), ()
        return True


class _MaskedStderr(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if os.environ.get(LOG_ENV) == "1":
            sys.stderr.write(f"redfish library: {record.levelname}: {record.getMessage()}\n")


def quiet_library_logging() -> None:
    """Idempotent: the ``redfish`` logger's records are masked and, unless NUMAFORGE_REDFISH_LOG=1, dropped."""
    logger = logging.getLogger("redfish")
    if any(isinstance(f, _Masked) for f in logger.filters):
        return
    masked = _Masked()
    logger.addFilter(masked)
    handler = _MaskedStderr()
    handler.addFilter(masked)  # records of child loggers (redfish.rest.v1) reach handlers, not logger filters
    logger.addHandler(handler)
    logger.propagate = False
