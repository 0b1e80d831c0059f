"""The exec-upload script (numaforge.remote.ssh.PUT_SCRIPT) under busybox sh with busybox's own cat, chmod,
sha256sum, mv and rm: what the lab VM's initramfs (busybox + dropbear) runs it with. Run here as a local
process with only busybox applets on PATH (the SSH part is covered against sshd and dropbear elsewhere)."""

import hashlib
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from numaforge.remote import ssh

pytestmark = pytest.mark.ssh

BUSYBOX = shutil.which("busybox") or "/bin/busybox"


def put_script(tmp: str, dest: str, sha: str, mode: str = "640") -> str:
    prefix = tmp[: tmp.index(ssh.TMP_MARK) + len(ssh.TMP_MARK)]
    return ssh.PUT_SCRIPT.format(
        tmp=shlex.quote(tmp),
        prefix=shlex.quote(prefix),
        mode=mode,
        sha=sha,
        dest=shlex.quote(dest),
        write=ssh.PUT_WRITE,
        chmod=ssh.PUT_CHMOD,
        no_sha=ssh.PUT_NO_SHA,
        mismatch=ssh.PUT_MISMATCH,
        mv=ssh.PUT_MV,
    )


@pytest.fixture
def busybox_path(tmp_path):
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox is not installed (scripts/setup.d/40-lab-vm.sh installs busybox-static)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for applet in ("sh", "cat", "chmod", "sha256sum", "mv", "rm"):
        (bindir / applet).symlink_to(BUSYBOX)
    return str(bindir)


def run(script: str, data: bytes, path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BUSYBOX, "sh", "-c", script], input=data, capture_output=True, env={"PATH": path}, timeout=60
    )


def test_busybox_upload_script_installs_checks_and_cleans_up(busybox_path, tmp_path):
    d = tmp_path / "dir with 'quotes'"
    d.mkdir()
    data = os.urandom(300_000)
    sha = hashlib.sha256(data).hexdigest()
    dest = d / "mod $x.ko"
    stale = d / (".mod $x.ko" + ssh.TMP_MARK + "000000000000")
    stale.write_bytes(b"left by a dropped upload")
    tmp = f"{d}/.mod $x.ko{ssh.TMP_MARK}abcdefabcdef"

    r = run(put_script(tmp, str(dest), sha), data, busybox_path)
    assert r.returncode == 0, r.stderr
    assert f"sha256={sha}" in r.stdout.decode()
    assert dest.read_bytes() == data and oct(dest.stat().st_mode & 0o777) == "0o640"
    assert sorted(p.name for p in d.iterdir()) == [dest.name]  # stale temp gone, no new one left

    r = run(put_script(tmp, str(dest), "0" * 64), b"other bytes", busybox_path)  # sha256 mismatch
    assert r.returncode == ssh.PUT_MISMATCH
    assert dest.read_bytes() == data and sorted(p.name for p in d.iterdir()) == [dest.name]

    r = run(put_script(f"{tmp_path}/nodir/.x{ssh.TMP_MARK}1", f"{tmp_path}/nodir/x", sha), data, busybox_path)
    assert r.returncode == ssh.PUT_WRITE and r.stderr


def test_busybox_upload_script_refuses_a_directory_target(busybox_path, tmp_path):
    (tmp_path / "target").mkdir()
    data = b"x"
    tmp = f"{tmp_path}/.target{ssh.TMP_MARK}abcdefabcdef"
    r = run(put_script(tmp, str(tmp_path / "target"), hashlib.sha256(data).hexdigest()), data, busybox_path)
    assert r.returncode == ssh.PUT_MV and b"is a directory" in r.stderr
    assert list((tmp_path / "target").iterdir()) == [] and not Path(tmp).exists()
