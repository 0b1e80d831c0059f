"""A simulator fleet (issue 39 item 11): `python -m numaforge.lab.bmc --fleet N --flavours ...` starts N BMCs in
one process with one CA and one password file, writes their native inventory, and `bios-plan --all` runs against
that inventory as it is. SIGTERM and SIGINT stop it cleanly. Real processes, real TLS, no fakes."""

from __future__ import annotations

import os
import resource
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from sshd_fixture import free_port

from numaforge.lab.bmc import CORPUS, FLAVOURS, vendor_of
from numaforge.lab.bmc.fleet import MAX_FLEET, SPARE_FILES

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).resolve().parents[2]
# six BMCs across base and corpus flavours, every vendor map among them
SIX = [FLAVOURS[0], CORPUS[1], FLAVOURS[2], CORPUS[4], FLAVOURS[3], FLAVOURS[4]]


def _start(state: Path, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "numaforge.lab.bmc", "--state-dir", str(state), "--power-delay", "0.2", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (state / "ready").exists():
        if proc.poll() is not None:
            raise AssertionError(f"fleet exited {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
        assert time.monotonic() < deadline, "fleet not ready within 60 s"
        time.sleep(0.1)
    return proc


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> str:
    if proc.poll() is None:
        proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    return out


def _refused(url: str) -> bool:
    u = urlparse(url)
    try:
        socket.create_connection((u.hostname, u.port), timeout=2).close()
    except OSError:
        return True
    return False


def test_a_fleet_across_flavours_plans_with_bios_plan_all(tmp_path):
    state = tmp_path / "fleet"
    proc = _start(state, "--fleet", "6", "--flavours", ",".join(SIX))
    try:
        inv = yaml.safe_load((state / "inventory.yaml").read_text())
        hosts = inv["hosts"]
        assert [h["vars"]["bmc_flavour"] for h in hosts.values()] == SIX
        assert sorted(inv["groups"]["fleet"]["hosts"]) == sorted(hosts)
        ca = state / "tls" / "ca.pem"
        for h in hosts.values():
            assert h["bmc"]["ca_bundle"] == str(ca.resolve()) and h["bmc"]["password"] == f"file:{state / 'password'}"
            assert h["bmc"]["vendor"] == vendor_of(h["vars"]["bmc_flavour"])
            u = urlparse(h["bmc"]["url"])  # one CA verifies every member
            ctx = ssl.create_default_context(cafile=str(ca))
            with (
                socket.create_connection((u.hostname, u.port), timeout=10) as s,
                ctx.wrap_socket(s, server_hostname=u.hostname),
            ):
                pass
        assert (state / "password").stat().st_mode & 0o077 == 0
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "from numaforge.cli.main import main; main()",
                "bios-plan",
                "--all",
                "-i",
                str(state / "inventory.yaml"),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200", "NUMAFORGE_STATE": str(tmp_path / "state")},
        )
        assert r.returncode == 0, r.stdout + r.stderr
        for name in hosts:
            assert any(line.split()[:2] == [name, "unchanged"] for line in r.stdout.splitlines()), (name, r.stdout)
    finally:
        out = _stop(proc)
    assert proc.returncode == 0 and "fleet stopped" in out, out
    assert not (state / "pid").exists() and not (state / "ready").exists()
    assert all(_refused(h["bmc"]["url"]) for h in hosts.values())


def test_sigint_stops_the_fleet_and_ports_come_from_the_range(tmp_path):
    base = free_port()
    lo, hi = max(1024, base - 10), min(65535, base + 30)
    state = tmp_path / "fleet"
    proc = _start(state, "--fleet", "3", "--flavours", "generic", "--ports", f"{lo}-{hi}")
    inv = yaml.safe_load((state / "inventory.yaml").read_text())
    ports = [urlparse(h["bmc"]["url"]).port for h in inv["hosts"].values()]
    assert len(set(ports)) == 3 and all(lo <= p <= hi for p in ports), ports
    out = _stop(proc, signal.SIGINT)
    assert "fleet stopped" in out and "Traceback" not in out, out
    assert all(_refused(h["bmc"]["url"]) for h in inv["hosts"].values())


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--fleet", "0"], "--fleet"),
        (["--fleet", str(MAX_FLEET + 1)], f"from 1 to {MAX_FLEET}"),
        (["--fleet", "2", "--flavours", "dell,nope"], "unknown BMC flavour 'nope'"),
        (["--fleet", "2", "--flavours", "dell,"], "empty name"),
        (["--fleet", "3", "--ports", "9000-9001"], "2 ports for 3 BMCs"),
        (["--fleet", "2", "--ports", "x"], "not a range"),
        (["--flavours", "dell"], "go with --fleet"),
    ],
)
def test_bad_fleet_options_exit_2_and_start_nothing(args, needle, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "numaforge.lab.bmc", "--state-dir", str(tmp_path / "f"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and needle in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "f" / "inventory.yaml").exists()


def test_a_fleet_larger_than_the_open_files_limit_is_refused_before_it_starts(tmp_path):
    """Issue 43 item 6: a fleet of up to MAX_FLEET BMCs is one process (one accepting thread, server.Hub), and each
    BMC is a listening socket: a fleet the process's open-files limit cannot hold exits 2 naming the limit and
    the ulimit to set, before any BMC listens (not "cannot listen ... pick a free port" half-way through)."""
    count = 200
    limit = count + SPARE_FILES - 1

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    r = subprocess.run(
        [sys.executable, "-m", "numaforge.lab.bmc", "--state-dir", str(tmp_path / "f"), "--fleet", str(count)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=low_limit,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"may open {limit}" in r.stderr and f"ulimit -n {count + SPARE_FILES}" in r.stderr, r.stderr
    assert not (tmp_path / "f" / "inventory.yaml").exists() and "BMC at" not in r.stdout
