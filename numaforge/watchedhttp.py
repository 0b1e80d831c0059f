"""HTTP requests (requests + urllib3) whose socket a watcher thread cuts at a deadline or on a stop request.

A read timeout bounds one ``recv``: a peer that sends one byte every few seconds never trips it. The callers
(Redfish: numaforge.bios.deadline; Prometheus: numaforge.canary.prometheus) bound a whole request instead:

    with watched(seconds, stop_grace=0.0, name="prometheus-deadline") as box:
        session.mount("https://", WatchedAdapter())
        ...  # the request, headers and body
    box.get("cut")  # "deadline", "stop" or None

:class:`WatchedAdapter` (requests' transport adapter) takes its connections from pools that tell this thread's
box which connection the request uses; :func:`watched` runs a watcher thread that, when the deadline passes or
the run is stopped (:func:`numaforge.budget.request_stop`, after ``stop_grace`` seconds; never if None), writes
the reason into the box and shuts the socket down, which wakes the read blocked in the requesting thread.

Each caller keeps its own policy (deadlines, answer size caps, what a stop may interrupt); this module is only
the mechanism they share.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from requests.adapters import HTTPAdapter
from urllib3 import ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from . import budget

POLL = 0.05  # seconds between the watcher's looks

_local = threading.local()  # per requesting thread: the box of its request in flight (its connection, the cut)


def _remember(conn) -> None:
    box = getattr(_local, "box", None)
    if box is not None:
        box["conn"] = conn


class WatchedHTTPConnection(HTTPConnection):
    """Keeps its socket in ``watched_sock``: http.client drops ``sock`` once a response says it closes the
    connection (``Connection: close``, HTTP/1.0) and hands it to the response, where a watcher looking at
    ``sock`` found nothing to cut while the body dripped on (issue 40 item 6, the reader fault matrix)."""

    def connect(self):
        super().connect()
        self.watched_sock = self.sock


class WatchedHTTPSConnection(HTTPSConnection):
    def connect(self):
        super().connect()
        self.watched_sock = self.sock


class _Remembering:
    """A pool that tells this thread's box which connection the request takes."""

    def _get_conn(self, timeout=None):
        conn = super()._get_conn(timeout)
        _remember(conn)
        return conn


class WatchedHTTPPool(_Remembering, HTTPConnectionPool):
    ConnectionCls = WatchedHTTPConnection


class WatchedHTTPSPool(_Remembering, HTTPSConnectionPool):
    ConnectionCls = WatchedHTTPSConnection


POOLS = {"http": WatchedHTTPPool, "https": WatchedHTTPSPool}


class WatchedAdapter(HTTPAdapter):
    """requests' transport adapter whose pools tell the watcher which connection (socket) a request uses."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(POOLS)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        """An HTTP(S) proxy from the environment (requests honours HTTPS_PROXY/HTTP_PROXY) gets the watched pools
        too: a proxy that drips its CONNECT answer or the body is cut at the same deadline (the watcher shuts
        the socket to the proxy, which urllib3 sets before it tunnels)."""
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, ProxyManager):
            manager.pool_classes_by_scheme = dict(POOLS)
        return manager


@contextmanager
def watched(seconds: float, stop_grace: float | None = 0.0, name: str = "http-deadline") -> Iterator[dict]:
    """Watch this thread's requests inside for ``seconds`` in total; a stop request cuts them ``stop_grace``
    seconds after it is seen (None: never). Yields the box: ``box["cut"]`` is "deadline" or "stop" once cut."""
    box: dict = {}
    done = threading.Event()
    watcher = threading.Thread(
        target=_watch, args=(box, done, time.monotonic() + seconds, stop_grace), name=name, daemon=True
    )
    _local.box = box
    watcher.start()
    try:
        yield box
    finally:
        done.set()
        watcher.join()
        _local.box = None


def _watch(box: dict, done: threading.Event, deadline: float, stop_grace: float | None) -> None:
    """Cut the request's socket at the deadline, or ``stop_grace`` s after a stop request (Ctrl-C/SIGTERM in
    another thread: numaforge.budget.request_stop)."""
    stop_seen: float | None = None
    while not done.wait(POLL):
        now = time.monotonic()
        reason = None
        if now >= deadline:
            reason = "deadline"
        elif stop_grace is not None and budget.stop_requested():
            stop_seen = stop_seen or now
            if now - stop_seen >= stop_grace:
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
