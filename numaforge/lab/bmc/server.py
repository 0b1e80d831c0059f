"""The BMC simulator: an HTTPS (or HTTP) Redfish service on a ThreadingHTTPServer.

``BMCSimulator`` is the API for tests and the lab daemon (``python -m numaforge.lab.bmc``). Every request is
counted (``sim.requests``); faults (``sim.inject``) fire before (or, with after=True, after) processing.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import selectors
import shutil
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .errors import BMCSimulatorError
from .faults import STAGING, FaultPlan
from .flavours import Flavour, load_flavour
from .http import Request, Router, SimResponse, error, method_not_allowed, normalise, not_found
from .messages import message
from .state import BMCState
from .tls import ensure_certificates

# resources anyone may read without credentials (DSP0266: service root, odata, $metadata; POST to Sessions)
ACCOUNT_URI = "/redfish/v1/AccountService/Accounts/1"  # the simulator's one account, named in PasswordChangeRequired
PUBLIC = {("GET", "/redfish"), ("GET", "/redfish/v1/"), ("GET", "/redfish/v1/odata"), ("GET", "/redfish/v1/$metadata")}


def _logout(req: Request) -> bool:
    return req.method == "DELETE" and req.path.startswith("/redfish/v1/SessionService/Sessions/")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, *args, **kw) -> None:
        self.connections: set = set()
        self.conn_lock = threading.Lock()
        self.log = lambda text: None
        super().__init__(*args, **kw)

    def process_request(self, request, client_address):
        with self.conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut every open (keep-alive) connection: a stopped BMC must not keep answering on old sockets."""
        with self.conn_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):  # TLS handshake failures, clients going away: not bugs
        self.log(f"connection from {client_address[0]} ended: {sys.exc_info()[1]!r}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "numaforge-bmc-sim/1.0"
    sys_version = ""
    timeout = 60
    sim: "BMCSimulator"  # set on the subclass

    def setup(self):
        # as web servers do (nginx's tcp_nodelay): without it the body, written after the headers, waits for
        # the client's delayed ACK of the headers (~40 ms per response)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(self.timeout)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self.request.close()
                raise ConnectionAbortedError from None
            self.sim._count_connection(resumed=bool(self.request.session_reused))
        else:
            self.sim._count_connection(resumed=False)
        super().setup()

    def handle(self):
        try:
            super().handle()
        except (ConnectionError, ssl.SSLError, TimeoutError, socket.timeout):
            self.close_connection = True

    def log_message(self, fmt, *args):  # quiet; the daemon logs through sim.log
        self.sim.log(fmt % args)

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    # ------------------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self, method: str):
        sim = self.sim
        raw = self._read_body()
        path = normalise(self.path)
        started = time.monotonic()
        sim._count(method, path)
        sim._gathered(method)
        try:
            self._answer(sim, method, path, raw)
        finally:
            sim._served(method, path, started)

    def _answer(self, sim, method: str, path: str, raw: bytes):
        if sim.latency:
            time.sleep(sim.latency)
        fault = sim.faults.take(method, path, after=False)
        if fault is not None and fault.kind == "slow":
            time.sleep(float(fault.options.get("seconds", 2.0)))
            fault = None
        staging = fault if fault is not None and fault.kind in STAGING else None
        if fault is not None and staging is None:
            return self._fault(fault)
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = Request(method, path, self.path, headers, fault=staging)
        if raw:
            try:
                req.body = json.loads(raw)
            except ValueError:
                req.body_error = True
        try:
            resp = sim._handle(req)
        except Exception as exc:  # a bug in the simulator: answer like a BMC would, and keep serving
            sim.log(f"internal error on {method} {path}: {exc!r}")
            sim.errors.append(f"{method} {path}: {exc!r}")
            resp = error(500, message("InternalError"))
        after = sim.faults.take(method, path, after=True)
        if after is not None and after.kind == "slow":  # done, but the answer comes late
            time.sleep(float(after.options.get("seconds", 2.0)))
            after = None
        if after is not None:
            return self._fault(after)
        self._send(resp, head=(method == "HEAD"))

    def _fault(self, fault):
        if fault.kind == "reset":
            if "body_bytes" in fault.options:
                self._partial(int(fault.options["body_bytes"]))
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            self.close_connection = True
            return
        if fault.kind == "503":
            retry = fault.options.get("retry_after", 1)
            resp = error(503, message("ServiceTemporarilyUnavailable", retry), headers={"Retry-After": str(retry)})
        elif fault.kind == "5xx":
            msg = message("InternalError")
            if "message" in fault.options:
                msg = dict(msg, Message=str(fault.options["message"]))
            resp = error(int(fault.options.get("status", 500)), msg)
        elif fault.kind == "redirect":
            resp = SimResponse(
                int(fault.options.get("status", 302)),
                b"",
                headers={"Location": str(fault.options.get("location", "https://elsewhere.invalid/"))},
            )
        elif fault.kind == "echo":
            echoed = " ".join(
                f"{k}={v}" for k, v in self.headers.items() if k.lower() in ("x-auth-token", "authorization")
            )
            msg = dict(
                message("InternalError"),
                Message=f"request rejected [/b][red]:smile: 0000:3b:00.0; headers were: {echoed}",
            )
            resp = error(int(fault.options.get("status", 400)), msg)
        elif fault.kind == "drip":
            return self._drip(float(fault.options.get("interval", 5.0)))
        elif fault.kind == "drip_body":
            return self._drip(float(fault.options.get("interval", 5.0)), headers_at_once=True)
        elif fault.kind == "huge":
            return self._huge(
                int(fault.options.get("size", 100 * 1024 * 1024)), bool(fault.options.get("length", True))
            )
        elif fault.kind == "answer":
            resp = SimResponse(
                int(fault.options.get("status", 200)),
                json.dumps(fault.options.get("body")).encode(),
                headers=dict(fault.options.get("headers") or {}),
            )
        elif fault.options.get("echo"):  # bad_json whose body repeats the credentials the client sent
            echoed = " ".join(
                f"{k}={v}" for k, v in self.headers.items() if k.lower() in ("x-auth-token", "authorization")
            )
            resp = SimResponse(200, ('{"@odata.id": "/redfish/v1/", "Name": "truncat ' + echoed).encode())
        else:  # bad_json
            resp = SimResponse(200, b'{"@odata.id": "/redfish/v1/", "Name": "truncat')
        self._send(resp)

    def _drip(self, interval: float, headers_at_once: bool = False) -> None:
        """A whole (valid) answer, one byte every ``interval`` s, until it is sent, the client goes away or
        the simulator stops; ``headers_at_once``: the status line and headers in one write, then the body drips.
        It says ``Connection: close`` (it does close): a client then hands the socket to the response, where a
        deadline watching the connection's socket no longer finds it."""
        body = b'{"@odata.id": "/redfish/v1/", "Name": "' + b"d" * 4096 + b'"}'
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nOData-Version: 4.0\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        data = head + body
        self.close_connection = True
        start = 0
        if headers_at_once:
            try:
                self.wfile.write(head)
                self.wfile.flush()
            except OSError:
                return
            start = len(head)
        for i in range(start, len(data)):
            if self.sim._stopping.wait(interval if i > start or headers_at_once else 0):
                return
            try:
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
            except OSError:
                return

    def _partial(self, sent: int) -> None:
        """A 200 whose headers announce a whole JSON body, then only its first ``sent`` bytes (the reset follows)."""
        body = b'{"@odata.id": "/redfish/v1/", "Name": "' + b"p" * 4096 + b'"}'
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: max(0, min(sent, len(body) - 1))])
            self.wfile.flush()
        except OSError:
            pass

    def _huge(self, size: int, length: bool) -> None:
        """A 200 whose valid JSON body is ``size`` bytes, written in chunks (never held whole), until it is sent or
        the client goes away; without ``length`` no Content-Length: the body ends when the connection closes."""
        prefix, suffix = b'{"@odata.id": "/redfish/v1/", "Pad": "', b'"}'
        pad = max(0, size - len(prefix) - len(suffix))
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("OData-Version", "4.0")
            if length:
                self.send_header("Content-Length", str(len(prefix) + pad + len(suffix)))
            self.end_headers()
            self.wfile.write(prefix)
            chunk = b"x" * 65536
            while pad > 0 and not self.sim._stopping.is_set():
                self.wfile.write(chunk[: min(pad, len(chunk))])
                pad -= len(chunk)
            self.wfile.write(suffix)
            self.wfile.flush()
        except OSError:
            return

    def _send(self, resp: SimResponse, head: bool = False):
        data = resp.payload()
        self.send_response(resp.status)
        if data or resp.status not in (204, 304):
            self.send_header("Content-Type", resp.content_type)
        self.send_header("OData-Version", "4.0")
        self.send_header("Cache-Control", "no-cache")
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0" if resp.status == 204 else str(len(data)))
        self.end_headers()
        if not head and resp.status != 204:
            self.wfile.write(data)


class Hub:
    """One thread that accepts connections for many simulators (issue 43 item 6): each simulator keeps its own
    listening socket, BIOS state and per-connection threads, but an idle one costs no thread and no wake-ups (a
    simulator on its own ran ``serve_forever``, which wakes every 0.2 s: 10,000 of them kept two cores busy
    doing nothing). ``BMCSimulator.start(hub=hub)`` registers a simulator, ``stop()`` takes it off; ``close()``
    ends the thread. The bench farm and ``--fleet`` serve their BMCs so; a simulator started without a hub gets
    one of its own (named after it), so its stop() wakes its thread at once instead of waiting for a poll."""

    def __init__(self, name: str = "bmc-sim-hub") -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, server: "_Server") -> None:
        server.socket.setblocking(False)  # accept only what select() reported; never block the other BMCs
        with self._lock:
            self._selector.register(server.socket, selectors.EVENT_READ, server)
        self._wake()

    def remove(self, server: "_Server") -> None:
        with self._lock:
            try:
                self._selector.unregister(server.socket)
            except (KeyError, ValueError):
                pass
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):  # the pipe is full (the hub wakes anyway) or closed
            pass

    def _run(self) -> None:
        while not self._closed:
            events = self._selector.select()
            for key, _ in events:
                if key.data is None:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                with self._lock:  # a server stopped meanwhile is not served
                    if self._selector.get_map().get(key.fd) is not key:
                        continue
                key.data._handle_request_noblock()  # accept; the connection gets its own thread (ThreadingMixIn)

    def close(self) -> None:
        self._closed = True
        self._wake()
        self._thread.join(timeout=10)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


class BMCSimulator:
    """A vendor-flavoured Redfish BMC on host:port. Use as a context manager or start()/stop()."""

    _gather: dict | None = None  # gather(): the next requests held until they are all in flight (any subclass)

    def __init__(
        self,
        flavour: "str | Flavour" = "generic",
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = True,
        username: str = "admin",
        password: str | None = None,
        power_delay: float = 1.0,
        state_dir: str | Path | None = None,
        verbose: bool = False,
        latency: float = 0.0,
    ):
        # a flavour name, or a Flavour (tests vary one, e.g. dataclasses.replace(f, publication_uri=...))
        self.flavour = flavour if isinstance(flavour, Flavour) else load_flavour(flavour)
        if not (isinstance(power_delay, (int, float)) and 0 <= power_delay <= 3600):
            raise BMCSimulatorError(
                f"power_delay must be 0..3600 seconds, got {power_delay!r}",
                "power_delay",
                "pass a number of seconds such as 1.0",
            )
        if not (isinstance(latency, (int, float)) and 0 <= latency <= 60):
            raise BMCSimulatorError(
                f"latency must be 0..60 seconds, got {latency!r}",
                "latency",
                "pass the seconds a real BMC takes to answer, such as 0.05",
            )
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise BMCSimulatorError(f"port must be 0..65535, got {port!r}", "port", "pass 0 for any free port")
        self.host = host
        self.port = port
        self.tls = tls
        self.username = username
        self.password = password if password is not None else secrets.token_urlsafe(18)
        self.power_delay = power_delay
        self.latency = latency  # seconds added before every answer (a BMC's service time; benchmarks)
        self.verbose = verbose
        self._own_state_dir = state_dir is None
        self.state_dir = (
            Path(tempfile.mkdtemp(prefix=f"bmc-{self.flavour.name}-")) if state_dir is None else Path(state_dir)
        )
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            probe = self.state_dir / ".writable"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise BMCSimulatorError(
                f"state directory is not writable: {exc.strerror}",
                str(self.state_dir),
                "pass a writable state_dir (or None for a temporary one)",
            ) from None
        self.state = BMCState(self.flavour, power_delay, self.state_dir / "state.json")
        self.faults = FaultPlan()
        self._stopping = threading.Event()  # set by stop(): a dripping answer ends
        self.requests: list[tuple[str, str]] = []
        self.timeline: list[tuple[str, str, float, float]] = []  # (method, path, received, answered), monotonic
        self.connections = 0  # connections accepted (TLS handshakes completed), since the last reset_counts()
        self.tls_resumed = 0  # of those, TLS sessions resumed (abbreviated handshakes)
        self.errors: list[str] = []  # simulator bugs seen (tests assert it stays empty)
        self.sessions: dict[str, dict] = {}  # token -> {"Id", "UserName", "created"}
        self.issued_tokens: list[str] = []  # every token ever issued (tests: must never leak)
        self.extra_systems: list[str] = []  # more members of the Systems collection (a BMC that grew one)
        self.settings_etag = True  # False: the settings object carries no ETag at all
        self.annotation_etag: bool | None = None  # Bios @Redfish.Settings.ETag published? None: as settings_etag
        self.require_if_match = False  # True: a PATCH of the settings object without If-Match gets 428
        self.strong_if_match = False  # True: If-Match with the weak form of the BMC's own ETag gets 412 (a quirk)
        self.password_change_required = False  # True: the account must change its password (Base message)
        self.basic_auth = True  # False: HTTP Basic is refused (401), sessions only (some BMCs are set up so)
        self._session_seq = 0
        self._gather_cv = threading.Condition()
        self._lock = threading.Lock()
        self._unavailable_until = 0.0  # after a manager reset the BMC answers 503 for a while
        self.manager_reset_seconds: float | None = None  # None: min(power_delay, 2)
        self.ca_file: Path | None = None
        self._server: _Server | None = None
        self._hub: Hub | None = None
        self._own_hub = False  # start() without a hub made this one: stop() closes it
        self.router = Router(case_insensitive=self.flavour.case_insensitive_paths)
        from .resources import register_all

        register_all(self)

    # ------------------------------------------------------------------ lifecycle
    def start(self, hub: Hub | None = None) -> "BMCSimulator":
        """Listen and serve: in a thread of its own, or through ``hub`` (one thread for many simulators)."""
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"sim": self})
        try:
            server = _Server((self.host, self.port), handler, bind_and_activate=False)
            server.server_bind()
            server.server_activate()
        except OSError as exc:
            raise BMCSimulatorError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}",
                f"{self.host}:{self.port}",
                "pick a free port (or 0 for any) or stop what is listening there",
            ) from None
        if self.tls:
            self.ca_file, cert, key = ensure_certificates(self.state_dir, self.host)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(cert, key)
            server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        server.log = self.log
        self._server = server
        self.port = server.server_address[1]
        # on its own: a hub of its own, whose thread sleeps until a connection or stop() (serve_forever polled
        # every 0.2 s, and each stop() waited for that poll)
        self._own_hub = hub is None
        self._hub = Hub(name=f"bmc-sim-{self._display_name()}") if hub is None else hub
        self._hub.add(server)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            if self._hub is not None:
                self._hub.remove(self._server)
                if self._own_hub:
                    self._hub.close()  # wakes its thread and joins it
                self._hub = None
            self._server.server_close()
            self._server.close_connections()
            self._server = None
        if self._own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------------ test API
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @property
    def system_path(self) -> str:
        return self.flavour.system_path

    @property
    def manager_path(self) -> str:
        return self.flavour.manager_path

    @property
    def bios_path(self) -> str:
        return self.flavour.bios_path

    @property
    def settings_path(self) -> str:
        return self.flavour.settings_path

    def inject(self, kind: str, path_regex: str = ".*", count: int = 1, **kw):
        """Queue a fault: kind in 5xx (status=), 503 (retry_after=), slow (seconds=), reset (body_bytes=), bad_json (echo=),
        redirect (status=, location=), echo (status=), drip (interval=), drip_body (interval=), huge (size=,
        length=), answer (status=, body=, headers=);
        method="PATCH" limits it to one method; after=True fires after the request was processed."""
        return self.faults.add(kind, path_regex, count, **kw)

    def gather(self, n: int, methods: tuple[str, ...] = ("GET", "HEAD"), timeout: float = 10.0) -> None:
        """Hold the next ``n`` requests of these methods until all ``n`` have arrived (at most ``timeout`` s after
        the first): requests a client sent at once are then in flight together however this machine schedules
        the client's threads, so round_trips() counts them once; a client that sends them one after the other
        gets its first answer only after the timeout, and round_trips() still counts every one. Later requests
        pass."""
        with self._gather_cv:
            self._gather = {"n": n, "methods": set(methods), "arrived": 0, "timeout": timeout, "first": None}

    def _gathered(self, method: str) -> None:
        if self._gather is None:  # nothing gathered: every request passes without taking the condition
            return
        with self._gather_cv:
            g = self._gather
            if g is None or method not in g["methods"] or g["arrived"] >= g["n"]:
                return
            g["arrived"] += 1
            g["first"] = g["first"] or time.monotonic()
            self._gather_cv.notify_all()
            while g["arrived"] < g["n"] and not self._stopping.is_set():
                left = g["first"] + g["timeout"] - time.monotonic()
                if left <= 0:
                    return
                self._gather_cv.wait(min(left, 0.2))

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.timeline.clear()
            self.connections = self.tls_resumed = 0

    def count(self, method: str | None = None, path_regex: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for m, p in self.requests
                if (method is None or m == method) and (path_regex is None or re.search(path_regex, p))
            )

    def bios_current(self) -> dict:
        self.state.advance()
        with self.state.lock:
            return dict(self.state.current)

    def bios_pending(self) -> dict:
        self.state.advance()
        with self.state.lock:
            return dict(self.state.pending)

    def power_state(self) -> str:
        self.state.advance()
        return self.state.power

    def jobs(self) -> list[dict]:
        self.state.advance()
        with self.state.lock:
            return [dict(j) for j in self.state.jobs.values()]

    def set_bios(self, **attributes) -> None:
        """Test setup: force current values (as if set in BIOS setup), bypassing Redfish."""
        with self.state.lock:
            unknown = set(attributes) - set(self.flavour.defaults)
            if unknown:
                raise KeyError(f"unknown attributes {sorted(unknown)}")
            self.state.current.update(attributes)
            self.state.save()

    @property
    def graceful_ignored(self) -> bool:
        return self.state.graceful_ignored

    @graceful_ignored.setter
    def graceful_ignored(self, value: bool) -> None:
        """When True the host OS ignores GracefulRestart/GracefulShutdown (a hung OS): only Force* works."""
        self.state.graceful_ignored = bool(value)

    def _display_name(self) -> str:
        return self.flavour.name

    def log(self, text: str) -> None:
        if self.verbose:
            print(f"bmc-sim[{self._display_name()}]: {text}", flush=True)

    # ------------------------------------------------------------------ request handling
    def _count_connection(self, resumed: bool) -> None:
        with self._lock:
            self.connections += 1
            self.tls_resumed += int(resumed)

    def _count(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def _served(self, method: str, path: str, started: float) -> None:
        with self._lock:
            self.timeline.append((method, path, started, time.monotonic()))

    def round_trips(self) -> int:
        """Sequential round trips the client made: the longest chain of requests each received after the
        previous one was answered (requests that overlap in time went out in parallel and count once). With
        ``latency`` set, every answer takes at least that long, so parallel requests overlap for certain."""
        deadline = time.monotonic() + 5.0  # an answer is on the wire before its span is written: wait for the spans
        while True:
            with self._lock:
                if len(self.timeline) >= len(self.requests) or time.monotonic() > deadline:
                    spans = sorted(self.timeline, key=lambda t: t[3])
                    break
            time.sleep(0.01)
        chain, free_at = 0, float("-inf")
        for _m, _p, start, end in spans:  # earliest-answered first: the longest chain of disjoint spans
            if start >= free_at:
                chain, free_at = chain + 1, end
        return chain

    def link(self, path: str) -> str:
        """How this flavour spells a link (iLO-like flavours end links with '/')."""
        if self.flavour.trailing_slash and not path.endswith("/"):
            return path + "/"
        return path

    def new_session(self) -> tuple[str, dict]:
        with self._lock:
            self._session_seq += 1
            token = secrets.token_hex(16)
            sess = {"Id": str(self._session_seq), "UserName": self.username, "created": time.time()}
            self.sessions[token] = sess
            self.issued_tokens.append(token)
            return token, sess

    def _authenticate(self, req: Request) -> bool:
        token = req.headers.get("x-auth-token")
        if token:
            with self._lock:
                sess = self.sessions.get(token)
            if sess is not None:
                req.session_id = sess["Id"]
                return True
            return False
        auth = req.headers.get("authorization", "")
        if auth.lower().startswith("basic ") and self.basic_auth:
            try:
                user, _, pw = base64.b64decode(auth[6:].strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return False
            return secrets.compare_digest(user, self.username) and secrets.compare_digest(pw, self.password)
        return False

    def _handle(self, req: Request) -> SimResponse:
        if time.time() < self._unavailable_until:
            retry = max(1, int(self._unavailable_until - time.time() + 0.999))
            return error(503, message("ServiceTemporarilyUnavailable", retry), headers={"Retry-After": str(retry)})
        methods, groups = self.router.find(req.path)
        public = req.method in ("GET", "HEAD") and (req.method if req.method != "HEAD" else "GET", req.path) in PUBLIC
        is_login = req.method == "POST" and methods is not None and methods.get("_LOGIN")
        if not public and not is_login and not self._authenticate(req):
            return error(
                401, message("NoValidSession"), headers={"WWW-Authenticate": 'Basic realm="numaforge BMC simulator"'}
            )
        if self.password_change_required and not public and not is_login and not _logout(req):
            # DSP0266: the account may only change its password (and log out) until it has
            return error(403, message("PasswordChangeRequired", ACCOUNT_URI))
        if methods is None:
            return not_found(req)
        handler = methods.get(req.method)
        if handler is None:
            allow = ", ".join(m for m in methods if not m.startswith("_"))
            return method_not_allowed(allow)
        if req.body_error:
            return error(400, message("MalformedJSON"))
        return handler(req, **groups)

    def bmc_rebooting(self, seconds: float) -> None:
        """The manager restarts: sessions are dropped and the service answers 503 for a while."""
        with self._lock:
            self.sessions.clear()
        self._unavailable_until = time.time() + seconds
