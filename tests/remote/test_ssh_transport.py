"""numaforge.remote.ssh against a real OpenSSH sshd on 127.0.0.1 (tests/sshd_fixture.py starts it).

The "host" shares this machine's filesystem and pid namespace, so the tests look at the host side directly
(files under the upload dir, /proc for the killed command).
"""

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from sshd_fixture import descendants

from numaforge.remote.ssh import (TMP_MARK, AuthError, CommandFailed, CommandResult, CommandTimeout, ConnectError,
                                  ConnectionLost, HostKeyError, SudoError, UploadError, connect, fingerprint)
from numaforge.secrets import SecretRef

pytestmark = pytest.mark.ssh


def wait_for(pred, what, limit=30.0):
    """Poll for a condition the test needs before going on (not a timing assertion: the bound is generous)."""
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > limit:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------ commands
def test_run_returns_rc_stdout_stderr_and_feeds_stdin(sshd_host):
    with connect(sshd_host.spec(), "loop") as r:
        res = r.run("echo out; echo err >&2; exit 0")
        assert isinstance(res, CommandResult)
        assert (res.rc, res.stdout, res.stderr) == (0, "out\n", "err\n")
        assert res.seconds > 0
        assert r.run("tr a-z A-Z", stdin="numa\n").stdout == "NUMA\n"
        assert r.run("exit 3", check=False).rc == 3


def test_failed_command_carries_rc_output_host_and_command(sshd_host):
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(CommandFailed) as exc:
            r.run("echo partial; echo 'no such module' >&2; exit 7")
    e = exc.value
    assert (e.rc, e.stdout, e.stderr) == (7, "partial\n", "no such module\n")
    assert "loop" in e.where and f"root@127.0.0.1:{sshd_host.port}" in e.where and "exit 7" in e.where
    assert "exited 7: no such module" in e.what and e.fix


def test_command_timeout_kills_the_remote_process_and_keeps_partial_output(sshd_host, tmp_path):
    pidfile = tmp_path / "sleep.pid"
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(CommandTimeout) as exc:
            r.run(f"echo started; sh -c 'echo $$ > {pidfile}; exec sleep 600'", timeout=2)
        assert exc.value.stdout == "started\n" and exc.value.timeout == 2
        assert "still running after 2 s" in exc.value.what and "sleep 600" in exc.value.where
        # the connection stays usable after a timeout
        assert r.run("echo still here").stdout == "still here\n"
    pid = int(pidfile.read_text())
    wait_for(lambda: not Path(f"/proc/{pid}").exists()
             or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0],
             "the timed-out sleep to be killed on the host")


def test_dropped_connection_during_a_command_is_connection_lost(sshd_host, tmp_path):
    flag = tmp_path / "running"
    with connect(sshd_host.spec(), "loop") as r:
        killer = threading.Thread(target=lambda: (wait_for(flag.exists, "the command to start"),
                                                  sshd_host.kill_sessions()))
        killer.start()
        with pytest.raises(ConnectionLost) as exc:
            r.run(f"touch {flag}; sleep 600", timeout=120)
        killer.join()
        assert "connection lost" in exc.value.what and "loop" in exc.value.where
        with pytest.raises(ConnectionLost):
            r.run("true")


def test_read_and_write_text(sshd_host, tmp_path):
    f = tmp_path / "value"
    with connect(sshd_host.spec(), "loop") as r:
        r.write_text(str(f), "1")
        assert f.read_text() == "1"
        assert r.read_text(str(f)) == "1"
        assert r.exists(str(f)) and not r.exists(str(tmp_path / "nope"))
        with pytest.raises(CommandFailed) as exc:
            r.read_text(str(tmp_path / "nope"))
        assert "cannot read" in exc.value.what and "No such file" in exc.value.what


# ------------------------------------------------------------------------------------------------ host keys
def test_unknown_host_key_is_refused_with_fingerprint_and_fix(sshd_host):
    sshd_host.known_hosts.write_text("")
    with pytest.raises(HostKeyError) as exc:
        connect(sshd_host.spec(), "loop")
    e = exc.value
    assert "unknown host key" in e.what
    assert f"[127.0.0.1]:{sshd_host.port}" in e.what and "ssh-ed25519" in e.what
    assert sshd_host.fingerprint() in e.what          # what OpenSSH's ssh-keygen -l prints for the host key
    assert "--accept-new-host-key" in e.fix and "ssh-keyscan" in e.fix
    assert sshd_host.known_hosts.read_text() == ""


def test_missing_known_hosts_file_is_refused_not_created(sshd_host, tmp_path):
    kh = tmp_path / "nodir" / "known_hosts"
    with pytest.raises(HostKeyError, match="unknown host key"):
        connect(sshd_host.spec(known_hosts=str(kh)), "loop")
    assert not kh.exists()


def test_accept_new_host_key_adds_it_then_strict_checking_uses_it(sshd_host, tmp_path):
    kh = tmp_path / "fresh" / "known_hosts"
    with connect(sshd_host.spec(known_hosts=str(kh)), "loop", accept_new_host_key=True) as r:
        assert r.accepted_host_key == (f"[127.0.0.1]:{sshd_host.port}", "ssh-ed25519", sshd_host.fingerprint())
    assert kh.read_text() == f"[127.0.0.1]:{sshd_host.port} {sshd_host.host_key_line()}\n"
    assert oct(kh.stat().st_mode & 0o777) == "0o600"
    # OpenSSH itself agrees with what was written
    found = subprocess.run(["ssh-keygen", "-F", f"[127.0.0.1]:{sshd_host.port}", "-f", str(kh)],
                           capture_output=True, text=True)
    assert found.returncode == 0
    with connect(sshd_host.spec(known_hosts=str(kh)), "loop") as r:
        assert r.accepted_host_key is None
        assert r.run("echo ok").stdout == "ok\n"


def test_changed_host_key_is_refused_even_with_accept_new(sshd_host, tmp_path):
    from sshd_fixture import keygen
    other = keygen(tmp_path / "other_host_key")
    other_line = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    sshd_host.known_hosts.write_text(f"[127.0.0.1]:{sshd_host.port} {other_line}\n")
    before = sshd_host.known_hosts.read_text()
    for accept in (False, True):
        with pytest.raises(HostKeyError) as exc:
            connect(sshd_host.spec(), "loop", accept_new_host_key=accept)
        e = exc.value
        assert "HOST KEY MISMATCH" in e.what and sshd_host.fingerprint() in e.what
        other_fp = subprocess.run(["ssh-keygen", "-lf", f"{other}.pub"], capture_output=True,
                                  text=True).stdout.split()[1]
        assert other_fp in e.what
        assert f"ssh-keygen -R '[127.0.0.1]:{sshd_host.port}'" in e.fix
    assert sshd_host.known_hosts.read_text() == before


def test_hashed_known_hosts_entry_is_honoured(sshd_host):
    subprocess.run(["ssh-keygen", "-H", "-f", str(sshd_host.known_hosts)], check=True, capture_output=True)
    assert sshd_host.known_hosts.read_text().startswith("|1|")
    with connect(sshd_host.spec(), "loop") as r:
        assert r.run("echo hashed").stdout == "hashed\n"


def test_fingerprint_matches_openssh(sshd_host):
    import paramiko
    key = paramiko.Ed25519Key.from_private_key_file(str(sshd_host.host_key))
    assert fingerprint(key) == sshd_host.fingerprint()


# ------------------------------------------------------------------------------------------------ auth
def test_ssh_config_supplies_hostname_port_user_key_and_known_hosts(sshd_host, tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host lab-alias\n  HostName 127.0.0.1\n  Port {sshd_host.port}\n  User root\n"
                   f"  IdentityFile {sshd_host.client_key}\n  UserKnownHostsFile {sshd_host.known_hosts}\n")
    from numaforge.inventory.model import SSHSpec
    spec = SSHSpec(address="lab-alias", config_file="ssh_config", use_agent=False)
    with connect(spec, "aliased", base_dir=tmp_path) as r:
        assert (r.target.hostname, r.target.port) == ("127.0.0.1", sshd_host.port)
        assert r.run("echo via-config").stdout == "via-config\n"


def test_agent_authentication(sshd_host, tmp_path, monkeypatch):
    agent = subprocess.run(["ssh-agent", "-s", "-a", str(tmp_path / "agent.sock")], capture_output=True,
                           text=True, check=True).stdout
    pid = int(agent.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
        monkeypatch.setenv("HOME", str(tmp_path))         # no ~/.ssh/id_* to fall back on
        subprocess.run(["ssh-add", str(sshd_host.client_key)], check=True, capture_output=True)
        spec = sshd_host.spec(key_file=None, use_agent=True)
        with connect(spec, "loop") as r:
            assert r.run("echo agent").stdout == "agent\n"
        with pytest.raises(AuthError) as exc:
            connect(sshd_host.spec(key_file=None, use_agent=False), "loop")
        assert "no credentials to offer" in exc.value.what and "ssh.key_file" in exc.value.fix
    finally:
        os.kill(pid, 15)


def test_key_not_authorized_is_an_auth_error(sshd_host, tmp_path):
    from sshd_fixture import keygen
    stranger = keygen(tmp_path / "stranger")
    with pytest.raises(AuthError) as exc:
        connect(sshd_host.spec(key_file=str(stranger)), "loop")
    assert "authentication failed" in exc.value.what and str(stranger) in exc.value.what
    assert "authorized_keys" in exc.value.fix


@pytest.mark.parametrize("content", ["garbage\n", "public"])
def test_unusable_key_file_is_an_auth_error_naming_it(sshd_host, tmp_path, content):
    bad = tmp_path / "id_bad"
    bad.write_text(Path(f"{sshd_host.client_key}.pub").read_text() if content == "public" else content)
    bad.chmod(0o600)  # a readable key is refused before its content is looked at (test_key_file_checks below)
    with pytest.raises(AuthError) as exc:
        connect(sshd_host.spec(key_file=str(bad)), "loop")
    assert f"cannot use private key {bad}" in exc.value.what and "PRIVATE key" in exc.value.fix


def test_password_only_by_reference_and_never_in_errors(sshd_host, test_user, monkeypatch):
    user = test_user(sudo=None)
    password = "Numa-Pw-" + os.urandom(6).hex()
    subprocess.run(["chpasswd"], input=f"{user}:{password}\n", text=True, check=True)
    monkeypatch.setenv("NF_TEST_SSH_PW", password)
    spec = sshd_host.spec(user=user, key_file=None, use_agent=False,
                          password=SecretRef.parse("env:NF_TEST_SSH_PW"))
    monkeypatch.setenv("HOME", "/nonexistent")
    with connect(spec, "loop") as r:
        assert r.run("id -un").stdout.strip() == user
    monkeypatch.setenv("NF_TEST_SSH_PW", password + "-wrong")
    with pytest.raises(AuthError) as exc:
        connect(spec, "loop")
    text = exc.value.render()
    assert "env:NF_TEST_SSH_PW" in text and password not in text


def test_nothing_listening_is_a_connect_error(tmp_path):
    from sshd_fixture import free_port
    from numaforge.inventory.model import SSHSpec
    spec = SSHSpec(address="127.0.0.1", port=free_port(), known_hosts=str(tmp_path / "kh"), use_agent=False)
    with pytest.raises(ConnectError) as exc:
        connect(spec, "gone", connect_timeout=5)
    assert "cannot connect" in exc.value.what and "gone" in exc.value.where and "sshd listens" in exc.value.fix


# ------------------------------------------------------------------------------------------------ sudo
def test_sudo_as_non_root_user(sshd_host, test_user, tmp_path):
    user = test_user(sudo="nopasswd", pubkey=f"{sshd_host.client_key}.pub")
    secret = tmp_path / "root-only"
    secret.write_text("root data")
    secret.chmod(0o600)
    with connect(sshd_host.spec(user=user), "loop") as r:
        assert not r.is_root
        assert r.run("id -u").stdout.strip() != "0"
        assert r.run("id -u", sudo=True).stdout.strip() == "0"
        with pytest.raises(CommandFailed):
            r.read_text(str(secret))
        assert r.read_text(str(secret), sudo=True) == "root data"
        r.write_text(str(secret), "new", sudo=True)
        assert secret.read_text() == "new"
        assert r.run("echo piped | cat", sudo=True).stdout == "piped\n"


def test_sudo_needing_a_password_is_a_clear_error(sshd_host, test_user):
    user = test_user(sudo="password", pubkey=f"{sshd_host.client_key}.pub")
    with connect(sshd_host.spec(user=user), "loop") as r:
        with pytest.raises(SudoError) as exc:
            r.run("true", sudo=True, check=False)       # never a silent rc: sudo did not run the command
    assert "needs a password" in exc.value.what and "NOPASSWD" in exc.value.fix and user in exc.value.fix


def test_user_without_sudo_rights_is_a_clear_error(sshd_host, test_user):
    user = test_user(sudo=None, pubkey=f"{sshd_host.client_key}.pub")
    with connect(sshd_host.spec(user=user), "loop") as r:
        with pytest.raises(SudoError) as exc:
            r.run("true", sudo=True)
    assert user in exc.value.fix


def test_sudo_command_timeout_stops_the_root_process(sshd_host, test_user, tmp_path):
    user = test_user(sudo="nopasswd", pubkey=f"{sshd_host.client_key}.pub")
    pidfile = tmp_path / "root-sleep.pid"
    with connect(sshd_host.spec(user=user), "loop") as r:
        with pytest.raises(CommandTimeout):
            r.run(f"sh -c 'echo $$ > {pidfile}; exec sleep 600'", timeout=2, sudo=True)
    pid = int(pidfile.read_text())
    assert Path(f"/proc/{pid}/status").exists() is False or os.stat(f"/proc/{pid}").st_uid == 0
    wait_for(lambda: not Path(f"/proc/{pid}").exists()
             or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0],
             "the timed-out root sleep to be killed on the host")


# ------------------------------------------------------------------------------------------------ uploads
def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if TMP_MARK in p.name)


def host_writing(d: Path) -> bool:
    """The host has started writing a temp file in d (its login shell's startup is over)."""
    return any(p.stat().st_size > 0 for p in d.iterdir() if TMP_MARK in p.name)


def upload_case(tmp_path: Path, name: str, mib: int) -> tuple[Path, Path, Path]:
    """(src of `mib` random MiB, the host's dest_dir, dest = dest_dir/name holding b"previous version")."""
    src = tmp_path / name
    src.write_bytes(os.urandom(mib * 1024 * 1024))
    dest_dir = tmp_path / "remote"
    dest_dir.mkdir()
    dest = dest_dir / name
    dest.write_bytes(b"previous version")
    return src, dest_dir, dest


@pytest.mark.parametrize("method", ["exec", "sftp"])
def test_put_is_verified_by_sha256_on_the_host(sshd_host, tmp_path, method):
    src = tmp_path / "livepatch.ko"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    dest_dir = tmp_path / "remote"
    dest_dir.mkdir()
    dest = dest_dir / "livepatch.ko"
    seen = []
    with connect(sshd_host.spec(), "loop") as r:
        sha = r.put(src, str(dest), mode=0o640, method=method, progress=lambda sent, total: seen.append((sent, total)))
        assert sha == hashlib.sha256(src.read_bytes()).hexdigest()
        assert r.run(f"sha256sum {dest}").stdout.split()[0] == sha
    assert dest.read_bytes() == src.read_bytes()
    assert oct(dest.stat().st_mode & 0o777) == "0o640"
    assert leftovers(dest_dir) == []
    assert seen[-1] == (src.stat().st_size, src.stat().st_size)


def test_put_replaces_an_existing_file(sshd_host, tmp_path):
    src = tmp_path / "new.ko"
    src.write_bytes(b"new module")
    dest = tmp_path / "remote.ko"
    dest.write_bytes(b"old module")
    with connect(sshd_host.spec(), "loop") as r:
        r.put(src, str(dest))
    assert dest.read_bytes() == b"new module"


@pytest.mark.parametrize("method", ["exec", "sftp"])
def test_put_to_paths_with_spaces_quotes_and_shell_characters(sshd_host, tmp_path, method):
    dest_dir = tmp_path / "a dir" / "it's \"q\" $HOME `id` ;*"
    dest_dir.mkdir(parents=True)
    dest = dest_dir / "mod 'x' $(id).ko"
    src = tmp_path / "m.ko"
    src.write_bytes(os.urandom(100_000))
    with connect(sshd_host.spec(), "loop") as r:
        r.put(src, str(dest), mode=0o755, method=method)
    assert sorted(p.name for p in dest_dir.iterdir()) == [dest.name]
    assert dest.read_bytes() == src.read_bytes()
    assert oct(dest.stat().st_mode & 0o777) == "0o755"
    assert sorted(p.name for p in (tmp_path / "a dir").iterdir()) == [dest_dir.name]   # nothing ran or leaked


def test_empty_file_and_relative_path_upload(sshd_host, tmp_path):
    src = tmp_path / "empty"
    src.write_bytes(b"")
    with connect(sshd_host.spec(), "loop") as r:
        home = r.run("pwd").stdout.strip()
        name = f"numaforge-test-empty-{os.getpid()}"
        try:
            assert r.put(src, name) == hashlib.sha256(b"").hexdigest()
            assert (Path(home) / name).read_bytes() == b""
        finally:
            (Path(home) / name).unlink(missing_ok=True)


@pytest.mark.parametrize("method", ["exec", "sftp"])
def test_put_detects_a_file_changed_during_upload(sshd_host, tmp_path, method):
    """A second writer scribbles over the temp file mid-transfer: the host-side sha256 check catches it."""
    src, dest_dir, dest = upload_case(tmp_path, "mod.ko", 8)
    scribbled = []

    def scribble(sent, total):
        if not scribbled and sent > total // 2:
            wait_for(lambda: host_writing(dest_dir), "the host to write the temp file")
            (tmp,) = [p for p in dest_dir.iterdir() if TMP_MARK in p.name]
            # writes are in order (sftp pipelines them, cat streams): wait until the host has written past the
            # region we overwrite, so no later write of the real bytes can undo the scribble
            wait_for(lambda: tmp.stat().st_size > 65536, "the host to write the first 64 KiB")
            with open(tmp, "r+b") as fh:
                fh.write(b"\0" * 4096)
            scribbled.append(tmp.name)

    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(UploadError) as exc:
            r.put(src, str(dest), progress=scribble, method=method)
    assert scribbled and "sha256 mismatch" in exc.value.what, exc.value.what
    assert "local " + hashlib.sha256(src.read_bytes()).hexdigest() in exc.value.what
    assert dest.read_bytes() == b"previous version"
    assert leftovers(dest_dir) == []


@pytest.mark.parametrize("method", ["exec", "sftp"])
def test_dropped_upload_never_leaves_a_partial_file_under_the_final_name(sshd_host, tmp_path, method):
    src, dest_dir, dest = upload_case(tmp_path, "big.ko", 8)
    stale = dest_dir / (".big.ko" + TMP_MARK + "0123456789ab")   # what an earlier, dropped SFTP upload left
    stale.write_bytes(b"half")
    killed = []

    def drop(sent, total):
        if not killed and sent > 1024 * 1024:
            wait_for(lambda: host_writing(dest_dir) and not stale.exists(), "the host to write the temp file")
            # the session's sshd processes die, as when the network drops: what they ran sees its stdin end
            for pid in descendants(sshd_host.proc.pid):
                if Path(f"/proc/{pid}/comm").read_text().startswith("sshd"):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(UploadError) as exc:
            r.put(src, str(dest), progress=drop, method=method)
    assert killed
    assert "connection lost" in exc.value.what and "was not created or replaced" in exc.value.what
    assert dest.read_bytes() == b"previous version"
    assert all(n.startswith(".big.ko" + TMP_MARK) for n in leftovers(dest_dir))      # at most a hidden temp
    if method == "exec":
        # the host's side of the upload removes its temp itself: stdin ended early, so the sha256 differed
        wait_for(lambda: leftovers(dest_dir) == [], "the host to remove the temp of the dropped upload")
    # the next upload to the same path succeeds and clears any stale temp
    with connect(sshd_host.spec(), "loop") as r:
        r.put(src, str(dest), method=method)
    assert dest.read_bytes() == src.read_bytes()
    assert leftovers(dest_dir) == []


def test_stalled_exec_upload_times_out_and_leaves_nothing(sshd_host, tmp_path):
    """The host's `cat` is SIGSTOPped mid-upload (a hung disk): put gives up at its timeout, stops the
    host side and removes the temp; the old file stays."""
    src, dest_dir, dest = upload_case(tmp_path, "big.ko", 16)
    stopped = []

    def stall(sent, total):
        if not stopped:
            wait_for(lambda: host_writing(dest_dir), "the host to write the temp file")
            (cat,) = [p for p in descendants(sshd_host.proc.pid) if Path(f"/proc/{p}/comm").read_text() == "cat\n"]
            os.kill(cat, signal.SIGSTOP)
            stopped.append(cat)

    t0 = time.monotonic()
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(UploadError) as exc:
            r.put(src, str(dest), progress=stall, timeout=5)
        assert r.run("echo still usable").stdout == "still usable\n"
    assert stopped and time.monotonic() - t0 < 60
    assert "not finished after 5 s" in exc.value.what and "was not created or replaced" in exc.value.what
    assert dest.read_bytes() == b"previous version"
    assert leftovers(dest_dir) == []
    wait_for(lambda: not Path(f"/proc/{stopped[0]}").exists(), "the stopped cat to be killed")


def test_upload_onto_a_directory_is_refused(sshd_host, tmp_path):
    """mv onto a directory would move the temp into it: refused, nothing moved, no temp left."""
    src = tmp_path / "a.ko"
    src.write_bytes(b"x")
    (tmp_path / "target.ko").mkdir()
    for method in ("exec", "sftp"):
        with connect(sshd_host.spec(), "loop") as r:
            with pytest.raises(UploadError) as exc:
                r.put(src, str(tmp_path / "target.ko"), method=method)
        assert "is a directory" in exc.value.what and "was not created or replaced" in exc.value.what
        assert list((tmp_path / "target.ko").iterdir()) == [] and leftovers(tmp_path) == []


def test_upload_as_a_sudo_user(sshd_host, test_user, tmp_path):
    """A deploy account with NOPASSWD sudo: its own directories as itself; root's with sudo=True, as root."""
    user = test_user(sudo="nopasswd", pubkey=f"{sshd_host.client_key}.pub")
    src = tmp_path / "m.ko"
    src.write_bytes(os.urandom(300_000))
    root_dir = Path(tempfile.mkdtemp(prefix="numaforge-test-rootdir-"))      # 0700 -> 0755, owned by root
    try:
        root_dir.chmod(0o755)
        (root_dir / "m.ko").write_bytes(b"previous version")
        home = Path(f"/tmp/numaforge-test-homes/{user}")
        with connect(sshd_host.spec(user), "loop") as r:
            r.put(src, str(home / "m.ko"))
            with pytest.raises(UploadError) as exc:
                r.put(src, str(root_dir / "m.ko"), mode=0o644)
            assert "cannot write" in exc.value.what and "sudo=True" in exc.value.fix
            with pytest.raises(UploadError, match="cannot use sudo"):
                r.put(src, str(root_dir / "m.ko"), method="sftp", sudo=True)
            assert (root_dir / "m.ko").read_bytes() == b"previous version"
            r.put(src, str(root_dir / "m.ko"), mode=0o644, sudo=True)
        st = (home / "m.ko").stat()
        assert (home / "m.ko").read_bytes() == src.read_bytes() and st.st_uid != 0
        st = (root_dir / "m.ko").stat()
        assert (root_dir / "m.ko").read_bytes() == src.read_bytes()
        assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, "0o644")
        assert leftovers(root_dir) == [] and leftovers(home) == []
    finally:
        shutil.rmtree(root_dir)


def test_upload_with_sudo_needing_a_password_is_a_clear_error(sshd_host, test_user, tmp_path):
    user = test_user(sudo="password", pubkey=f"{sshd_host.client_key}.pub")
    src = tmp_path / "m.ko"
    src.write_bytes(b"x")
    with connect(sshd_host.spec(user), "loop") as r:
        with pytest.raises(UploadError) as exc:
            r.put(src, "/tmp/numaforge-never-written.ko", sudo=True)
    assert "sudo needs a password" in exc.value.what and "NOPASSWD" in exc.value.fix
    assert not Path("/tmp/numaforge-never-written.ko").exists()


def test_upload_errors_name_the_problem(sshd_host, tmp_path):
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(UploadError, match="does not exist"):
            r.put(tmp_path / "missing.ko", "/tmp/x.ko")
        src = tmp_path / "a.ko"
        src.write_bytes(b"x")
        with pytest.raises(UploadError) as exc:
            r.put(src, str(tmp_path / "no-such-dir" / "a.ko"))
        assert "was not created or replaced" in exc.value.what and "no-such-dir" in exc.value.where


def test_command_that_never_reads_its_stdin_times_out(sshd_host):
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(CommandTimeout) as exc:
            r.run("sleep 600", stdin=b"x" * (16 * 1024 * 1024), timeout=3)   # more than the SSH window
        assert "did not read its input" in exc.value.what
        assert r.run("echo usable").stdout == "usable\n"


def test_command_killed_by_a_signal_is_a_failure(sshd_host):
    with connect(sshd_host.spec(), "loop") as r:
        with pytest.raises(CommandFailed) as exc:
            r.run("kill -9 $$")
        assert exc.value.rc == -1 and "killed by a signal" in exc.value.what
        assert r.run("kill -9 $$", check=False).rc == -1


def test_output_of_the_login_shell_startup_does_not_break_commands(sshd_host, test_user):
    """A user whose ~/.profile-style startup prints (bash sources ~/.bashrc for sshd commands when built so)."""
    user = test_user(sudo=None, pubkey=f"{sshd_host.client_key}.pub")
    subprocess.run(["usermod", "-s", "/bin/bash", user], check=True)
    home = Path(f"/tmp/numaforge-test-homes/{user}")
    (home / ".bashrc").write_text("echo from-bashrc\n")
    # sshd's own per-user hook, run by the login shell for every command: prints before our marker
    (home / ".ssh" / "rc").write_text("echo from-ssh-rc\n")
    with connect(sshd_host.spec(user=user), "loop") as r:
        res = r.run("echo payload")
        assert res.stdout == "payload\n"          # the startup noise came before the marker and is dropped
        assert r.read_text("/proc/sys/kernel/ostype") == "Linux\n"
        with pytest.raises(CommandTimeout):
            r.run("sleep 600", timeout=2)


def test_revoked_host_key_is_refused_even_when_also_listed(sshd_host):
    line = sshd_host.known_hosts.read_text()
    sshd_host.known_hosts.write_text(line + f"@revoked * {sshd_host.host_key_line()}\n")
    for accept in (False, True):
        with pytest.raises(HostKeyError) as exc:
            connect(sshd_host.spec(), "loop", accept_new_host_key=accept)
        assert "@revoked" in exc.value.what and sshd_host.fingerprint() in exc.value.what
    sshd_host.known_hosts.write_text(f"@revoked * {sshd_host.host_key_line()}\n")
    with pytest.raises(HostKeyError, match="@revoked"):
        connect(sshd_host.spec(), "loop", accept_new_host_key=True)
    assert sshd_host.known_hosts.read_text() == f"@revoked * {sshd_host.host_key_line()}\n"


def test_odd_lines_in_known_hosts_do_not_break_connections(sshd_host):
    data = (Path(__file__).resolve().parents[1] / "data" / "ssh" / "known_hosts-mixed").read_text()
    data = "\n".join(line for line in data.splitlines() if not line.startswith("@revoked"))
    sshd_host.known_hosts.write_text(data + "\n" + sshd_host.known_hosts.read_text())
    with connect(sshd_host.spec(), "loop") as r:
        assert r.run("echo fine").stdout == "fine\n"


def test_messages_are_not_held_back_by_nagle(sshd_host):
    """TCP_NODELAY on the connection: without it each new channel waited ~40 ms for the host's delayed ACK
    (docs/BENCHMARKS.md "SSH fleet": a short command took 50 ms instead of 6 ms)."""
    import socket

    with connect(sshd_host.spec(), sshd_host.name) as r:
        sock = r._client.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert r.run("echo ok").stdout == "ok\n"


def test_output_written_after_the_exit_status_is_not_lost(sshd_host):
    """sshd sends the exit status when the shell exits; a child still holding stdout writes after that. run()
    waits for EOF (the old loop returned at the exit status and dropped "late")."""
    with connect(sshd_host.spec(), sshd_host.name) as r:
        res = r.run("(sleep 0.5; echo late) & echo early")
        assert res.rc == 0 and res.stdout == "early\nlate\n"


def test_a_background_child_holding_stdout_does_not_hold_the_command(sshd_host):
    """...but only for a short grace: a daemon started without redirecting its output keeps EOF away for good."""
    with connect(sshd_host.spec(), sshd_host.name) as r:
        t0 = time.monotonic()
        res = r.run("sleep 20 & echo started", timeout=60)
        assert res.rc == 0 and res.stdout == "started\n" and time.monotonic() - t0 < 10
        r.run("pkill -f '^sleep 20$' || true")


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "huge", "world-readable"])
def test_key_file_checks_before_paramiko_reads_it(tmp_path, kind):
    """Issue 25 item 4: a key file that is a device was read until the kernel killed the process (facts).
    resolve_target refuses it -- and a FIFO, a directory, a huge file, a key others can read -- with what,
    where and a fix, before anything opens it. Pure: no peer needed."""
    from numaforge.remote.ssh import ConnectError, SSHSpec, resolve_target

    path = {"dev-zero": Path("/dev/zero"), "directory": tmp_path}.get(kind, tmp_path / "id_x")
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "huge":
        path.write_bytes(b"k" * (65 * 1024))
        path.chmod(0o600)
    elif kind == "world-readable":
        path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
        path.chmod(0o644)
    kh = tmp_path / "kh"
    kh.write_text("")
    spec = SSHSpec(address="127.0.0.1", key_file=str(path), known_hosts=str(kh), config_file=str(kh))
    with pytest.raises(ConnectError) as exc:
        resolve_target(spec, "h1")
    expected = {"dev-zero": "not a regular file", "fifo": "not a regular file", "directory": "is a directory",
                "huge": "more than the 65536-byte limit", "world-readable": "readable by others"}[kind]
    assert expected in exc.value.what and str(path) in exc.value.what
    assert exc.value.where == "host h1 (ssh.key_file / IdentityFile)" and exc.value.fix
