"""Fleet safety and the live-patch lifecycle on the real lab VM (Debian's or the lab 5.10 kernel, real insmod,
real livepatch transitions, real taint and module signature enforcement), plus a real sshd test host.

- another live patch (nf_lp_version, loaded by "someone else") stays enabled through validate, install, reboot
  and unload of ours (nf_lp_cmdline, non-replace per its manifest);
- livepatch-status over the VM and an SSH test host; install survives a VM reboot (the persistent disk and the
  boot unit); unload refuses the foreign patch unless forced;
- EBUSY: while nf_lp_stall's transition hangs, the kernel answers insmod with EBUSY: retried 5 x 2 s;
- module.sig_enforce switched on for real (it can only be switched on: these tests run last, see conftest).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from numaforge import livepatch as lp
from numaforge.livepatch import fleet as lpfleet
from numaforge.livepatch import lifecycle
from numaforge.livepatch.hostops import PROD_IDLE_CPUS as PROD  # 5.10 wakes no idle CPU (docs/kpatch.md)
from numaforge.report import HostResult

from .conftest import manifest_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sshd_fixture import sshd_host  # noqa: F401 (fixture)

pytestmark = pytest.mark.lab_vm

FAST = dict(signal_after=3.0, revert_after=10.0, effect=False)


def sh(lab, cmd: str, timeout: float = 60):
    with lab.remote() as r:
        return r.run(cmd, timeout=timeout, check=False)


def insmod_other(lab, name: str = "nf_lp_version") -> None:
    """Load a test live patch behind numaforge's back (no ownership record), like a vendor's CVE fix."""
    ko = lab.module(name)
    with lab.remote() as r:
        r.put(ko, f"/tmp/{name}.ko")
        res = r.run(
            f"insmod /tmp/{name}.ko && rm -f /tmp/{name}.ko; "
            f'while [ "$(cat /sys/kernel/livepatch/{name}/transition)" != 0 ]; do {PROD}; sleep 0.2; done',
            timeout=60,
            check=False,
        )
    assert res.rc == 0, res.stderr


def remove(lab, name: str) -> None:
    sh(
        lab,
        f"[ -d /sys/kernel/livepatch/{name} ] && echo 0 > /sys/kernel/livepatch/{name}/enabled; "
        f"while [ -d /sys/kernel/livepatch/{name} ]; do {PROD}; sleep 0.3; done; "
        f'while [ "$(cat /sys/module/{name}/refcnt 2>/dev/null || echo 0)" != 0 ]; do sleep 0.3; done; '
        f"rmmod {name} 2>/dev/null; true",
    )


def ours(lab, tmp_path, **fields) -> Path:
    return manifest_for(
        lab.module("nf_lp_cmdline"),
        tmp_path / "cmdline",
        replace=False,
        patched_functions=[{"function": "cmdline_proc_show"}],
        **fields,
    )


def enabled(lab, name: str) -> str:
    return sh(lab, f"cat /sys/kernel/livepatch/{name}/enabled 2>/dev/null || echo gone").stdout.strip()


def test_another_live_patch_survives_validate_install_reboot_and_unload(lab, tmp_path, sshd_host):
    insmod_other(lab)
    try:
        # a module of unknown mode (no manifest) would be refused while another patch is loaded
        unknown = lp.load_artifact(lab.module("nf_lp_cmdline"), check_script=lab.check_script("nf_lp_cmdline"))
        with lab.remote() as r:
            res = lp.validate_host(r, unknown, lp.Options(**FAST), HostResult("lab-vm"))
        assert res.status == "failed" and "unknown mode" in res.data["error"]["what"]
        assert "nf_lp_version" in res.data["error"]["what"] and res.data["states"] == ["preflight"]

        ko = ours(lab, tmp_path)
        art = lp.load_artifact(ko, check_script=lab.check_script("nf_lp_cmdline"))
        assert art.replace is False
        with lab.remote() as r:
            res = lp.validate_host(r, art, lp.Options(**FAST), HostResult("lab-vm"))
        assert res.status == "ok", res.message
        assert res.data["preflight"]["other_patches"] == ["nf_lp_version"]
        assert res.data["verify"]["other_livepatches"] == {"nf_lp_version": {"enabled": "1"}}
        assert "K" in res.data["taint"]["after the load"]["now"]["flags"]  # live patched, decoded
        assert res.data["busy_retries"]["load"] == 1
        assert enabled(lab, "nf_lp_version") == "1"

        # install: loaded (validated) and persisted; the other patch is untouched
        out = lpfleet.install_hosts(
            [lab.host], module=str(ko), opts=lp.Options(**FAST), run_key=None, log=print, progress=False
        )
        (h,) = out.results
        assert h.status == "changed" and h.data["final"] == "installed", h.message
        inst = next(s for s in h.steps if s.name == "install").detail
        assert inst["via"].startswith(lifecycle.UNIT_NAME) and inst["module"].endswith("/nf_lp_cmdline.ko")
        assert enabled(lab, "nf_lp_version") == "1"

        # livepatch-status over the VM and a real sshd host (this machine's kernel: no live patches)
        st = lpfleet.status_hosts([lab.host, sshd_host.inventory_host()], progress=False)
        vm_st, ssh_st = st.results
        assert vm_st.status == "ok" and ssh_st.status == "ok", ssh_st.message
        lps = vm_st.data["livepatches"]
        assert lps["nf_lp_cmdline"]["owner"] == "numaforge" and lps["nf_lp_cmdline"]["installed"] is True
        assert lps["nf_lp_version"]["owner"] == "other" and lps["nf_lp_version"]["enabled"] == "1"
        assert lps["nf_lp_cmdline"]["functions"] == ["vmlinux/cmdline_proc_show,1"]
        assert vm_st.data["boot"]["numaforge"] == ["nf_lp_cmdline"] and "K" in vm_st.data["taint"]["flags"]
        assert ssh_st.data["livepatches"] == {} and ssh_st.message == "no live patches loaded"

        # the install survives a reboot: the boot unit loads it from the persistent disk
        sh(lab, "sync; (sleep 1; reboot -f) >/dev/null 2>&1 &")
        from numaforge.lab import vm

        info = vm.reboot(lab.state_dir)
        assert info.persist is True
        assert "numaforge livepatch nf_lp_cmdline active" in sh(lab, "cat /proc/cmdline").stdout
        assert enabled(lab, "nf_lp_cmdline") == "1" and enabled(lab, "nf_lp_version") == "gone"
        insmod_other(lab)  # the other vendor's patch again, for the unload

        # unload refuses what numaforge did not install; ours goes, with its boot persistence; the other stays
        refused = lpfleet.unload_hosts([lab.host], module="nf_lp_version", run_key=None, progress=False)
        assert (
            refused.results[0].status == "failed"
            and "not loaded or installed by numaforge" in refused.results[0].message
        )
        assert enabled(lab, "nf_lp_version") == "1"
        out = lpfleet.unload_hosts([lab.host], module="nf_lp_cmdline", run_key=None, progress=False)
        (h,) = out.results
        assert h.status == "changed", h.message
        unload = next(s for s in h.steps if s.name == "unload").detail
        assert unload["refcount"].startswith("refcnt=") and unload["unload"]["rc"] == 0
        assert unload["other_livepatches"] == {"nf_lp_version": {"enabled": "1"}}
        assert next(s for s in h.steps if s.name == "uninstall").detail["unit_removed"] is True
        assert enabled(lab, "nf_lp_cmdline") == "gone" and enabled(lab, "nf_lp_version") == "1"
        assert sh(lab, f"ls {lifecycle.STATE_DIR}/*/* {lifecycle.WANTS_LINK} 2>/dev/null").stdout.strip() == ""
        # --force removes a foreign patch on purpose
        forced = lpfleet.unload_hosts([lab.host], module="nf_lp_version", force=True, run_key=None, progress=False)
        assert forced.results[0].status == "changed" and enabled(lab, "nf_lp_version") == "gone"
    finally:
        remove(lab, "nf_lp_cmdline")
        remove(lab, "nf_lp_version")
        sh(lab, f"rm -rf {lifecycle.STATE_DIR}/* {lifecycle.RUN_DIR} {lifecycle.UNIT_PATH} {lifecycle.WANTS_LINK}")


def test_insmod_answered_ebusy_during_another_transition_is_retried_five_times(lab, tmp_path):
    """nf_lp_stall's transition never finishes; while it runs the livepatch core refuses every other patch with
    EBUSY (klp_enable_patch). numaforge retries like kpatch (5 x 2 s), then fails cleanly."""
    stall = lab.module("nf_lp_stall")
    with lab.remote() as r:
        r.put(stall, "/tmp/nf_lp_stall.ko")
        assert r.run("insmod /tmp/nf_lp_stall.ko && rm -f /tmp/nf_lp_stall.ko", timeout=60, check=False).rc == 0
    try:
        assert sh(lab, "cat /sys/kernel/livepatch/nf_lp_stall/transition").stdout.strip() == "1"
        art = lp.load_artifact(ours(lab, tmp_path))
        t0 = time.monotonic()
        with lab.remote() as r:
            res = lp.validate_host(r, art, lp.Options(**FAST), HostResult("lab-vm"))
        assert res.status == "failed" and res.data["error"]["kind"] == "LoadError", res.message
        assert res.data["busy_retries"]["load"] == 5 and time.monotonic() - t0 >= 8
        assert "busy" in res.data["error"]["what"] and "transition" in res.data["error"]["fix"]
        assert enabled(lab, "nf_lp_cmdline") == "gone"
    finally:
        remove(lab, "nf_lp_stall")
    assert enabled(lab, "nf_lp_stall") == "gone"


def test_sig_enforce_unsigned_module_is_refused_before_upload_and_the_kernel_agrees(lab, tmp_path):
    """module.sig_enforce switched on for real in the guest (a one-way switch): preflight refuses the unsigned
    module with the key-enrollment fix, and the kernel itself refuses it too (so the preflight is right)."""
    if sh(lab, "test -e /sys/module/module/parameters/sig_enforce").rc != 0:
        pytest.skip(f"kernel {lab.kernel.name} is built without CONFIG_MODULE_SIG (no sig_enforce to switch on)")
    assert (
        sh(
            lab, "echo 1 > /sys/module/module/parameters/sig_enforce; cat /sys/module/module/parameters/sig_enforce"
        ).stdout.strip()
        == "Y"
    )
    art = lp.load_artifact(ours(lab, tmp_path))
    with lab.remote() as r:
        res = lp.validate_host(r, art, lp.Options(**FAST), HostResult("lab-vm"))
    assert res.status == "failed" and res.data["error"]["kind"] == "HostPreflightError"
    assert "only loads signed modules" in res.data["error"]["what"]
    assert "mokutil --import" in res.data["error"]["fix"] and res.data["states"] == ["preflight"]
    with lab.remote() as r:
        r.put(art.path, "/tmp/unsigned.ko")
        kernel = r.run("insmod /tmp/unsigned.ko; rc=$?; rm -f /tmp/unsigned.ko; exit $rc", check=False)
    assert kernel.rc != 0 and ("Key was rejected" in kernel.stderr or "Required key" in kernel.stderr)
