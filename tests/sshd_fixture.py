"""Real OpenSSH sshd "hosts" for tests: on loopback, or inside network namespaces the test creates.

Nothing here is a fake: each host is /usr/sbin/sshd (Debian's openssh-server, installed by
scripts/setup.d/15-ssh-test-peers.sh) started with its own host key, config and authorized_keys in a tmp dir,
and stopped (with every session process it forked) on teardown, even when the test failed.

Use from any tier's conftest.py:

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from sshd_fixture import sshd_host, netns_lab, test_user, dropbear_host   # noqa: F401 (fixtures)

    def test_x(sshd_host):                               # one sshd on 127.0.0.1:<free port>
        with connect(sshd_host.spec(), sshd_host.name) as r: ...

    def test_y(netns_lab):                               # hosts in namespaces, 10.231.X.(10+i)
        hosts = [netns_lab.add_host(f"n{i}") for i in range(3)]

Network namespaces: one Linux bridge in the root namespace (10.231.X.1/24, the client side) and one namespace per
host (10.231.X.(10+i)/24 on a veth whose other end is on the bridge); sshd runs inside the namespace with
`ip netns exec`. X is picked per lab and held with a lock file so parallel test runs do not collide.
Needs root (CI runs as root).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from numaforge.inventory.model import Host, Location, SSHSpec

SSHD = "/usr/sbin/sshd"


def _run(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519", comment: str = "numaforge-test") -> Path:
    """A new key pair via ssh-keygen (no passphrase); returns the private key path."""
    if path.exists():
        path.unlink()
    _run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", comment, "-f", str(path)])
    return path


def descendants(pid: int) -> list[int]:
    """Every live descendant of pid (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class _ServerProcess:
    """Stopping a test SSH server: its per-connection children first, then the listener (``self.proc``)."""

    proc: subprocess.Popen | None

    def kill_sessions(self) -> list[int]:
        """SIGKILL every per-connection process (drops live connections), keep the listener."""
        if self.proc is None:
            return []
        pids = descendants(self.proc.pid)  # `ip netns exec` execs sshd, so proc.pid is the listener
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def stop(self) -> None:
        """Stop the listener and every session it forked."""
        if self.proc is None:
            return
        self.kill_sessions()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


@dataclass
class SshdHost(_ServerProcess):
    """One running sshd. ``spec()`` gives the SSHSpec that reaches it with the test client key."""

    name: str
    address: str
    port: int
    dir: Path
    netns: str | None = None
    proc: subprocess.Popen | None = None
    extra_config: str = ""
    host_key: Path = field(init=False)
    client_key: Path = field(init=False)
    known_hosts: Path = field(init=False)
    log: Path = field(init=False)

    def __post_init__(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(self.dir / "ssh_host_ed25519_key", comment=f"host-{self.name}")
        self.client_key = keygen(self.dir / "client_ed25519", comment=f"client-{self.name}")
        (self.dir / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text(f"{self.known_hosts_name} {self.host_key_line()}\n")
        self.log = self.dir / "sshd.log"

    # -- identity
    @property
    def known_hosts_name(self) -> str:
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def host_key_line(self) -> str:
        """'ssh-ed25519 AAAA...' of the host key (what known_hosts holds after the name)."""
        return " ".join(Path(f"{self.host_key}.pub").read_text().split()[:2])

    def fingerprint(self) -> str:
        return _run(["ssh-keygen", "-l", "-f", f"{self.host_key}.pub"]).stdout.split()[1]

    def spec(self, user: str = "root", **kw) -> SSHSpec:
        kw.setdefault("key_file", str(self.client_key))
        kw.setdefault("use_agent", False)
        kw.setdefault("known_hosts", str(self.known_hosts))
        return SSHSpec(address=self.address, port=self.port, user=user, **kw)

    def inventory_host(self, user: str = "root", **kw) -> Host:
        return Host(name=self.name, location=Location("<test>"), ssh=self.spec(user, **kw))

    # -- lifecycle
    def _config(self) -> Path:
        cfg = self.dir / "sshd_config"
        cfg.write_text(
            f"Port {self.port}\n"
            f"ListenAddress {self.address}\n"
            f"HostKey {self.host_key}\n"
            "PidFile none\n"
            f"AuthorizedKeysFile {self.dir}/authorized_keys .ssh/authorized_keys\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "PermitRootLogin yes\n"
            "PasswordAuthentication yes\n"
            "KbdInteractiveAuthentication no\n"
            "Subsystem sftp internal-sftp\n"
            "LogLevel VERBOSE\n"
            "MaxStartups 200\n"
            "MaxSessions 100\n" + self.extra_config
        )
        return cfg

    def ns_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def start(self, timeout: float = 15.0) -> "SshdHost":
        if self.proc is not None and self.proc.poll() is None:
            return self
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        cfg = self._config()
        _run([SSHD, "-t", "-f", str(cfg)])
        logf = open(self.log, "ab")
        start_mark = self.log.stat().st_size
        self.proc = subprocess.Popen(
            self.ns_argv([SSHD, "-D", "-e", "-f", str(cfg)]),
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        logf.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with open(self.log, "rb") as fh:
                fh.seek(start_mark)
                if b"Server listening on" in fh.read():
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"sshd {self.name} did not start; log:\n{self.log.read_text()[-2000:]}")

    def add_authorized_key(self, pubkey_path: Path) -> None:
        with open(self.dir / "authorized_keys", "a") as fh:
            fh.write(Path(pubkey_path).read_text())


DROPBEAR = "/usr/sbin/dropbear"


@dataclass
class DropbearHost(_ServerProcess):
    """dropbear (the SSH server of the lab VM's initramfs) on 127.0.0.1:<port>.

    It runs as an unprivileged test account, which is then also the only login user (dropbear can only log in
    as itself when it is not root); its authorized_keys, host key, pid and log live in that user's home.
    SFTP goes through dropbear's sftp-server (/usr/lib/sftp-server), like in the VM.
    """

    name: str
    user: str
    home: Path
    port: int
    client_key: Path
    proc: subprocess.Popen | None = None
    host_key: Path = field(init=False)
    known_hosts: Path = field(init=False)
    log: Path = field(init=False)

    def __post_init__(self):
        self.dir = self.home / "dropbear"
        self.dir.mkdir(exist_ok=True)
        self.host_key = self.dir / "host_ed25519"
        _run(["dropbearkey", "-t", "ed25519", "-f", str(self.host_key)])
        pub = [
            ln
            for ln in _run(["dropbearkey", "-y", "-f", str(self.host_key)]).stdout.splitlines()
            if ln.startswith("ssh-ed25519 ")
        ][0]
        self.host_pub = Path(f"{self.host_key}.pub")
        self.host_pub.write_text(pub + "\n")
        _run(["chown", "-R", f"{self.user}:", str(self.dir)])
        self.known_hosts = self.client_key.parent / f"known_hosts-{self.name}"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {self.host_key_line()}\n")
        self.log = self.dir / "dropbear.log"

    def host_key_line(self) -> str:
        return " ".join(self.host_pub.read_text().split()[:2])

    def fingerprint(self) -> str:
        return _run(["ssh-keygen", "-l", "-f", str(self.host_pub)]).stdout.split()[1]

    def spec(self, **kw) -> SSHSpec:
        kw.setdefault("key_file", str(self.client_key))
        kw.setdefault("use_agent", False)
        kw.setdefault("known_hosts", str(self.known_hosts))
        return SSHSpec(address="127.0.0.1", port=self.port, user=self.user, **kw)

    def start(self, timeout: float = 15.0) -> "DropbearHost":
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [
                DROPBEAR,
                "-F",
                "-E",
                "-s",
                "-p",
                f"127.0.0.1:{self.port}",
                "-r",
                str(self.host_key),
                "-P",
                str(self.dir / "pid"),
            ],
            user=self.user,
            group=self.user,
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=str(self.home),
        )
        logf.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                break
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"dropbear {self.name} did not start; log:\n{self.log.read_text()[-2000:]}")


class NetnsLab:
    """Hosts in network namespaces bridged to the root namespace. Call close() (the fixture does)."""

    def __init__(self, base: Path):
        self.base = base
        self.tag = secrets.token_hex(2)
        self.bridge = f"nfbr{self.tag}"
        self.hosts: list[SshdHost] = []
        self.namespaces: list[str] = []
        self._lock: IO[str] | None = None  # the held subnet lock file (its content: this lab's tag)
        self.lockdir = Path("/tmp/numaforge-netns-locks")
        self.lockdir.mkdir(exist_ok=True)
        self._reap_stale()
        self.subnet = self._pick_subnet()
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"10.231.{self.subnet}.1/24", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])

    def _reap_stale(self) -> None:
        """Remove what a killed test run left: each lab's lock file names its tag, and a lock nobody holds
        means its owner is gone, so its namespaces (and the sshd processes in them) and bridge go too."""
        for lock in self.lockdir.glob("*.lock"):
            with open(lock, "r+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a live lab
                tag = fh.read().strip()
                if len(tag) == 4 and all(c in "0123456789abcdef" for c in tag):
                    for ns in _run(["ip", "netns", "list"]).stdout.split("\n"):
                        ns = ns.split(" ")[0]
                        if ns.startswith(f"nf{tag}"):
                            for pid in _run(["ip", "netns", "pids", ns], check=False).stdout.split():
                                try:
                                    os.kill(int(pid), signal.SIGKILL)
                                except (ProcessLookupError, ValueError):
                                    pass
                            _run(["ip", "netns", "del", ns], check=False)
                    _run(["ip", "link", "del", f"nfbr{tag}"], check=False)
                fh.seek(0)
                fh.truncate()

    def _pick_subnet(self) -> int:
        used = _run(["ip", "-4", "-o", "addr"]).stdout
        lockdir = self.lockdir
        start = int(self.tag, 16) % 200
        for i in range(200):
            x = 20 + (start + i) % 200
            if f" 10.231.{x}." in used:
                continue
            fh = open(lockdir / f"{x}.lock", "a+")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            fh.seek(0)
            fh.truncate()
            fh.write(self.tag)  # lets a later run reap this lab if we get killed
            fh.flush()
            self._lock = fh
            return x
        raise RuntimeError("no free 10.231.X.0/24 subnet for the test namespaces")

    def add_namespace(self, name: str) -> tuple[str, str]:
        """A namespace with lo up and eth0 = 10.231.X.(10+i) on the bridge; returns (netns, address)."""
        i = len(self.namespaces)
        ns = f"nf{self.tag}{name}"[:40]
        veth = f"nf{self.tag}v{i}"
        _run(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
        _run(["ip", "link", "set", veth, "master", self.bridge])
        _run(["ip", "link", "set", veth, "up"])
        addr = f"10.231.{self.subnet}.{10 + i}"
        _run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        return ns, addr

    def add_host(self, name: str, start: bool = True, **kw) -> SshdHost:
        ns, addr = self.add_namespace(name)
        h = SshdHost(name=name, address=addr, port=22, dir=self.base / name, netns=ns, **kw)
        self.hosts.append(h)
        return h.start() if start else h

    def close(self) -> None:
        errors = []
        for h in self.hosts:
            try:
                h.stop()
            except Exception as exc:  # keep tearing down the rest
                errors.append(f"{h.name}: {exc}")
        for ns in self.namespaces:
            r = _run(["ip", "netns", "del", ns], check=False)
            if r.returncode:
                errors.append(r.stderr)
        _run(["ip", "link", "del", self.bridge], check=False)
        if self._lock is not None:
            self._lock.seek(0)
            self._lock.truncate()
            self._lock.close()
        if errors:
            raise RuntimeError("netns teardown: " + "; ".join(errors))


@pytest.fixture
def sshd_host(tmp_path):
    """A real sshd on 127.0.0.1:<free port>, root login with the test client key."""
    h = SshdHost(name="loop", address="127.0.0.1", port=free_port(), dir=tmp_path / "sshd")
    try:
        yield h.start()
    finally:
        h.stop()


@pytest.fixture
def netns_lab(tmp_path):
    """Factory for sshd hosts in their own network namespaces; everything is removed on teardown."""
    lab = NetnsLab(tmp_path / "netns")
    try:
        yield lab
    finally:
        lab.close()


TEST_HOMES = Path("/tmp/numaforge-test-homes")


class LocalUsers:
    """Real local accounts (useradd) with homes under /tmp/numaforge-test-homes, removed by close().

    sshd reads a user's ~/.ssh/authorized_keys as that user, so the home cannot live in a root-only tmp dir.
    Login shell /bin/sh with no startup files: a session costs what the command costs, not what a
    build server's root dotfiles cost (this machine's root ~/.bashrc runs pyenv twice per session).
    """

    def __init__(self) -> None:
        self.made: list[tuple[str, Path | None]] = []

    def make(self, sudo: str | None = "nopasswd", pubkey: Path | str | None = None) -> str:
        """A new account; sudo = "nopasswd" | "password" | None; pubkey = a .pub file for its authorized_keys."""
        TEST_HOMES.mkdir(mode=0o755, exist_ok=True)
        name = f"nft{secrets.token_hex(3)}"
        home = TEST_HOMES / name
        _run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", name])
        self.made.append((name, None))
        # a usable (not locked) account: sshd refuses key logins to locked ("!") accounts without PAM
        _run(["usermod", "-p", "*", name])
        if pubkey is not None:
            ssh = home / ".ssh"
            ssh.mkdir(mode=0o700)
            (ssh / "authorized_keys").write_text(Path(pubkey).read_text())
            _run(["chown", "-R", f"{name}:", str(ssh)])
        if sudo:
            rule = Path(f"/etc/sudoers.d/numaforge-test-{name}")
            tag = "NOPASSWD: " if sudo == "nopasswd" else ""
            rule.write_text(f"{name} ALL=(root) {tag}ALL\n")
            rule.chmod(0o440)
            self.made[-1] = (name, rule)
        return name

    def close(self) -> None:
        for name, rule in self.made:
            if rule is not None:
                rule.unlink(missing_ok=True)
            _kill_user_processes(name)  # whatever a failed test left running as the test user
            _run(["userdel", "-f", "-r", name], check=False)
        self.made.clear()


@pytest.fixture
def test_user():
    """Factory: make_user(sudo="nopasswd"|"password"|None, pubkey=PATH) -> user name (LocalUsers.make);
    the accounts, their homes and their /etc/sudoers.d rules are removed on teardown."""
    users = LocalUsers()
    try:
        yield users.make
    finally:
        users.close()


def _kill_user_processes(name: str) -> None:
    import pwd

    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


@pytest.fixture
def dropbear_host(tmp_path, test_user):
    """A real dropbear on 127.0.0.1:<free port>, logging in its own (NOPASSWD-sudo) test user."""
    key = keygen(tmp_path / "dropbear_client_ed25519", comment="client-dropbear")
    user = test_user(sudo="nopasswd", pubkey=f"{key}.pub")
    h = DropbearHost(name="dropbear", user=user, home=TEST_HOMES / user, port=free_port(), client_key=key)
    try:
        yield h.start()
    finally:
        h.stop()
