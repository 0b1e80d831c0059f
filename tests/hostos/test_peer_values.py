"""Peer data in the host OS pipeline (issue 40 items 2 and 5): sysctl values are checked per kind -- desired
and current -- before any write, and a file a host sends past the per-file cap is refused, never parsed cut
short. Pure parts here; the SSH run (a real sshd, the /proc tree as the documented boundary fake) at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from numaforge.hostos.plan import KNOWN_SYSCTLS, MANAGED_FILES, SYSCTL_MAX, HostPlanError, make_plan, sysctl_problem
from numaforge.hostos.profile import profile_facts, render_profile
from numaforge.hostos.read import MAX_FILE_BYTES, host_state, parse_snapshot, snapshot_script

from .helpers import build_tree, corpus, lab_like_host

ROOT = Path(__file__).resolve().parents[2]


def _plan_with(tmp_path, sysctls: dict, host_values: dict | None = None):
    p = tmp_path / "p.yaml.j2"
    p.write_text(yaml.safe_dump({"sysctl": sysctls}))
    prof = render_profile(str(p), profile_facts(lab_like_host()))
    st = host_state(parse_snapshot(corpus("lab-vm")), list(prof.sysctl), [], MANAGED_FILES)
    for k, v in (host_values or {}).items():
        st.sysctls[k] = v
    return make_plan(prof, st, host="lab")


@pytest.mark.parametrize("key", sorted(KNOWN_SYSCTLS))
@pytest.mark.parametrize("value", ["abc", "1 2", "1.5", "0x1", "", "nan", "1e3"])
def test_a_non_numeric_value_for_a_numeric_sysctl_is_refused_before_any_write(tmp_path, key, value):
    """`vm.swappiness: abc` was accepted and written to sysctl.d."""
    with pytest.raises(HostPlanError) as exc:
        _plan_with(tmp_path, {key: value}, {key: "1"})
    assert f"lab/sysctl {key}:" in exc.value.render() and "before any write" in exc.value.render()


@pytest.mark.parametrize("key", sorted(KNOWN_SYSCTLS))
def test_known_sysctls_are_range_checked_both_ways(tmp_path, key):
    lo, hi = KNOWN_SYSCTLS[key]
    _plan_with(tmp_path, {key: hi}, {key: str(lo)})  # the edges are fine
    for bad in (hi + 1, lo - 1):
        with pytest.raises(HostPlanError, match="outside the kernel's range"):
            _plan_with(tmp_path, {key: bad}, {key: str(lo)})
    for huge in (10**30, "9" * 5000):  # wider than any sysctl number (5000 digits: int() itself refuses it)
        with pytest.raises(HostPlanError, match="is not a number"):
            _plan_with(tmp_path, {key: huge}, {key: str(lo)})
    for garbage in ("garbage", "\x1b[2J", str(hi + 1)):  # the host's value: cannot tell, nothing written
        with pytest.raises(HostPlanError, match="cannot tell") as exc:
            _plan_with(tmp_path, {key: lo}, {key: garbage})
        assert "\x1b" not in exc.value.render()


def test_other_sysctls_take_their_kind_from_the_host():
    assert sysctl_problem("net.core.somaxconn", "4096", "128") is None
    assert "not a number" in sysctl_problem("net.core.somaxconn", "lots", "128")
    assert "field(s)" in sysctl_problem("net.ipv4.tcp_rmem", "4096 87380", "4096 131072 6291456")
    assert sysctl_problem("net.ipv4.tcp_rmem", "4096 87380 16777216", "4096 131072 6291456") is None
    assert "range" in sysctl_problem("net.core.somaxconn", str(SYSCTL_MAX + 1), "128")
    assert sysctl_problem("net.ipv4.tcp_congestion_control", "bbr", "cubic") is None  # text stays text
    assert "control characters" in sysctl_problem("kernel.core_pattern", "core\x1b[2J", "core")


def test_a_file_past_the_per_file_cap_is_refused_not_parsed_short():
    text = f"@@@ file /proc/interrupts\n{'1' * (MAX_FILE_BYTES + 1)}\n\n"
    with pytest.raises(ValueError, match=f"/proc/interrupts: more than {MAX_FILE_BYTES} bytes"):
        parse_snapshot(text)
    assert parse_snapshot("@@@ file /proc/x\nsmall\n\n").files == {"/proc/x": "small"}


def test_the_snapshot_script_reads_at_most_the_cap_of_a_huge_file(tmp_path):
    """A 300 MB /proc/interrupts (sparse: nothing is written to disk) is read up to the cap + 1 byte."""
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    with open(root / "proc" / "interrupts", "wb") as fh:
        fh.truncate(300 * 1024 * 1024)
    r = subprocess.run(
        ["sh", "-s"],
        input=snapshot_script(str(root), ["/proc/interrupts"], []).encode(),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0 and len(r.stdout) <= MAX_FILE_BYTES + 200, len(r.stdout)
    with pytest.raises(ValueError, match="more than"):
        parse_snapshot(r.stdout.decode())


# ------------------------------------------------------------------------------------------------ over SSH
@pytest.mark.ssh
@pytest.mark.parametrize("case", ["non-numeric-desired", "garbage-current", "huge-interrupts"])
def test_os_apply_writes_nothing_for_bad_peer_or_profile_values(sshd_host, tmp_path, case):
    root = build_tree(tmp_path / "root")
    swappiness = root / "proc/sys/vm/swappiness"
    before = swappiness.read_text()
    profiles = tmp_path / "project" / "hostos" / "profiles"
    profiles.mkdir(parents=True)
    value = "abc" if case == "non-numeric-desired" else "10"
    (profiles / "t.yaml.j2").write_text(f"sysctl:\n  vm.swappiness: {value}\n")
    if case == "garbage-current":
        swappiness.write_text("sixty\n")
        before = "sixty\n"
    if case == "huge-interrupts":
        with open(root / "proc" / "interrupts", "r+b") as fh:
            fh.truncate(300 * 1024 * 1024)
    inv = tmp_path / "inv.yaml"
    spec = sshd_host.spec()
    inv.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "hosts": {
                    "h": {
                        "ssh": {
                            "address": spec.address,
                            "port": spec.port,
                            "key_file": spec.key_file,
                            "known_hosts": spec.known_hosts,
                            "agent": False,
                        },
                        "hardware": {"sockets": 4},
                        "vars": {"hostos_profile": "t", "hostos_root": str(root)},
                    }
                },
            }
        )
    )
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "os-apply", "-i", str(inv), "--all"]
        + ["--json", str(tmp_path / "r.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "NUMAFORGE_ROOT": str(tmp_path / "project"),
            "NUMAFORGE_STATE": str(tmp_path / "state"),
            "COLUMNS": "300",
        },
    )
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode != 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] is False and report["hosts"][0]["status"] == "failed", out
    assert swappiness.read_text() == before and not (root / "etc/sysctl.d/60-numaforge-hostos.conf").exists()
    assert not (root / "var/lib/numaforge").exists()
    want = {
        "non-numeric-desired": "the value 'abc' is not a number",
        "garbage-current": "cannot tell: the host reports 'sixty'",
        "huge-interrupts": f"/proc/interrupts: more than {MAX_FILE_BYTES} bytes",
    }[case]
    assert want in out, out
    assert "a bug" not in out and "Traceback" not in out
