"""The validate states against the real lab VM (qemu TCG, 4 NUMA nodes, dropbear): real insmod, real
livepatch transitions, real tracefs. One VM per session (conftest.py)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from numaforge import livepatch as lp
from numaforge.lab import vm
from numaforge.livepatch.hostops import PROD_IDLE_CPUS as PROD  # 5.10 wakes no idle CPU (docs/kpatch.md)
from numaforge.measure.runner import WorkloadParams
from numaforge.paths import ROOT
from numaforge.report import HostResult

pytestmark = pytest.mark.lab_vm

FAST = dict(signal_after=3.0, revert_after=10.0, effect=False)


def run(lab, art, **opts) -> HostResult:
    with lab.remote() as r:
        return lp.validate_host(r, art, lp.Options(**{**FAST, **opts}), HostResult(lab.host.name))


def host_state(lab, module: str) -> dict:
    with lab.remote() as r:
        out = r.run(
            f"grep -c '^{module} ' /proc/modules; ls -d /sys/kernel/livepatch/{module} 2>/dev/null | wc -l; "
            "ls -d /tmp/numaforge-livepatch.* 2>/dev/null | wc -l; find /tmp -name '*.ko*' | wc -l; "
            "head -c 60 /proc/cmdline",
            check=False,
        ).stdout.split("\n")
    return {
        "loaded": int(out[0]),
        "sysfs": int(out[1]),
        "upload_dirs": int(out[2]),
        "ko_files": int(out[3]),
        "cmdline": out[4],
    }


CLEAN = {"loaded": 0, "sysfs": 0, "upload_dirs": 0, "ko_files": 0}


def clean(state: dict) -> dict:
    return {k: state[k] for k in CLEAN}


def test_vm_has_four_numa_nodes_with_epyc_like_distances(lab):
    assert lab.info.nodes == 4
    with lab.remote() as r:
        assert r.read_text("/sys/devices/system/node/online").strip() == "0-3"
        assert r.read_text("/sys/devices/system/node/node0/distance").split() == ["10", "16", "32", "32"]
        assert r.read_text("/proc/sys/kernel/numa_balancing").strip() == "1"
        assert r.run("uname -r").stdout.strip() == lab.kernel.release
    assert vm.status(lab.state_dir).running


def test_load_verify_unload_cycle(lab):
    art = lp.load_artifact(
        lab.module("nf_lp_cmdline"), functions=["cmdline_proc_show"], check_script=lab.check_script("nf_lp_cmdline")
    )
    res = run(lab, art)
    assert res.status == "ok", res.message
    assert res.data["states"] == ["preflight", "upload", "load", "transition", "verify", "unload"]
    assert res.data["transition"]["done"] is True
    v = res.data["verify"]
    assert v["enabled"] == "1" and v["transition"] == "0"
    assert v["objects"] == {"vmlinux": ["cmdline_proc_show,1"]}
    assert v["loaded_check"]["rc"] == 0 and v["dmesg_problems"] == []
    assert res.data["final"] == "unloaded"
    after = host_state(lab, "nf_lp_cmdline")
    assert clean(after) == CLEAN and "numaforge livepatch" not in after["cmdline"]


def test_stalled_transition_is_signalled_reverted_unloaded_and_failed(lab):
    art = lp.load_artifact(lab.module("nf_lp_stall"), functions=["msleep_interruptible"])
    res = run(lab, art)
    assert res.status == "failed"
    assert res.data["error"]["kind"] == "TransitionError"
    assert res.data["states"] == ["preflight", "upload", "load", "transition", "revert", "rollback"]
    tr = res.data["transition"]
    assert tr["done"] is False and "signalled" in tr
    # every stalled thread with its kernel stack: the module's kthread sleeps in the patched function
    stall = [t for t in tr["stalled_tasks"] if t["comm"] == "nf_lp_stall"]
    assert stall and any("msleep_interruptible" in line for line in stall[0]["stack"]), tr["stalled_tasks"]
    assert "nf_lp_stall" in res.data["error"]["what"] and "msleep_interruptible" in res.data["error"]["what"]
    assert tr["reverted"]["disable"]["done"] is True and tr["reverted"]["unload"]["rc"] == 0
    assert tr["reverted"]["refcount"].startswith("refcnt=")  # waited for the module reference
    assert res.data["final"] == "reverted"
    assert clean(host_state(lab, "nf_lp_stall")) == CLEAN


def test_host_out_of_budget_mid_transition_is_still_rolled_back(lab):
    """--host-timeout during a stalled transition (revert_after is far away): the next poll stops the host with
    HostTimeout, and the rollback, which runs with the budget lifted, still disables and unloads the patch."""
    import time

    from numaforge import budget

    art = lp.load_artifact(lab.module("nf_lp_stall"), functions=["msleep_interruptible"])
    t0 = time.monotonic()
    with budget.host_deadline(8, lab.host.name):
        res = run(lab, art, revert_after=120.0)
    assert time.monotonic() - t0 < 90  # not the 120 s revert_after
    assert res.status == "failed" and res.data["error"]["kind"] == "HostTimeout", res.message
    assert "used up its --host-timeout of 8 s" in res.data["error"]["what"]
    assert res.data["states"][-1] == "rollback" and res.data["final"] == "rolled-back"
    assert res.data["remote_dir_removed"] is True
    assert clean(host_state(lab, "nf_lp_stall")) == CLEAN


def test_vermagic_mismatch_is_refused_before_anything_is_uploaded(lab, tmp_path):
    ko = lab.module("nf_lp_cmdline")
    data = ko.read_bytes()
    rel = lab.kernel.release.encode()
    other = rel[:-1] + (b"X" if not rel.endswith(b"X") else b"Y")  # same length: a module for another kernel
    bad = tmp_path / "nf_lp_cmdline.ko"
    bad.write_bytes(data.replace(b"vermagic=" + rel, b"vermagic=" + other))
    art = lp.load_artifact(bad, functions=["cmdline_proc_show"])
    res = run(lab, art)
    assert res.status == "failed" and res.data["error"]["kind"] == "HostPreflightError"
    assert "vermagic mismatch" in res.data["error"]["what"] and other.decode() in res.data["error"]["what"]
    assert res.data["states"] == ["preflight"] and "remote_dir" not in res.data
    assert res.data["final"] == "untouched"
    assert clean(host_state(lab, "nf_lp_cmdline")) == CLEAN


def test_failed_verification_rolls_back_leaving_no_module_and_no_file(lab, tmp_path):
    check = tmp_path / "fails-on-purpose-LOADED.test"
    check.write_text("#!/bin/sh\necho 'NOT LOADED: failing on purpose' >&2\nexit 1\n")
    art = lp.load_artifact(lab.module("nf_lp_cmdline"), functions=["cmdline_proc_show"], check_script=check)
    res = run(lab, art)
    assert res.status == "failed" and res.data["error"]["kind"] == "VerifyError"
    assert "failing on purpose" in res.data["error"]["what"]
    assert res.data["states"][-1] == "rollback" and res.data["final"] == "rolled-back"
    assert res.data["remote_dir_removed"] is True
    after = host_state(lab, "nf_lp_cmdline")
    assert clean(after) == CLEAN and "numaforge livepatch" not in after["cmdline"]


def test_keep_leaves_the_patch_loaded_and_a_second_run_refuses_it(lab):
    art = lp.load_artifact(lab.module("nf_lp_cmdline"), functions=["cmdline_proc_show"])
    res = run(lab, art, keep=True)
    try:
        assert res.status == "changed" and res.data["final"] == "kept"
        st = host_state(lab, "nf_lp_cmdline")
        assert st["loaded"] == 1 and st["sysfs"] == 1 and st["cmdline"].startswith("numaforge livepatch")
        assert st["upload_dirs"] == 0  # the module lives in memory; no file is left behind
        again = run(lab, art)
        assert again.status == "failed" and "already loaded" in again.data["error"]["what"]
        assert again.data["states"] == ["preflight"]
    finally:
        with lab.remote() as r:
            r.run(
                "echo 0 > /sys/kernel/livepatch/nf_lp_cmdline/enabled; "
                f"while [ -d /sys/kernel/livepatch/nf_lp_cmdline ]; do {PROD}; sleep 0.5; done; rmmod nf_lp_cmdline",
                timeout=60,
                check=False,
            )
    assert clean(host_state(lab, "nf_lp_cmdline")) == CLEAN


def test_effect_mechanism_counts_the_workload_in_both_states(lab):
    """Short A/B run (mechanism, not the effect size): the workload's 3 processes are traced in each run."""
    art = lp.load_artifact(lab.module("nf_lp_cmdline"), functions=["cmdline_proc_show"])
    work = WorkloadParams(warm=2, unpinned=3, pinned=1, duration=8, mb=16)
    res = run(lab, art, effect=True, workload=work)
    assert res.status == "ok", res.message
    eff = res.data["numa_effect"]
    assert eff["nodes"] == 4 and eff["numa_balancing"] == "1"
    assert [r["label"] for r in eff["runs"]] == ["off", "on"]
    for r in eff["runs"]:
        assert len(r["tasks"]) == 3 and r["unpinned_phases"] >= 3
        assert r["vmstat_delta"]["numa_pte_updates"] > 0  # NUMA balancing scanned the workload
        assert r["units"] > 0 and r["mean_latency_us"] > 0 and r["migrations"] > 0
    assert set(eff["third_node_moves"]) == {"off", "on"}
    assert set(eff["metrics"]["cross_numa_rate"]) == {"off", "on"}
    assert clean(host_state(lab, "nf_lp_cmdline")) == CLEAN


def test_validate_task_writes_schema_valid_json_and_junit(lab, tmp_path):
    inv = tmp_path / "inv.yaml"
    s = lab.host.ssh
    inv.write_text(
        f"version: 1\nhosts:\n  lab-vm:\n    ssh: {{address: 127.0.0.1, port: {s.port}, user: root, "
        f"key_file: {s.key_file}, known_hosts: {s.known_hosts}, agent: false}}\n"
        "  gone-vm:\n    ssh: {address: 127.0.0.1, port: 1, user: root, "
        f"key_file: {s.key_file}, known_hosts: {s.known_hosts}, agent: false}}\n"
    )
    ko = lab.module("nf_lp_cmdline")
    cmd = [
        str(ROOT / ".venv/bin/invoke"),
        "validate",
        "--inventory",
        str(inv),
        "--module",
        str(ko),
        "--check",
        str(lab.check_script("nf_lp_cmdline")),
        "--no-measure",
        "--canary",
        "1",
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(tmp_path / "r.xml"),
    ]
    ok = subprocess.run(cmd + ["--host", "lab-vm"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["ok"] is True and rep["hosts"][0]["data"]["verify"]["enabled"] == "1"
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.get("tests") == "1" and root.get("failures") == "0"
    # canary first: the unreachable host fails and the rollout stops before lab-vm
    bad = subprocess.run(
        cmd + ["--host", "gone-vm", "--host", "lab-vm"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 1
    rep = json.loads((tmp_path / "r.json").read_text())
    assert [(h["host"], h["status"]) for h in rep["hosts"]] == [("gone-vm", "failed"), ("lab-vm", "not-run")]
    assert rep["data"]["fleet"]["stopped"] is True
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.get("failures") == "1" and root.get("skipped") == "1"
    assert clean(host_state(lab, "nf_lp_cmdline")) == CLEAN
