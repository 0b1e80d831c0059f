"""Real kpatch-build runs (kpatch tier): the lab livepatch module of the backported series, the artifact cache,
a series kpatch cannot handle, and the Debian 5.10.0-46-amd64 target's preflight and command line.

Cold, this builds the lab kernel once (~20+ min on 2 cores) into the content-hash cache; warm it reuses it.
The Debian target downloads its -dbg package once (800 MB, only vmlinux is kept) and runs kpatch-build up to
"Building original source" (its compiler/config/patch checks); the full Debian build is
tests/kpatch/test_debian_build.py (only with a warm prepared tree)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from numaforge.kernel import kpatch as kp
from numaforge.kernel import targets as tg
from numaforge.paths import ROOT

pytestmark = pytest.mark.kpatch

DATA = Path(__file__).resolve().parents[1] / "data" / "kpatch"
SERIES = "sched-numa-prefer-local-fallback"


@pytest.fixture(scope="module")
def lab(bp):
    """The real lab module (built now or taken from the artifact cache)."""
    return kp.build_kpatch("lab", bp=bp, log=lambda m: print(m, flush=True))


def test_lab_module_is_real_and_manifest_matches_modinfo(lab, bp):
    m = lab.manifest
    ko = Path(lab.module)
    assert ko.is_file() and ko.parent == kp.build_root() / "lab"
    info = kp.modinfo(ko)  # read back from the real .ko, not from the manifest
    assert info["livepatch"] == "Y" == m["livepatch"]
    assert info["vermagic"] == m["vermagic"] and info["vermagic"].startswith("5.10.262 SMP mod_unload")
    assert info["name"] == m["module_name"] == "livepatch_sched_numa_prefer_local_fallback"
    assert kp.sha256_file(ko) == m["sha256"]
    funcs = [f["function"] for f in m["patched_functions"]]
    assert any(f.startswith("task_numa_migrate") for f in funcs), funcs
    assert m["result_commit"] == bp.result_commit and m["base_commit"] == bp.base_commit
    assert m["series_files"] == bp.manifest["series_files"] and m["source_hash"] == bp.source_hash
    assert m["toolchain"]["kpatch_build"] == "0.9.11" and "10.2.1" in m["toolchain"]["gcc"]
    assert m["kernel_release"] == "5.10.262"
    sections = subprocess.run(["readelf", "-SW", str(ko)], capture_output=True, text=True).stdout
    assert ".klp.rela.vmlinux." in sections  # a livepatch (klp) module with relocations into vmlinux
    assert Path(m["log"]).is_file()


def test_prebuilt_tree_is_reused_and_restored(lab):
    m = lab.manifest
    stages = [s["stage"] for s in m["stages"]]
    assert stages.index("build-original") < stages.index("build-patched") < stages.index("module")
    # kpatch-build built only the patch's directories (no vmlinux relink) through ccache and left patched objects
    # there; the restore rebuilt the same targets from the original source and the vmlinux is the prebuilt one
    assert m["build_targets"] == ["kernel/sched/", "modules_prepare"] and m["toolchain"]["cc_wrapper"] == "ccache"
    assert m["restore"] == {"restored": True, "vmlinux_identical": True, "targets": m["build_targets"]}


def test_unchanged_rebuild_does_no_work(lab, bp):
    ko = Path(lab.module)
    before = (ko.stat().st_mtime_ns, Path(lab.manifest["log"]).stat().st_mtime_ns)
    again = kp.build_kpatch("lab", bp=bp)
    assert again.status == "unchanged"
    assert again.manifest["sha256"] == lab.manifest["sha256"]
    assert (ko.stat().st_mtime_ns, Path(lab.manifest["log"]).stat().st_mtime_ns) == before


def test_series_touching_init_code_fails_with_the_mapped_error(lab, bp, tmp_path, monkeypatch):
    """tests/data/kpatch/series/touches-init-code.patch changes init_sched_fair_class() (__init)."""
    monkeypatch.setenv("NUMAFORGE_KPATCH_BUILD", str(tmp_path / "out"))
    bad = SimpleNamespace(
        **{
            **bp.__dict__,
            "combined_patch": DATA / "series" / "touches-init-code.patch",
            "result_commit": "touches-init-code",
            "manifest": {**bp.manifest, "series": "touches-init-code"},
        }
    )
    with pytest.raises(kp.KpatchBuildError) as ei:
        kp.build_kpatch("lab", bp=bad)
    err = ei.value
    assert err.kind == "init-code", err.render()
    assert "init" in err.what and "kpatch: false" in err.fix
    log = Path(err.log)
    assert log.is_file() and str(log) in err.where
    assert "init" in log.read_text()
    assert not list((tmp_path / "out" / "lab").glob("*.ko"))  # nothing half-written
    # the lab tree is back to the prebuilt state: source reverted, objects rebuilt
    tree = Path(lab.manifest["tree"])
    pristine = subprocess.run(
        ["git", "-C", str(bp.tree), "show", f"{bp.base_commit}:kernel/sched/fair.c"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (tree / "kernel/sched/fair.c").read_text() == pristine
    assert kp.sha256_file(tree / "vmlinux") == kp.sha256_file(Path(lab.manifest["vmlinux"]))


def test_one_command_line_backport_then_build_kpatch(lab, tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "invoke"), "backport", "build-kpatch", "--json", str(report)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(report.read_text())
    man = doc["data"]["kpatch"]["lab"]
    assert man["sha256"] == kp.sha256_file(kp.build_root() / "lab" / man["module_file"])
    assert [h["host"] for h in doc["hosts"]] == ["target:lab"]


# ---------------------------------------------------------------- Debian target: preflight + command line

DEB = "debian-5.10.0-46-amd64"


@pytest.fixture(scope="module")
def deb_inputs():
    return tg.debian_inputs(tg.load_target(DEB), log=lambda m: print(m, flush=True))


def test_debian_compiler_check_against_the_real_vmlinux(deb_inputs):
    kcomment = kp.comment_of(deb_inputs.vmlinux)
    assert "10.2.1" in kcomment
    assert kp.preflight_compiler(kcomment, kp.gcc_comment(kp.compiler_shim("gcc-10")), "gcc-10", "v") == []
    errs = kp.preflight_compiler(kcomment, kp.gcc_comment(None, "gcc-12"), "gcc-12", str(deb_inputs.vmlinux))
    assert len(errs) == 1 and "mismatch" in errs[0].what
    assert kp.preflight_config(kp.parse_config(deb_inputs.config.read_text()), "c") == []


def test_debian_target_passes_preflight_and_kpatch_builds_own_checks(bp, deb_inputs):
    res = kp.build_kpatch(DEB, bp=bp, options=kp.BuildOptions(check_only=True))
    assert res.status == "checked" and res.module is None
    m = res.manifest
    assert m["stages"][-1] == "build-original" and "test-patch" in m["stages"]
    cmd = m["command"]
    assert cmd[cmd.index("-v") + 1] == str(deb_inputs.vmlinux) and "-c" not in cmd  # the prepared tree's .config
    assert "-R" in cmd and cmd[cmd.index("-t") + 1] == "kernel/sched/"  # non-replace, the patch's dirs
    tree = Path(cmd[cmd.index("-s") + 1])
    assert (tree / "Module.symvers").read_bytes() == deb_inputs.symvers.read_bytes()  # Debian's CRCs
    assert 'CONFIG_MODULE_SIG_KEY="certs/signing_key.pem"' in (tree / ".config").read_text()
    assert m["env"] == {"MAKEFLAGS": "KERNELRELEASE=5.10.0-46-amd64"}
    # with that environment the tree's UTS_RELEASE (hence the module's vermagic) is the hosts' `uname -r`,
    # although the tree's Makefile says 5.10.262
    tree = Path(cmd[cmd.index("-s") + 1])
    tc = kp.toolchain()
    env = kp.BuildEnv(kp.compiler_shim("gcc-10"), m["env"]).env()
    gen = subprocess.run(
        ["make", "-s", *kp.make_vars(tc), "include/generated/utsrelease.h"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert gen.returncode == 0, gen.stderr[-1000:]
    assert (tree / "include/generated/utsrelease.h").read_text().strip() == '#define UTS_RELEASE "5.10.0-46-amd64"'
    assert "SUBLEVEL = 262" in (tree / "Makefile").read_text()
    # kpatch-build's trap restored the tree: no patch left applied
    assert (
        subprocess.run(
            ["patch", "-p1", "-R", "--dry-run", "-s", "-f", "-i", str(bp.combined_patch)], cwd=tree, capture_output=True
        ).returncode
        != 0
    )


def test_real_kpatch_build_gcc_mismatch_is_mapped(bp, deb_inputs, tmp_path):
    """kpatch-build itself, with the machine's gcc-12 instead of gcc-10, against the Debian vmlinux."""
    res = kp.build_kpatch(DEB, bp=bp, options=kp.BuildOptions(check_only=True))  # prepares the Debian tree (cached)
    tree = Path(res.manifest["command"][res.manifest["command"].index("-s") + 1])
    tc = kp.toolchain()
    cmd = kp.kpatch_command(tc, tree, deb_inputs.vmlinux, Path(bp.combined_patch), "livepatch-x", tmp_path, 2)
    env = kp.BuildEnv(None, {"CACHEDIR": str(tmp_path / "cache")}).env()
    env["PATH"] = f"{kp.compiler_shim('gcc-12')}:{env['PATH']}"
    log = tmp_path / "kpatch-build.log"
    rc, out, stopped = kp.run_kpatch_build(cmd, env, log, stop_at="build-original")
    assert rc != 0 and not stopped
    err = kp.map_failure(out, str(log))
    assert err.kind == "gcc-mismatch" and "10.2.1" in err.what and "12.2" in err.what


def test_lab_kernel_for_the_vm_is_bootable_shape(lab):
    """What the lab VM gets: a bzImage + vmlinux of 5.10.262 whose function/data sections were linked INTO
    .text/.data/.bss (the lab linker-script patch), so the kpatch-flags build boots."""
    lk = kp.lab_kernel(log=lambda m: None)
    assert lk.release == "5.10.262" and str(lk.vmlinux) == lab.manifest["vmlinux"]
    head = lk.bzimage.read_bytes()[:0x210]
    assert head[0x202:0x206] == b"HdrS"  # x86 boot protocol header
    sections = subprocess.run(["readelf", "-SW", str(lk.vmlinux)], capture_output=True, text=True, check=True).stdout
    names = [
        ln.split("]", 1)[1].split()[0]
        for ln in sections.splitlines()
        if ln.strip().startswith("[") and "]" in ln and ln.split("]", 1)[1].split()
    ]
    orphans = [
        n
        for n in names
        if n.startswith((".text.", ".data.", ".bss.")) and not n.startswith((".text..", ".data..", ".bss.."))
    ]
    assert ".text" in names and ".bss" in names and orphans == []
    cfg = lk.config.read_text()
    assert "CONFIG_LIVEPATCH=y" in cfg and "CONFIG_NUMA_BALANCING=y" in cfg and "CONFIG_SCHED_DEBUG=y" in cfg
