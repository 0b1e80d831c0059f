"""Two writers on one host (issue 25 item 2): a per-host write lock across processes on this build server.

Real peers: the BMC simulator over TLS and two `invoke bios-apply --reboot` processes started at the same time
against the same host, sharing one state directory (where numaforge.hostlock keeps its lock files).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from numaforge import hostlock
from numaforge.lab.bmc import BMCSimulator

from .test_bios_resume import PASSWORD
from .test_bios_resume import _setup as resume_setup

pytestmark = pytest.mark.bmc

ROOT = Path(__file__).parents[2]


def _setup(tmp_path, sim):
    _inv, env, cmd = resume_setup(tmp_path, sim)     # one host on `sim`, NUMAFORGE_STATE under tmp_path
    return env, cmd


def _race(tmp_path, cmds, env, tag):
    """Start the commands at the same time; return (winner index, loser index, procs, outputs)."""
    procs = [subprocess.Popen(cmd + ["--json", str(tmp_path / f"{tag}{i}.json")], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i, cmd in enumerate(cmds)]
    outs = [" ".join("".join(p.communicate(timeout=300)).split()) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 1], (codes, outs)
    winner = codes.index(0)
    return winner, 1 - winner, procs, outs


def test_two_bios_apply_reboot_runs_on_one_host_patch_and_reset_it_once(tmp_path):
    """Both start at once: exactly one PATCH and one reset reach the BMC; the run that did not get the host exits
    non-zero naming the one that holds it (pid, task, start time, user) and writes nothing. First two different
    commands (their resume journals differ: the host's own write lock decides), then the same command twice
    (the second never resumes from the journal the first is still writing)."""
    sim = BMCSimulator(flavour="dell", tls=True, username="admin", password=PASSWORD, power_delay=3.0).start()
    try:
        env, cmd = _setup(tmp_path, sim)
        winner, loser, procs, outs = _race(tmp_path, [cmd, cmd + ["--profile", "epyc-gpudirect"]], env, "a")
        assert sim.count("PATCH") == 1 and sim.count("POST", "Reset") == 1
        text = outs[loser]
        assert "another run is writing this host: bios-apply" in text and "host gpu-01" in text, text
        assert f"pid {procs[winner].pid}," in text and "started 20" in text and "user " in text, text
        assert "--wait-lock" in text, text
        doc = json.loads((tmp_path / f"a{loser}.json").read_text())
        (h,) = doc["hosts"]
        assert doc["ok"] is False and h["status"] == "failed" and not h.get("data", {}).get("changed")
        assert json.loads((tmp_path / f"a{winner}.json").read_text())["hosts"][0]["status"] == "changed"

    finally:
        sim.stop()
    sim = BMCSimulator(flavour="dell", tls=True, username="admin", password=PASSWORD, power_delay=3.0).start()
    try:
        env, cmd = _setup(tmp_path, sim)
        winner, loser, procs, outs = _race(tmp_path, [cmd, cmd], env, "b")
        assert sim.count("PATCH") == 1 and sim.count("POST", "Reset") == 1
        text = outs[loser]
        assert "another run is running this command: bios-apply" in text, text
        assert f"pid {procs[winner].pid}," in text and "resuming" not in text, text
        doc = json.loads((tmp_path / f"b{loser}.json").read_text())
        assert doc["ok"] is False and doc["error"]["kind"] == "HostLocked"
    finally:
        sim.stop()


def test_wait_lock_waits_for_the_holder_and_a_dead_holders_lock_is_free(tmp_path):
    """--wait-lock: the second run waits for the first to finish, then finds nothing to change (no second
    PATCH or reset). A holder killed with SIGKILL leaves its lock free at once (flock dies with the process)."""
    sim = BMCSimulator(flavour="generic", tls=True, username="admin", password=PASSWORD, power_delay=2.0).start()
    try:
        env, cmd = _setup(tmp_path, sim)
        first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while sim.count("PATCH") == 0:
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = subprocess.run(cmd + ["--wait-lock", "240"], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=300)
        first.communicate(timeout=300)
        assert first.returncode == 0 and second.returncode == 0, second.stdout + second.stderr
        assert sim.count("PATCH") == 1 and sim.count("POST", "Reset") == 1
        assert "unchanged" in second.stdout

        # a holder that dies without cleaning up: its lock is free for the next run
        env_state = {**os.environ, "NUMAFORGE_STATE": str(tmp_path / "state")}
        (key,) = hostlock.machine_keys(SimpleNamespace(bmc=SimpleNamespace(url=sim.url)))
        code = f"import time; from numaforge import hostlock\nwith hostlock.held({key!r}, 'bios-apply'):\n" \
               "    print('held', flush=True); time.sleep(300)\n"
        holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env_state, stdout=subprocess.PIPE,
                                  text=True)
        assert holder.stdout.readline().strip() == "held"
        held = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert held.returncode == 1 and f"pid {holder.pid}," in " ".join((held.stdout + held.stderr).split())
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        free = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert free.returncode == 0, free.stdout + free.stderr
    finally:
        sim.stop()


def test_lock_file_names_any_host_safely_and_waiting_gives_up_with_the_holder(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path / "state"))
    odd = "../../etc/x y"
    path = hostlock.lock_path(odd)
    assert path.parent == tmp_path / "state" / "locks" and "/" not in path.name
    with hostlock.held(odd, "os-apply") as me:
        assert hostlock.holder(path) == me and me["pid"] == os.getpid()
        t0 = time.monotonic()
        with pytest.raises(hostlock.HostLocked) as exc:
            with hostlock.held(odd, "bios-apply", wait=0.5):
                pass
        assert time.monotonic() - t0 >= 0.5
        assert "os-apply (pid" in exc.value.what and "waited 0.5 s" in exc.value.what
    assert hostlock.holder(path) == {}          # released: nobody named
    with hostlock.held(odd, "bios-apply"):
        pass


def test_a_host_is_locked_by_the_machine_it_reaches_not_by_its_inventory_name(tmp_path, monkeypatch):
    """Two inventories naming one BMC differently share its lock; one name for two BMCs (two inventories, or
    two test workers on one build server) does not; a host with a BMC and SSH holds both."""
    monkeypatch.setenv("NUMAFORGE_STATE", str(tmp_path / "state"))

    def host(name, url=None, ssh=None):
        return SimpleNamespace(name=name, bmc=SimpleNamespace(url=url) if url else None,
                               ssh=SimpleNamespace(address=ssh[0], port=ssh[1]) if ssh else None)

    a = host("gpu-01", "https://10.0.0.5")
    assert hostlock.machine_keys(a) == hostlock.machine_keys(host("rack3-u7", "https://10.0.0.5:443/"))
    assert hostlock.machine_keys(a) != hostlock.machine_keys(host("gpu-01", "https://10.0.0.6"))
    both = host("gpu-02", "https://10.0.0.7:8443", ("10.1.0.7", 22))
    assert hostlock.machine_keys(both) == ["bmc:10.0.0.7:8443", "ssh:10.1.0.7:22"]
    assert hostlock.machine_keys("plain-name") == ["plain-name"]
    with hostlock.held_host(a, "gpu-01", "bios-apply"):
        with pytest.raises(hostlock.HostLocked) as exc:
            with hostlock.held_host(host("rack3-u7", "https://10.0.0.5"), "rack3-u7", "os-apply"):
                pass
        assert exc.value.where.startswith("host rack3-u7 (lock ") and "bios-apply (pid" in exc.value.what
        with hostlock.held_host(host("gpu-01", "https://10.0.0.6"), "gpu-01", "bios-apply"):
            pass                                 # another machine of the same name: not held
    with hostlock.held_host(both, "gpu-02", "os-apply"):
        with pytest.raises(hostlock.HostLocked):   # its SSH side alone is enough to collide
            with hostlock.held_host(host("other", ssh=("10.1.0.7", 22)), "other", "os-apply"):
                pass
