"""Several real sshd "hosts", each in its own network namespace (10.231.X.(10+i)), driven by run_fleet.

The client is this pytest process in the root namespace, reaching the hosts over a bridge + veth pairs the
fixture creates (tests/sshd_fixture.py: NetnsLab); nothing here talks to any other address.
"""

import os
import signal
import time
from pathlib import Path

import pytest

from numaforge.fleet import Rollout, run_fleet
from numaforge.remote.ssh import TMP_MARK, ConnectError, HostKeyError, UploadError, connect
from numaforge.report import HostResult

pytestmark = pytest.mark.ssh


def probe(host):
    """Per-host function: connect, report the address the host sees on its eth0, upload a file."""
    res = HostResult(host.name)
    with res.step("connect"):
        remote = connect(host.ssh, host.name, connect_timeout=10)
    with remote:
        with res.step("facts"):
            res.data["eth0"] = remote.run("ip -4 -o addr show dev eth0").stdout.split()[3]
        with res.step("upload"):
            src = Path(host.vars["payload"])
            res.data["sha256"] = remote.put(src, f"/tmp/numaforge-fleet-{host.name}.bin")
    res.message = res.data["eth0"]
    return res


def failing_probe(host):
    try:
        return probe(host)
    except Exception as exc:
        return HostResult(host.name, "failed", str(exc))


def sessions_seen(h) -> int:
    return h.log.read_text().count("Connection from") if h.log.exists() else 0


def make_fleet(netns_lab, tmp_path, n, down=()):
    payload = tmp_path / "payload.bin"
    payload.write_bytes(os.urandom(256 * 1024))
    hosts, inv = [], []
    for i in range(n):
        h = netns_lab.add_host(f"n{i}", start=i not in down)
        hosts.append(h)
        ih = h.inventory_host()
        ih.vars["payload"] = str(payload)
        inv.append(ih)
    return hosts, inv


def test_each_namespace_host_is_its_own_machine_on_the_network(netns_lab, tmp_path):
    hosts, inv = make_fleet(netns_lab, tmp_path, 3)
    out = run_fleet(inv, probe, rollout=Rollout(forks=3), progress=False)
    assert out.ok, out.summary()
    for h, r in zip(hosts, out.results):
        assert r.data["eth0"] == f"{h.address}/24"  # the sshd answering is the one inside that namespace
        assert [s.name for s in r.steps] == ["connect", "facts", "upload"]
        assert Path(f"/tmp/numaforge-fleet-{h.name}.bin").exists()
        Path(f"/tmp/numaforge-fleet-{h.name}.bin").unlink()


def test_rolling_stops_at_max_fail_when_hosts_are_down(netns_lab, tmp_path):
    # n2 and n3 have no sshd: batch 2 fails 2 of 4 attempted (50% > 25%) -> n4, n5 are never contacted
    hosts, inv = make_fleet(netns_lab, tmp_path, 6, down=(2, 3))
    out = run_fleet(inv, probe, rollout=Rollout(forks=2, batch=2, max_fail=25), progress=False)
    status = {r.host: r.status for r in out.results}
    assert status == {"n0": "ok", "n1": "ok", "n2": "failed", "n3": "failed", "n4": "not-run", "n5": "not-run"}
    assert out.stopped and out.not_run == ["n4", "n5"]
    assert "2 of 4 hosts failed (50% > --max-fail 25%)" in out.reason
    for r in out.results[2:4]:
        assert "cannot connect" in r.message and f"host {r.host}" in r.message
    assert sessions_seen(hosts[0]) == 1 and sessions_seen(hosts[1]) == 1
    assert sessions_seen(hosts[4]) == 0 and sessions_seen(hosts[5]) == 0  # up, but never contacted
    for h in hosts[:2]:
        Path(f"/tmp/numaforge-fleet-{h.name}.bin").unlink()


def test_failed_canary_stops_before_touching_the_fleet(netns_lab, tmp_path):
    hosts, inv = make_fleet(netns_lab, tmp_path, 3, down=(0,))
    out = run_fleet(inv, probe, rollout=Rollout(canary=1), progress=False)
    assert out.stopped and out.not_run == ["n1", "n2"]
    assert sessions_seen(hosts[1]) == 0 and sessions_seen(hosts[2]) == 0


def test_a_changed_host_key_fails_only_that_host(netns_lab, tmp_path):
    from sshd_fixture import keygen

    hosts, inv = make_fleet(netns_lab, tmp_path, 3)
    other = keygen(tmp_path / "impostor")
    hosts[1].known_hosts.write_text(f"{hosts[1].address} " + " ".join(Path(f"{other}.pub").read_text().split()[:2]))
    out = run_fleet(inv, probe, rollout=Rollout(forks=3), progress=False)
    assert [r.status for r in out.results] == ["ok", "failed", "ok"]
    assert "HOST KEY MISMATCH" in out.results[1].message
    for h in (hosts[0], hosts[2]):
        Path(f"/tmp/numaforge-fleet-{h.name}.bin").unlink()


def test_sshd_stopped_mid_upload_leaves_no_partial_file(netns_lab, tmp_path):
    (h,) = make_fleet(netns_lab, tmp_path, 1)[0]
    src = tmp_path / "big.ko"
    src.write_bytes(os.urandom(6 * 1024 * 1024))
    dest_dir = tmp_path / "remote"
    dest_dir.mkdir()
    stopped = []

    def stop_sshd(sent, total):
        if not stopped and sent > 512 * 1024:
            # once the host writes (killing a root session inside its ~/.bashrc could leave pyenv's lock behind)
            t0 = time.monotonic()
            while not any(p.stat().st_size for p in dest_dir.iterdir() if TMP_MARK in p.name):
                assert time.monotonic() - t0 < 30, "the host never started writing the temp file"
                time.sleep(0.05)
            h.stop()  # listener and every session: the host's sshd is gone
            stopped.append(sent)

    with connect(h.spec(), h.name) as r:
        with pytest.raises(UploadError) as exc:
            r.put(src, str(dest_dir / "big.ko"), progress=stop_sshd)
    assert stopped and "connection lost" in exc.value.what
    assert not (dest_dir / "big.ko").exists()
    assert all(TMP_MARK in p.name and p.name.startswith(".big.ko") for p in dest_dir.iterdir())


def test_hung_sshd_is_a_connect_timeout_not_a_hang(netns_lab, tmp_path):
    """sshd is SIGSTOPped: the kernel still accepts the TCP connection, but no SSH banner ever comes."""
    (h,) = make_fleet(netns_lab, tmp_path, 1)[0]
    os.kill(h.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(ConnectError) as exc:
            connect(h.spec(), h.name, connect_timeout=2)
        assert "no SSH banner" in exc.value.what and h.name in exc.value.where
    finally:
        os.kill(h.proc.pid, signal.SIGCONT)


def test_unknown_key_on_a_namespace_host_is_refused(netns_lab, tmp_path):
    (h,) = make_fleet(netns_lab, tmp_path, 1)[0]
    h.known_hosts.write_text("")
    with pytest.raises(HostKeyError) as exc:
        connect(h.spec(), h.name)
    assert h.address in exc.value.what and h.fingerprint() in exc.value.what


def test_host_timeout_stops_a_slow_host_between_commands_and_spares_the_others(netns_lab, test_user, tmp_path):
    """--host-timeout over real SSH: the slow host (its sshd answers, its commands take 1 s each) stops before
    the command that would start past its 2.5 s budget; no command is cut in half (each `sleep 1` that started
    wrote its marker), and the quick host finishes. Logged in as a /bin/sh account: root's ~/.bashrc on this
    machine costs ~0.15 CPU s per command, which on a loaded machine no longer fits 2 commands in 2.5 s."""
    hosts = [netns_lab.add_host("slow"), netns_lab.add_host("quick")]
    keys = tmp_path / "keys.pub"
    keys.write_text("".join(Path(f"{h.client_key}.pub").read_text() for h in hosts))
    user = test_user(sudo=None, pubkey=keys)
    slow, quick = (h.inventory_host(user=user) for h in hosts)

    def work(host):
        res = HostResult(host.name)
        with connect(host.ssh, host.name, connect_timeout=10) as remote:
            remote.run(f"rm -f /tmp/nf-budget-{host.ssh.user}-{host.name}")
            for i in range(8 if host.name == "slow" else 1):
                remote.run(f"sleep 1; echo {i} >> /tmp/nf-budget-{host.ssh.user}-{host.name}", timeout=30)
            res.data["done"] = remote.run(f"cat /tmp/nf-budget-{host.ssh.user}-{host.name}").stdout.split()
        return res

    out = run_fleet(
        [slow, quick],
        work,
        rollout=Rollout(forks=2, host_timeout=2.5),
        progress=False,
    )
    by = {r.host: r for r in out.results}
    assert by["quick"].status != "failed" and by["quick"].data["done"] == ["0"]
    assert by["slow"].status == "failed"
    assert "used up its --host-timeout of 2.5 s; stopped before `sleep 1; echo " in by["slow"].message
    written = Path(f"/tmp/nf-budget-{user}-slow").read_text().split()  # the namespaces share this filesystem
    for h in ("slow", "quick"):
        Path(f"/tmp/nf-budget-{user}-{h}").unlink()
    assert written == [str(i) for i in range(len(written))] and 2 <= len(written) <= 3
