"""Hostile SSH peers and unclear SSH messages (issue 40): a TCP peer that never sends an SSH banner (a raw
listener: nothing else can play it), a command that prints without end (a real sshd), an encrypted key with no
agent. docs/RELIABILITY.md lists each promise with its test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sshd_fixture import free_port, keygen

from numaforge.inventory.model import SSHSpec
from numaforge.remote.ssh import MAX_OUTPUT_BYTES, AuthError, ConnectError, OutputTooLarge, connect

pytestmark = pytest.mark.ssh

ROOT = Path(__file__).resolve().parents[2]


class SilentPeer:
    """A TCP listener on 127.0.0.1 that accepts connections and never sends a byte (no SSH banner): a port
    held by something that is not sshd, or an sshd too loaded to answer."""

    def __init__(self):
        self.port = free_port()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        self.conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def silent_peer():
    peer = SilentPeer()
    yield peer
    peer.close()


def test_a_peer_that_never_sends_a_banner_is_named_as_such_and_prints_no_traceback(silent_peer, tmp_path, capfd):
    """It was "cannot connect: No existing session" under paramiko's "Exception (client): Error reading SSH
    protocol banner" and two tracebacks printed on the terminal."""
    (tmp_path / "kh").write_text("")
    spec = SSHSpec(address="127.0.0.1", port=silent_peer.port, known_hosts=str(tmp_path / "kh"), use_agent=False)
    t0 = time.monotonic()
    with pytest.raises(ConnectError) as exc:
        connect(spec, "mute", connect_timeout=1.5)
    assert time.monotonic() - t0 < 10
    assert f"no SSH banner from 127.0.0.1:{silent_peer.port} within 1.5 s" in exc.value.what
    assert "No existing session" not in exc.value.render() and "sshd" in exc.value.fix
    time.sleep(1.0)  # paramiko's transport thread logs after the socket is closed under it
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err, err


@pytest.mark.parametrize("task", ["facts", "numa-audit"])
def test_tasks_say_no_banner_without_tracebacks(silent_peer, tmp_path, task):
    (tmp_path / "kh").write_text("")
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"hosts:\n  mute:\n    ssh: {{address: 127.0.0.1, port: {silent_peer.port}, known_hosts: {tmp_path / 'kh'}}}\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), task, "--inventory", str(inv), "--host", "mute"]
        + ["--host-timeout", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300", "NUMAFORGE_STATE": str(tmp_path / "state")},
    )
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode != 0, out
    assert "Traceback" not in out and "Exception (client)" not in out, out
    assert f"no SSH banner from 127.0.0.1:{silent_peer.port}" in out and "No existing session" not in out, out


def test_command_output_past_the_cap_stops_the_command_and_names_the_cap(sshd_host, tmp_path):
    """A host could send a command's output without end (a 300 MB /proc/interrupts); it was read whole."""
    pidfile = tmp_path / "pid"
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(OutputTooLarge) as exc:
            r.run(f"echo $$ > {pidfile}; exec yes numaforge", max_output=1 << 20, timeout=60)
        assert f"more than {1 << 20} bytes on stdout" in exc.value.what and "stopped it" in exc.value.what
        assert exc.value.cap == 1 << 20 and "loop" in exc.value.where
        pid = int(pidfile.read_text())
        t0 = time.monotonic()
        while Path(f"/proc/{pid}").exists() and time.monotonic() - t0 < 15:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), "the command was not stopped on the host"
        assert r.run("echo still-usable").stdout == "still-usable\n"
        # the default cap is finite and stderr is capped as well
        assert 0 < MAX_OUTPUT_BYTES <= 256 * 1024 * 1024
        with pytest.raises(OutputTooLarge, match="on stderr"):
            r.run("exec yes numaforge >&2", max_output=1 << 20, timeout=60)


@pytest.mark.parametrize("agent", [False, True])
def test_an_encrypted_key_without_an_agent_names_ssh_agent_the_real_key(sshd_host, tmp_path, monkeypatch, agent):
    """The fix said `ssh.use_agent` (the Python attribute); the inventory key is `ssh.agent`."""
    key = tmp_path / "locked"
    keygen(key)
    subprocess.run(["ssh-keygen", "-q", "-p", "-N", "secret-pass", "-f", str(key)], check=True, capture_output=True)
    sshd_host.add_authorized_key(Path(f"{key}.pub"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(AuthError) as exc:
        connect(sshd_host.spec(key_file=str(key), use_agent=agent), "loop")
    text = exc.value.render()
    assert "use_agent" not in text and "ssh.agent" in text and "passphrase" in text and str(key) in text
    assert ("ssh.agent is false" in text) if not agent else ("SSH_AUTH_SOCK is not set" in text)
    assert "secret-pass" not in text


def test_read_text_of_a_huge_remote_file_is_refused_naming_file_and_cap(sshd_host, tmp_path):
    huge = tmp_path / "interrupts"
    with open(huge, "wb") as fh:
        fh.truncate(300 * 1024 * 1024)  # sparse: 300 MB to read, nothing on disk
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(OutputTooLarge) as exc:
            r.read_text(str(huge), max_bytes=1 << 20)
        assert f"{huge} on the host is more than {1 << 20} bytes" in exc.value.what
        (tmp_path / "small").write_text("1\n")
        assert r.read_text(str(tmp_path / "small")) == "1\n"
