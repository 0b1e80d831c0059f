"""The reader fault matrix (issue 40 item 6): every place numaforge reads from a peer, against a real peer that
drips, floods, answers garbage, redirects, or cuts the connection mid-answer.

**Which readers there are comes from the code.** ``found_readers()`` walks numaforge/ (the simulator and lab
tooling in numaforge/lab/ are the peers, not readers) for the calls that take bytes from a peer
(``RECEIVE_CALLS``: an HTTP body's ``iter_content``, a channel's ``recv``, ``exec_command``, a socket's
``create_connection``, ``pread`` of a lock record...) and names the function that makes each one. Every such
function must belong to a row of ``READERS``; a new one fails ``test_every_peer_reader_has_a_row`` until it is
given a row (and its cells here), and a row naming a function that no longer exists fails it too. Readers built
on another reader with their own cap (``Remote.read_text`` over ``Remote.run``) are rows of their own, listed
with ``via``: the test checks that function still exists and still calls its base.

**Each cell** runs the reader in-process against a real misbehaving peer and asserts: it ends within its deadline
(the deadline is set short here through the reader's own knob -- ``RetryPolicy.total_timeout``,
``Prometheus.timeout``, ``Remote.run(timeout=)``, ``connect_timeout`` -- plus ``MARGIN`` for a loaded 2-core
machine), it raises numaforge's own error (a ``NumaforgeError``: the tasks print it as a message, never a
traceback) whose text names the peer and the cap or the deadline it hit, and it never returns as if all was well.

Peers: the BMC simulator with its fault knobs (Redfish); ``HostilePrometheus`` below -- a small HTTP server that
stands in for Prometheus at this boundary, because a real Prometheus cannot be made to drip, flood or reset (the
real one is used in tests/canary/test_prometheus.py); a real sshd (tests/sshd_fixture.py) running commands that
drip, flood or get cut (SSH command output, files read from hosts); ``RawPeer`` below for the SSH handshake -- a
TCP listener standing in for a broken SSH server, since a real sshd cannot be made to drip its banner; lock files
planted in the lock directory (lock records).

The counts (cells run, cells not applicable) are printed at the end of the hostile tier's log
(tests/hostile/conftest.py).
"""

from __future__ import annotations

import ast
import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sshd_fixture import SshdHost, free_port

import numaforge
from numaforge import hostlock
from numaforge.bios.deadline import MiB
from numaforge.bios.exchange import RetryPolicy
from numaforge.bios.redfish import RedfishClient
from numaforge.canary.prometheus import MAX_ANSWER_BYTES, Prometheus
from numaforge.errors import NumaforgeError
from numaforge.inventory.model import SSHSpec
from numaforge.lab.bmc import BMCSimulator
from numaforge.remote.session import MAX_READ_BYTES
from numaforge.remote.ssh import connect

pytestmark = [pytest.mark.hostile, pytest.mark.bmc, pytest.mark.ssh]

PKG = Path(numaforge.__file__).parent
MARGIN = 4.0  # seconds past a deadline a loaded 2-core machine may need to notice it and clean up
DEADLINE = 2.0  # the deadline each cell sets through the reader's own knob
PW = "matrix-Bmc-pw-40"

# calls that take bytes from a peer (attribute or plain name): what makes a function a peer reader
RECEIVE_CALLS = {
    "iter_content",  # an HTTP body (requests)
    "iter_lines",
    "getresponse",  # http.client
    "urlopen",  # urllib
    "recv",  # an SSH channel or a socket
    "recv_stderr",
    "recv_into",
    "recv_exit_status",
    "exec_command",  # an SSH command: its output is read next
    "create_connection",  # a TCP connection whose peer speaks first (the SSH banner)
    "open_sftp",
    "pread",  # a record another process wrote (lock files)
}

FAULTS = ("drip", "huge", "garbage", "redirect", "reset")

# reader -> the functions (module:qualname) that read for it, found by found_readers(); ``via``: built on another
# reader with a cap of its own (checked to exist and to call ``calls``)
READERS: dict[str, dict] = {
    "redfish": {"functions": {"numaforge.bios.deadline:_read_body"}},
    "prometheus": {"functions": {"numaforge.canary.prometheus:_get"}},
    "ssh-handshake": {"functions": {"numaforge.remote.connect:connect"}},
    "ssh-command": {
        "functions": {
            "numaforge.remote.session:Remote.run",
            "numaforge.remote.session:Remote._send_input",
            "numaforge.remote.session:Remote._kill",
            "numaforge.remote.session:_drain",
        }
    },
    "ssh-file": {"via": ("numaforge.remote.session:Remote.read_text", "run")},
    "lock-record": {"functions": {"numaforge.hostlock:read_record"}},
}

# (reader, fault) -> why the fault does not apply to that reader; every other cell runs
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("ssh-handshake", "redirect"): "SSH has no redirects",
    ("ssh-command", "redirect"): "SSH has no redirects",
    ("ssh-file", "redirect"): "SSH has no redirects",
    ("ssh-command", "garbage"): "a command's output is bytes with no expected shape at this layer (decoded with "
    "replacement, never raises); the shape is judged where it is parsed: tests/facts/test_peer_data.py (every "
    "capture x garbage), tests/hostos/test_peer_values.py",
    ("ssh-file", "garbage"): "as ssh-command: read_text returns the file's text; its callers parse it",
    ("lock-record", "drip"): "a lock record is a local file read once, non-blocking (O_NONBLOCK: a FIFO planted "
    "there is never waited on -- tests/hostile/test_links_and_caps.py); nothing can drip into pread",
}


# ------------------------------------------------------------------------------------------ the code's readers
def _functions(tree: ast.Module):
    """(qualname, node) of every function and method, nested ones named by their outer function."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                stack.append((name + ".", child))
            elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.append((prefix, child))


def _called_names(fn: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return names


def _own_calls(fn: ast.AST) -> set[str]:
    """Names called in ``fn`` itself, not in functions nested inside it (they are readers of their own)."""
    names: set[str] = set()
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
        todo.extend(ast.iter_child_nodes(node))
    return names


def _module_functions() -> dict[str, ast.AST]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent)
        if rel.parts[:2] == ("numaforge", "lab"):
            continue  # the simulator and lab tooling: the peers themselves
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for qual, node in _functions(ast.parse(path.read_text(), str(path))):
            out[f"{module}:{qual}"] = node
    return out


def found_readers() -> dict[str, set[str]]:
    """function (module:qualname) -> the receive calls it makes, for every function of numaforge/ making one."""
    found = {}
    for name, node in _module_functions().items():
        hits = _own_calls(node) & RECEIVE_CALLS
        if hits:
            found[name] = hits
    return found


def _record(request, reader: str, fault: str, applies: bool) -> None:
    request.node.user_properties.append(("reader_matrix", {"reader": reader, "fault": fault, "applies": applies}))


def test_every_peer_reader_has_a_row(request):
    """A function that starts reading from a peer without a row here fails; so does a row whose function went."""
    found = found_readers()
    listed = set().union(*(r.get("functions", set()) for r in READERS.values()))
    missing = sorted(f"{name} (calls {', '.join(sorted(found[name]))})" for name in set(found) - listed)
    assert not missing, "peer readers with no row in READERS (give each a row and its cells): " + "; ".join(missing)
    gone = sorted(listed - set(found))
    assert not gone, f"rows naming functions that no longer read from a peer: {gone}"
    functions = _module_functions()
    for reader, row in READERS.items():
        if "via" in row:
            name, base = row["via"]
            assert name in functions, f"{reader}: {name} no longer exists"
            assert base in _called_names(functions[name]), f"{reader}: {name} no longer calls {base}"
    assert set(CELLS) | set(NOT_APPLICABLE) == {(r, f) for r in READERS for f in FAULTS}, "every cell is run or N/A"
    assert not set(CELLS) & set(NOT_APPLICABLE)
    for reader, fault in NOT_APPLICABLE:
        _record(request, reader, fault, False)


# ------------------------------------------------------------------------------------------------ the peers
class HostilePrometheus:
    """Stands in for Prometheus at the HTTP boundary (a real Prometheus cannot be made to misbehave): answers
    /api/v1/query the way ``mode`` says."""

    def __init__(self, mode: str):
        outer = self
        self.mode = mode

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.stopping = threading.Event()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        good = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        h.close_connection = True
        try:
            if self.mode == "redirect":
                h.send_response(302)
                h.send_header("Location", "http://elsewhere.invalid/api/v1/query")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            if self.mode == "garbage":
                body = b"\xff\xfe<html>\x1b[2J not an API</html>"
                h.send_response(200)
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)
                return
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            if self.mode == "huge":  # no Content-Length: only counting finds it too big
                h.end_headers()
                chunk = b" " * 65536
                for _ in range(MAX_ANSWER_BYTES // len(chunk) + 64):
                    if self.stopping.is_set():
                        return
                    h.wfile.write(chunk)
                return
            h.send_header("Content-Length", str(len(good) + 4096))
            h.end_headers()
            if self.mode == "drip":
                for i in range(len(good)):
                    if self.stopping.wait(0.3):
                        return
                    h.wfile.write(good[i : i + 1])
                    h.wfile.flush()
            elif self.mode == "reset":
                h.wfile.write(good[:20])
                h.wfile.flush()
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                h.connection.close()
        except OSError:
            return

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


class RawPeer:
    """A TCP listener standing in for a broken SSH server (a real sshd cannot be made to drip or flood its
    banner): each connection gets what ``mode`` says."""

    def __init__(self, mode: str):
        self.mode, self.port = mode, free_port()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(8)
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket):
        try:
            if self.mode == "drip":
                for b in b"SSH-2.0-OpenSSH_9.2\r\n" * 100:
                    if self.stopping.wait(0.3):
                        return
                    conn.sendall(bytes([b]))
            elif self.mode == "huge":  # endless lines before a banner that never comes
                while not self.stopping.is_set():
                    conn.sendall(b"x" * 200 + b"\r\n")
            elif self.mode == "garbage":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\x1b[2J\xff\xfe\r\n\r\n")
                self.stopping.wait(30)
            elif self.mode == "reset":  # a banner, then the connection is cut during the key exchange
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                time.sleep(0.2)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stopping.set()
        self.sock.close()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    h = SshdHost(name="matrix", address="127.0.0.1", port=free_port(), dir=tmp_path_factory.mktemp("sshd"))
    try:
        yield h.start()
    finally:
        h.stop()


@pytest.fixture(scope="module")
def bmc():
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PW, power_delay=0.2).start()
    try:
        yield sim
    finally:
        sim.stop()


# ---------------------------------------------------------------------------------------------------- cells
# each cell: (ctx) -> (the call that reads, the deadline it has, fragments its error must hold)
Cell = Callable[["Ctx"], tuple[Callable[[], object], float, list[str]]]


class Ctx:
    def __init__(self, request, tmp_path: Path):
        self.request, self.tmp = request, tmp_path
        self.cleanup: list[Callable[[], None]] = []

    def fixture(self, name: str):
        return self.request.getfixturevalue(name)


def _redfish(fault: str, **kw) -> Cell:
    def cell(ctx: Ctx):
        sim: BMCSimulator = ctx.fixture("bmc")
        path = sim.bios_path
        sim.faults.clear()
        ctx.cleanup.append(sim.faults.clear)
        policy = RetryPolicy(attempts=1, connect_timeout=DEADLINE, read_timeout=DEADLINE, total_timeout=DEADLINE)
        client = RedfishClient(sim.url, "admin", PW, host="bmc-matrix", ca_file=str(sim.ca_file), policy=policy)
        client.__enter__()
        ctx.cleanup.append(lambda: client.__exit__(None, None, None))
        sim.inject(fault, f"^{path}$", method="GET", **kw)
        expect = {
            "drip_body": [f"total deadline of {DEADLINE:g} s"],
            "huge": ["8 MiB cap for a BIOS resource"],
            "bad_json": ["JSON"],
            "redirect": ["redirect"],
            "reset": ["cut the connection in the middle of its answer (100 of"],
        }[fault]
        return (lambda: client.get(path)), DEADLINE, ["bmc-matrix", f"GET {path}", *expect]

    return cell


def _prometheus(mode: str) -> Cell:
    def cell(ctx: Ctx):
        peer = HostilePrometheus(mode)
        ctx.cleanup.append(peer.close)
        prom = Prometheus(peer.url, timeout=DEADLINE)
        expect = {
            "drip": [f"did not answer within {DEADLINE:g} s"],
            "huge": [f"larger than {MAX_ANSWER_BYTES} bytes"],
            "garbage": ["not Prometheus's API answer", "\\x1b"],
            "redirect": ["redirect to 'http://elsewhere.invalid"],
            "reset": ["cut the connection in the middle of its answer"],
        }[mode]
        return (lambda: prom.query("up", time.time())), DEADLINE, [peer.url, *expect]

    return cell


def _handshake(mode: str) -> Cell:
    def cell(ctx: Ctx):
        peer = RawPeer(mode)
        ctx.cleanup.append(peer.close)
        (ctx.tmp / "kh").write_text("")
        spec = SSHSpec(address="127.0.0.1", port=peer.port, known_hosts=str(ctx.tmp / "kh"), use_agent=False)
        where = f"127.0.0.1:{peer.port}"
        timeout = DEADLINE / 2  # the handshake's deadline is 3 connect timeouts (connect.CONNECT_PHASES)
        expect = {
            "drip": ["within"],
            "huge": ["banner"],
            "garbage": ["banner"],
            "reset": [],
        }[mode]
        return (lambda: connect(spec, "ssh-matrix", connect_timeout=timeout)), 3 * timeout, [where, *expect]

    return cell


def _ssh(command: str, expect: list[str], kill_after: float | None = None, **kw) -> Cell:
    def cell(ctx: Ctx):
        host: SshdHost = ctx.fixture("sshd")
        remote = connect(host.spec(), "ssh-matrix")
        ctx.cleanup.append(remote.close)
        cmd = command.replace("TMP", str(ctx.tmp))
        if kill_after is not None:  # the connection is cut while the command is still printing
            timer = threading.Timer(kill_after, host.kill_sessions)
            timer.start()
            ctx.cleanup.append(timer.cancel)
        if cmd.startswith("read_text "):
            path = cmd.split(" ", 1)[1]
            return (lambda: remote.read_text(path, timeout=DEADLINE, **kw)), DEADLINE, ["ssh-matrix", *expect]
        return (lambda: remote.run(cmd, timeout=DEADLINE, **kw)), DEADLINE, ["ssh-matrix", *expect]

    return cell


DRIP = "i=0; while [ $i -lt 100 ]; do printf x; sleep 0.3; i=$((i+1)); done"


def _fifo(ctx_tmp: Path) -> str:
    fifo = ctx_tmp / "dripping"
    os.mkfifo(fifo)
    subprocess.Popen(["sh", "-c", f"exec > {fifo}; {DRIP}"], start_new_session=True)
    return str(fifo)


def _ssh_file(fault: str) -> Cell:
    def cell(ctx: Ctx):
        if fault == "huge":
            big = ctx.tmp / "interrupts"
            with open(big, "wb") as fh:
                fh.truncate(MAX_READ_BYTES * 8)  # sparse
            return _ssh(f"read_text {big}", [str(big), f"more than {MAX_READ_BYTES} bytes"])(ctx)
        fifo = _fifo(ctx.tmp)
        if fault == "drip":
            return _ssh(f"read_text {fifo}", [f"still running after {DEADLINE:g} s"])(ctx)
        return _ssh(f"read_text {fifo}", ["connection lost"], kill_after=0.8)(ctx)

    return cell


def _lock(content: bytes | None, expect: list[str], link: bool = False) -> Cell:
    def cell(ctx: Ctx):
        state = ctx.tmp / "state"
        old = os.environ.get("NUMAFORGE_STATE")
        os.environ["NUMAFORGE_STATE"] = str(state)

        def restore() -> None:
            if old is None:
                os.environ.pop("NUMAFORGE_STATE", None)
            else:
                os.environ["NUMAFORGE_STATE"] = old

        ctx.cleanup.append(restore)
        path = hostlock.lock_path("lock-matrix")
        path.parent.mkdir(parents=True, exist_ok=True)
        if link:  # the file's redirect: a symlink planted at the record, pointing at a record elsewhere
            target = ctx.tmp / "elsewhere"
            target.write_text(json.dumps({"pid": 1, "task": "planted-elsewhere", "user": "x", "started": "x"}))
            path.symlink_to(target)
        else:  # a holder (another open file description) has the lock; its record is ``content``
            path.write_bytes(content or b"")
            fd = os.open(path, os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
            ctx.cleanup.append(lambda: os.close(fd))

        def take():
            with hostlock.held("lock-matrix", "bios-apply"):
                pass

        return take, 1.0, ["lock-matrix", *expect]

    return cell


CELLS: dict[tuple[str, str], Cell] = {
    ("redfish", "drip"): _redfish("drip_body", interval=0.3),
    ("redfish", "huge"): _redfish("huge", size=20 * MiB, length=False),
    ("redfish", "garbage"): _redfish("bad_json"),
    ("redfish", "redirect"): _redfish("redirect", status=307, location="https://elsewhere.invalid/redfish/v1/"),
    ("redfish", "reset"): _redfish("reset", body_bytes=100),
    **{("prometheus", f): _prometheus(f) for f in FAULTS},
    **{("ssh-handshake", f): _handshake(f) for f in ("drip", "huge", "garbage", "reset")},
    ("ssh-command", "drip"): _ssh(DRIP, [f"still running after {DEADLINE:g} s"]),
    ("ssh-command", "huge"): _ssh("exec yes numaforge", ["more than 4194304 bytes on stdout"], max_output=4 * MiB),
    ("ssh-command", "reset"): _ssh(DRIP, ["connection lost"], kill_after=0.8),
    **{("ssh-file", f): _ssh_file(f) for f in ("drip", "huge", "reset")},
    ("lock-record", "huge"): _lock(b'{"task": "' + b"x" * 100_000 + b'"}', ["over 4096 bytes"]),
    ("lock-record", "garbage"): _lock(b"\xff\xfe\x1b[2J\x00 not json", ["not a numaforge holder record", "\\x1b"]),
    # the file's redirect: O_NOFOLLOW, the planted link's target is never read as the holder
    ("lock-record", "redirect"): _lock(None, ["symbolic link"], link=True),
    # the file's cut answer: a record cut mid-write by a crash
    ("lock-record", "reset"): _lock(b'{"pid": 12, "task": "bios-ap', ["not a numaforge holder record"]),
}


@pytest.mark.parametrize("cell", list(CELLS), ids=[f"{r}-{f}" for r, f in CELLS])
def test_reader_x_fault(request, tmp_path, cell, capfd):
    reader, fault = cell
    ctx = Ctx(request, tmp_path)
    try:
        call, deadline, fragments = CELLS[cell](ctx)
        t0 = time.monotonic()
        with pytest.raises(Exception) as exc:
            call()
        took = time.monotonic() - t0
    finally:
        for undo in reversed(ctx.cleanup):
            undo()
    _record(request, reader, fault, True)
    assert isinstance(exc.value, NumaforgeError), f"not numaforge's error (a traceback in a task): {exc.value!r}"
    text = " ".join(exc.value.render().split())
    assert took < deadline + MARGIN, f"{reader} x {fault} took {took:.1f} s (deadline {deadline:g} s): {text}"
    for fragment in fragments:
        assert fragment in text, f"{reader} x {fault}: {fragment!r} not in the error: {text}"
    assert "Traceback" not in capfd.readouterr().err
