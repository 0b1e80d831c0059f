"""The transport against real dropbear, the SSH server of the lab VM's initramfs (tests/sshd_fixture.py).

dropbear differs from OpenSSH where it matters here: the command's shell is not a process-group leader,
and SFTP is a separate sftp-server binary (which a stock dropbear install lacks: uploads use an exec channel).
"""

import hashlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from sshd_fixture import descendants

from numaforge.remote.ssh import TMP_MARK, CommandTimeout, HostKeyError, UploadError, connect

pytestmark = pytest.mark.ssh


def gone(pid: int) -> bool:
    p = Path(f"/proc/{pid}/stat")
    try:
        return p.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_run_and_sudo_over_dropbear(dropbear_host):
    with connect(dropbear_host.spec(), "lab") as r:
        assert r.run("id -un").stdout.strip() == dropbear_host.user
        assert r.run("id -u", sudo=True).stdout.strip() == "0"
        assert r.run("echo e >&2; exit 4", check=False).rc == 4


def test_unknown_dropbear_host_key_is_refused(dropbear_host):
    dropbear_host.known_hosts.write_text("")
    with pytest.raises(HostKeyError) as exc:
        connect(dropbear_host.spec(), "lab")
    assert dropbear_host.fingerprint() in exc.value.what


def test_timeout_stops_the_whole_command_tree_under_dropbear(dropbear_host):
    pidfile = dropbear_host.home / "child.pid"
    with connect(dropbear_host.spec(), "lab") as r:
        with pytest.raises(CommandTimeout):
            # a child that is not the shell: killing only the shell would leave it running
            r.run(f"sleep 600 & echo $! > {pidfile}; wait", timeout=2)
    pid = int(pidfile.read_text())
    t0 = time.monotonic()
    while not gone(pid):
        assert time.monotonic() - t0 < 30, "the timed-out command's child is still running"
        time.sleep(0.05)


@pytest.mark.parametrize("method", ["exec", "sftp"])
def test_put_through_dropbear(dropbear_host, tmp_path, method):
    """exec: cat on an exec channel (works on a dropbear without any SFTP server); sftp: its sftp-server."""
    src = tmp_path / "lp.ko"
    src.write_bytes(os.urandom(1024 * 1024 + 5))
    dest = dropbear_host.home / "lp.ko"
    with connect(dropbear_host.spec(), "lab") as r:
        assert r.put(src, str(dest), mode=0o644, method=method) == hashlib.sha256(src.read_bytes()).hexdigest()
    assert dest.read_bytes() == src.read_bytes()
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in dropbear_host.home.iterdir() if TMP_MARK in p.name] == []


def test_sudo_put_through_dropbear(dropbear_host, tmp_path):
    src = tmp_path / "lp.ko"
    src.write_bytes(os.urandom(200_000))
    dest = Path(tempfile.mkdtemp(prefix="numaforge-test-dropbear-")) / "lp.ko"  # a root-only directory
    try:
        with connect(dropbear_host.spec(), "lab") as r:
            with pytest.raises(UploadError, match="cannot write"):
                r.put(src, str(dest))
            r.put(src, str(dest), sudo=True)
        assert dest.read_bytes() == src.read_bytes() and dest.stat().st_uid == 0
    finally:
        shutil.rmtree(dest.parent)


@pytest.mark.parametrize("method", ["exec", "sftp"])
def test_dropped_upload_over_dropbear(dropbear_host, tmp_path, method):
    src = tmp_path / "lp.ko"
    src.write_bytes(os.urandom(4 * 1024 * 1024))
    dest = dropbear_host.home / "lp.ko"
    killed = []

    def temps():
        return [p.name for p in dropbear_host.home.iterdir() if p.name.startswith(".lp.ko")]

    def drop(sent, total):
        if not killed and sent > 512 * 1024:
            # the session's dropbear dies, as when the network drops: what it ran sees its stdin end
            for pid in descendants(dropbear_host.proc.pid):
                if Path(f"/proc/{pid}/comm").read_text().startswith("dropbear"):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    with connect(dropbear_host.spec(), "lab") as r:
        with pytest.raises(UploadError, match="connection lost"):
            r.put(src, str(dest), progress=drop, method=method)
    assert killed and not dest.exists()
    assert all(TMP_MARK in n for n in temps())
    if method == "exec":
        t0 = time.monotonic()
        while temps():  # the host side removes its temp: stdin ended early, the sha256 differed
            assert time.monotonic() - t0 < 30, temps()
            time.sleep(0.05)
