"""Total deadlines for Redfish requests, and the `redfish` library's logging kept behind the masking.

A read timeout bounds one ``recv``: a BMC that sends one byte every few seconds never trips it and held a run
forever (issue 25 item 3). :class:`DeadlineAdapter` (requests' transport adapter, handed to the library as its
``https_adapter``) watches every request from a small thread -- connect, headers AND body: the body is read
inside the adapter, under the same watch (requests reads it only after the adapter returned, where a BMC that
sent its headers and then dripped the body was watched by nobody: issue 40 item 2) -- and cuts its socket
(``shutdown``, which wakes the blocked read at once) when

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
import socket
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter
from requests.exceptions import RequestException
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .. import budget
from ..secrets import redact
from ..textsafe import printable

WRITE_GRACE = 10.0  # seconds a write on the wire may still take after Ctrl-C/SIGTERM
MiB = 1024 * 1024
# (kind of answer, cap in bytes), by the resource asked for: the first whose test matches the path (answer_cap)
REGISTRY_CAP = ("attribute registry", 64 * MiB)  # the largest real ones are a few MB (Dell iDRAC9: ~1.5 MB)
BIOS_CAP = ("BIOS resource", 8 * MiB)  # a Bios/settings document: ~50-300 KB on real BMCs
OTHER_CAP = ("Redfish resource", 8 * MiB)  # service root, systems, jobs, sessions, errors: a few KB
READ_CHUNK = 65536
POLL = 0.05
LOG_ENV = "NUMAFORGE_REDFISH_LOG"

_local = threading.local()  # per requesting thread: the box of the request in flight, the last cut reason


def _remember(conn) -> None:
    box = getattr(_local, "box", None)
    if box is not None:
        box["conn"] = conn


class _WatchedHTTP(HTTPConnection):
    """Keeps its socket in ``watched_sock``: http.client drops ``sock`` once a response says it closes the
    connection (``Connection: close``, HTTP/1.0) and hands it to the response, where a watcher looking at
    ``sock`` found nothing to cut while the body dripped on (issue 40 item 6, the reader fault matrix)."""

    def connect(self):
        super().connect()
        self.watched_sock = self.sock


class _WatchedHTTPS(HTTPSConnection):
    def connect(self):
        super().connect()
        self.watched_sock = self.sock


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTP

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)
        _remember(conn)
        return conn


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPS

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)
        _remember(conn)
        return conn


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


class DeadlineAdapter(HTTPAdapter):
    """An HTTPAdapter whose requests each have a total deadline and end on a stop request."""

    def __init__(self, total_timeout: float = 180.0, **kw):
        self.total_timeout = total_timeout
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

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
        box: dict = {}
        done = threading.Event()
        _local.box, _local.cut = box, None
        watcher = threading.Thread(
            target=_watch,
            args=(box, done, time.monotonic() + total, write, budget.is_lifted()),
            name="redfish-deadline",
            daemon=True,
        )
        watcher.start()
        # a hair longer than the deadline: the watcher ends the request there and says why (deadline, budget,
        # stop); the socket's own timeout ends what the watcher cannot reach (a connect not yet made)
        kwargs["timeout"] = _within(kwargs.get("timeout"), total + 2 * POLL)
        try:
            response = super().send(request, *args, **kwargs)
            _read_body(response, request.path_url or "/")
            return response
        finally:
            done.set()
            watcher.join()
            _local.box = None
            _local.cut = box.get("cut")


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


def _watch(box: dict, done: threading.Event, deadline: float, write: bool, lifted: bool) -> None:
    stop_seen: float | None = None
    while not done.wait(POLL):
        now = time.monotonic()
        reason = None
        if now >= deadline:
            reason = "deadline"
        elif budget.stop_requested() and not lifted:
            stop_seen = stop_seen or now
            if not write or now - stop_seen >= WRITE_GRACE:
                reason = "stop"
        if reason is None:
            continue
        box["cut"] = reason
        conn = box.get("conn")
        sock = getattr(conn, "sock", None) or getattr(conn, "watched_sock", None)
        if sock is not None:
            try:  # the plain socket's shutdown: wakes a read blocked in another thread, TLS state untouched
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass
        return


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
